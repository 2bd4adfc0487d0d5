import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { configErrorOf } from '../../test/helpers/config-errors.js';
import { freePort } from '../../test/helpers/free-port.js';
import { pingPostgres, serviceAvailable } from '../../test/helpers/services.js';
import { BatonError, InvalidArgumentError, StoreUnavailableError } from '../core/errors.js';
import { appendToLog } from '../core/session-log.js';
import { createState, type OrchestrationState } from '../core/state.js';
import { testStore } from '../testing/test-store.js';
import { POSTGRES_SCHEMA_VERSION, type PostgresStoreOptions, postgresStore } from './postgres.js';
import type { SessionStore } from './types.js';

const URL = 'postgres://postgres@127.0.0.1:5432/test';

const skip = await serviceAvailable('postgres', () => pingPostgres(URL));

const tables = new Set<string>();
const stores: SessionStore[] = [];
const admin = skip ? undefined : new pg.Pool({ connectionString: URL, max: 2 });

function newTable(): string {
  const table = `baton_test_t${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  tables.add(table);
  return table;
}

function open(options: PostgresStoreOptions): SessionStore {
  const store = postgresStore({ connectionString: URL, ...options });
  stores.push(store);
  return store;
}

async function sql<R extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<R[]> {
  if (admin === undefined) throw new Error('PostgreSQL is not available');
  return (await admin.query<R>(text, values)).rows;
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );
}

const state = (sessionId: string, patch: Partial<OrchestrationState> = {}): OrchestrationState => ({
  ...createState(sessionId, 1_000, 60_000),
  ...patch,
});
/** An updater that adds `tool` to the history and logs it, as the manager does. */
const loggedTool =
  (tool: string, patch: Partial<OrchestrationState> = {}) =>
  (current: OrchestrationState | undefined) => {
    const base = current ?? state('unused');
    const next = { ...base, ...patch, recentlyUsedTools: [...base.recentlyUsedTools, tool] };
    const event = { type: 'tool-recorded' as const, tool, step: undefined };
    return appendToLog(next, 100, [{ event, state: next }], 1, 'm');
  };
const addTool = (tool: string) => (current: OrchestrationState | undefined) => {
  const base = current ?? state('unused');
  return { ...base, recentlyUsedTools: [...base.recentlyUsedTools, tool] };
};

afterAll(async () => {
  await Promise.all(stores.map((store) => store.close().catch(() => undefined)));
  if (admin === undefined) return;
  for (const table of tables) {
    await admin.query(`DROP TABLE IF EXISTS "${table}_log", "${table}", "${table}_migrations"`);
  }
  await admin.end();
});

testStore({
  name: 'postgres',
  create: ({ namespace, ...options }) => {
    const table = `baton_test_${namespace}`;
    tables.add(table);
    return postgresStore({ connectionString: URL, table, ...options });
  },
  skip,
});

describe('postgresStore options', () => {
  it('refuses an option it does not know, naming it and the factory, with a did-you-mean when close', () => {
    // `connectionstring` was ignored without a word: the store connected where PG* pointed instead.
    const error = configErrorOf(() => postgresStore({ connectionstring: URL } as never));
    expect(error.message).toContain('Invalid postgresStore() options');
    expect(error.issues).toEqual([
      expect.objectContaining({
        path: 'connectionstring',
        message: 'unknown option "connectionstring"',
        hint: 'did you mean "connectionString"?',
      }),
    ]);
    expect(
      configErrorOf(() => postgresStore({ connectionString: URL, statementTimeout: 1_000 } as never)).issues[0]?.hint,
    ).toBe('did you mean "statementTimeoutMs"?');
  });

  it('refuses a connection string, pool or clock of the wrong type, when it is created', () => {
    expect(() => postgresStore({ connectionString: new globalThis.URL(URL) } as never)).toThrow(
      'Invalid connectionString: expected a postgres:// URL string, got object',
    );
    expect(() => postgresStore({ pool: URL } as never)).toThrow('Invalid pool: expected a pg Pool, got string');
    expect(() => postgresStore({ connectionString: URL, now: 0 } as never)).toThrow(
      'Invalid now: expected a function returning milliseconds, got number',
    );
  });

  it('still takes every option it knows (connecting only when used)', async () => {
    const store = postgresStore({
      connectionString: URL,
      table: 'baton_sessions_options',
      statementTimeoutMs: 1_000,
      connectionTimeoutMillis: 1_000,
      poolSize: 2,
      maxSessions: 10,
      now: Date.now,
    });
    await store.close();
  });

  it('rejects a table name that is not a plain SQL identifier', () => {
    for (const table of ['', '1abc', 'a-b', 'a"b', 'sessions; DROP TABLE x', 'public.sessions', 'x'.repeat(49), 'é']) {
      const error = (() => {
        try {
          postgresStore({ connectionString: URL, table });
        } catch (e) {
          return e;
        }
      })();
      expect(InvalidArgumentError.isInstance(error), table).toBe(true);
      expect((error as InvalidArgumentError).path).toBe('table');
    }
  });

  it('rejects a pool together with a connection string, and bad numbers', async () => {
    const pool = new pg.Pool({ connectionString: URL });
    try {
      expect(() => postgresStore({ pool, connectionString: URL })).toThrow(/either a pool or a connectionString/);
    } finally {
      await pool.end();
    }
    expect(() => postgresStore({ connectionString: URL, maxSessions: 0 })).toThrow(/maxSessions/);
    expect(() => postgresStore({ connectionString: URL, statementTimeoutMs: -1 })).toThrow(/statementTimeoutMs/);
    expect(() => postgresStore({ connectionString: URL, poolSize: 1.5 })).toThrow(/poolSize/);
  });

  it('fails fast with StoreUnavailableError when nothing listens', async () => {
    const port = await freePort();
    const store = open({ connectionString: `postgres://postgres@127.0.0.1:${port}/test`, table: newTable() });
    const started = Date.now();
    for (const call of [() => store.get('s'), () => store.update('s', () => state('s')), () => store.sweep()]) {
      const error = await failure(call());
      expect(StoreUnavailableError.isInstance(error)).toBe(true);
      expect((error as StoreUnavailableError).store).toBe('postgres');
      expect((error as Error).message).toMatch(/ECONNREFUSED|connect/);
    }
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});

