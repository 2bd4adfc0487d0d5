/**
 * A chat turn's slot of the turn limiter (`maxTurns`) is held until what the turn started has
 * ended, also when its client disconnects: a tool that ignores the abort keeps running, and a
 * client that disconnected and came back at once must not get a second tool running beside it.
 * Otherwise a client that disconnects after each tool call starts could run any number of tools
 * at once, whatever `maxTurns` says.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, expect, it } from 'vitest';
import { type BatonApp, createApp } from '../src/server/create-app.js';
import { chunksOf, postJson, userMessage } from './helpers/chat-requests.js';
import { JOB_AGENT, jobModel, jobTools } from './helpers/job-agent.js';

const apps: BatonApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

it('stays taken while a tool of a disconnected client still runs', async () => {
  let running = 0;
  let most = 0;
  let started = 0;
  // Ignores the abort signal, as most tools do: its work goes on when the client leaves.
  const tools = jobTools(async () => {
    started++;
    running++;
    most = Math.max(most, running);
    await sleep(400);
    running--;
    return 'done';
  });
  const app = createApp({
    agents: [JOB_AGENT],
    model: jobModel(),
    tools,
    webRoot: false,
    maxTurns: 1,
    maxQueuedTurns: 4,
  });
  apps.push(app);
  const chat = (text: string, signal?: AbortSignal) =>
    postJson(app, '/api/chat/worker', { messages: [userMessage(text)] }, {}, signal);

  // Three clients in a row, each leaving as soon as its job has started.
  for (let i = 0; i < 3; i++) {
    const leaving = new AbortController();
    const before = started;
    const response = chat(`job ${i}`, leaving.signal).catch(() => undefined);
    await expect.poll(() => started, { timeout: 5_000 }).toBe(before + 1);
    leaving.abort();
    await response;
  }
  // A client that stays is served once the slot is free.
  const last = await chat('last job');
  expect(last.status).toBe(200);
  expect((await chunksOf(last)).at(-1)?.type).toBe('finish');
  expect(started).toBe(4);
  expect(most).toBe(1);
}, 30_000);
