/**
 * The SQLite store: durable and embedded, the default of the server and the CLI. Built on
 * Node's own `node:sqlite`, so there is no native addon to compile.
 *
 * Atomicity: `DatabaseSync` is synchronous, so one update (BEGIN IMMEDIATE, read, `fn`, write,
 * COMMIT) never yields to the event loop and in-process updates are serialized for free.
 * Several processes may share the file: BEGIN IMMEDIATE takes SQLite's single write lock
 * before the read, so a cross-process read-modify-write cannot interleave with another.
 *
 * Layout: one row per session in the sessions table (the state as JSON text, plus `ttl`,
 * `expires_at` and `last_access` for expiry and eviction in SQL), and the sessions' event logs
 * in `<table>_log` (one row per entry, keyed by session and seq), appended in the same
 * transaction as the state they describe and deleted with their session.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { DatabaseSync, SQLOutputValue, StatementSync } from 'node:sqlite';
import { setTimeout as sleep } from 'node:timers/promises';
import { BatonError, InvalidArgumentError, StoreClosedError, StoreUnavailableError } from '../core/errors.js';
import { optionIssues, optionNames, throwOnErrors } from '../core/option-issues.js';
import { assertLogEntry, logEntriesOf, type SessionLogEntry } from '../core/session-log.js';
import type { OrchestrationState } from '../core/state.js';
import { assertState, assertTextSessionId } from '../core/state-check.js';
import { loadNodeSqlite } from './optional-dependency.js';
import type { SessionStore, StateUpdater, StoreOptions } from './types.js';

/** Options of {@link sqliteStore}. */
export interface SqliteStoreOptions extends StoreOptions {
  /** Path of the database file (its parent directories are created), or `:memory:`. */
  path: string;
  /**
   * How long an operation waits for another connection's lock before failing with a
   * {@link StoreUnavailableError}, in milliseconds (default 5,000).
   */
  busyTimeoutMs?: number;
  /** Name of the sessions table (default `baton_sessions`): letters, digits and underscores. */
  table?: string;
  /**
   * `normal` (default): an acknowledged write survives the process being killed, but the
   * last writes may be lost (never corrupted) on power loss or an OS crash. `full`: every
   * commit is fsynced, so it survives power loss too, at a much lower write rate.
   */
  synchronous?: 'normal' | 'full';
}

/** The option names {@link sqliteStore} takes, to refuse others with a did-you-mean. */
const SQLITE_STORE_OPTIONS = optionNames<SqliteStoreOptions>({
  path: true,
  busyTimeoutMs: true,
  table: true,
  synchronous: true,
  maxSessions: true,
  now: true,
});

/** The schema version this code writes; a database stamped with a newer one is refused. */
export const SQLITE_SCHEMA_VERSION = 2;

/** Default name of the sessions table. */
export const DEFAULT_SQLITE_TABLE = 'baton_sessions';

const STORE_NAME = 'sqlite';
const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
/**
 * How long SQLite itself may wait for a lock, blocking the event loop. Longer waits happen
 * in `withRetry` between attempts, asleep, so one locked database never freezes a server.
 */
const BLOCKING_BUSY_SLICE_MS = 5;
const MAX_RETRY_SLEEP_MS = 25;

/**
 * Schema migrations in order: entry `i` takes a table from version `i` to `i + 1`. Applied
 * inside one transaction at open, so a database is never left half-migrated.
 */
const MIGRATIONS: readonly ((table: string) => string)[] = [
  // `ttl` duplicates `state.ttl`, so expiry can be computed in SQL without parsing JSON.
  (table) => `
    CREATE TABLE ${table} (
      session_id  TEXT    NOT NULL PRIMARY KEY,
      state       TEXT    NOT NULL,
      version     INTEGER NOT NULL,
      ttl         INTEGER NOT NULL,
      expires_at  INTEGER,
      last_access INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX ${table}_expires_at ON ${table} (expires_at);
    CREATE INDEX ${table}_last_access ON ${table} (last_access);
  `,
  // 2: sessions' event logs, beside their state rather than in it, so a write appends its own
  // entries instead of rewriting all of them.
  (table) => `
    CREATE TABLE ${table}_log (
      session_id TEXT    NOT NULL,
      seq        INTEGER NOT NULL,
      entry      TEXT    NOT NULL,
      PRIMARY KEY (session_id, seq)
    ) STRICT, WITHOUT ROWID;
  `,
];

