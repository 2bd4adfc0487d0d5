/**
 * The Redis session store, for state shared by many server processes (SPEC section 6).
 *
 * Layout. One string key per session, `${prefix}{${escaped id}}`, holding the state as JSON.
 * The braces make the escaped id the key's Redis Cluster hash tag, so a script that touches
 * one session touches one slot; `{`, `}` and `%` (and lone UTF-16 surrogates, which UTF-8
 * cannot carry) are percent-escaped, so every id gets exactly one, non-empty tag and two
 * ids never share a key. A session's event log is a list beside it, `${prefix}{${escaped id}}:log`
 * (same hash tag, so the same slot and the same scripts), appended and trimmed in the script that
 * writes the state, with the same expiry, and deleted with it (delete, eviction, a new session
 * under the same id). With `maxSessions`, a sorted set `${prefix}lru` ranks sessions by last
 * access (a counter kept by the server, not a clock, so ties cannot happen).
 *
 * Updates are optimistic: read the state (or take the copy this process last saw), compute
 * `fn` locally, then a Lua script writes only if the stored bytes are still the ones read.
 * It compares a SHA-1 of the whole stored value rather than the `version` field alone,
 * because versions restart at 1 when a session is deleted or expires and is created again:
 * a version-only check would let a writer holding the old session's version 3 overwrite
 * the new session's version 3. On a conflict the script returns the current value, so the
 * retry needs no extra read. Round trips per change: 1 when this process holds the latest
 * state, 2 when it must read first, plus 1 per conflicting writer.
 *
 * Expiry runs on the Redis server's clock (`PEXPIRE`, sliding: every write renews
 * it), so the `now` option cannot drive it and is ignored.
 *
 * Database. A URL's path (`redis://host:6379/3`) or a client's `db` names the database. ioredis
 * selects it on every connection, but when the server refuses (it has no such database: 16 by
 * default), it only emits an `error` event and every command goes to database 0, where sessions
 * would mix with whatever else lives there. So the store selects the database itself on each
 * new connection before its first command there, and refuses every call (`store-failed`,
 * saying which database the server has) while the server refuses it.
 *
 * Faults. Nothing waits unboundedly: with Redis down or hung, a call fails with
 * `StoreUnavailableError` after about `commandTimeoutMs`, and the store reconnects on its own.
 * A call that failed on a timeout may still have reached the server and taken effect (no
 * client can tell); compare-and-set keeps that safe, since later writes build on it.
 */
