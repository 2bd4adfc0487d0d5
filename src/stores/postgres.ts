/**
 * The PostgreSQL store: one row per session, shared safely by many server processes.
 * `update` first tries a compare-and-set on the row version it knows (one statement, one
 * commit); when another writer got in first it falls back to a transaction that locks the row
 * (`SELECT ... FOR UPDATE`), so a hot session never livelocks the way endless retries can.
 *
 * Sessions' event logs live in `<table>_log`, one row per entry, referencing their session
 * with ON DELETE CASCADE (delete, sweep and eviction take them along). A write's entries are
 * inserted, and the log trimmed to its capacity, by the statement that writes the state
 * (data-modifying CTEs over the write's RETURNING row), so a compare-and-set that finds no
 * row appends nothing, and a logged write costs no extra round trip.
 */
import { createHash, hash } from 'node:crypto';
import type { Pool, PoolClient, QueryResultRow } from 'pg';
import {
  BatonError,
  InvalidArgumentError,
  StoreClosedError,
  StoreConflictError,
  StoreUnavailableError,
} from '../core/errors.js';
import { optionIssues, optionNames, throwOnErrors } from '../core/option-issues.js';
import { assertLogEntry, logEntriesOf, type SessionLogEntry } from '../core/session-log.js';
import type { OrchestrationState } from '../core/state.js';
import { assertState, assertTextSessionId } from '../core/state-check.js';
import { loadOptionalDependency } from './optional-dependency.js';
import { createSessionLanes } from './session-lanes.js';
import type { SessionStore, StateUpdater, StoreOptions } from './types.js';

/**
 * Options of {@link postgresStore}. Pass either `pool` or `connectionString`, not both. With
 * `maxSessions`, each new session counts the table's rows and creations are serialised per table,
 * so keep it for bounded tables; rows being updated at that moment are never evicted.
 */
export interface PostgresStoreOptions extends StoreOptions {
  /**
   * A pool you own. The store never ends it, and its own timeouts and `error` listener are
   * yours to set: an idle client's `error` event crashes the process when nobody listens.
   */
  pool?: Pool;
  /**
   * Where to connect, e.g. `postgres://postgres@127.0.0.1:5432/test`. Without `pool` or
   * `connectionString` the `PG*` environment variables (PGHOST, PGUSER...) apply.
   */
  connectionString?: string;
  /**
   * Table holding the sessions (default `baton_sessions`): letters, digits and `_`, at most
   * 48 characters. Its schema is the connection's `search_path`. The schema version is kept in
   * `<table>_migrations`.
   */
  table?: string;
  /**
   * Limit of each statement, lock waits included, in ms (default 5,000); the client gives up
   * one second later if the server does not answer at all. Not applied to a `pool` you pass.
   */
  statementTimeoutMs?: number;
  /**
   * Limit on connecting, and on waiting for a free pooled connection, in ms (default 2,000).
   * Not applied to a `pool` you pass.
   */
  connectionTimeoutMillis?: number;
  /** Connections in the pool the store creates (default 10). Not applied to a `pool` you pass. */
  poolSize?: number;
}

/** The option names {@link postgresStore} takes, to refuse others with a did-you-mean. */
const POSTGRES_STORE_OPTIONS = optionNames<PostgresStoreOptions>({
  pool: true,
  connectionString: true,
  table: true,
  statementTimeoutMs: true,
  connectionTimeoutMillis: true,
  poolSize: true,
  maxSessions: true,
  now: true,
});

/** The schema version this code writes; a table with a newer one is refused. */
export const POSTGRES_SCHEMA_VERSION = 2;

const STORE_NAME = 'postgres';
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,47}$/;
/** Bounded retries: of a transaction that hit a deadlock or serialization failure, and of the create race. */
const MAX_ATTEMPTS = 10;
/** Bounds of the per-instance cache of known row versions (at most ~16 MB of JSON). */
const MAX_CACHED_SESSIONS = 1_000;
const MAX_CACHED_STATE_CHARS = 16_384;
/**
 * How long the store keeps its last client out of its own pool for the next statement: within
 * the pool's default idle timeout (10 s), so connections close about as they did before.
 */
const PARK_MS = 5_000;
/** pg's `Client.ref`/`unref` (what pg-pool calls for allowExitOnIdle), missing from its types. */
type Unreferable = { ref?(): void; unref?(): void };

interface Migration {
  description: string;
  statements: (table: string) => string[];
}