/**
 * Parses a `sqlite:` URL into {@link SqliteStoreOptions}: `sqlite:relative/path.db`,
 * `sqlite:///absolute/path.db` or `sqlite::memory:`, with optional query parameters
 * `table`, `busyTimeoutMs`, `maxSessions` and `synchronous`.
 */
export function parseSqliteUrl(url: string): SqliteStoreOptions {
  const bad = (message: string): never => {
    throw new InvalidArgumentError(
      'url',
      `${message} (got ${JSON.stringify(url)}); expected sqlite:relative/path.db, sqlite:///absolute/path.db or sqlite::memory:`,
    );
  };
  if (typeof url !== 'string' || !url.toLowerCase().startsWith('sqlite:')) bad('not a sqlite: URL');
  const rest = url.slice('sqlite:'.length);
  const queryAt = rest.indexOf('?');
  let location = queryAt === -1 ? rest : rest.slice(0, queryAt);
  if (location.startsWith('//')) {
    // `sqlite://name` would put the path in the host position, which means nothing here.
    if (!location.startsWith('///')) bad('a sqlite URL has no host; use three slashes for an absolute path');
    location = location.slice(2);
    // sqlite:///C:/data/baton.db names a Windows drive, not a root directory called "C:".
    if (/^\/[A-Za-z]:[/\\]/.test(location)) location = location.slice(1);
  }
  let path = '';
  try {
    path = decodeURIComponent(location);
  } catch {
    bad('the path has a malformed %-escape');
  }
  if (path === '' || path === '/') bad('the URL names no database file');
  const options: SqliteStoreOptions = { path };
  if (queryAt === -1) return options;
  for (const [key, value] of new URLSearchParams(rest.slice(queryAt + 1))) {
    if (key === 'table') options.table = value;
    else if (key === 'busyTimeoutMs' || key === 'maxSessions') {
      const number = Number(value);
      if (value.trim() === '' || !Number.isFinite(number)) bad(`${key} must be a number`);
      options[key] = number;
    } else if (key === 'synchronous') {
      if (value !== 'normal' && value !== 'full') bad('synchronous must be normal or full');
      options.synchronous = value as 'normal' | 'full';
    } else bad(`unknown parameter "${key}"; known: table, busyTimeoutMs, maxSessions, synchronous`);
  }
  return options;
}

/**
 * Creates a {@link SessionStore} kept in a SQLite database (opened, and migrated, now).
 * Its options are checked now: an unknown one is a `TemplateConfigError` naming it (with a
 * did-you-mean when one is close), a value of the wrong type an `InvalidArgumentError`.
 */
