/**
 * The four stores, for tests that must hold on every one of them: `describeEachStore(title,
 * (open) => { ... })` registers a describe block per store, where `open()` returns a new instance
 * of that store over the same data (on the durable stores, a second instance is as a second
 * process would see it). Redis and PostgreSQL data is namespaced per run and removed afterwards;
 * a missing service skips (or, with BATON_REQUIRE_SERVICES=1, fails) its block.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe } from 'vitest';
import { memoryStore } from '../../src/stores/memory.js';
import { postgresStore } from '../../src/stores/postgres.js';
import { redisStore } from '../../src/stores/redis.js';
import { sqliteStore } from '../../src/stores/sqlite.js';
import type { SessionStore } from '../../src/stores/types.js';
import { deleteRedisKeys, pingPostgres, pingRedis, serviceAvailable } from './services.js';

/** The Redis and PostgreSQL servers the tests use. */
export const REDIS_URL = 'redis://127.0.0.1:6379';
export const POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';

/** The store kinds, in the order their blocks are registered. */
export type StoreKind = 'memory' | 'sqlite' | 'redis' | 'postgres';

/**
 * Registers `body` once per store kind inside `describe(title)`. `open()` opens an instance of
 * the store (closed after the block); memory returns its one shared instance.
 */
export function describeEachStore(title: string, body: (open: () => SessionStore, kind: StoreKind) => void): void {
  describe(title, () => {
    for (const kind of ['memory', 'sqlite', 'redis', 'postgres'] as const) {
      describe(kind, async () => {
        const skip =
          kind === 'redis'
            ? await serviceAvailable('redis', () => pingRedis(REDIS_URL))
            : kind === 'postgres'
              ? await serviceAvailable('postgres', () => pingPostgres(POSTGRES_URL))
              : false;
        if (skip) {
          describe.skip(skip, () => undefined);
          return;
        }
        const run = randomUUID().slice(0, 8);
        const opened: SessionStore[] = [];
        const dir = kind === 'sqlite' ? mkdtempSync(join(tmpdir(), 'baton-kinds-')) : undefined;
        let shared: SessionStore | undefined;
        const open = (): SessionStore => {
          let store: SessionStore;
          if (kind === 'memory') {
            shared ??= memoryStore();
            return shared;
          }
          if (kind === 'sqlite') store = sqliteStore({ path: join(dir!, 'sessions.db') });
          else if (kind === 'redis') store = redisStore({ url: REDIS_URL, prefix: `baton-test:kinds:${run}:` });
          else store = postgresStore({ connectionString: POSTGRES_URL, table: `baton_kinds_${run}` });
          opened.push(store);
          return store;
        };
        afterAll(async () => {
          await Promise.all(
            [...opened, ...(shared ? [shared] : [])].map((store) => store.close().catch(() => undefined)),
          );
          if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
          if (kind === 'redis') await deleteRedisKeys(REDIS_URL, `baton-test:kinds:${run}:`);
          if (kind === 'postgres') {
            const client = new pg.Client({ connectionString: POSTGRES_URL });
            await client.connect();
            const table = `baton_kinds_${run}`;
            await client.query(`DROP TABLE IF EXISTS "${table}_log", "${table}", "${table}_migrations"`);
            await client.end();
          }
        });
        body(open, kind);
      });
    }
  });
}