// Append only: a released migration never changes, a new one goes at the end.
const MIGRATIONS: readonly Migration[] = [
  {
    description: 'sessions table with expiry and recency indexes',
    statements: (table) => [
      // The key is a SHA-256 of the id because a btree entry is limited to ~2.7 kB and session
      // ids may be 4,096 characters (12 kB of UTF-8); `session_id` is kept for people reading the table.
      `CREATE TABLE ${quote(table)} (
        session_key BYTEA PRIMARY KEY,
        session_id TEXT NOT NULL,
        state JSONB NOT NULL,
        version BIGINT NOT NULL,
        expires_at BIGINT,
        last_access BIGINT NOT NULL
      )`,
      `CREATE INDEX ${quote(`${table}_expires_at_idx`)} ON ${quote(table)} (expires_at)`,
      `CREATE INDEX ${quote(`${table}_last_access_idx`)} ON ${quote(table)} (last_access)`,
    ],
  },
  {
    description: 'event log entries beside their session',
    statements: (table) => [
      `CREATE TABLE ${quote(`${table}_log`)} (
        session_key BYTEA NOT NULL REFERENCES ${quote(table)} (session_key) ON DELETE CASCADE,
        seq BIGINT NOT NULL,
        entry JSONB NOT NULL,
        PRIMARY KEY (session_key, seq)
      )`,
    ],
  },
];

/**
 * Creates a PostgreSQL {@link SessionStore}; the table is created or migrated on first use.
 * Its options are checked now: an unknown one is a `TemplateConfigError` naming it (with a
 * did-you-mean when one is close), a value of the wrong type an `InvalidArgumentError`.
 */
