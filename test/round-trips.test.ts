/**
 * Store round trips of a 3-tool research turn (ResearchMode: search, think, reflect, then the
 * answer), counted on the wire of real Redis and PostgreSQL servers, through the library
 * (`orchestrate()` + `streamText`) and through the server (`createApp`, which also claims the
 * session for its agent and keeps an event log). The floor is 4: the three reservations (the
 * first carries the user message and the claim) and the final record (the last tool's
 * completion and the turn's usage). A turn begins without a round trip when the session's state
 * is known without one: a new session the server named, or the copy the store kept.
 */
import { randomUUID } from 'node:crypto';
import { isStepCount, streamText } from 'ai';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createAgent } from '../src/agents/create-agent.js';
import { createOfflineModel } from '../src/ai-sdk/offline-model.js';
import { orchestrate } from '../src/ai-sdk/orchestrate.js';
import { createOrchestrationManager, type OrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { createApp } from '../src/server/create-app.js';
import { postgresStore } from '../src/stores/postgres.js';
import { redisStore } from '../src/stores/redis.js';
import type { SessionStore } from '../src/stores/types.js';
import { loadTemplate } from '../src/templates/load-template.js';
import { chunksOf, postJson, userMessage } from './helpers/chat-requests.js';
import { deleteRedisKeys, pingPostgres, pingRedis, serviceAvailable } from './helpers/services.js';
import { POSTGRES_URL, REDIS_URL } from './helpers/store-kinds.js';

const reasoner = await loadTemplate(new URL('../examples/agents/cognitive-reasoner.json', import.meta.url).pathname);
const QUESTION = 'How many electric vehicles will be on the road by 2030?';
const RUN = randomUUID().slice(0, 8);

/** A store on the wire, and the round trips it made since the last `reset()`. */
interface Counted {
  store: SessionStore;
  trips: () => number;
  reset: () => void;
  close: () => Promise<void>;
}

async function countedRedis(): Promise<Counted> {
  const client = new Redis(REDIS_URL);
  await new Promise((resolve) => client.once('ready', resolve));
  let sent = 0;
  const original = client.sendCommand.bind(client);
  client.sendCommand = ((...args: Parameters<typeof original>) => {
    sent++;
    return original(...args);
  }) as typeof client.sendCommand;
  const store = redisStore({ client, prefix: `baton-test:trips:${RUN}:` });
  return {
    store,
    trips: () => sent,
    reset: () => {
      sent = 0;
    },
    close: async () => {
      await store.close();
      client.disconnect();
    },
  };
}

async function countedPostgres(table: string): Promise<Counted> {
  const pool = new pg.Pool({ connectionString: POSTGRES_URL, max: 4 });
  let sent = 0;
  pool.on('connect', (client) => {
    const original = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      sent++;
      return original(...args);
    };
  });
  const store = postgresStore({ pool, table });
  await store.get('warm-up'); // migrations and prepared statements, before counting
  return {
    store,
    trips: () => sent,
    reset: () => {
      sent = 0;
    },
    close: async () => {
      await store.close();
      await pool.end();
    },
  };
}

/** One research turn through `orchestrate()` + `streamText` on `manager`. */
async function libraryTurn(manager: OrchestrationManager, sessionId: string) {
  const agent = createAgent(reasoner, { model: 'offline', manager });
  const messages = [{ role: 'user' as const, content: QUESTION }];
  const orchestration = orchestrate({ manager, config: reasoner, sessionId, tools: agent.tools, messages });
  const result = streamText({
    model: createOfflineModel(),
    messages,
    stopWhen: isStepCount(8),
    ...orchestration,
  });
  await result.consumeStream();
  await orchestration.settled();
  return (await manager.getStateManager().peek(sessionId)) ?? (await manager.getStateManager().getState(sessionId));
}

function describeStore(name: 'redis' | 'postgres', open: () => Promise<Counted>) {
  describe(name, async () => {
    const skip = await serviceAvailable(name, () =>
      name === 'redis' ? pingRedis(REDIS_URL) : pingPostgres(POSTGRES_URL),
    );
    const opened: Counted[] = [];
    afterAll(async () => {
      for (const counted of opened) await counted.close();
      if (name === 'redis' && !skip) await deleteRedisKeys(REDIS_URL, `baton-test:trips:${RUN}:`);
      if (name === 'postgres' && !skip) {
        const client = new pg.Client({ connectionString: POSTGRES_URL });
        await client.connect();
        await client.query(
          `DROP TABLE IF EXISTS "baton_trips_${RUN}_log", "baton_trips_${RUN}", "baton_trips_${RUN}_migrations"`,
        );
        await client.end();
      }
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

describeStore('redis', countedRedis);
describeStore('postgres', () => countedPostgres(`baton_trips_${RUN}`));