export function sqliteStore(options: SqliteStoreOptions): SessionStore {
  // A misspelt option would otherwise be ignored without a word (`synchronus: 'full'` would
  // leave commits unsynced on power loss).
  throwOnErrors(optionIssues(SQLITE_STORE_OPTIONS, options), 'sqliteStore() options');
  const now = options.now ?? Date.now;
  // A clock that is not a function would fail only at the first request, as a TypeError.
  if (typeof now !== 'function') {
    throw new InvalidArgumentError('now', `expected a function returning milliseconds, got ${typeof now}`);
  }
  const path = options.path;
  if (typeof path !== 'string' || path === '') {
    throw new InvalidArgumentError('path', 'expected a database file path or ":memory:"');
  }
  const table = options.table ?? DEFAULT_SQLITE_TABLE;
  if (!TABLE_NAME.test(table)) {
    throw new InvalidArgumentError(
      'table',
      `${JSON.stringify(table)} is not a plain SQL name; use letters, digits and underscores`,
    );
  }
  const busyTimeoutMs = options.busyTimeoutMs ?? 5_000;
  if (!(Number.isFinite(busyTimeoutMs) && busyTimeoutMs >= 0)) {
    throw new InvalidArgumentError('busyTimeoutMs', `expected a number >= 0, got ${String(options.busyTimeoutMs)}`);
  }
  const maxSessions = options.maxSessions ?? Number.POSITIVE_INFINITY;
  if (!(maxSessions >= 1)) {
    throw new InvalidArgumentError('maxSessions', `expected a number >= 1, got ${String(options.maxSessions)}`);
  }
  const synchronous = options.synchronous ?? 'normal';
  if (synchronous !== 'normal' && synchronous !== 'full') {
    throw new InvalidArgumentError('synchronous', `expected "normal" or "full", got ${String(synchronous)}`);
  }

  const db = openDatabase(path, table, busyTimeoutMs, synchronous);
  let statements: ReturnType<typeof prepareStatements>;
  try {
    statements = prepareStatements(db, table);
  } catch (error) {
    db.close();
    throw unavailable(`cannot prepare statements on ${path}`, error);
  }
  const s = statements;
  let closed = false;

  function checkOpen() {
    if (closed) throw new StoreClosedError('sqlite');
  }

  /**
   * Runs `body` (which must not yield) and, while the database is locked by another
   * connection, tries again after a short sleep until `busyTimeoutMs` has passed. `action`
   * names the operation for error messages; it is a function so the hot path builds no string.
   */
  async function withRetry<T>(action: () => string, body: () => T): Promise<T> {
    const deadline = performance.now() + busyTimeoutMs;
    for (let attempt = 0; ; attempt++) {
      checkOpen();
      try {
        return body();
      } catch (error) {
        if (!isSqliteError(error)) throw error;
        if (!isBusy(error)) throw unavailable(`${action()} failed: ${error.message}`, error);
        const left = deadline - performance.now();
        if (left <= 0) {
          throw unavailable(
            `${action()} gave up: the database ${path} stayed locked by another connection for more than ${busyTimeoutMs} ms`,
            error,
          );
        }
        // Jitter keeps two waiting processes from retrying in lockstep.
        const backoff = Math.min(2 ** attempt, MAX_RETRY_SLEEP_MS) * (0.5 + Math.random() / 2);
        await sleep(Math.min(backoff, left));
      }
    }
  }

  /** One transaction: the caller holds the write lock from BEGIN IMMEDIATE to COMMIT. */
  function transaction<T>(body: () => T): T {
    s.begin.run();
    try {
      const result = body();
      s.commit.run();
      return result;
    } catch (error) {
      try {
        s.rollback.run();
      } catch {
        // SQLite already rolled back on its own (it does after some I/O errors).
      }
      throw error;
    }
  }

  function decode(sessionId: string, row: Record<string, SQLOutputValue>): OrchestrationState {
    const text = row.state;
    let value: unknown;
    try {
      if (typeof text !== 'string') throw new TypeError(`the state column holds ${typeof text}, not text`);
      value = JSON.parse(text);
    } catch (error) {
      throw corrupted(sessionId, `its state is not JSON text (${(error as Error).message})`, error);
    }
    try {
      return assertState(value);
    } catch (error) {
      throw corrupted(sessionId, (error as Error).message, error);
    }
  }

  function corrupted(sessionId: string, detail: string, cause: unknown) {
    return unavailable(
      `the stored state of session ${describeId(sessionId)} in table "${table}" of ${path} is corrupted: ${detail}. ` +
        'Delete the session to start it afresh.',
      cause,
    );
  }

  function expiryOf(ttl: number, at: number): number | null {
    return ttl > 0 ? at + ttl : null;
  }

  /** Evicts expired sessions first, then the least recently used, down to `maxSessions`. */
  function evict(keep: string, at: number) {
    const count = Number(s.count.get()?.n ?? 0);
    if (count <= maxSessions) return;
    s.sweepLogs.run(at);
    const expired = Number(s.sweep.run(at).changes);
    const excess = count - expired - maxSessions;
    if (excess > 0) {
      s.evictLogs.run(keep, Math.ceil(excess));
      s.evictLeastRecent.run(keep, Math.ceil(excess));
    }
  }

  /** Appends `entries` to the session's log and keeps the newest `capacity` (inside the update's transaction). */
  function appendLog(sessionId: string, entries: readonly SessionLogEntry[], stored: OrchestrationState) {
    for (const entry of entries) s.insertLog.run(sessionId, entry.seq, JSON.stringify(entry));
    const log = stored.log;
    if (log !== undefined) s.trimLog.run(sessionId, log.seq - log.capacity);
  }

  function decodeEntry(sessionId: string, row: Record<string, SQLOutputValue>): SessionLogEntry {
    try {
      if (typeof row.entry !== 'string') throw new TypeError(`the entry column holds ${typeof row.entry}, not text`);
      return assertLogEntry(JSON.parse(row.entry), `the event log entry ${String(row.seq)}`);
    } catch (error) {
      throw unavailable(
        `the event log of session ${describeId(sessionId)} in table "${table}_log" of ${path} is corrupted: ${(error as Error).message}. ` +
          'Delete the session to start it afresh.',
        error,
      );
    }
  }

  /** The read-modify-write of `update`; the caller runs it inside one transaction. */
  function applyUpdate(sessionId: string, fn: StateUpdater): OrchestrationState | undefined {
    const at = now();
    const row = s.selectLive.get(sessionId, at);
    const current = row === undefined ? undefined : decode(sessionId, row);
    const next = fn(current);
    // Nothing to write: no renewal either (TTLs ride on writes, so a read is never a write).
    if (next === undefined || next === current) return current;
    // Refuse to write what could not be read back: a bad state would poison the row.
    assertState(next, 'state');
    const stored: OrchestrationState = { ...next, version: (current?.version ?? 0) + 1 };
    s.upsert.run(sessionId, JSON.stringify(stored), stored.version, stored.ttl, expiryOf(stored.ttl, at), at);
    // A new session (perhaps over an expired row) starts with no entries of an older one.
    if (current === undefined) s.clearLog.run(sessionId);
    const entries = logEntriesOf(next);
    if (entries !== undefined) appendLog(sessionId, entries, stored);
    if (current === undefined && maxSessions !== Number.POSITIVE_INFINITY) evict(sessionId, at);
    return stored;
  }

  return {
    name: STORE_NAME,
    async get(sessionId) {
      assertTextSessionId(sessionId);
      // Reads renew nothing: TTLs ride on writes, so a read takes no write lock.
      const row = await withRetry(
        () => `reading session ${describeId(sessionId)}`,
        () => s.selectLive.get(sessionId, now()),
      );
      return row === undefined ? undefined : decode(sessionId, row);
    },
    async update(sessionId: string, fn: StateUpdater) {
      assertTextSessionId(sessionId);
      return withRetry(
        () => `updating session ${describeId(sessionId)}`,
        () => transaction(() => applyUpdate(sessionId, fn)),
      );
    },
    async readLog(sessionId) {
      assertTextSessionId(sessionId);
      // Only a live session's log: an expired one's entries wait for the sweep, unread.
      const rows = await withRetry(
        () => `reading the event log of session ${describeId(sessionId)}`,
        () => s.selectLog.all(sessionId, now()),
      );
      return rows.map((row) => decodeEntry(sessionId, row));
    },
    async delete(sessionId) {
      assertTextSessionId(sessionId);
      const result = await withRetry(
        () => `deleting session ${describeId(sessionId)}`,
        () =>
          transaction(() => {
            s.clearLog.run(sessionId);
            return s.remove.run(sessionId);
          }),
      );
      return Number(result.changes) > 0;
    },
    async sweep() {
      const result = await withRetry(
        () => 'sweeping expired sessions',
        () =>
          transaction(() => {
            const at = now();
            s.sweepLogs.run(at);
            return s.sweep.run(at);
          }),
      );
      return Number(result.changes);
    },
    async close() {
      if (closed) return;
      closed = true;
      // Closing the last connection checkpoints the WAL into the database file.
      db.close();
    },
  };
}

