import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterAll, describe, expect, it } from 'vitest';
import { configErrorOf } from '../../test/helpers/config-errors.js';
import { InvalidArgumentError, StoreClosedError, StoreUnavailableError } from '../core/errors.js';
import { appendToLog } from '../core/session-log.js';
import { createState, type OrchestrationState } from '../core/state.js';
import { testStore } from '../testing/test-store.js';
import { DEFAULT_SQLITE_TABLE, parseSqliteUrl, SQLITE_SCHEMA_VERSION, sqliteStore } from './sqlite.js';
import type { SessionStore } from './types.js';

const directory = mkdtempSync(join(tmpdir(), 'baton-sqlite-'));
const opened: SessionStore[] = [];
let counter = 0;

afterAll(async () => {
  await Promise.all(opened.map((store) => store.close()));
  rmSync(directory, { recursive: true, force: true });
});

/** A fresh database file path in this run's temporary directory. */
function freshPath(name = 'db'): string {
  counter += 1;
  return join(directory, `${name}-${counter}.db`);
}

function open(...args: Parameters<typeof sqliteStore>): SessionStore {
  const store = sqliteStore(...args);
  opened.push(store);
  return store;
}

/** An updater that adds `tool` to the history and logs it, as the manager does. */
function loggedTool(tool: string) {
  return (current: OrchestrationState | undefined) => {
    const base = current ?? createState('unused', 1, 0);
    const next = { ...base, recentlyUsedTools: [...base.recentlyUsedTools, tool] };
    return appendToLog(next, 100, [{ event: { type: 'tool-recorded', tool, step: undefined }, state: next }], 1, 'm');
  };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );
}

testStore({
  name: 'sqlite',
  create: ({ namespace, ...options }) => sqliteStore({ path: join(directory, `${namespace}.db`), ...options }),
});

describe('sqliteStore options', () => {
  it('refuses an option it does not know, naming it and the factory, with a did-you-mean when close', () => {
    // `synchronus: 'full'` was ignored without a word: commits stayed unsynced on power loss.
    const error = configErrorOf(() => sqliteStore({ path: ':memory:', synchronus: 'full' } as never));
    expect(error.message).toContain('Invalid sqliteStore() options');
    expect(error.issues).toEqual([
      expect.objectContaining({
        path: 'synchronus',
        message: 'unknown option "synchronus"',
        hint: 'did you mean "synchronous"?',
      }),
    ]);
    // What testStore() gives every store: a store on a server must map it (to a file, a table).
    expect(configErrorOf(() => sqliteStore({ path: ':memory:', namespace: 'n' } as never)).message).toContain(
      'namespace: unknown option "namespace"',
    );
  });

  it('refuses a clock that is not a function, when it is created', () => {
    expect(() => sqliteStore({ path: ':memory:', now: 5 } as never)).toThrow(
      'Invalid now: expected a function returning milliseconds, got number',
    );
  });

  it('still takes every option it knows', () => {
    open({
      path: ':memory:',
      table: 'sessions',
      busyTimeoutMs: 100,
      synchronous: 'full',
      maxSessions: 10,
      now: () => 0,
    });
  });
});

describe('parseSqliteUrl', () => {
  it('reads relative, absolute and in-memory URLs', () => {
    expect(parseSqliteUrl('sqlite:data/baton.db')).toEqual({ path: 'data/baton.db' });
    expect(parseSqliteUrl('sqlite:///var/lib/baton/state.db')).toEqual({ path: '/var/lib/baton/state.db' });
    expect(parseSqliteUrl('sqlite::memory:')).toEqual({ path: ':memory:' });
    expect(parseSqliteUrl('sqlite:///C:/baton/state.db')).toEqual({ path: 'C:/baton/state.db' });
    expect(parseSqliteUrl('sqlite:my%20files/a%3Fb.db')).toEqual({ path: 'my files/a?b.db' });
  });

  it('reads the query parameters', () => {
    expect(parseSqliteUrl('sqlite:///tmp/x.db?table=agents&busyTimeoutMs=250&maxSessions=10&synchronous=full')).toEqual(
      { path: '/tmp/x.db', table: 'agents', busyTimeoutMs: 250, maxSessions: 10, synchronous: 'full' },
    );
  });

  it('rejects what is not a usable sqlite URL, saying what it expected', () => {
    for (const url of [
      'postgres://localhost/db',
      'sqlite:',
      'sqlite://host/file.db',
      'sqlite:%E0%A4%A.db',
      'sqlite:x.db?busyTimeoutMs=soon',
      'sqlite:x.db?colour=blue',
      'sqlite:x.db?synchronous=off',
    ]) {
      let error: unknown;
      try {
        parseSqliteUrl(url);
      } catch (caught) {
        error = caught;
      }
      expect(InvalidArgumentError.isInstance(error), url).toBe(true);
      expect((error as Error).message).toMatch(/sqlite::memory:/);
    }
  });

  it('gives options that open a store, creating the parent directories', async () => {
    const path = join(directory, 'nested', 'deeper', 'url.db');
    const store = open(parseSqliteUrl(`sqlite://${path}?table=from_url`));
    await store.update('u', () => createState('u', 1));
    const db = new DatabaseSync(path);
    expect(db.prepare('SELECT count(*) AS n FROM from_url').get()?.n).toBe(1);
    db.close();
  });
});

