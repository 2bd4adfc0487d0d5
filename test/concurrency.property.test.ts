/**
 * Concurrent turns on one session, with a model that calls anything: random valid configs,
 * 2-4 turns racing on one session, each making 1-5 tool calls of any tool (the agent's, others
 * and unknown ones) with call ids drawn from a small pool (so ids repeat, within and across
 * turns), tools that sometimes throw, and turns that bring different user messages.
 *
 * Every store update is logged with the version it wrote. Replaying the writes in version
 * order through the SPEC oracle (test/helpers/spec-oracle.ts) must show:
 * - every executed call was allowed at its reservation, in the serial order of the writes, and
 *   its id had never been used;
 * - every refusal for a SPEC reason (sequence, denied, not allowed, no such tool) is one the
 *   oracle makes too; a refusal as duplicate names an id already used;
 * - the final session equals the oracle's: every completed call is in the history, in order
 *   (nothing allowed is lost), with the same active step and sequence position.
 *
 * It runs on all four stores; on the durable ones, the turns alternate between two store
 * instances, as two processes would (separate caches and queues, racing compare-and-set). Once as
 * the raw transition answers (a request that depends on a running call is logged as not
 * decided), once with such requests waiting for the calls they depend on, as turns do. The
 * managers also keep an event log, which must read as one story (verifyEventLog).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, describe, it } from 'vitest';
import { createOrchestrationManager, type OrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { memoryStore } from '../src/stores/memory.js';
import { postgresStore } from '../src/stores/postgres.js';
import { redisStore } from '../src/stores/redis.js';
import { sqliteStore } from '../src/stores/sqlite.js';
import type { SessionStore } from '../src/stores/types.js';
import { type Case, caseArb, playTurns } from './helpers/concurrency-case.js';
import { verifyCase } from './helpers/concurrency-verify.js';
import { deleteRedisKeys, pingPostgres, pingRedis, serviceAvailable } from './helpers/services.js';

const REDIS_URL = 'redis://127.0.0.1:6379';
const POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';
const RUN = randomUUID().slice(0, 8);

async function runCase(c: Case, managers: readonly OrchestrationManager[], wait = false): Promise<void> {
  const sessionId = `prop-${randomUUID()}`;
  const log = await playTurns(
    c,
    c.turns.map((_, i) => i),
    (turn) => managers[turn % managers.length]!,
    sessionId,
    undefined,
    undefined,
    wait,
  );
  const store = await managers[0]!.getStateManager().store();
  const events = managers[0]!.eventLog > 0 ? await store.readLog?.(sessionId) : undefined;
  verifyCase(c, log, await managers[0]!.getStateManager().getState(sessionId), events);
}

const property = (managers: () => readonly OrchestrationManager[], numRuns: number, wait = false) =>
  fc.assert(
    fc.asyncProperty(caseArb, (c) => runCase(c, managers(), wait)),
    { numRuns },
  );

describe('concurrent turns on one session: executions equal a serial run of reservations', () => {
  it('memory store', async () => {
    // With an event log, which must stay one consistent story under the race (verifyEventLog).
    const manager = createOrchestrationManager({ store: memoryStore(), eventLog: 1000 });
    await property(() => [manager], 300);
    await manager.close();
  }, 120_000);

  it('memory store, requests that wait for the running calls they depend on', async () => {
    const manager = createOrchestrationManager({ store: memoryStore(), eventLog: 1000 });
    await property(() => [manager], 200, true);
    await manager.close();
  }, 120_000);

  it('two managers on one memory store, requests that wait (one wakes the other by polling)', async () => {
    const store = memoryStore();
    const managers = [createOrchestrationManager({ store }), createOrchestrationManager({ store })];
    await property(() => managers, 60, true);
  }, 120_000);

  describe('sqlite store (two instances on one file)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'baton-concurrency-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    it('holds', async () => {
      const path = join(dir, 'sessions.db');
      const stores: SessionStore[] = [sqliteStore({ path }), sqliteStore({ path })];
      const managers = stores.map((store) => createOrchestrationManager({ store, eventLog: 1000 }));
      await property(() => managers, 60);
      for (const store of stores) await store.close();
    }, 180_000);
  });

  describe('redis store (two instances)', async () => {
    const skip = await serviceAvailable('redis', () => pingRedis(REDIS_URL));
    const prefix = `baton-test:concurrency:${RUN}:`;
    afterAll(async () => {
      if (!skip) await deleteRedisKeys(REDIS_URL, prefix);
    });
    it.skipIf(skip)(
      'holds',
      async () => {
        const stores: SessionStore[] = [redisStore({ url: REDIS_URL, prefix }), redisStore({ url: REDIS_URL, prefix })];
        const managers = stores.map((store) => createOrchestrationManager({ store, eventLog: 1000 }));
        await property(() => managers, 40);
        await property(() => managers, 15, true);
        for (const store of stores) await store.close();
      },
      180_000,
    );
  });

  describe('postgres store (two instances)', async () => {
    const skip = await serviceAvailable('postgres', () => pingPostgres(POSTGRES_URL));
    const table = `baton_concurrency_${RUN}`;
    afterAll(async () => {
      if (skip) return;
      const client = new pg.Client({ connectionString: POSTGRES_URL });
      await client.connect();
      await client.query(`DROP TABLE IF EXISTS "${table}_log", "${table}", "${table}_migrations"`);
      await client.end();
    });
    it.skipIf(skip)(
      'holds',
      async () => {
        const stores: SessionStore[] = [
          postgresStore({ connectionString: POSTGRES_URL, table }),
          postgresStore({ connectionString: POSTGRES_URL, table }),
        ];
        const managers = stores.map((store) => createOrchestrationManager({ store, eventLog: 1000 }));
        await property(() => managers, 25);
        await property(() => managers, 10, true);
        for (const store of stores) await store.close();
      },
      180_000,
    );
  });
});