/** Opens the file, sets the pragmas and brings the schema up to date; throws a BatonError. */
function openDatabase(
  path: string,
  table: string,
  busyTimeoutMs: number,
  synchronous: 'normal' | 'full',
): DatabaseSync {
  // Loaded here, not imported, so that on a Node.js without node:sqlite the error says so.
  const { DatabaseSync } = loadNodeSqlite();
  const inMemory = path === ':memory:';
  let db: DatabaseSync;
  try {
    if (!inMemory) mkdirSync(dirname(path), { recursive: true });
    db = new DatabaseSync(path);
  } catch (error) {
    throw unavailable(`cannot open the database file ${path}: ${(error as Error).message}`, error);
  }
  // Opening happens once, at startup, so it may block for the whole timeout. SQLite answers
  // "database is locked" at once, without its busy handler, while another connection switches
  // a new file to WAL or migrates it (several `baton serve --workers` starting together): such
  // answers are retried until the timeout, like any other lock.
  const deadline = performance.now() + busyTimeoutMs;
  for (;;) {
    try {
      return prepareDatabase(db, table, path, inMemory, busyTimeoutMs, synchronous);
    } catch (error) {
      if (isSqliteError(error) && isBusy(error) && performance.now() < deadline) {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
        continue;
      }
      db.close();
      if (BatonError.isInstance(error)) throw error;
      throw unavailable(`cannot open the database ${path}: ${(error as Error).message}`, error);
    }
  }
}

