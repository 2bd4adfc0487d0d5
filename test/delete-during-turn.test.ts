/**
 * A session deleted while one of its turns runs stays deleted: the turn's later writes (the
 * completion of the tool that was running, the end of the turn) create nothing, so the session
 * answers 404 afterwards and its id can start a new conversation. Before, the turn's next write
 * brought it back half-written (no agent, no history), and the id answered 409
 * session-without-agent until it expired.
 */
import { afterEach, expect, it } from 'vitest';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { type BatonApp, createApp } from '../src/server/create-app.js';
import { chunksOf, postJson, userMessage } from './helpers/chat-requests.js';
import { JOB_AGENT, jobModel, jobTools } from './helpers/job-agent.js';
import { describeEachStore } from './helpers/store-kinds.js';

const apps: BatonApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

describeEachStore('a session deleted while its turn runs', (open) => {
  it('stays deleted, and its id starts afresh', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started!: () => void;
    const running = new Promise<void>((resolve) => {
      started = resolve;
    });
    let jobs = 0;
    const tools = jobTools(async () => {
      jobs++;
      started();
      await gate;
      return 'done';
    });
    const sessionId = `deleted-${crypto.randomUUID()}`;
    const manager = createOrchestrationManager({ store: open() });
    const app = createApp({ agents: [JOB_AGENT], model: jobModel(), tools, manager, webRoot: false });
    apps.push(app);

    const turn = postJson(app, '/api/chat/worker', { sessionId, messages: [userMessage('Run the job')] });
    await running;
    expect((await app.request(`/api/sessions/${sessionId}`, { method: 'DELETE' })).status).toBe(204);
    release();
    // The turn's stream ends (its writes found the session gone); nothing brings it back.
    await chunksOf(await turn);
    const after = await app.request(`/api/sessions/${sessionId}`);
    expect(after.status, await after.clone().text()).toBe(404);

    // The id starts a new conversation, claimed for the agent as any new session.
    const again = await postJson(app, '/api/chat/worker', { sessionId, messages: [userMessage('Run it again')] });
    expect(again.status).toBe(200);
    expect((await chunksOf(again)).at(-1)?.type).toBe('finish');
    expect(jobs).toBe(2);
    const session = await app.request(`/api/sessions/${sessionId}`);
    expect(session.status).toBe(200);
    expect(await session.json()).toMatchObject({ agentId: 'worker' });
  }, 30_000);
});
