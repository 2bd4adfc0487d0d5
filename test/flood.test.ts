/**
 * A flood of messages behind a running call. What arrives while a call runs waits in the
 * session's pending log; a session takes at most MAX_PENDING_ENTRIES such entries and refuses
 * more user messages as `session-busy` (over HTTP: 429 with Retry-After) until the call
 * finishes, and a waiting message keeps only its key and its conditions' answers, so the state
 * does not grow with what users type. (Before, 234 turns of 30,000 characters grew one SQLite
 * session to 7.0 MB and a turn from 11 ms to 370 ms.)
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { tool } from 'ai';
import { expect, it } from 'vitest';
import { z } from 'zod';
import { SessionRefusedError } from '../src/core/errors.js';
import type { OrchestrationConfig } from '../src/core/schema.js';
import { MAX_PENDING_ENTRIES } from '../src/core/transition.js';
import { parseTemplate } from '../src/core/validate-template.js';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { Turn } from '../src/orchestration/turn.js';
import { createApp } from '../src/server/create-app.js';
import { chunksOf, postJson, userMessage } from './helpers/chat-requests.js';
import { mockModel } from './helpers/mock-model.js';
import { describeEachStore } from './helpers/store-kinds.js';

const CONFIG: OrchestrationConfig = {
  steps: [
    {
      name: 'Research',
      conditions: [{ type: 'message_regex', value: 'research|look up' }],
      sequence: ['search', 'summarize'],
      resetSequenceOn: ['new_message'],
    },
  ],
};
const TOOLS = ['search', 'summarize'];
const LONG = 'please research this for me '.repeat(1_200).slice(0, 30_000);

describeEachStore('a flood of messages behind a running call', (open, kind) => {
  it(`keeps at most ${MAX_PENDING_ENTRIES} entries waiting, refuses the rest as busy, and stays small`, async () => {
    const manager = createOrchestrationManager({ store: open() });
    const sessionId = `flood-${kind}-${Date.now()}`;
    const running = new Turn({
      manager,
      config: CONFIG,
      sessionId,
      agentTools: TOOLS,
      messages: [userMessage('research cats')],
    });
    await running.begin();
    expect(await running.request('search', 'running')).toMatchObject({ allowed: true });
    let refused = 0;
    const turns = MAX_PENDING_ENTRIES + 20;
    for (let i = 0; i < turns; i++) {
      const turn = new Turn({
        manager,
        config: CONFIG,
        sessionId,
        agentTools: TOOLS,
        messages: [userMessage(LONG, `m${i}`)],
      });
      try {
        // A turn that begins and ends: its message is written (at its first write) either way.
        await turn.begin();
        await turn.end();
      } catch (error) {
        expect(SessionRefusedError.isInstance(error) && error.code).toBe('session-busy');
        refused++;
      }
    }
    expect(refused).toBe(turns - (MAX_PENDING_ENTRIES - 1));
    const state = await manager.getStateManager().getState(sessionId);
    expect(state?.pending).toHaveLength(MAX_PENDING_ENTRIES);
    // 255 messages of 30,000 characters: kept as their keys and their conditions' answers.
    expect(JSON.stringify(state).length).toBeLessThan(20_000);
    expect(JSON.stringify(state)).not.toContain('please research');
    // When the call finishes, what waited is replayed and the session takes messages again.
    running.completed('running');
    await running.end();
    const after = await manager.getStateManager().getState(sessionId);
    expect(after?.pending).toBeUndefined();
    expect(after).toMatchObject({ activeStep: 'Research', recentlyUsedTools: ['search'], sequenceIndex: 0 });
    await new Turn({
      manager,
      config: CONFIG,
      sessionId,
      agentTools: TOOLS,
      messages: [userMessage('look up dogs')],
    }).begin();
  }, 60_000);
});

it('answers a turn beyond the bound with 429 session-busy and Retry-After, before any model call', async () => {
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const tools = {
    search: tool({
      inputSchema: z.object({}),
      execute: async () => {
        await released;
        return 'found';
      },
    }),
    summarize: tool({ inputSchema: z.object({}), execute: async () => 'summary' }),
  };
  const mock = mockModel((call) => (call.index === 0 ? { calls: [{ tool: 'search', id: 'slow' }] } : { text: 'ok' }));
  const template = parseTemplate({ id: 'flood', tools: TOOLS, orchestration: CONFIG });
  const app = createApp({ agents: [template], model: mock.model, tools, webRoot: false });
  try {
    const first = postJson(app, '/api/chat/flood', { sessionId: 'flooded', messages: [userMessage('research cats')] });
    while (mock.calls.length === 0) await sleep(5);
    await sleep(50); // the search call is reserved and runs
    const statuses: number[] = [];
    let busy: Response | undefined;
    const requests = MAX_PENDING_ENTRIES + 10;
    for (let i = 0; i < requests; i++) {
      const response = await postJson(app, '/api/chat/flood', { sessionId: 'flooded', messages: [userMessage(LONG)] });
      statuses.push(response.status);
      if (response.status === 429) busy ??= response;
      else await chunksOf(response);
    }
    expect(statuses.filter((status) => status === 200)).toHaveLength(MAX_PENDING_ENTRIES - 1);
    expect(statuses.filter((status) => status === 429)).toHaveLength(requests - (MAX_PENDING_ENTRIES - 1));
    expect(busy?.headers.get('retry-after')).toBe('1');
    expect(await busy?.json()).toMatchObject({ error: { code: 'session-busy', path: 'body.sessionId' } });
    // One model call for the first turn, one for each accepted one, none for a refused one.
    expect(mock.calls).toHaveLength(1 + (MAX_PENDING_ENTRIES - 1));
    release();
    await chunksOf(await first);
    const again = await postJson(app, '/api/chat/flood', { sessionId: 'flooded', messages: [userMessage('look up')] });
    expect(again.status).toBe(200);
    await chunksOf(again);
  } finally {
    release();
    await app.close();
  }
}, 60_000);