/** Sets the pragmas and brings the schema up to date. */
function prepareDatabase(
  db: DatabaseSync,
  table: string,
  path: string,
  inMemory: boolean,
  busyTimeoutMs: number,
  synchronous: 'normal' | 'full',
): DatabaseSync {
  db.exec(`PRAGMA busy_timeout = ${Math.ceil(busyTimeoutMs)}`);
  const mode = db.prepare('PRAGMA journal_mode = WAL').get()?.journal_mode;
  if (!inMemory && mode !== 'wal') {
    throw new Error(`SQLite refused write-ahead logging (journal mode is ${String(mode)})`);
  }
  // synchronous=NORMAL in WAL mode: COMMIT returns once the transaction is written to the
  // WAL file, i.e. handed to the OS, which keeps it even if this process is killed the next
  // instant (test/sqlite-crash.test.ts kills writers with SIGKILL to prove it). Only a power
  // loss or OS crash can drop the last commits, and even then the database stays consistent.
  // FULL adds an fsync per commit, which costs an order of magnitude in write rate.
  db.exec(`PRAGMA synchronous = ${synchronous === 'full' ? 'FULL' : 'NORMAL'}`);
  migrate(db, table, path);
  db.exec(`PRAGMA busy_timeout = ${Math.min(Math.ceil(busyTimeoutMs), BLOCKING_BUSY_SLICE_MS)}`);
  return db;
}

/** Applies the missing migrations of `table` in one transaction, recording the version. */
function migrate(db: DatabaseSync, table: string, path: string) {
  db.exec('BEGIN IMMEDIATE');
  try {
    db.exec('CREATE TABLE IF NOT EXISTS baton_meta (name TEXT NOT NULL PRIMARY KEY, schema_version INTEGER NOT NULL)');
    const found = db.prepare('SELECT schema_version FROM baton_meta WHERE name = ?').get(table)?.schema_version;
    const version = found === undefined ? 0 : Number(found);
    if (!Number.isSafeInteger(version) || version < 0) {
      throw unavailable(`baton_meta in ${path} records a nonsensical schema version ${String(found)} for "${table}"`);
    }
    if (version > SQLITE_SCHEMA_VERSION) {
      throw unavailable(
        `table "${table}" in ${path} has schema version ${version}, but this version of Baton knows only up to ` +
          `${SQLITE_SCHEMA_VERSION}; it was written by a newer Baton, so upgrade Baton (or use another database file)`,
      );
    }
    for (let next = version; next < SQLITE_SCHEMA_VERSION; next++) {
      const migration = MIGRATIONS[next];
      if (migration === undefined) throw new Error(`migration ${next + 1} is missing`);
      db.exec(migration(table));
    }
    if (version !== SQLITE_SCHEMA_VERSION) {
      db.prepare(
        'INSERT INTO baton_meta (name, schema_version) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET schema_version = excluded.schema_version',
      ).run(table, SQLITE_SCHEMA_VERSION);
    }
    db.exec('COMMIT');
  } catch (error) {
    try {
      db.exec('ROLLBACK');
    } catch {
      // Nothing to roll back: BEGIN itself failed or SQLite rolled back already.
    }
    throw error;
  }
}