describe('sqliteStore', () => {
  it('uses write-ahead logging and records its schema version', async () => {
    const path = freshPath();
    const store = open({ path });
    await store.update('s', () => createState('s', 1));
    const db = new DatabaseSync(path);
    expect(db.prepare('PRAGMA journal_mode').get()?.journal_mode).toBe('wal');
    expect(db.prepare('SELECT schema_version FROM baton_meta WHERE name = ?').get(DEFAULT_SQLITE_TABLE)).toEqual({
      schema_version: SQLITE_SCHEMA_VERSION,
    });
    const indexes = db.prepare(`PRAGMA index_list(${DEFAULT_SQLITE_TABLE})`).all();
    expect(indexes.map((row) => row.name)).toEqual(
      expect.arrayContaining([`${DEFAULT_SQLITE_TABLE}_expires_at`, `${DEFAULT_SQLITE_TABLE}_last_access`]),
    );
    db.close();
  });

  it('keeps two tables in one file apart', async () => {
    const path = freshPath();
    const first = open({ path, table: 'first' });
    const second = open({ path, table: 'second' });
    await first.update('s', () => createState('s', 1));
    expect(await second.get('s')).toBeUndefined();
    expect(await first.get('s')).toBeDefined();
  });

  it('works in memory', async () => {
    const store = open({ path: ':memory:' });
    await store.update('m', () => createState('m', 1));
    expect((await store.get('m'))?.version).toBe(1);
  });

  it('reopens an existing database and finds the sessions it holds', async () => {
    const path = freshPath();
    const first = sqliteStore({ path });
    await first.update('kept', () => createState('kept', 1, 0));
    await first.close();
    const second = open({ path });
    expect((await second.get('kept'))?.sessionId).toBe('kept');
  });

  it('refuses a database stamped with a newer schema version, naming both versions', async () => {
    const path = freshPath();
    await sqliteStore({ path }).close();
    const db = new DatabaseSync(path);
    db.prepare('UPDATE baton_meta SET schema_version = ? WHERE name = ?').run(
      SQLITE_SCHEMA_VERSION + 1,
      DEFAULT_SQLITE_TABLE,
    );
    db.close();
    let error: unknown;
    try {
      open({ path });
    } catch (caught) {
      error = caught;
    }
    expect(StoreUnavailableError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(
      new RegExp(`schema version ${SQLITE_SCHEMA_VERSION + 1}.*only up to ${SQLITE_SCHEMA_VERSION}.*upgrade Baton`),
    );
  });

  it('migrates a fresh table once, leaving existing data alone on reopen', async () => {
    const path = freshPath();
    const first = sqliteStore({ path, table: 'migrated' });
    await first.update('x', () => createState('x', 1, 0));
    await first.close();
    // A second open must not re-run migration 1 (CREATE TABLE would fail on the existing table).
    const second = open({ path, table: 'migrated' });
    expect(await second.get('x')).toBeDefined();
  });

  it('migrates a version-1 database: its sessions stay, and they gain an event log', async () => {
    const path = freshPath();
    // A database as Baton with schema version 1 left it: the sessions table, no log table.
    const old = new DatabaseSync(path);
    old.exec(`
      CREATE TABLE baton_meta (name TEXT NOT NULL PRIMARY KEY, schema_version INTEGER NOT NULL);
      INSERT INTO baton_meta VALUES ('${DEFAULT_SQLITE_TABLE}', 1);
      CREATE TABLE ${DEFAULT_SQLITE_TABLE} (session_id TEXT NOT NULL PRIMARY KEY, state TEXT NOT NULL,
        version INTEGER NOT NULL, ttl INTEGER NOT NULL, expires_at INTEGER, last_access INTEGER NOT NULL) STRICT;
    `);
    const kept = { ...createState('kept', 1, 0), recentlyUsedTools: ['search'], version: 4 };
    old.prepare(`INSERT INTO ${DEFAULT_SQLITE_TABLE} VALUES (?, ?, 4, 0, NULL, 1)`).run('kept', JSON.stringify(kept));
    old.close();
    const store = open({ path });
    expect(await store.get('kept')).toEqual(kept);
    await store.update('kept', loggedTool('think'));
    expect((await store.readLog!('kept')).map((entry) => entry.history)).toEqual([['search', 'think']]);
    const db = new DatabaseSync(path);
    expect(db.prepare('SELECT schema_version FROM baton_meta WHERE name = ?').get(DEFAULT_SQLITE_TABLE)).toEqual({
      schema_version: 2,
    });
    db.close();
  });

  it('appends no entry when the transaction fails, and evicts a session with its log', async () => {
    const path = freshPath();
    const store = open({ path, maxSessions: 2 });
    await store.update('a', loggedTool('search'));
    // An updater that throws after logging: nothing of that attempt is written.
    await expect(
      store.update('a', (current) => {
        loggedTool('think')(current);
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect((await store.readLog!('a')).map((entry) => entry.seq)).toEqual([1]);
    await store.update('b', loggedTool('x'));
    await store.update('c', loggedTool('y')); // evicts a, the least recently written
    expect(await store.get('a')).toBeUndefined();
    const db = new DatabaseSync(path);
    expect(db.prepare(`SELECT count(*) AS n FROM ${DEFAULT_SQLITE_TABLE}_log WHERE session_id = 'a'`).get()).toEqual({
      n: 0,
    });
    db.close();
  });

  it('loses and repeats no entry when two connections log to one session at once', async () => {
    const path = freshPath();
    const [first, second] = [open({ path }), open({ path })];
    await Promise.all(
      Array.from({ length: 60 }, (_, i) => (i % 2 ? first : second).update('shared', loggedTool(`t${i}`))),
    );
    const entries = await second.readLog!('shared');
    expect(entries.map((entry) => entry.seq)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
    expect(entries.at(-1)!.history).toHaveLength(60);
  });

  it('reports a corrupted event log entry clearly, naming the session', async () => {
    const path = freshPath();
    const store = open({ path });
    await store.update('logged', loggedTool('search'));
    const db = new DatabaseSync(path);
    db.prepare(`UPDATE ${DEFAULT_SQLITE_TABLE}_log SET entry = '{"seq":1}' WHERE session_id = 'logged'`).run();
    db.close();
    const error = await rejection(store.readLog!('logged'));
    expect(StoreUnavailableError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/event log of session "logged".*corrupted.*not an event log entry/);
  });

  it('reports a corrupted state row with a clear error naming the session', async () => {
    const path = freshPath();
    const store = open({ path });
    await store.update('broken', () => createState('broken', 1, 0));
    await store.update('garbled', () => createState('garbled', 1, 0));
    const db = new DatabaseSync(path);
    db.prepare(`UPDATE ${DEFAULT_SQLITE_TABLE} SET state = ? WHERE session_id = ?`).run(
      JSON.stringify({ ...createState('broken', 1, 0), sequenceIndex: -3 }),
      'broken',
    );
    db.prepare(`UPDATE ${DEFAULT_SQLITE_TABLE} SET state = ? WHERE session_id = ?`).run(
      '{"sessionId": "garb',
      'garbled',
    );
    db.close();
    for (const call of [() => store.get('broken'), () => store.update('broken', (current) => current)]) {
      const error = await rejection(call());
      expect(StoreUnavailableError.isInstance(error)).toBe(true);
      expect((error as Error).message).toMatch(/session "broken".*corrupted.*sequenceIndex/);
    }
    const error = await rejection(store.get('garbled'));
    expect((error as Error).message).toMatch(/session "garbled".*corrupted.*not JSON/);
    // The way out the message suggests works.
    expect(await store.delete('broken')).toBe(true);
    expect(await store.update('broken', () => createState('broken', 2))).toMatchObject({ version: 1 });
  });

  it('keeps sessions whose ids differ only in unpaired surrogates apart, by refusing such ids', async () => {
    // UTF-8 turns every lone surrogate into U+FFFD: stored as is, these three ids would share one
    // row, and each session would read and overwrite the others' state.
    const store = open({ path: ':memory:' });
    await store.update('chat-\uFFFD', () => ({ ...createState('chat-\uFFFD', 1, 0), sequenceIndex: 7 }));
    for (const id of ['chat-\uD800', 'chat-\uDFFF']) {
      await expect(store.get(id)).rejects.toSatisfy(InvalidArgumentError.isInstance);
      await expect(store.update(id, () => createState(id, 1, 0))).rejects.toSatisfy(InvalidArgumentError.isInstance);
      await expect(store.delete(id)).rejects.toSatisfy(InvalidArgumentError.isInstance);
    }
    // The session spelled with U+FFFD itself, and ids with surrogate pairs, are unaffected.
    expect((await store.get('chat-\uFFFD'))?.sequenceIndex).toBe(7);
    await store.update('chat-\u{1F600}', () => createState('chat-\u{1F600}', 1, 0));
    expect((await store.get('chat-\u{1F600}'))?.sessionId).toBe('chat-\u{1F600}');
  });

  it('refuses to write a malformed state and keeps the old one', async () => {
    const store = open({ path: freshPath() });
    await store.update('s', () => createState('s', 1));
    const error = await rejection(
      store.update('s', (current) => current && { ...current, recentlyUsedTools: [42] as unknown as string[] }),
    );
    expect(InvalidArgumentError.isInstance(error)).toBe(true);
    expect((await store.get('s'))?.version).toBe(1);
  });

  it('fails with StoreUnavailableError within bounded time when another connection holds the lock', async () => {
    const path = freshPath();
    const store = open({ path, busyTimeoutMs: 300 });
    await store.update('s', () => createState('s', 1));
    const holder = new DatabaseSync(path);
    holder.exec('BEGIN IMMEDIATE');
    try {
      // A read takes no write lock (WAL): it answers while another connection writes.
      expect((await store.get('s'))?.sessionId).toBe('s');
      for (const call of [
        () => store.update('s', (current) => current && { ...current, sequenceIndex: 1 }),
        () => store.delete('s'),
      ]) {
        const started = performance.now();
        const error = await rejection(call());
        const elapsed = performance.now() - started;
        expect(StoreUnavailableError.isInstance(error)).toBe(true);
        expect((error as Error).message).toMatch(/locked by another connection for more than 300 ms/);
        expect(elapsed).toBeGreaterThanOrEqual(290);
        expect(elapsed).toBeLessThan(1_500);
      }
    } finally {
      holder.exec('ROLLBACK');
      holder.close();
    }
    expect(await store.update('s', (current) => current && { ...current, sequenceIndex: 1 })).toMatchObject({
      version: 2,
    });
  });

  it('waits for a lock without blocking the event loop, then succeeds', async () => {
    const path = freshPath();
    const store = open({ path, busyTimeoutMs: 5_000 });
    await store.update('s', () => createState('s', 1));
    const holder = new DatabaseSync(path);
    holder.exec('BEGIN IMMEDIATE');
    // This timer can only fire if the waiting update leaves the event loop free.
    setTimeout(() => {
      holder.exec('ROLLBACK');
      holder.close();
    }, 150);
    const started = performance.now();
    const updated = await store.update('s', (current) => current && { ...current, sequenceIndex: 4 });
    expect(updated?.sequenceIndex).toBe(4);
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
  });

  it('fails with StoreUnavailableError when the file cannot be opened or is not a database', () => {
    const notDatabase = freshPath('garbage');
    writeFileSync(notDatabase, 'this is not a SQLite database, just some text that is long enough '.repeat(20));
    const parentIsFile = join(notDatabase, 'inside.db');
    for (const path of [directory, notDatabase, parentIsFile]) {
      let error: unknown;
      try {
        open({ path });
      } catch (caught) {
        error = caught;
      }
      expect(StoreUnavailableError.isInstance(error), path).toBe(true);
      expect((error as Error).message).toContain(path);
    }
  });

  it('rejects bad options', () => {
    expect(() => sqliteStore({ path: '' })).toThrow(/path/);
    expect(() => sqliteStore({ path: ':memory:', table: 'x; DROP TABLE y' })).toThrow(/table/);
    expect(() => sqliteStore({ path: ':memory:', busyTimeoutMs: -1 })).toThrow(/busyTimeoutMs/);
    expect(() => sqliteStore({ path: ':memory:', maxSessions: 0 })).toThrow(/maxSessions/);
  });

  it('evicts expired sessions before live ones when over maxSessions', async () => {
    let time = 1_000_000;
    const store = open({ path: freshPath(), maxSessions: 2, now: () => time });
    await store.update('long', () => createState('long', time, 60_000));
    time += 1;
    // 'short' is more recently used than 'long', so plain LRU would evict 'long'.
    await store.update('short', () => createState('short', time, 5));
    time += 10;
    await store.update('newest', () => createState('newest', time, 60_000));
    expect(await store.get('long')).toBeDefined();
    expect(await store.get('newest')).toBeDefined();
    expect(await store.sweep()).toBe(0);
  });

  it('is closed by close() and refuses use afterwards', async () => {
    const store = sqliteStore({ path: freshPath() });
    await store.close();
    await store.close();
    const error = await rejection(store.get('s'));
    expect(StoreClosedError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/closed/);
  });
});