describe.skipIf(skip)('postgresStore against PostgreSQL', () => {
  it('migrates once, and again is a no-op that keeps the data', async () => {
    const table = newTable();
    const first = open({ table });
    await first.update('kept', () => state('kept', { sequenceIndex: 7 }));
    await first.close();
    const second = open({ table });
    expect((await second.get('kept'))?.sequenceIndex).toBe(7);
    const versions = await sql<{ version: number }>(`SELECT version FROM "${table}_migrations" ORDER BY version`);
    // Every migration once, in order.
    expect(versions.map((row) => row.version)).toEqual(
      Array.from({ length: POSTGRES_SCHEMA_VERSION }, (_, i) => i + 1),
    );
  });

  it('lets several processes migrate the same new table at the same moment', async () => {
    const table = newTable();
    const many = Array.from({ length: 6 }, () => open({ table, poolSize: 2 }));
    const results = await Promise.allSettled(many.map((store, i) => store.update(`s${i}`, () => state(`s${i}`))));
    expect(results.filter((result) => result.status === 'rejected')).toEqual([]);
    const versions = await sql<{ version: number }>(`SELECT version FROM "${table}_migrations"`);
    expect(versions).toHaveLength(POSTGRES_SCHEMA_VERSION);
    const [count] = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${table}"`);
    expect(count?.n).toBe(6);
  });

  it('refuses a table whose schema is newer than this code', async () => {
    const table = newTable();
    const first = open({ table });
    await first.get('x');
    await sql(`INSERT INTO "${table}_migrations" (version, description) VALUES ($1, 'from the future')`, [
      POSTGRES_SCHEMA_VERSION + 1,
    ]);
    const second = open({ table });
    const error = await failure(second.get('x'));
    expect(BatonError.isInstance(error)).toBe(true);
    expect((error as BatonError).code).toBe('store-schema-mismatch');
    expect((error as Error).message).toMatch(
      new RegExp(`schema version ${POSTGRES_SCHEMA_VERSION + 1}.*Upgrade Baton`),
    );
    // A refusal is not an outage: nothing will fix it by retrying.
    expect(StoreUnavailableError.isInstance(error)).toBe(false);
  });

  it('refuses to adopt an unrelated table that already has the name', async () => {
    const table = newTable();
    await sql(`CREATE TABLE "${table}" (id int)`);
    const error = await failure(open({ table }).get('x'));
    expect((error as BatonError).code).toBe('store-schema-mismatch');
    expect((error as Error).message).toMatch(/already exists/);
  });

  it('loses none of 2 instances x 100 concurrent appends to one new session', async () => {
    const table = newTable();
    const first = open({ table, poolSize: 8 });
    const second = open({ table, poolSize: 8 });
    await Promise.all([
      ...Array.from({ length: 100 }, (_, i) => first.update('fresh', addTool(`a${i}`))),
      ...Array.from({ length: 100 }, (_, i) => second.update('fresh', addTool(`b${i}`))),
    ]);
    const final = await first.get('fresh');
    expect(final?.recentlyUsedTools).toHaveLength(200);
    expect(new Set(final?.recentlyUsedTools).size).toBe(200);
    expect(final?.version).toBe(200);
  });

  describe('against a writer in another transaction', () => {
    const keyOf = `sha256(convert_to($1::text, 'UTF8'))`;

    async function withTransaction(body: (client: pg.PoolClient) => Promise<void>): Promise<pg.PoolClient> {
      if (admin === undefined) throw new Error('PostgreSQL is not available');
      const client = await admin.connect();
      await client.query('BEGIN');
      await body(client);
      return client;
    }

    it('waits for a creator that has not committed yet, and keeps what it wrote', async () => {
      const table = newTable();
      const store = open({ table });
      await store.get('warm-up'); // creates the table
      const other = await withTransaction(async (client) => {
        const theirs = JSON.stringify(state('race', { recentlyUsedTools: ['theirs'], version: 1 }));
        await client.query(
          `INSERT INTO "${table}" (session_key, session_id, state, version, expires_at, last_access)
           VALUES (${keyOf}, $1, $2::jsonb, 1, NULL, 0)`,
          ['race', theirs],
        );
      });
      const ours = store.update('race', addTool('ours'));
      await new Promise((resolve) => setTimeout(resolve, 200));
      await other.query('COMMIT');
      other.release();
      const stored = await ours;
      expect(stored?.recentlyUsedTools).toEqual(['theirs', 'ours']);
      expect(stored?.version).toBe(2);
    });

    it('creates the session itself when the other creator rolls back', async () => {
      const table = newTable();
      const store = open({ table });
      await store.get('warm-up');
      const other = await withTransaction(async (client) => {
        await client.query(
          `INSERT INTO "${table}" (session_key, session_id, state, version, expires_at, last_access)
           VALUES (${keyOf}, $1, $2::jsonb, 1, NULL, 0)`,
          ['race', JSON.stringify(state('race', { recentlyUsedTools: ['theirs'], version: 1 }))],
        );
      });
      const ours = store.update('race', addTool('ours'));
      await new Promise((resolve) => setTimeout(resolve, 200));
      await other.query('ROLLBACK');
      other.release();
      expect((await ours)?.recentlyUsedTools).toEqual(['ours']);
    });

    it('does not overwrite a write committed after it read the state (own cached copy included)', async () => {
      const table = newTable();
      const store = open({ table });
      await store.update('cas', addTool('first')); // the store now knows this row version
      const other = await withTransaction(async (client) => {
        await client.query(
          `UPDATE "${table}" SET version = 2, state = jsonb_set(
             jsonb_set(state, '{recentlyUsedTools}', state->'recentlyUsedTools' || '["theirs"]'), '{version}', '2')
           WHERE session_key = ${keyOf}`,
          ['cas'],
        );
      });
      const ours = store.update('cas', addTool('ours'));
      await new Promise((resolve) => setTimeout(resolve, 200));
      await other.query('COMMIT');
      other.release();
      const stored = await ours;
      expect(stored?.recentlyUsedTools).toEqual(['first', 'theirs', 'ours']);
      expect(stored?.version).toBe(3);
      // A write from outside while nothing was in flight: the next update still sees it.
      await sql(
        `UPDATE "${table}" SET version = 4, state = jsonb_set(jsonb_set(state, '{sequenceIndex}', '9'), '{version}', '4')
         WHERE session_key = ${keyOf}`,
        ['cas'],
      );
      const next = await store.update('cas', (c) => c && { ...c, activeStep: 'B' });
      expect(next).toMatchObject({ sequenceIndex: 9, activeStep: 'B', version: 5 });
    });
  });

  it('migrates a version-1 table: its sessions stay, and they gain an event log', async () => {
    const table = newTable();
    // The table as Baton with schema version 1 left it.
    await sql(`CREATE TABLE "${table}_migrations" (version INTEGER PRIMARY KEY, description TEXT NOT NULL,
      applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`);
    await sql(`INSERT INTO "${table}_migrations" (version, description) VALUES (1, 'v1')`);
    await sql(`CREATE TABLE "${table}" (session_key BYTEA PRIMARY KEY, session_id TEXT NOT NULL, state JSONB NOT NULL,
      version BIGINT NOT NULL, expires_at BIGINT, last_access BIGINT NOT NULL)`);
    const kept = { ...state('kept'), recentlyUsedTools: ['search'], ttl: 0, version: 3 };
    await sql(`INSERT INTO "${table}" VALUES (sha256(convert_to('kept', 'UTF8')), 'kept', $1::jsonb, 3, NULL, 1)`, [
      JSON.stringify(kept),
    ]);
    const store = open({ table });
    expect(await store.get('kept')).toEqual(kept);
    await store.update('kept', loggedTool('think'));
    expect((await store.readLog!('kept')).map((entry) => entry.history)).toEqual([['search', 'think']]);
    const versions = await sql<{ version: number }>(`SELECT version FROM "${table}_migrations" ORDER BY version`);
    expect(versions.map((row) => row.version)).toEqual([1, 2]);
  });

  it('appends event log entries in the write statement: the same queries, none for a lost compare-and-set', async () => {
    const table = newTable();
    const pool = new pg.Pool({ connectionString: URL, max: 4 });
    const sent: string[] = [];
    // Count the statements the store sends through its pool (clients it checks out included).
    pool.on('connect', (client) => {
      const original = client.query.bind(client) as (...args: unknown[]) => unknown;
      (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
        const first = args[0] as string | { text?: string };
        sent.push(typeof first === 'string' ? first : (first.text ?? ''));
        return original(...args);
      };
    });
    tables.add(table);
    const store = postgresStore({ pool, table });
    stores.push(store);
    await store.update('warm', addTool('first'));
    sent.length = 0;
    await store.update('warm', addTool('plain'));
    const plain = sent.length;
    expect(plain).toBeGreaterThan(0);
    sent.length = 0;
    await store.update('warm', loggedTool('logged'));
    expect(sent.length).toBe(plain);
    // Another instance writes: our compare-and-set loses, and only the retry's entry lands.
    const other = open({ table });
    await other.update('warm', loggedTool('other'));
    await store.update('warm', loggedTool('stale'));
    const entries = await store.readLog!('warm');
    expect(entries.map((entry) => entry.seq)).toEqual([1, 2, 3]);
    expect(entries.at(-1)!.history.slice(-2)).toEqual(['other', 'stale']);
    // Two instances racing lose and repeat nothing.
    await Promise.all(
      Array.from({ length: 40 }, (_, i) => (i % 2 ? store : other).update('warm', loggedTool(`r${i}`))),
    );
    expect((await other.readLog!('warm')).map((entry) => entry.seq)).toEqual(
      Array.from({ length: 43 }, (_, i) => i + 1),
    );
    await pool.end();
  });

  it('drops the log with its session: delete, eviction, and an expired session written again', async () => {
    const table = newTable();
    const clock = { at: 1_000_000 };
    const store = open({ table, maxSessions: 2, now: () => clock.at });
    const logRows = async (id: string) =>
      (
        await sql<{ n: number }>(
          `SELECT count(*)::int AS n FROM "${table}_log" WHERE session_key = sha256(convert_to($1, 'UTF8'))`,
          [id],
        )
      )[0]?.n;
    for (const id of ['a', 'b', 'c']) {
      await store.update(id, loggedTool(id));
      clock.at += 10;
    }
    expect(await logRows('a')).toBe(0); // evicted with a
    await store.delete('c');
    expect(await logRows('c')).toBe(0);
    await store.update('brief', loggedTool('x', { ttl: 100 }));
    clock.at += 500;
    await store.update('brief', loggedTool('y', { ttl: 100 }));
    // The old session's entry is gone; the new one starts its own log.
    expect((await store.readLog!('brief')).map((entry) => entry.history)).toEqual([['y']]);
  });

  it('is not fooled by a session deleted and created again with the same version', async () => {
    const table = newTable();
    const first = open({ table });
    const second = open({ table });
    await first.update('aba', addTool('a1'));
    expect(await second.delete('aba')).toBe(true);
    await second.update('aba', addTool('b1')); // version 1 again
    const stored = await first.update('aba', addTool('a2'));
    expect(stored?.recentlyUsedTools).toEqual(['b1', 'a2']);
    expect(stored?.version).toBe(2);
  });

  it('trims to maxSessions after a burst of concurrent creations', async () => {
    const table = newTable();
    let time = 1_000_000;
    const store = open({ table, maxSessions: 5, now: () => time++ });
    await Promise.all(Array.from({ length: 30 }, (_, i) => store.update(`burst${i}`, () => state(`burst${i}`))));
    await store.update('last', () => state('last'));
    const [count] = await sql<{ n: number }>(`SELECT count(*)::int AS n FROM "${table}"`);
    expect(count?.n).toBe(5);
    expect(await store.get('last')).toBeDefined();
  });

  it('keeps session ids longer than a btree entry apart', async () => {
    const store = open({ table: newTable() });
    const long = Array.from({ length: 4096 }, (_, i) => String.fromCharCode(0x3042 + ((i * 7919) % 80))).join('');
    const other = `${long.slice(0, 4095)}x`;
    await store.update(long, () => state(long, { sequenceIndex: 1 }));
    await store.update(other, () => state(other, { sequenceIndex: 2 }));
    expect((await store.get(long))?.sequenceIndex).toBe(1);
    expect((await store.get(other))?.sequenceIndex).toBe(2);
  });

  it('refuses ids and states PostgreSQL cannot hold, with InvalidArgumentError', async () => {
    const store = open({ table: newTable() });
    for (const id of ['nul\0id', 'lone\uD800surrogate']) {
      expect(InvalidArgumentError.isInstance(await failure(store.get(id)))).toBe(true);
    }
    const error = await failure(store.update('s', () => state('s', { activeStep: 'has\0nul' })));
    expect(InvalidArgumentError.isInstance(error)).toBe(true);
    expect(await store.get('s')).toBeUndefined();
  });

  it('rejects a corrupted row instead of returning it', async () => {
    const table = newTable();
    const store = open({ table });
    await store.update('bad', () => state('bad'));
    await sql(`UPDATE "${table}" SET state = '{"sessionId": "bad", "sequenceIndex": -1}'`);
    const error = await failure(store.get('bad'));
    expect(InvalidArgumentError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/recentlyUsedTools/);
    expect(InvalidArgumentError.isInstance(await failure(store.update('bad', (c) => c)))).toBe(true);
  });

  it('reports a broken table as a store failure, not as an outage', async () => {
    const table = newTable();
    const store = open({ table });
    await store.get('x');
    await sql(`ALTER TABLE "${table}" DROP COLUMN last_access`);
    const error = await failure(store.update('x', () => state('x')));
    expect(BatonError.isInstance(error)).toBe(true);
    expect(StoreUnavailableError.isInstance(error)).toBe(false);
    expect((error as BatonError).code).toBe('store-failed');
    expect((error as Error).message).toMatch(/last_access/);
  });

  it('leaves a caller-owned pool open on close, and uses its connections', async () => {
    const pool = new pg.Pool({ connectionString: URL, max: 3 });
    try {
      const store = postgresStore({ pool, table: newTable() });
      await store.update('p', () => state('p'));
      await store.close();
      const { rows } = await pool.query<{ one: number }>('SELECT 1 AS one');
      expect(rows[0]?.one).toBe(1);
      await expect(store.get('p')).rejects.toThrow(/closed/);
    } finally {
      await pool.end();
    }
  });

  it('renews expiry on writes with the injected clock and stores it as milliseconds; reads write nothing', async () => {
    const table = newTable();
    let time = 10_000_000;
    const store = open({ table, now: () => time });
    await store.update('e', () => state('e', { ttl: 500 }));
    time += 100;
    await store.get('e');
    await store.update('e', (c) => c);
    const read = () =>
      sql<{ expires_at: string; last_access: string; version: string }>(
        `SELECT expires_at, last_access, version FROM "${table}"`,
      );
    expect((await read())[0]).toEqual({ expires_at: '10000500', last_access: '10000000', version: '1' });
    await store.update('e', (c) => c && { ...c, sequenceIndex: 1 });
    expect((await read())[0]).toEqual({ expires_at: String(time + 500), last_access: String(time), version: '2' });
    time += 500;
    expect(await store.delete('e')).toBe(false); // expired: removed, but it did not exist any more
    expect(await sql(`SELECT 1 FROM "${table}"`)).toHaveLength(0);
  });

  it('rewrites an expired session from scratch when it is updated again', async () => {
    let time = 1_000_000;
    const store = open({ table: newTable(), now: () => time });
    await store.update('r', () => state('r', { ttl: 10, sequenceIndex: 5 }));
    await store.update('r', (c) => c && { ...c, sequenceIndex: 6 });
    time += 10;
    const seen: (OrchestrationState | undefined)[] = [];
    const fresh = await store.update('r', (current) => {
      seen.push(current);
      return state('r', { ttl: 10 });
    });
    expect(seen).toEqual([undefined]);
    expect(fresh?.version).toBe(1);
    expect(fresh?.sequenceIndex).toBe(0);
  });

  describe('the connection kept for the next statement', () => {
    /** A connection string whose connections this test alone can find in pg_stat_activity. */
    const named = () => {
      const name = `baton_keep_${randomUUID().slice(0, 8)}`;
      return { name, connectionString: `${URL}?application_name=${name}` };
    };
    const backends = async (name: string) =>
      sql<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [name]);

    it('sends a statement from inside a long chain of promise jobs before the chain ends', async () => {
      // pg-pool hands out an idle client at the next process.nextTick, which waits for the
      // whole chain; the AI SDK calls the store from such chains (approval hook, then execute).
      const store = open({ table: newTable() });
      await store.update('w', () => state('w'));
      /** The job of a 1,000-job chain in which `call`'s statement was sent (0: in the call itself). */
      const sentAt = async <T>(call: () => Promise<T>): Promise<[number | undefined, T]> => {
        const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
        const query = proto.query;
        let job = 0;
        let sentAtJob: number | undefined;
        proto.query = function (this: unknown, ...args: unknown[]) {
          sentAtJob ??= job;
          return query.apply(this, args);
        };
        let done: Promise<T>;
        try {
          done = call();
          for (; job < 1_000; job++) await null;
        } finally {
          proto.query = query;
        }
        return [sentAtJob, await done];
      };
      const [updateSent, updated] = await sentAt(() => store.update('w', addTool('a')));
      expect(updateSent).toBeDefined();
      expect(updateSent).toBeLessThan(100);
      expect(updated?.recentlyUsedTools).toEqual(['a']);
      // A read goes out within the call: orchestrate() starts one before the AI SDK's setup.
      const [readSent, read] = await sentAt(() => store.get('w'));
      expect(readSent).toBe(0);
      expect(read?.recentlyUsedTools).toEqual(['a']);
    });

    it('survives the server ending the kept connection: the next call connects again and loses nothing', async () => {
      const { name, connectionString } = named();
      const store = open({ table: newTable(), connectionString });
      await store.update('k', addTool('a'));
      const [kept, ...others] = await backends(name);
      expect(others).toEqual([]);
      await sql('SELECT pg_terminate_backend($1)', [kept?.pid]);
      await sleep(500); // the termination notice reaches the client
      expect((await store.update('k', addTool('b')))?.recentlyUsedTools).toEqual(['a', 'b']);
      expect((await store.get('k'))?.recentlyUsedTools).toEqual(['a', 'b']);
      expect((await backends(name)).map((row) => row.pid)).not.toContain(kept?.pid);
    });

    it('makes no call wait for a connection, even with a pool of one', async () => {
      // A kept client yields to whoever queues for one; without that, these would wait for
      // it to idle out (5 s) and fail at connectionTimeoutMillis.
      const store = open({ table: newTable(), poolSize: 1, connectionTimeoutMillis: 1_000 });
      await store.update('s0', addTool('warm'));
      const sessions = ['s0', 's1', 's2', 's3', 's4'];
      await Promise.all([
        ...sessions.flatMap((id) => ['a', 'b', 'c'].map((tool) => store.update(id, addTool(tool)))),
        ...sessions.map((id) => store.get(id)),
      ]);
      for (const id of sessions) {
        const tools = (await store.get(id))?.recentlyUsedTools ?? [];
        expect(tools.filter((tool) => tool !== 'warm').sort()).toEqual(['a', 'b', 'c']);
      }
    });

    it('returns the clients of a pool the app passed in at once: the app may need them', async () => {
      const pool = new pg.Pool({ connectionString: URL, max: 1, connectionTimeoutMillis: 1_000 });
      try {
        const store = postgresStore({ pool, table: newTable() });
        await store.update('p', () => state('p'));
        expect(pool.idleCount).toBe(pool.totalCount);
        // The app's own query gets the pool's only connection without waiting.
        const { rows } = await pool.query<{ one: number }>('SELECT 1 AS one');
        expect(rows[0]?.one).toBe(1);
        await store.close();
      } finally {
        await pool.end();
      }
    });

    it('does not keep a script alive: a process that used the store ends without close()', async () => {
      const table = newTable();
      const script = [
        `import { postgresStore } from ${JSON.stringify(new globalThis.URL('./postgres.ts', import.meta.url).pathname)};`,
        `import { createState } from ${JSON.stringify(new globalThis.URL('../core/state.ts', import.meta.url).pathname)};`,
        `const store = postgresStore({ connectionString: ${JSON.stringify(URL)}, table: ${JSON.stringify(table)} });`,
        "await store.update('x', () => createState('x', Date.now()));",
        "console.log('written');",
      ].join('\n');
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '--eval', script], {
        cwd: new globalThis.URL('../..', import.meta.url).pathname,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      let writtenAt: number | undefined;
      child.stdout.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('written')) writtenAt ??= performance.now();
      });
      const [code] = (await once(child, 'exit')) as [number | null];
      expect(stderr).toBe('');
      expect(code).toBe(0);
      expect(writtenAt).toBeDefined();
      // The kept connection is released after 5 s; the process must not wait for that.
      expect(performance.now() - (writtenAt ?? 0)).toBeLessThan(3_500);
    });
  });
});