import { hash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import {
  BatonError,
  InvalidArgumentError,
  StoreClosedError,
  StoreConflictError,
  StoreUnavailableError,
} from '../core/errors.js';
import { optionIssues, optionNames, throwOnErrors } from '../core/option-issues.js';
import { assertLogEntry, logEntriesOf } from '../core/session-log.js';
import type { OrchestrationState } from '../core/state.js';
import { assertSessionId, assertState } from '../core/state-check.js';
import { loadOptionalDependency } from './optional-dependency.js';
import { createSessionLanes } from './session-lanes.js';
import type { SessionStore, StateUpdater, StoreOptions } from './types.js';

const STORE_NAME = 'redis';

/** Options of {@link redisStore}. */
export interface RedisStoreOptions extends StoreOptions {
  /**
   * An ioredis client (a `Redis` or a `Cluster`) that the caller owns: `close()` leaves it
   * open, and its own options (offline queue, retries) apply. Takes precedence over `url`.
   * Leave its `enableAutoPipelining` off: it holds every command until the process has run all
   * its pending work, so in a model loop each store call waits for that work, then for Redis.
   */
  client?: Redis | Cluster;
  /**
   * Where to connect when no `client` is given (default `redis://127.0.0.1:6379/0`); the path
   * names the database. One the server does not have is refused at the store's first call.
   */
  url?: string;
  /** Namespace put before every key (default `baton:`); must not contain `{` or `}`. */
  prefix?: string;
  /**
   * Evict the least recently used sessions beyond this many (default: unlimited). On a
   * single node the index is kept in the same script as the state, atomically. On a
   * Cluster the index lives in another slot, so it costs one more round trip per access
   * and is best-effort: a failure to update it never fails the state change.
   */
  maxSessions?: number;
  /**
   * Ignored: Redis expires keys on its own clock, which a client-side clock cannot move.
   * Accepted so that every store takes the same options.
   */
  now?: () => number;
  /** How many times a conflicting update is retried before `StoreConflictError` (default 50). */
  maxRetries?: number;
  /**
   * Bounds every wait, in milliseconds (default 2,000): for a connection and for this
   * process's earlier operations on the same session (together, per call), and for each
   * reply. During an outage a call so fails with `StoreUnavailableError` within about this
   * long, or twice it when a server stops answering a command already sent.
   */
  commandTimeoutMs?: number;
  /** How long one connection attempt may take (default 2,000 ms). */
  connectTimeoutMs?: number;
}

/** The option names {@link redisStore} takes, to refuse others with a did-you-mean. */
const REDIS_STORE_OPTIONS = optionNames<RedisStoreOptions>({
  client: true,
  url: true,
  prefix: true,
  maxSessions: true,
  now: true,
  maxRetries: true,
  commandTimeoutMs: true,
  connectTimeoutMs: true,
});

/** The key that holds `sessionId`'s state under `prefix` (useful to inspect a session with redis-cli). */
export function redisSessionKey(sessionId: string, prefix = 'baton:'): string {
  return `${prefix}{${escapeSessionId(sessionId)}}`;
}

// Percent-escaping is injective because `%` itself is escaped; lone surrogates are
// escaped because encoding them as UTF-8 would map distinct ids to the same bytes.
const NEEDS_ESCAPE = /[%{}]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

function escapeSessionId(sessionId: string): string {
  return sessionId.replace(NEEDS_ESCAPE, (c) => {
    if (c === '%') return '%25';
    if (c === '{') return '%7B';
    if (c === '}') return '%7D';
    return `%u${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`;
  });
}

// The stored JSON starts with `{"ttl":N,` (see `runUpdate`), so scripts read the TTL without
// decoding a possibly large document; cjson is the fallback for values written otherwise.
const LUA_HELPERS = `
local function ttl_of(v)
  local t = string.match(v, '^{"ttl":(%d+)[,}]')
  if t then return t end
  local ok, doc = pcall(cjson.decode, v)
  if ok and type(doc) == 'table' and type(doc.ttl) == 'number' then return string.format('%.0f', doc.ttl) end
  return nil
end
local function renew(key, v)
  local ttl = ttl_of(v)
  if ttl and tonumber(ttl) > 0 then redis.call('PEXPIRE', key, ttl) end
end
local function touch_lru(lru, member, max)
  local top = redis.call('ZREVRANGE', lru, 0, 0, 'WITHSCORES')
  local score = 1
  if top[2] then score = tonumber(top[2]) + 1 end
  redis.call('ZADD', lru, score, member)
  local excess = redis.call('ZCARD', lru) - tonumber(max)
  if excess > 0 then return redis.call('ZPOPMIN', lru, excess) end
  return {}
end
local function evict(popped, prefix)
  for i = 1, #popped, 2 do
    local key = prefix .. '{' .. popped[i] .. '}'
    redis.call('DEL', key, key .. ':log')
  end
end
`;

// KEYS: the session's state, its event log, the LRU index (with maxSessions on one node).
// ARGV: expected SHA-1 of the stored value ('' = expect no value), new value ('' = only
// renew the TTL), its ttl in ms, member, maxSessions, prefix, then, for a write that logs,
// the log's capacity and the event log entries to append (JSON).
// Returns {1} on success, {0} when the key is absent, {0, value} when it holds another value.
const CAS_SCRIPT = `${LUA_HELPERS}
local v = redis.call('GET', KEYS[1])
if v then
  if redis.sha1hex(v) ~= ARGV[1] then return {0, v} end
elseif ARGV[1] ~= '' then
  return {0}
end
if ARGV[2] == '' then
  -- Nothing to write: the caller only checks its copy is current. No renewal either: TTLs
  -- and the LRU index ride on writes, so a pure read writes nothing.
  return {1}
end
-- The log before the state: a script's writes are never rolled back, so should a command on
-- the log fail, it fails before the state is written, not after (a state without its entries).
-- A new session starts with no entries of an older one under its id.
if not v then redis.call('DEL', KEYS[2]) end
if ARGV[7] then
  -- In chunks: Lua's unpack refuses a few thousand values at once.
  for i = 8, #ARGV, 1000 do redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV))) end
  local capacity = tonumber(ARGV[7])
  if capacity > 0 then redis.call('LTRIM', KEYS[2], -capacity, -1) else redis.call('DEL', KEYS[2]) end
end
if tonumber(ARGV[3]) > 0 then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  -- The log lives exactly as long as its session: same expiry, renewed by every write.
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[2])
  redis.call('PERSIST', KEYS[2])
end
if KEYS[3] then evict(touch_lru(KEYS[3], ARGV[4], ARGV[5]), ARGV[6]) end
return {1}
`;

// KEYS: the session's state, its event log, the LRU index (optional). ARGV: member.
const DELETE_SCRIPT = `
local n = redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[2])
if KEYS[3] then redis.call('ZREM', KEYS[3], ARGV[1]) end
return n
`;

// Cluster only: KEYS[1] the LRU index; ARGV: member, maxSessions. Returns evicted members
// and their scores; the caller deletes their keys, which live in other slots.
const LRU_SCRIPT = `${LUA_HELPERS}
return touch_lru(KEYS[1], ARGV[1], ARGV[2])
`;

// Single node only: KEYS[1] the LRU index; ARGV: prefix, members. Drops the members whose
// key is gone, checking and removing each atomically so a session recreated meanwhile stays.
const SWEEP_SCRIPT = `
local removed = 0
for i = 2, #ARGV do
  if redis.call('EXISTS', ARGV[1] .. '{' .. ARGV[i] .. '}') == 0 then
    removed = removed + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return removed
`;

type Arg = string | Buffer | number;

/** The commands `defineCommand` adds; the first argument is the number of keys. */
interface ScriptCommands {
  batonCasBuffer(numKeys: number, ...args: Arg[]): Promise<unknown>;
  batonDelete(numKeys: number, ...args: Arg[]): Promise<unknown>;
  batonLru(numKeys: number, ...args: Arg[]): Promise<unknown>;
  batonSweep(numKeys: number, ...args: Arg[]): Promise<unknown>;
}

/** A state as this process last saw it, with the SHA-1 of its stored bytes. */
interface Snapshot {
  state: OrchestrationState;
  hash: string;
}

/** How many sessions' latest states each store instance remembers. */
const CACHE_LIMIT = 10_000;
const BACKOFF_CAP_MS = 100;

/**
 * Creates a {@link SessionStore} kept in Redis (standalone or Cluster); connects lazily.
 * Its options are checked now: an unknown one is a `TemplateConfigError` naming it (with a
 * did-you-mean when one is close), a value of the wrong type an `InvalidArgumentError`.
 */
export function redisStore(options: RedisStoreOptions = {}): SessionStore {
  // A misspelt option would otherwise be ignored without a word: `urll` connects to the default
  // local Redis, which may well answer, so the app keeps its sessions in the wrong place.
  throwOnErrors(optionIssues(REDIS_STORE_OPTIONS, options), 'redisStore() options');
  if (options.url !== undefined && typeof options.url !== 'string') {
    throw new InvalidArgumentError('url', `expected a redis:// or rediss:// URL string, got ${typeof options.url}`);
  }
  if (options.url !== undefined) {
    // ioredis reads `/abc` as no database at all and quietly uses database 0.
    const path = /^[a-z]+:\/\/[^/?#]*(\/[^?#]*)?/i.exec(options.url)?.[1] ?? '';
    if (path !== '' && path !== '/' && !/^\/\d+$/.test(path)) {
      throw new InvalidArgumentError(
        'url',
        `its path names the database, a whole number (redis://host:6379/0), got ${JSON.stringify(path)}`,
      );
    }
  }
  if (options.client !== undefined && !(typeof options.client === 'object' && options.client !== null)) {
    throw new InvalidArgumentError('client', `expected an ioredis Redis or Cluster, got ${typeof options.client}`);
  }
  // Ignored (Redis expires keys on its own clock), but refused when it is no clock at all, as
  // every store refuses it.
  if (options.now !== undefined && typeof options.now !== 'function') {
    throw new InvalidArgumentError('now', `expected a function returning milliseconds, got ${typeof options.now}`);
  }
  const prefix = options.prefix ?? 'baton:';
  if (typeof prefix !== 'string' || /[{}]/.test(prefix)) {
    throw new InvalidArgumentError(
      'prefix',
      `expected a string without "{" or "}" (they would change the key's cluster hash tag), got ${JSON.stringify(prefix)}`,
    );
  }
  const maxSessions = options.maxSessions ?? Number.POSITIVE_INFINITY;
  if (!(maxSessions === Number.POSITIVE_INFINITY || (Number.isSafeInteger(maxSessions) && maxSessions >= 1))) {
    throw new InvalidArgumentError('maxSessions', `expected an integer >= 1, got ${String(options.maxSessions)}`);
  }
  const maxRetries = options.maxRetries ?? 50;
  if (!(Number.isSafeInteger(maxRetries) && maxRetries >= 0)) {
    throw new InvalidArgumentError('maxRetries', `expected an integer >= 0, got ${String(options.maxRetries)}`);
  }
  const commandTimeoutMs = positive('commandTimeoutMs', options.commandTimeoutMs, 2_000);
  const connectTimeoutMs = positive('connectTimeoutMs', options.connectTimeoutMs, 2_000);

  const ownsClient = options.client === undefined;
  let lastError: Error | undefined;
  // ioredis is an optional peer dependency, loaded (or reported missing) when a store is created.
  const { Redis } = loadOptionalDependency<typeof import('ioredis')>('ioredis', 'The Redis store');
  const client: Redis | Cluster =
    options.client ??
    new Redis(options.url ?? 'redis://127.0.0.1:6379/0', {
      lazyConnect: true,
      // Fail fast instead of queueing: a command queued during an outage could run
      // minutes later, after its caller was told the state was not changed.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      commandTimeout: commandTimeoutMs,
      connectTimeout: connectTimeoutMs,
      retryStrategy: (attempt) => Math.min(attempt * 50, 500),
      // No auto-pipelining: it holds every command until a `setImmediate`, i.e. until the caller's
      // pending work has all run, so in a model loop a store call's round trip could never overlap
      // that work. `send` below batches concurrent commands itself, without delaying a lone one.
      enableAutoPipelining: false,
    });
  if (ownsClient) {
    // Without a listener ioredis prints every failed reconnection attempt.
    client.on('error', (error: Error) => {
      lastError = error;
    });
  }
  // A connection of the store's own keeps the process alive only while a command waits for its
  // reply: a script that used the store ends when its work is done, even without close() (a
  // server stays up because of its listening socket, not its store). A caller's client is left
  // as its owner set it.
  let inFlight = 0;
  const holdProcess = (hold: boolean) => {
    if (!ownsClient) return;
    const socket = (client as Redis).stream as { ref?: () => void; unref?: () => void } | undefined;
    if (hold) socket?.ref?.();
    else socket?.unref?.();
  };
  // Every (re)connection opens a new socket: it holds the process only if a command waits.
  if (ownsClient) client.on('connect', () => holdProcess(inFlight > 0));
  const cluster = client.isCluster;
  // A cluster has database 0 only (ioredis refuses a `db` for it).
  const database = cluster ? 0 : ((client as Redis).options.db ?? 0);
  /** Whether the current connection is known to use {@link database}; see the module comment. */
  let databaseSelected = database === 0;
  let selecting: Promise<void> | undefined;
  const onReady = () => {
    databaseSelected = database === 0;
    selecting = undefined;
  };
  // Registered before any waiter: a new connection is checked before the store's next command.
  if (database !== 0) client.on('ready', onReady);
  // ioredis adds a client's `keyPrefix` to declared keys, not to keys a script builds
  // from its arguments (evictions, sweeps), so those get it spelled out.
  const clientPrefix = client.options.keyPrefix ?? '';
  if (/[{}]/.test(clientPrefix)) {
    throw new InvalidArgumentError('client', `its keyPrefix ${JSON.stringify(clientPrefix)} contains "{" or "}"`);
  }
  const scriptPrefix = clientPrefix + prefix;
  const tracked = maxSessions !== Number.POSITIVE_INFINITY;
  const lruKey = `${prefix}lru`;
  // On a single node the LRU index rides in the same script as the state (one slot does
  // not matter there); on a Cluster it needs its own round trip.
  const inlineLru = tracked && !cluster;
  const limitArg = tracked ? String(maxSessions) : '0';

  client.defineCommand('batonCas', { lua: CAS_SCRIPT });
  client.defineCommand('batonDelete', { lua: DELETE_SCRIPT });
  client.defineCommand('batonLru', { lua: LRU_SCRIPT });
  client.defineCommand('batonSweep', { lua: SWEEP_SCRIPT });
  const scripts = client as unknown as ScriptCommands;

  const cache = new Map<string, Snapshot>();
  let closed = false;
  let readyWaiter: Promise<void> | undefined;

  function remember(sessionId: string, snapshot: Snapshot | undefined) {
    cache.delete(sessionId);
    if (snapshot === undefined) return;
    cache.set(sessionId, snapshot);
    if (cache.size > CACHE_LIMIT) {
      const oldest = cache.keys().next();
      if (!oldest.done) cache.delete(oldest.value);
    }
  }

  function recall(sessionId: string): Snapshot | undefined {
    const snapshot = cache.get(sessionId);
    if (snapshot !== undefined) remember(sessionId, snapshot);
    return snapshot;
  }

  const withDeadline = createDeadlines(commandTimeoutMs);

  // One process's operations on a session run one after another (see session-lanes.ts).
  const inLane = createSessionLanes((sessionId) =>
    unavailable(
      `gave up after ${commandTimeoutMs} ms waiting for earlier operations on session ${describeId(sessionId)}`,
    ),
  );

  function checkOpen() {
    if (closed) throw new StoreClosedError('redis');
  }

  function waitReady(what: string, deadline: number): Promise<void> {
    const status = client.status;
    const failure = (reason: string) => {
      const detail = lastError === undefined ? '' : ` (last error: ${lastError.message})`;
      return unavailable(`${what} failed: ${reason}${detail}`);
    };
    if (status === 'end') return Promise.reject(failure('the connection to Redis was closed'));
    const wait = deadline - performance.now();
    if (wait <= 0) return Promise.reject(failure(`not connected to Redis (${status})`));
    if (status === 'wait') client.connect().catch(noop);
    readyWaiter ??= new Promise<void>((resolve) => {
      client.once('ready', () => {
        readyWaiter = undefined;
        resolve();
      });
    });
    const waiter = readyWaiter;
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(failure(`not connected to Redis within ${commandTimeoutMs} ms (${status})`)),
        wait,
      );
      void waiter.then(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /**
   * Sends one command, mapping every failure to a `StoreUnavailableError`. `deadline`
   * (from `performance.now()`) bounds the wait for a connection; the reply gets
   * `commandTimeoutMs` of its own.
   */
  async function send<T>(what: string, command: () => Promise<T>, deadline?: number): Promise<T> {
    if (inFlight++ === 0) holdProcess(true);
    try {
      if (client.status !== 'ready') await waitReady(what, deadline ?? performance.now() + commandTimeoutMs);
      if (!databaseSelected) await selectDatabase(what);
      if (inFlight > 1) batchWrites();
      // ioredis's `commandTimeout` starts only when a command is written, and auto-pipelining
      // holds commands back while an earlier batch awaits its replies; a caller's client
      // may have no timeout at all. So every command gets its own deadline here.
      return await withDeadline(command());
    } catch (error) {
      if (BatonError.isInstance(error)) throw error;
      throw unavailable(`${what} failed: ${(error as Error).message}`, error);
    } finally {
      if (--inFlight === 0) holdProcess(false);
    }
  }

  /**
   * Selects {@link database} on the current connection, once for all the commands that wait on
   * it. A server that refuses it is a misconfiguration, which no retry mends: `store-failed`,
   * saying how many databases the server has when it tells.
   */
  function selectDatabase(what: string): Promise<void> {
    selecting ??= (async () => {
      try {
        await withDeadline((client as Redis).select(database));
        databaseSelected = true;
      } catch (error) {
        selecting = undefined;
        const reply = (error as Error).message;
        if (!/^ERR\b/.test(reply)) throw unavailable(`${what} failed: selecting database ${database}: ${reply}`, error);
        const count = await databaseCount();
        throw new BatonError(
          'store-failed',
          `Session store "${STORE_NAME}" cannot use database ${database}: the Redis server refused to select it (${reply}). ` +
            (count === undefined
              ? 'A Redis server has 16 databases (0 to 15) unless its "databases" setting says otherwise; '
              : `This server has ${count} (0 to ${count - 1}); `) +
            'name one of them in the URL (redis://host:6379/<database>) or raise "databases" in redis.conf.',
          { cause: error },
        );
      }
    })();
    return selecting;
  }

  /** How many databases the server has, when it says (managed servers often disable CONFIG). */
  async function databaseCount(): Promise<number | undefined> {
    try {
      const reply = await withDeadline((client as Redis).config('GET', 'databases'));
      const count = Number(Array.isArray(reply) ? reply[1] : undefined);
      return Number.isSafeInteger(count) && count > 0 ? count : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * How commands leave the process. One sent while no other command of this store waits goes out
   * at once: a model loop's store call then travels while the loop does its own work. One sent
   * while others wait (many sessions at once) is held, with every other command sent before the
   * process next turns to I/O, and they leave in one socket write: a system call per burst, not
   * per command. Holding changes when bytes leave, never their order or content. Only a single
   * node's socket is held; a Cluster's commands go to several sockets and are written as they come.
   */
  let held: { uncork(): void } | undefined;
  const release = () => {
    const stream = held;
    held = undefined;
    stream?.uncork();
  };
  function batchWrites() {
    if (held !== undefined || cluster) return;
    const stream = (client as Redis).stream as (Redis['stream'] & { cork?: () => void }) | undefined;
    if (stream?.cork === undefined || !stream.writable) return;
    stream.cork();
    held = stream;
    // A next tick runs once the current run of callbacks and promise reactions is over, before
    // any I/O: every command sent in that run joins the write, and none waits for the network.
    process.nextTick(release);
  }

  function decode(sessionId: string, raw: Buffer): Snapshot {
    let value: unknown;
    try {
      value = JSON.parse(raw.toString('utf8'));
    } catch (error) {
      throw corrupted(sessionId, `it is not JSON (${(error as Error).message})`, error);
    }
    try {
      return { state: assertState(value), hash: sha1(raw) };
    } catch (error) {
      throw corrupted(sessionId, (error as Error).message, error);
    }
  }

  function corrupted(sessionId: string, detail: string, cause: unknown) {
    return unavailable(
      `the stored state of session ${describeId(sessionId)} (key ${describeId(redisSessionKey(sessionId, scriptPrefix))}) ` +
        `is corrupted: ${detail}. Delete the session to start it afresh.`,
      cause,
    );
  }

  /** The keys of a session's scripts: its state, its event log (same hash tag), the LRU index. */
  function sessionKeys(sessionId: string): [number, string, ...string[]] {
    const key = redisSessionKey(sessionId, prefix);
    return inlineLru ? [3, key, `${key}:log`, lruKey] : [2, key, `${key}:log`];
  }

  /** Cluster only: records an access in the LRU index and deletes what it evicts. */
  async function touchIndex(member: string): Promise<void> {
    if (!tracked || inlineLru) return;
    try {
      const popped = await send('updating the LRU index', () => scripts.batonLru(1, lruKey, member, limitArg));
      if (!Array.isArray(popped)) return;
      const evicted: string[] = [];
      for (let i = 0; i < popped.length; i += 2) {
        const key = `${prefix}{${String(popped[i])}}`;
        evicted.push(key, `${key}:log`);
      }
      await Promise.all(evicted.map((key) => send('evicting a session', () => client.del(key))));
    } catch {
      // Best-effort by design (see `maxSessions`): the state change already happened, and
      // the next access of the session puts it back in the index.
    }
  }

  async function dropFromIndex(member: string): Promise<void> {
    if (!tracked || inlineLru) return;
    try {
      await send('updating the LRU index', () => client.zrem(lruKey, member));
    } catch {
      // Best-effort, as above; `sweep()` removes entries whose session is gone.
    }
  }

  async function runUpdate(
    sessionId: string,
    fn: StateUpdater,
    deadline: number,
  ): Promise<OrchestrationState | undefined> {
    const keys = sessionKeys(sessionId);
    const member = escapeSessionId(sessionId);
    let snapshot = recall(sessionId);
    // A session this process has not seen is usually new: try to create it with one
    // compare-and-set (expecting no value). If it exists after all, the script answers with
    // its value and the retry below needs no extra read: never more round trips than a GET first.
    let fresh = snapshot !== undefined;
    for (let attempt = 0; ; attempt++) {
      const current = snapshot?.state;
      const next = fn(current);
      const write = next !== undefined && next !== current;
      if (!write && current === undefined && !fresh) {
        // Nothing to create: only a read can say whether the session exists.
        const raw = await send('reading a session', () => client.getBuffer(keys[1]), deadline);
        fresh = true;
        if (raw === null) return undefined;
        snapshot = decode(sessionId, raw);
        remember(sessionId, snapshot);
        // Just read: if the updater changes nothing, there is nothing to check or write.
        if (fn(snapshot.state) === snapshot.state) return snapshot.state;
        continue;
      }
      // A fresh read (or a script's answer) is the only thing that can say the session is absent.
      if (!write && current === undefined) return undefined;
      let stored: OrchestrationState | undefined;
      let payload: string | undefined;
      let logged: string[] = NO_ENTRIES;
      if (write) {
        const entries = logEntriesOf(next);
        if (entries !== undefined && next.log !== undefined) {
          // Only the newest `capacity`: older ones would be trimmed by this very write.
          const capacity = next.log.capacity;
          const kept = capacity > 0 ? entries.slice(-capacity) : [];
          logged = [String(capacity), ...kept.map((entry) => JSON.stringify(entry))];
        }
        // `ttl` first, so the scripts can read it with a pattern match instead of a JSON decode.
        stored = assertState(Object.assign({ ttl: next.ttl }, next, { version: (current?.version ?? 0) + 1 }), 'state');
        payload = JSON.stringify(stored);
      }
      const reply = await send(
        'writing a session',
        () =>
          scripts.batonCasBuffer(
            ...keys,
            snapshot?.hash ?? '',
            payload ?? '',
            String(stored?.ttl ?? 0),
            member,
            limitArg,
            scriptPrefix,
            ...logged,
          ),
        deadline,
      );
      if (!Array.isArray(reply)) throw unavailable(`writing a session failed: unexpected reply ${String(reply)}`);
      if (reply[0] === 1) {
        if (stored === undefined || payload === undefined) return current;
        if (tracked && !inlineLru) await touchIndex(member);
        remember(sessionId, { state: stored, hash: sha1(payload) });
        return stored;
      }
      // Another writer got in first; the reply carries what it stored.
      fresh = true;
      const latest: unknown = reply[1];
      snapshot = Buffer.isBuffer(latest) ? decode(sessionId, latest) : undefined;
      remember(sessionId, snapshot);
      if (attempt >= maxRetries) {
        throw new StoreConflictError(
          STORE_NAME,
          `gave up updating session ${describeId(sessionId)} after ${attempt + 1} attempts lost to concurrent writers`,
        );
      }
      // The first conflict usually means only that our cached copy was stale: retry at once.
      if (attempt > 0) await sleep(Math.random() * Math.min(BACKOFF_CAP_MS, 2 ** attempt));
    }
  }

  return {
    name: STORE_NAME,
    peek(sessionId) {
      // The copy this instance last read or wrote (its compare-and-set base), without I/O.
      return closed ? undefined : cache.get(sessionId)?.state;
    },
    async get(sessionId) {
      assertSessionId(sessionId);
      checkOpen();
      // A plain GET: reads renew nothing (TTLs and the LRU index ride on writes), so a read
      // is never a write. `sweep()` drops index entries of sessions that expired.
      const raw = await send('reading a session', () => client.getBuffer(redisSessionKey(sessionId, prefix)));
      if (!Buffer.isBuffer(raw)) {
        remember(sessionId, undefined);
        return undefined;
      }
      const snapshot = decode(sessionId, raw);
      remember(sessionId, snapshot);
      return snapshot.state;
    },
    async update(sessionId: string, fn: StateUpdater) {
      assertSessionId(sessionId);
      checkOpen();
      const deadline = performance.now() + commandTimeoutMs;
      return inLane(sessionId, deadline, () => runUpdate(sessionId, fn, deadline));
    },
    async readLog(sessionId) {
      assertSessionId(sessionId);
      checkOpen();
      const key = `${redisSessionKey(sessionId, prefix)}:log`;
      const raw = await send('reading an event log', () => client.lrangeBuffer(key, 0, -1));
      return raw.map((bytes, i) => {
        try {
          return assertLogEntry(JSON.parse(bytes.toString('utf8')), `entry ${i} of the event log`);
        } catch (error) {
          throw unavailable(
            `the event log of session ${describeId(sessionId)} (key ${describeId(key)}) is corrupted: ${(error as Error).message}. ` +
              'Delete the session to start it afresh.',
            error,
          );
        }
      });
    },
    async delete(sessionId) {
      assertSessionId(sessionId);
      checkOpen();
      const deadline = performance.now() + commandTimeoutMs;
      return inLane(sessionId, deadline, async () => {
        const member = escapeSessionId(sessionId);
        const removed = await send(
          'deleting a session',
          () => scripts.batonDelete(...sessionKeys(sessionId), member),
          deadline,
        );
        remember(sessionId, undefined);
        await dropFromIndex(member);
        return removed === 1;
      });
    },
    /**
     * Redis deletes expired keys by itself, so there is nothing left to delete: this
     * removes the LRU index entries of sessions that expired and counts them. Without
     * `maxSessions` there is no index and it resolves to 0.
     */
    async sweep() {
      checkOpen();
      if (!tracked) return 0;
      let removed = 0;
      let cursor = '0';
      do {
        const [next, flat] = await send('sweeping expired sessions', () => client.zscan(lruKey, cursor, 'COUNT', 500));
        cursor = next;
        const members = flat.filter((_, i) => i % 2 === 0);
        if (members.length > 0) removed += await sweepMembers(members);
      } while (cursor !== '0');
      return removed;
    },
    async close() {
      if (closed) return;
      closed = true;
      cache.clear();
      client.off('ready', onReady);
      if (!ownsClient) return;
      if (client.status === 'ready') {
        await client.quit().catch(() => client.disconnect());
      } else {
        client.disconnect();
      }
    },
  };

  async function sweepMembers(members: string[]): Promise<number> {
    if (!cluster) {
      const count = await send('sweeping expired sessions', () =>
        scripts.batonSweep(1, lruKey, scriptPrefix, ...members),
      );
      return Number(count);
    }
    // On a Cluster each session key lives in its own slot, so no script can check them
    // together; a session recreated between the two steps is re-indexed on its next access.
    const exists = await Promise.all(
      members.map((m) => send('sweeping expired sessions', () => client.exists(`${prefix}{${m}}`))),
    );
    const gone = members.filter((_, i) => exists[i] === 0);
    if (gone.length === 0) return 0;
    return send('sweeping expired sessions', () => client.zrem(lruKey, ...gone));
  }
}

/** No event log entries to append: the script's arguments end with the prefix. */
const NO_ENTRIES: string[] = [];

function sha1(bytes: Buffer | string): string {
  // A string is hashed as UTF-8, the bytes ioredis sends for it.
  return hash('sha1', bytes, 'hex');
}

function positive(path: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!(Number.isFinite(value) && value > 0)) {
    throw new InvalidArgumentError(path, `expected a number of milliseconds > 0, got ${String(value)}`);
  }
  return value;
}

/** A command waiting for its reply, failed when `at` (from `performance.now()`) passes. */
interface Waiting {
  readonly at: number;
  readonly reject: (error: Error) => void;
  settled: boolean;
}

/**
 * Bounds the wait for every command's reply to `ms`, with one timer for all of them: a timer
 * set and cleared per command cost more client CPU than the rest of the command's own work.
 * Every command gets the same bound, so deadlines come in the order commands were sent, and the
 * timer only ever waits for the oldest unanswered one.
 */
function createDeadlines(ms: number): <T>(promise: Promise<T>) => Promise<T> {
  let queue: Waiting[] = [];
  let head = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const check = () => {
    timer = undefined;
    const now = performance.now();
    for (; head < queue.length; head++) {
      const waiting = queue[head]!;
      if (waiting.settled) continue;
      if (waiting.at > now) break;
      waiting.settled = true;
      waiting.reject(new Error(`no reply within ${ms} ms`));
    }
    advance();
    if (head < queue.length) arm(queue[head]!.at - now);
  };
  const arm = (delay: number) => {
    timer = setTimeout(check, Math.max(1, Math.ceil(delay)));
    // A command that waits keeps the process alive through its socket, not through this timer.
    timer.unref?.();
  };
  /** Drops answered commands from the front (replies mostly come in order), so none is kept long. */
  const advance = () => {
    while (head < queue.length && queue[head]!.settled) head++;
    if (head === queue.length) {
      queue = [];
      head = 0;
    } else if (head > 1024 && head * 2 > queue.length) {
      queue = queue.slice(head);
      head = 0;
    }
  };
  return <T>(promise: Promise<T>) =>
    new Promise<T>((resolve, reject) => {
      const waiting: Waiting = { at: performance.now() + ms, reject, settled: false };
      queue.push(waiting);
      if (timer === undefined) arm(ms);
      promise.then(
        (value) => {
          if (waiting.settled) return;
          waiting.settled = true;
          advance();
          resolve(value);
        },
        (error: unknown) => {
          if (waiting.settled) return;
          waiting.settled = true;
          advance();
          reject(error);
        },
      );
    });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function noop() {}

function unavailable(message: string, cause?: unknown) {
  return new StoreUnavailableError(STORE_NAME, message, cause === undefined ? {} : { cause });
}

/** A session id for an error message: quoted, and cut short (ids may be 4,096 characters). */
function describeId(sessionId: string): string {
  return JSON.stringify(sessionId.length > 80 ? `${sessionId.slice(0, 80)}…` : sessionId);
}