/** Every statement the store runs, prepared once: compiling SQL per call would dominate. */
function prepareStatements(db: DatabaseSync, table: string) {
  return {
    begin: db.prepare('BEGIN IMMEDIATE'),
    commit: db.prepare('COMMIT'),
    rollback: db.prepare('ROLLBACK'),
    selectLive: db.prepare(
      `SELECT state FROM ${table} WHERE session_id = ?1 AND (expires_at IS NULL OR expires_at > ?2)`,
    ),
    upsert: db.prepare(
      `INSERT INTO ${table} (session_id, state, version, ttl, expires_at, last_access) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (session_id) DO UPDATE SET state = excluded.state, version = excluded.version,
         ttl = excluded.ttl, expires_at = excluded.expires_at, last_access = excluded.last_access`,
    ),
    remove: db.prepare(`DELETE FROM ${table} WHERE session_id = ?`),
    sweep: db.prepare(`DELETE FROM ${table} WHERE expires_at <= ?`),
    insertLog: db.prepare(`INSERT INTO ${table}_log (session_id, seq, entry) VALUES (?, ?, ?)`),
    trimLog: db.prepare(`DELETE FROM ${table}_log WHERE session_id = ? AND seq <= ?`),
    clearLog: db.prepare(`DELETE FROM ${table}_log WHERE session_id = ?`),
    selectLog: db.prepare(
      `SELECT seq, entry FROM ${table}_log WHERE session_id = ?1 AND EXISTS
        (SELECT 1 FROM ${table} WHERE session_id = ?1 AND (expires_at IS NULL OR expires_at > ?2)) ORDER BY seq`,
    ),
    sweepLogs: db.prepare(
      `DELETE FROM ${table}_log WHERE session_id IN (SELECT session_id FROM ${table} WHERE expires_at <= ?)`,
    ),
    count: db.prepare(`SELECT count(*) AS n FROM ${table}`),
    // rowid breaks ties between sessions last touched in the same millisecond.
    evictLeastRecent: db.prepare(
      `DELETE FROM ${table} WHERE rowid IN
        (SELECT rowid FROM ${table} WHERE session_id <> ? ORDER BY last_access, rowid LIMIT ?)`,
    ),
    // The logs of exactly the sessions evictLeastRecent removes next (same order, same limit).
    evictLogs: db.prepare(
      `DELETE FROM ${table}_log WHERE session_id IN
        (SELECT session_id FROM ${table} WHERE session_id <> ? ORDER BY last_access, rowid LIMIT ?)`,
    ),
  } satisfies Record<string, StatementSync>;
}

interface SqliteError extends Error {
  code: 'ERR_SQLITE_ERROR';
  errcode?: number;
}

function isSqliteError(error: unknown): error is SqliteError {
  return error instanceof Error && (error as { code?: unknown }).code === 'ERR_SQLITE_ERROR';
}

/** SQLITE_BUSY (5) or SQLITE_LOCKED (6), in their primary or extended forms. */
function isBusy(error: SqliteError): boolean {
  const primary = (error.errcode ?? 0) & 0xff;
  return primary === 5 || primary === 6;
}

function unavailable(message: string, cause?: unknown) {
  return new StoreUnavailableError(STORE_NAME, message, cause === undefined ? {} : { cause });
}

/** A session id for an error message: quoted, and cut short (ids may be 4,096 characters). */
function describeId(sessionId: string): string {
  return JSON.stringify(sessionId.length > 80 ? `${sessionId.slice(0, 80)}…` : sessionId);
}