export function postgresStore(options: PostgresStoreOptions = {}): SessionStore {
  // A misspelt option would otherwise be ignored without a word: `connectionstring` falls back
  // to the PG* environment variables, a database other than the one meant.
  throwOnErrors(optionIssues(POSTGRES_STORE_OPTIONS, options), 'postgresStore() options');
  if (options.connectionString !== undefined && typeof options.connectionString !== 'string') {
    throw new InvalidArgumentError(
      'connectionString',
      `expected a postgres:// URL string, got ${typeof options.connectionString}`,
    );
  }
  if (options.pool !== undefined && !(typeof options.pool === 'object' && options.pool !== null)) {
    throw new InvalidArgumentError('pool', `expected a pg Pool, got ${typeof options.pool}`);
  }
  // A clock that is not a function would fail only at the first request, as a TypeError.
  if (options.now !== undefined && typeof options.now !== 'function') {
    throw new InvalidArgumentError('now', `expected a function returning milliseconds, got ${typeof options.now}`);
  }
  const pg = loadPg();
  const table = options.table ?? 'baton_sessions';
  if (typeof table !== 'string' || !IDENTIFIER.test(table)) {
    throw new InvalidArgumentError(
      'table',
      `expected letters, digits and "_" (not starting with a digit, at most 48 characters), got ${JSON.stringify(table)}`,
    );
  }
  if (options.pool !== undefined && options.connectionString !== undefined) {
    throw new InvalidArgumentError('connectionString', 'pass either a pool or a connectionString, not both');
  }
  const maxSessions = options.maxSessions ?? Number.POSITIVE_INFINITY;
  if (!(maxSessions >= 1)) {
    throw new InvalidArgumentError('maxSessions', `expected a number >= 1, got ${String(options.maxSessions)}`);
  }
  const statementTimeoutMs = positive('statementTimeoutMs', options.statementTimeoutMs, 5_000);
  const connectionTimeoutMillis = positive('connectionTimeoutMillis', options.connectionTimeoutMillis, 2_000);
  const poolSize = positive('poolSize', options.poolSize, 10);
  const now = options.now ?? Date.now;

  const ownsPool = options.pool === undefined;
  const pool =
    options.pool ??
    new pg.Pool({
      ...(options.connectionString === undefined ? {} : { connectionString: options.connectionString }),
      max: poolSize,
      connectionTimeoutMillis,
      statement_timeout: statementTimeoutMs,
      // The client-side limit catches a server that stopped answering (statement_timeout
      // needs a live server to fire); the margin lets the server's own, clearer error win.
      query_timeout: statementTimeoutMs + 1_000,
      keepAlive: true,
      application_name: 'baton',
      // Idle connections do not keep the process alive: a script that used the store ends when
      // its work is done, even without close() (a server stays up because of its listening
      // socket). A connection in use does.
      allowExitOnIdle: true,
    });
  // An idle pooled client whose server went away emits `error`; pg-pool re-emits it on the pool,
  // where an unheard `error` event would crash the process. The pool has already discarded the
  // client, and the next call reports the outage, so there is nothing else to do here.
  if (ownsPool) pool.on('error', () => undefined);

  const t = quote(table);
  const log = quote(`${table}_log`);
  const live = '(expires_at IS NULL OR expires_at > $2)';
  /**
   * A write statement that also appends the entries in `$n` (a JSON array) and trims the log to
   * seq > `$n+1`: the CTEs act only when `w` wrote a row, and all see one snapshot, so the trim
   * never touches the entries inserted beside it.
   */
  const logged = (write: string, n: number) => `WITH w AS (${write}),
    a AS (INSERT INTO ${log} (session_key, seq, entry)
      SELECT $1, (e->>'seq')::bigint, e FROM w, jsonb_array_elements($${n}::jsonb) AS e),
    d AS (DELETE FROM ${log} WHERE session_key = $1 AND seq <= $${n + 1} AND EXISTS (SELECT 1 FROM w))
    SELECT revision, expires_at FROM w`;
  // `xmin` is the id of the transaction that wrote a row version: comparing it (and `version`,
  // which alone could repeat when a session is deleted and created again) detects any other
  // write since we read the row. States travel as JSON text so a known one can be cached.
  const returning = 'RETURNING xmin::text AS revision, expires_at';
  const writeSql = `UPDATE ${t} SET state = $3::jsonb, version = $4, expires_at = $5, last_access = $2 WHERE session_key = $1
      ${returning}`;
  const writeIfSql = `UPDATE ${t} SET state = $3::jsonb, version = $4, expires_at = $5, last_access = $2
      WHERE session_key = $1 AND xmin = $6::xid AND version = $7 AND ${live} ${returning}`;
  const insertSql = `INSERT INTO ${t} (session_key, session_id, state, version, expires_at, last_access)
      VALUES ($1, $3, $4::jsonb, $5, $6, $2) ON CONFLICT (session_key) DO NOTHING ${returning}`;
  const sql = {
    // Reads renew nothing: TTLs and `last_access` ride on writes, so a read is never a write.
    get: `SELECT state::text AS json, xmin::text AS revision, expires_at FROM ${t} WHERE session_key = $1 AND ${live}`,
    peek: `SELECT state::text AS json, xmin::text AS revision, expires_at, NOT ${live} AS expired
      FROM ${t} WHERE session_key = $1`,
    lock: `SELECT state::text AS json, NOT ${live} AS expired FROM ${t} WHERE session_key = $1 FOR UPDATE`,
    write: writeSql,
    writeLogged: logged(writeSql, 6),
    // An update that changes nothing only checks that the copy it ran on is still current.
    checkIf: `SELECT xmin::text AS revision, expires_at FROM ${t}
      WHERE session_key = $1 AND xmin = $3::xid AND version = $4 AND ${live}`,
    writeIf: writeIfSql,
    writeIfLogged: logged(writeIfSql, 8),
    insert: insertSql,
    insertLogged: logged(insertSql, 7),
    // A session written over an expired row starts with no entries of the old one.
    clearLog: `DELETE FROM ${log} WHERE session_key = $1`,
    readLog: `SELECT seq::text AS position, entry::text AS json FROM ${log} WHERE session_key = $1
      AND EXISTS (SELECT 1 FROM ${t} WHERE session_key = $1 AND ${live}) ORDER BY seq`,
    remove: `DELETE FROM ${t} WHERE session_key = $1 RETURNING ${live} AS live`,
    removeExpired: `DELETE FROM ${t} WHERE session_key = $1`,
    sweep: `DELETE FROM ${t} WHERE expires_at <= $1`,
    // Evictions are serialised per table: two running at once would each remove the excess
    // they counted (skipping the rows the other one locked), so together remove too many.
    evictLock: 'SELECT pg_advisory_xact_lock($1::bigint)',
    count: `SELECT count(*)::bigint AS n FROM ${t}`,
    // SKIP LOCKED: a session locked right now is being used, so it is not the least recent,
    // and waiting for it could deadlock two transactions evicting at once.
    evict: `DELETE FROM ${t} WHERE session_key IN (
      SELECT session_key FROM ${t} WHERE session_key <> $1 ORDER BY last_access ASC LIMIT $2 FOR UPDATE SKIP LOCKED)`,
  } as const;
  const names = Object.fromEntries(
    Object.entries(sql).map(([key, text]) => [
      key,
      `baton_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`,
    ]),
  ) as Record<keyof typeof sql, string>;

  let closed = false;
  let migrated: Promise<void> | undefined;
  // Once migrated, calls skip the `await` of ready(): a statement is then sent in the caller's
  // own job (a read started by orchestrate() leaves before the AI SDK's setup, not after it).
  let isMigrated = false;

  // The last row version this instance read or wrote, per session. It only saves the read of
  // a compare-and-set (one round trip instead of two); the database still checks it, so a
  // stale entry costs a retry, never a lost write. Bounded, and big states are not kept.
  const known = new Map<string, Revision>();
  function remember(sessionId: string, revision: Revision | undefined) {
    known.delete(sessionId);
    if (revision === undefined || revision.json.length > MAX_CACHED_STATE_CHARS) return;
    known.set(sessionId, revision);
    if (known.size > MAX_CACHED_SESSIONS) {
      for (const oldest of known.keys()) {
        known.delete(oldest);
        break;
      }
    }
  }

  function checkOpen() {
    if (closed) throw new StoreClosedError('postgres');
  }

  async function ready(): Promise<void> {
    migrated ??= migrate(pool, table).then(
      () => {
        isMigrated = true;
      },
      (error: unknown) => {
        migrated = undefined; // try again on the next call, e.g. once the server is back
        throw error;
      },
    );
    return migrated;
  }

  async function run<R extends QueryResultRow>(
    client: PoolClient | Pool,
    key: keyof typeof sql,
    values: unknown[],
  ): Promise<R[] & { count: number }> {
    const result = await client.query<R>({ name: names[key], text: sql[key], values });
    return Object.assign(result.rows, { count: result.rowCount ?? 0 });
  }

  // The client of the last statement, kept checked out for the next one. pg-pool hands out
  // an idle client only at the next `process.nextTick`, and a store call made from inside a
  // long chain of promise jobs (the AI SDK's, between a tool's approval and its `execute`)
  // waits for that whole chain to finish before its statement leaves; a kept client sends it
  // at once, so the round trip overlaps the caller's own work. Only with a pool the store
  // made: that pool serves nobody else, and every checkout here takes the kept client first,
  // so keeping it never makes anyone wait for a connection. A pool the app passed in may have
  // other users, who would wait for it, so its clients go back at once as before.
  let parked: { client: PoolClient; timer: NodeJS.Timeout; onError: (error: Error) => void } | undefined;

  /** The kept client, now checked out to the caller, or undefined when there is none. */
  function unpark(): PoolClient | undefined {
    const kept = parked;
    if (kept === undefined) return undefined;
    parked = undefined;
    clearTimeout(kept.timer);
    kept.client.off('error', kept.onError);
    (kept.client as Unreferable).ref?.();
    return kept.client;
  }

  /** Keeps a healthy client for the next statement, or returns it to the pool. */
  function park(client: PoolClient) {
    // A waiter in the pool's queue gets it now; so does the pool when one is kept already.
    if (!ownsPool || closed || parked !== undefined || pool.waitingCount > 0) {
      client.release();
      return;
    }
    const giveBack = (error?: Error) => {
      if (parked?.client === client) unpark();
      client.release(error);
    };
    // A kept client whose server goes away emits `error`; the pool must discard it.
    const onError = (error: Error) => giveBack(error);
    // Back to the pool while it idles, where the pool's own idle timeout can close it.
    const timer = setTimeout(giveBack, PARK_MS);
    timer.unref();
    // Like the pool's idle clients (allowExitOnIdle), a kept one does not hold the process open.
    (client as Unreferable).unref?.();
    client.on('error', onError);
    parked = { client, timer, onError };
  }

  /**
   * Runs `body` on one pooled client, in a transaction when `transactional`; maps every
   * database failure to a Baton error and rethrows the updater's own errors untouched.
   */
  async function withClient<T>(transactional: boolean, body: (client: PoolClient) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      // No `await` for a kept client: the statement is written to its socket in this job.
      const client =
        unpark() ??
        (await pool.connect().catch((error: unknown) => {
          throw translate(error, 'connecting');
        }));
      // pg-pool removes its own listener while a client is checked out; without one, a
      // connection error between two queries would be an unheard `error` event.
      client.on('error', ignore);
      let broken: unknown;
      const undo = async () => (transactional ? rollback(client) : undefined);
      try {
        if (transactional) await client.query('BEGIN');
        const result = await body(client);
        if (transactional) await client.query('COMMIT');
        return result;
      } catch (error) {
        if (error instanceof UpdaterError) {
          broken = await undo();
          throw error.cause;
        }
        broken = isHealthyAfter(error) ? await undo() : error;
        const code = sqlState(error);
        if ((code === '40001' || code === '40P01') && attempt < MAX_ATTEMPTS) continue;
        throw translate(error, transactional ? 'running a transaction' : 'running a statement');
      } finally {
        client.off('error', ignore);
        if (broken === undefined) park(client);
        // Passing an error makes the pool destroy the client instead of reusing a broken one.
        else client.release(toError(broken));
      }
    }
  }

  async function oneStatement<R extends QueryResultRow>(key: keyof typeof sql, values: unknown[]) {
    return withClient(false, (client) => run<R>(client, key, values));
  }

  const evictLockKey = advisoryKey(`evict:${table}`);
  async function evictBeyondLimit(client: PoolClient, keep: Buffer) {
    await run(client, 'evictLock', [evictLockKey]);
    const [row] = await run<{ n: string }>(client, 'count', []);
    const excess = Number(row?.n ?? 0) - maxSessions;
    if (excess > 0) await run(client, 'evict', [keep, excess]);
  }

  const expiresAt = (state: OrchestrationState, at: number) => (state.ttl > 0 ? at + state.ttl : null);
  const parse = (json: string) => readState(JSON.parse(json), table);

  /** Applies `fn` to the state of row version `base`; undefined when another write got in first. */
  async function compareAndSet(
    client: PoolClient,
    key: Buffer,
    at: number,
    base: Revision,
    fn: StateUpdater,
  ): Promise<Outcome | undefined> {
    // The state this process wrote or read last is kept decoded: no JSON parse per update.
    const current = base.state ?? parse(base.json);
    const next = callUpdater(fn, current);
    if (next === undefined || next === current) {
      const [row] = await run<WrittenRow>(client, 'checkIf', [key, at, base.revision, current.version]);
      return row && { state: current, revision: revisionOf(row, base.json, current) };
    }
    const stored = checkedState({ ...next, version: current.version + 1 });
    const json = JSON.stringify(stored);
    const values = [key, at, json, stored.version, expiresAt(stored, at), base.revision, current.version];
    const entries = logArguments(next);
    const [row] = await (entries
      ? run<WrittenRow>(client, 'writeIfLogged', [...values, ...entries])
      : run<WrittenRow>(client, 'writeIf', values));
    return row && { state: stored, revision: revisionOf(row, json, stored) };
  }

  /** Creates the session when it does not exist; undefined when another creator got in first. */
  async function create(
    client: PoolClient,
    key: Buffer,
    sessionId: string,
    at: number,
    next: OrchestrationState,
  ): Promise<Outcome | undefined> {
    const stored = checkedState({ ...next, version: 1 });
    const json = JSON.stringify(stored);
    const values = [key, at, sessionId, json, stored.version, expiresAt(stored, at)];
    const entries = logArguments(next);
    const [row] = await (entries
      ? run<WrittenRow>(client, 'insertLogged', [...values, ...entries])
      : run<WrittenRow>(client, 'insert', values));
    if (row === undefined) return undefined;
    if (maxSessions !== Number.POSITIVE_INFINITY) await evictBeyondLimit(client, key);
    return { state: stored, revision: revisionOf(row, json, stored) };
  }

  /** The pessimistic path: lock the row (or win the insert), so it always makes progress. */
  /**
   * Writes `stored` (made from `next`, the updater's result, whose log entries it appends) to
   * the locked row and returns it with the row's new revision.
   */
  async function writeRow(
    client: PoolClient,
    key: Buffer,
    at: number,
    next: OrchestrationState,
    stored: OrchestrationState,
  ) {
    const json = JSON.stringify(stored);
    const values = [key, at, json, stored.version, expiresAt(stored, at)];
    const entries = logArguments(next);
    const [written] = await (entries
      ? run<WrittenRow>(client, 'writeLogged', [...values, ...entries])
      : run<WrittenRow>(client, 'write', values));
    return { state: stored, revision: written && revisionOf(written, json, stored) };
  }

  async function lockAndUpdate(client: PoolClient, key: Buffer, sessionId: string, at: number, fn: StateUpdater) {
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      const [row] = await run<{ json: string; expired: boolean }>(client, 'lock', [key, at]);
      if (row !== undefined && !row.expired) {
        const current = parse(row.json);
        const next = callUpdater(fn, current);
        if (next === undefined || next === current) return { state: current, revision: undefined };
        const stored = checkedState({ ...next, version: current.version + 1 });
        return writeRow(client, key, at, next, stored);
      }
      const next = callUpdater(fn, undefined);
      if (row !== undefined) {
        // An expired row is locked by us: replace it, or drop it when nothing is written.
        if (next === undefined) {
          await run(client, 'removeExpired', [key]);
          return { state: undefined };
        }
        const stored = checkedState({ ...next, version: 1 });
        await run(client, 'clearLog', [key]);
        return writeRow(client, key, at, next, stored);
      }
      if (next === undefined) return { state: undefined };
      const created = await create(client, key, sessionId, at, next);
      if (created !== undefined) return created;
      // Another transaction created the session after our read; ON CONFLICT waited for it
      // to commit, so the next statement (READ COMMITTED: a fresh snapshot) sees and locks
      // its row, and `fn` runs again on that state: no creator is lost.
    }
    throw new StoreConflictError(
      STORE_NAME,
      `session ${JSON.stringify(sessionId.slice(0, 100))} was created and deleted ${MAX_ATTEMPTS} times ` +
        'while updating it; try again',
    );
  }

  const inLane = createSessionLanes(
    (sessionId) =>
      new StoreUnavailableError(
        STORE_NAME,
        `gave up waiting for earlier updates of session ${JSON.stringify(sessionId.slice(0, 80))}`,
      ),
  );

  async function updateNow(key: Buffer, sessionId: string, fn: StateUpdater) {
    if (!isMigrated) await ready();
    const at = now();
    const cached = known.get(sessionId);
    // Optimistic first: compare-and-set against the row version we know (one statement),
    // or one we read now (two). No explicit transaction: the single write commits alone.
    let outcome = await withClient(false, async (client): Promise<Outcome | undefined> => {
      if (cached !== undefined && (cached.expiresAt === null || cached.expiresAt > at)) {
        const done = await compareAndSet(client, key, at, cached, fn);
        if (done !== undefined) return done;
      } else if (cached === undefined && maxSessions === Number.POSITIVE_INFINITY) {
        // A session this process has not seen is usually new: try to create it in one statement
        // (ON CONFLICT DO NOTHING). If it exists, read it below, as without this attempt.
        const next = callUpdater(fn, undefined);
        if (next !== undefined) {
          const created = await create(client, key, sessionId, at, next);
          if (created !== undefined) return created;
        }
      }
      const [row] = await run<WrittenRow & { json: string; expired: boolean }>(client, 'peek', [key, at]);
      if (row === undefined) {
        // With a size limit, a new session and the evictions it causes commit together.
        if (maxSessions !== Number.POSITIVE_INFINITY) return undefined;
        const next = callUpdater(fn, undefined);
        return next === undefined ? { state: undefined } : create(client, key, sessionId, at, next);
      }
      if (row.expired) return undefined;
      return compareAndSet(client, key, at, revisionOf(row, row.json), fn);
    }).catch((error: unknown) => {
      known.delete(sessionId);
      throw error;
    });
    // Another writer got in first: lock the row instead, which cannot livelock on a hot session.
    outcome ??= await withClient(true, (client) => lockAndUpdate(client, key, sessionId, at, fn)).catch(
      (error: unknown) => {
        known.delete(sessionId);
        throw error;
      },
    );
    remember(sessionId, outcome.revision);
    return outcome.state;
  }

  return {
    name: STORE_NAME,

    peek(sessionId) {
      // The row this instance last read or wrote (its compare-and-set base), without I/O.
      const revision = known.get(sessionId);
      if (revision === undefined || (revision.expiresAt !== null && revision.expiresAt <= now())) return undefined;
      try {
        return revision.state ?? parse(revision.json);
      } catch {
        return undefined;
      }
    },

    async get(sessionId) {
      const key = sessionKey(sessionId);
      checkOpen();
      if (!isMigrated) await ready();
      const [row] = await oneStatement<WrittenRow & { json: string }>('get', [key, now()]);
      if (row === undefined) {
        known.delete(sessionId);
        return undefined;
      }
      const state = parse(row.json);
      remember(sessionId, revisionOf(row, row.json, state));
      return state;
    },

    update(sessionId: string, fn: StateUpdater) {
      // Validate before queueing, so bad input fails at once with its own error.
      let key: Buffer;
      try {
        key = sessionKey(sessionId);
        checkOpen();
      } catch (error) {
        return Promise.reject(error);
      }
      // This process's updates of one session run one at a time: racing them would only
      // fail their compare-and-sets and pile them up on the row lock, each holding a pooled
      // connection, until the pool ran dry (seen with 100 concurrent updates under load).
      return inLane(sessionId, performance.now() + connectionTimeoutMillis + statementTimeoutMs, () =>
        updateNow(key, sessionId, fn),
      );
    },
    async readLog(sessionId) {
      const key = sessionKey(sessionId);
      checkOpen();
      if (!isMigrated) await ready();
      const rows = await oneStatement<{ position: string; json: string }>('readLog', [key, now()]);
      return rows.map((row) => {
        try {
          return assertLogEntry(JSON.parse(row.json), `entry ${row.position} of the event log`);
        } catch (error) {
          throw new StoreUnavailableError(
            STORE_NAME,
            `the event log of session ${JSON.stringify(sessionId.slice(0, 80))} in table "${table}_log" is corrupted: ` +
              `${(error as Error).message}. Delete the session to start it afresh.`,
            { cause: error },
          );
        }
      });
    },

    async delete(sessionId) {
      const key = sessionKey(sessionId);
      checkOpen();
      if (!isMigrated) await ready();
      known.delete(sessionId);
      const [row] = await oneStatement<{ live: boolean }>('remove', [key, now()]);
      return row?.live === true;
    },

    async sweep() {
      checkOpen();
      if (!isMigrated) await ready();
      const result = await oneStatement('sweep', [now()]);
      return result.count;
    },

    async close() {
      if (closed) return;
      closed = true;
      // A migration still running holds a client; let it finish so the pool can end cleanly.
      await migrated?.catch(() => undefined);
      unpark()?.release();
      if (ownsPool) await pool.end();
    },
  };
}

