/**
 * Store round trips of a 3-tool research turn (ResearchMode: search, think, reflect, then the
 * answer), counted on the wire of real Redis and PostgreSQL servers, through the library
 * (`orchestrate()` + `streamText`) and through the server (`createApp`, which also claims the
 * session for its agent and keeps an event log). The floor is 4: the three reservations (the
 * first carries the user message and the claim) and the final record (the last tool's
 * completion and the turn's usage). A turn begins without a round trip when the session's state
 * is known without one: a new session the server named, a session the in-process store knows is
 * absent, or the copy the store kept.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { createOrchestrationManager, type OrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { createApp } from '../src/server/create-app.js';
import { memoryStore } from '../src/stores/memory.js';
import type { SessionStore } from '../src/stores/types.js';
import { loadTemplate } from '../src/templates/load-template.js';
import { chunksOf, postJson, userMessage } from './helpers/chat-requests.js';
import {
  type CountedStore,
  countedPostgres,
  countedRedis,
  RESEARCH_QUESTION as QUESTION,
  researchTurn,
} from './helpers/counted-stores.js';
import { pingPostgres, pingRedis, serviceAvailable } from './helpers/services.js';
import { POSTGRES_URL, REDIS_URL } from './helpers/store-kinds.js';

const reasoner = await loadTemplate(new URL('../examples/agents/cognitive-reasoner.json', import.meta.url).pathname);
const RUN = randomUUID().slice(0, 8);

/** One research turn on `manager`, and the session's state after it. */
async function libraryTurn(manager: OrchestrationManager, sessionId: string, options: { newSession?: boolean } = {}) {
  await researchTurn(reasoner, manager, sessionId, options);
  return (await manager.getStateManager().peek(sessionId)) ?? (await manager.getStateManager().getState(sessionId));
}

function describeStore(name: 'redis' | 'postgres', open: () => Promise<CountedStore>) {
  describe(name, async () => {
    const skip = await serviceAvailable(name, () =>
      name === 'redis' ? pingRedis(REDIS_URL) : pingPostgres(POSTGRES_URL),
    );
    const opened: CountedStore[] = [];
    afterAll(async () => {
      for (const counted of opened) await counted.close();
    });

    it.skipIf(skip)('through the library: 4 round trips for a turn of a session the store knows', async () => {
      const counted = await open();
      opened.push(counted);
      const manager = createOrchestrationManager({ store: counted.store });
      const sessionId = `trips-lib-${randomUUID()}`;
      await libraryTurn(manager, sessionId); // a new session: the store learns it
      counted.reset();
      const state = await libraryTurn(manager, sessionId);
      expect(state?.recentlyUsedTools.slice(-3)).toEqual(['search', 'think', 'reflect']);
      expect(counted.trips()).toBe(4);
      expect(counted.writes()).toBe(4);
    });

    it.skipIf(skip)('through the library: 4 round trips for a new session the app says is new', async () => {
      const counted = await open();
      opened.push(counted);
      const manager = createOrchestrationManager({ store: counted.store });
      await libraryTurn(manager, `trips-lib-${randomUUID()}`); // the store has answered once
      counted.reset();
      // Without the hint the turn reads the session before its first model step: a read, which
      // commits nothing; the user message rides on the first reservation.
      await libraryTurn(manager, `trips-lib-${randomUUID()}`);
      expect(counted.trips()).toBe(5);
      expect(counted.writes()).toBe(4);
      counted.reset();
      const state = await libraryTurn(manager, `trips-lib-${randomUUID()}`, { newSession: true });
      expect(state?.recentlyUsedTools).toEqual(['search', 'think', 'reflect']);
      expect(counted.trips()).toBe(4);
    });

    it.skipIf(skip)('through the server: 4 round trips for a new session and for a continued one', async () => {
      const counted = await open();
      opened.push(counted);
      const manager = createOrchestrationManager({ store: counted.store, eventLog: 100 });
      const app = createApp({ agents: [reasoner], model: 'offline', manager, webRoot: false });
      try {
        // The server has answered once: its store is known to answer.
        await chunksOf(await postJson(app, '/api/chat/cognitive-reasoner', { messages: [userMessage('Hello')] }));
        counted.reset();
        const first = await postJson(app, '/api/chat/cognitive-reasoner', { messages: [userMessage(QUESTION)] });
        await chunksOf(first);
        expect(counted.trips()).toBe(4);
        counted.reset();
        const sessionId = first.headers.get('x-session-id');
        await chunksOf(
          await postJson(app, '/api/chat/cognitive-reasoner', {
            sessionId,
            messages: [
              userMessage(QUESTION),
              { id: 'a1', role: 'assistant', parts: [{ type: 'text', text: 'ok' }] },
              userMessage('And by 2040?'),
            ],
          }),
        );
        expect(counted.trips()).toBeLessThanOrEqual(4);
      } finally {
        await app.close();
      }
    });
  });
}

describe('memory', () => {
  it('through the library: 4 writes for a turn of a new session and of a continued one', async () => {
    const inner = memoryStore();
    let writes = 0;
    // Every write of the memory store is an updateSync (update() runs it too).
    const store: SessionStore = {
      ...inner,
      updateSync: (id, fn, at) => {
        writes++;
        return inner.updateSync!(id, fn, at);
      },
    };
    const manager = createOrchestrationManager({ store });
    await libraryTurn(manager, `trips-mem-${randomUUID()}`); // the store has answered once
    writes = 0;
    // The store knows the session is absent: the turn begins as on a known session.
    const sessionId = `trips-mem-${randomUUID()}`;
    await libraryTurn(manager, sessionId);
    expect(writes).toBe(4);
    writes = 0;
    const state = await libraryTurn(manager, sessionId);
    expect(state?.recentlyUsedTools).toEqual(['search', 'think', 'reflect', 'search', 'think', 'reflect']);
    expect(writes).toBe(4);
    await store.close();
  });
});

describeStore('redis', () => countedRedis(REDIS_URL, `baton-test:trips:${RUN}:`));
describeStore('postgres', () => countedPostgres(POSTGRES_URL, `baton_trips_${RUN}`));