/** Creates or upgrades `table`, serialised across processes by a transaction-level advisory lock. */
async function migrate(pool: Pool, table: string): Promise<void> {
  const client = await pool.connect().catch((error: unknown) => {
    throw translate(error, 'connecting');
  });
  client.on('error', ignore);
  let broken: unknown;
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1::bigint)', [advisoryKey(`migrate:${table}`)]);
    const migrations = quote(`${table}_migrations`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${migrations} (
      version INTEGER PRIMARY KEY,
      description TEXT NOT NULL,
      applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )`);
    const { rows } = await client.query<{ version: number }>(
      `SELECT coalesce(max(version), 0)::integer AS version FROM ${migrations}`,
    );
    const current = rows[0]?.version ?? 0;
    if (current > MIGRATIONS.length) {
      throw new BatonError(
        'store-schema-mismatch',
        `Session store "${STORE_NAME}": table "${table}" has schema version ${current}, but this version of Baton ` +
          `knows versions up to ${MIGRATIONS.length}. Upgrade Baton, or point it at another table.`,
      );
    }
    for (const [index, migration] of MIGRATIONS.entries()) {
      if (index < current) continue;
      for (const statement of migration.statements(table)) await client.query(statement);
      await client.query(`INSERT INTO ${migrations} (version, description) VALUES ($1, $2)`, [
        index + 1,
        migration.description,
      ]);
    }
    await client.query('COMMIT');
  } catch (error) {
    broken = isHealthyAfter(error) ? await rollback(client) : error;
    if (BatonError.isInstance(error)) throw error;
    const code = sqlState(error);
    if (code === '42P07') {
      throw new BatonError(
        'store-schema-mismatch',
        `Session store "${STORE_NAME}": a table or index named like "${table}" already exists but is not ` +
          `recorded in "${table}_migrations"; choose another table name.`,
        { cause: error },
      );
    }
    throw translate(error, `migrating table "${table}"`);
  } finally {
    client.off('error', ignore);
    client.release(broken === undefined ? undefined : toError(broken));
  }
}

/**
 * The log arguments of a logged write statement (the entries as a JSON array, and the highest
 * seq to trim), or undefined when `next` carries no entries. Only the newest `capacity` entries
 * are sent: the statement's trim cannot see the rows it inserts.
 */
function logArguments(next: OrchestrationState): [string, number] | undefined {
  const entries = logEntriesOf(next);
  const log = next.log;
  if (entries === undefined || log === undefined) return undefined;
  const kept: readonly SessionLogEntry[] = entries.slice(-log.capacity);
  return [JSON.stringify(kept), log.seq - log.capacity];
}

/** A committed row version: the `xmin` that wrote it and its state as JSON text. */
interface Revision {
  revision: string;
  json: string;
  /** Milliseconds since the epoch, or null: an expired state is not offered to the updater. */
  expiresAt: number | null;
  /** `json` decoded and checked, when this process has it already (it wrote or read it). */
  state?: OrchestrationState | undefined;
}

/** The columns every write returns. BIGINT arrives as a string. */
interface WrittenRow {
  revision: string;
  expires_at: string | null;
}

function revisionOf(row: WrittenRow, json: string, state?: OrchestrationState): Revision {
  return { revision: row.revision, json, expiresAt: row.expires_at === null ? null : Number(row.expires_at), state };
}

/** What an update stored (or found), and the row version to remember for the next one. */
interface Outcome {
  state: OrchestrationState | undefined;
  revision?: Revision | undefined;
}

/** Carries an error thrown by the caller's updater through the transaction untouched. */
class UpdaterError {
  constructor(readonly cause: unknown) {}
}

function callUpdater(fn: StateUpdater, current: OrchestrationState | undefined): OrchestrationState | undefined {
  try {
    return fn(current);
  } catch (error) {
    throw new UpdaterError(error);
  }
}

function checkedState(state: OrchestrationState): OrchestrationState {
  try {
    return assertState(state);
  } catch (error) {
    throw new UpdaterError(error);
  }
}

function readState(value: unknown, table: string): OrchestrationState {
  return assertState(value, `${table}.state`);
}

/**
 * The primary key of a session. PostgreSQL text cannot hold NUL, and a lone surrogate would be
 * encoded as U+FFFD (two ids, one row), so both are refused rather than silently merged.
 */
function sessionKey(sessionId: string): Buffer {
  // A turn runs 4-6 statements on one session: its key is hashed once.
  const known = recentKeys.get(sessionId);
  if (known !== undefined) return known;
  assertTextSessionId(sessionId);
  if (sessionId.includes('\0')) {
    throw new InvalidArgumentError('sessionId', 'the postgres store cannot keep the NUL character (\\u0000)');
  }
  const key = hash('sha256', sessionId, 'buffer');
  if (recentKeys.size >= RECENT_KEYS) recentKeys.delete(recentKeys.keys().next().value as string);
  recentKeys.set(sessionId, key);
  return key;
}

/** The keys of the sessions used last (checked and hashed), oldest first; pg never writes to a parameter. */
const recentKeys = new Map<string, Buffer>();
const RECENT_KEYS = 1024;

/** A 64-bit advisory lock key for `name`, as the decimal string PostgreSQL parses. */
function advisoryKey(name: string): string {
  return createHash('sha256').update(`baton:postgres-store:${name}`).digest().readBigInt64BE(0).toString();
}

function quote(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}

function positive(path: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new InvalidArgumentError(path, `expected a positive integer, got ${String(value)}`);
  }
  return value;
}

function ignore() {}

function sqlState(error: unknown): string | undefined {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'string' ? code : undefined;
}

function toError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

/** Rolls back; resolves to the error when the connection is unusable, so the pool drops it. */
async function rollback(client: PoolClient): Promise<unknown> {
  try {
    await client.query('ROLLBACK');
    return undefined;
  } catch (error) {
    return error;
  }
}

/** pg, an optional peer dependency: loaded when a store is created, never by merely importing this module. */
function loadPg(): typeof import('pg') {
  return loadOptionalDependency<typeof import('pg')>('pg', 'The PostgreSQL store');
}

/** Whether the connection can still be used after `error` (an SQL error, not a lost socket). */
function isHealthyAfter(error: unknown): boolean {
  if (error instanceof UpdaterError || BatonError.isInstance(error)) return true;
  return error instanceof loadPg().DatabaseError && !isOutage(error);
}

const SOCKET_ERRORS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EADDRNOTAVAIL',
]);

// SQLSTATEs meaning "the server cannot serve us now", as opposed to "our SQL is wrong".
const SERVER_UNAVAILABLE = new Set([
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, shutting down, recovering)
  '57P05', // idle_session_timeout
  '57014', // query_canceled: statement_timeout
  '55P03', // lock_not_available: lock_timeout
  '25P03', // idle_in_transaction_session_timeout
  '53000', // insufficient_resources
  '53100', // disk_full
  '53200', // out_of_memory
  '53300', // too_many_connections
  '58000', // system_error
  '58030', // io_error
]);

// pg reports a lost or slow connection with plain Errors and no code.
const CLIENT_OUTAGE_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Query read timeout|not queryable|Connection ended|connection timeout/i;

function isOutage(error: unknown): boolean {
  const code = sqlState(error);
  if (code !== undefined) {
    if (SOCKET_ERRORS.has(code) || SERVER_UNAVAILABLE.has(code) || code.startsWith('08')) return true;
  }
  if (error instanceof AggregateError) return error.errors.some(isOutage);
  return (
    error instanceof Error && !(error instanceof loadPg().DatabaseError) && CLIENT_OUTAGE_MESSAGES.test(error.message)
  );
}

/** Maps a failure to a Baton error: outages to StoreUnavailableError, bad data to InvalidArgumentError. */
function translate(error: unknown, doing: string): BatonError {
  if (BatonError.isInstance(error)) return error;
  const message = error instanceof Error ? error.message : String(error);
  if (isOutage(error)) {
    return new StoreUnavailableError(STORE_NAME, `${doing}: ${message || sqlState(error) || 'connection failed'}`, {
      cause: error,
    });
  }
  const code = sqlState(error);
  // Text PostgreSQL cannot represent (NUL, an unpaired surrogate in JSON): a bad value, not a bug.
  if (code === '22P05' || code === '22021' || code === '22P02') {
    return new InvalidArgumentError('state', `PostgreSQL cannot store this value: ${message}`, { cause: error });
  }
  return new BatonError('store-failed', `Session store "${STORE_NAME}" failed ${doing}: ${message}`, { cause: error });
}
