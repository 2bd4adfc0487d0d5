import { randomUUID } from 'node:crypto';
import { Socket } from 'node:net';
import { type Command, Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { configErrorOf } from '../../test/helpers/config-errors.js';
import { freePort } from '../../test/helpers/free-port.js';
import { pingRedis, serviceAvailable } from '../../test/helpers/services.js';
import { InvalidArgumentError, StoreConflictError, StoreUnavailableError } from '../core/errors.js';
import { appendToLog } from '../core/session-log.js';
import { createState, type OrchestrationState } from '../core/state.js';
import { testStore } from '../testing/test-store.js';
import { type RedisStoreOptions, redisSessionKey, redisStore } from './redis.js';
import type { SessionStore } from './types.js';

const URL = 'redis://127.0.0.1:6379';
// Every key this file writes starts with this, so afterAll can remove exactly them.
const RUN_PREFIX = `baton-test:${randomUUID().slice(0, 8)}:`;

const skip = await serviceAvailable('redis', () => pingRedis(URL));

testStore({
  name: 'redis',
  clock: 'real',
  create: ({ namespace, ...o }) => redisStore({ url: URL, prefix: `${RUN_PREFIX}${namespace}:`, ...o }),
  skip,
});

const state = (sessionId: string, patch: Partial<OrchestrationState> = {}): OrchestrationState => ({
  ...createState(sessionId, 1_000, 60_000),
  ...patch,
});
const addTool = (tool: string) => (current: OrchestrationState | undefined) => {
  const base = current ?? state('unused');
  return { ...base, recentlyUsedTools: [...base.recentlyUsedTools, tool] };
};
/** An updater that adds `tool` to the history and logs it, as the manager does. */
const loggedTool =
  (tool: string, patch: Partial<OrchestrationState> = {}) =>
  (current: OrchestrationState | undefined) => {
    const base = current ?? state('unused');
    const next = { ...base, ...patch, recentlyUsedTools: [...base.recentlyUsedTools, tool] };
    return appendToLog(next, 100, [{ event: { type: 'tool-recorded', tool, step: undefined }, state: next }], 1, 'm');
  };
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The error `promise` rejects with (fails the test if it resolves). */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.fail('expected a rejection'),
    (error: unknown) => error,
  );
}

// Checked before anything connects: these need no Redis server.
describe('redisStore options', () => {
  it('refuses an option it does not know, naming it and the factory, with a did-you-mean when close', () => {
    // `urll` was ignored without a word: the store used the default local Redis instead.
    const error = configErrorOf(() => redisStore({ urll: 'redis://cache.internal:6379' } as never));
    expect(error.message).toContain('Invalid redisStore() options');
    expect(error.issues).toEqual([
      expect.objectContaining({ path: 'urll', message: 'unknown option "urll"', hint: 'did you mean "url"?' }),
    ]);
    const several = configErrorOf(() => redisStore({ url: URL, prefx: 'app:', commandTimeout: 500 } as never));
    expect(several.issues.map((issue) => [issue.path, issue.hint])).toEqual([
      ['prefx', 'did you mean "prefix"?'],
      ['commandTimeout', 'did you mean "commandTimeoutMs"?'],
    ]);
  });

  it('refuses a url, client or clock of the wrong type, when it is created', () => {
    expect(() => redisStore({ url: new globalThis.URL(URL) } as never)).toThrow(
      'Invalid url: expected a redis:// or rediss:// URL string, got object',
    );
    expect(() => redisStore({ client: URL } as never)).toThrow(
      'Invalid client: expected an ioredis Redis or Cluster, got string',
    );
    expect(() => redisStore({ url: URL, now: Date.now() } as never)).toThrow(
      'Invalid now: expected a function returning milliseconds, got number',
    );
  });

  it('refuses a url whose path is no database number, which ioredis would read as database 0', () => {
    expect(() => redisStore({ url: `${URL}/sessions` })).toThrow(
      'Invalid url: its path names the database, a whole number (redis://host:6379/0), got "/sessions"',
    );
    expect(() => redisStore({ url: `${URL}/-1` })).toThrow(/got "\/-1"/);
  });

  it('still takes every option it knows (connecting only when used)', async () => {
    const store = redisStore({
      url: URL,
      prefix: `${RUN_PREFIX}options:`,
      maxSessions: 10,
      now: Date.now,
      maxRetries: 3,
      commandTimeoutMs: 500,
      connectTimeoutMs: 500,
    });
    await store.close();
  });
});

describe.skipIf(skip)('redisStore', () => {
  const stores: SessionStore[] = [];
  const clients: Redis[] = [];
  let namespaceCount = 0;

  function open(options: RedisStoreOptions = {}, namespace = `n${namespaceCount++}`): SessionStore {
    const store = redisStore({ url: URL, prefix: `${RUN_PREFIX}${namespace}:`, ...options });
    stores.push(store);
    return store;
  }

  /** A client of our own whose commands are counted, to measure round trips. */
  async function countingClient() {
    const client = new Redis(URL);
    clients.push(client);
    // Count from the first command the store sends, not the connection handshake.
    await new Promise((resolve) => client.once('ready', resolve));
    const sent: string[] = [];
    const original = client.sendCommand.bind(client);
    client.sendCommand = ((command: Command, stream?: Parameters<typeof original>[1]) => {
      sent.push(command.name);
      return original(command, stream);
    }) as typeof client.sendCommand;
    return { client, sent };
  }

  const raw = new Redis(URL);
  clients.push(raw);

  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    let cursor = '0';
    do {
      const [next, keys] = await raw.scan(cursor, 'MATCH', `${RUN_PREFIX}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await raw.unlink(...keys);
    } while (cursor !== '0');
    await Promise.all(clients.map((c) => c.quit()));
  });

  it('changes a state in 1 round trip when it holds the latest version or creates it, 2 when another instance wrote last, with or without event log entries', async () => {
    // A write that appends log entries must cost exactly what one without costs: the entries
    // ride in the same script call as the state.
    for (const [kind, change] of [
      ['unlogged', addTool],
      ['logged', loggedTool],
    ] as const) {
      const namespace = `rt${namespaceCount++}`;
      for (const maxSessions of [undefined, 1_000]) {
        const { client, sent } = await countingClient();
        const store = open({ client, maxSessions }, namespace);
        await store.update('warm', change('first')); // created by one script call, no GET first
        expect(sent, kind).toEqual(['evalsha']);
        sent.length = 0;
        for (let i = 0; i < 20; i++) await store.update('warm', change(`t${i}`));
        expect(sent, kind).toHaveLength(20);
        expect(new Set(sent), kind).toEqual(new Set(['evalsha']));
        sent.length = 0;
        await store.update('warm', (current) => current); // a no-op only checks its copy is current
        expect(sent, kind).toEqual(['evalsha']);

        // A second instance has never seen the session: its create attempt is answered with the
        // stored state, and the retry writes (two script calls, no GET).
        const { client: coldClient, sent: coldSent } = await countingClient();
        const cold = open({ client: coldClient, maxSessions }, namespace);
        await cold.update('warm', change('cold'));
        expect(coldSent, kind).toEqual(['evalsha', 'evalsha']);
        // An instance that must only read a session it has not seen makes one GET.
        const { client: readClient, sent: readSent } = await countingClient();
        const reader = open({ client: readClient, maxSessions }, namespace);
        expect(await reader.update('warm', (current) => current)).toMatchObject({ version: 22 });
        expect(readSent, kind).toEqual(['get']);
        // The first instance's copy is now stale: the script's conflict reply carries the
        // latest state, so the retry costs one more round trip and no GET.
        sent.length = 0;
        const final = await store.update('warm', change('after'));
        expect(sent, kind).toEqual(['evalsha', 'evalsha']);
        expect(final?.recentlyUsedTools.slice(-3)).toEqual(['t19', 'cold', 'after']);
        expect(final?.version).toBe(23);
        // The attempts that lost their compare-and-set (the cold create, the stale retry)
        // appended nothing: one entry per write, numbered without gaps. readLog is one LRANGE.
        sent.length = 0;
        const entries = await store.readLog!('warm');
        expect(sent).toEqual(['lrange']);
        expect(entries.map((entry) => entry.seq)).toEqual(
          kind === 'logged' ? Array.from({ length: 23 }, (_, i) => i + 1) : [],
        );
        await store.delete('warm');
      }
    }
  });

  it('never appends the entries of an attempt that lost its compare-and-set: two instances racing lose and repeat nothing', async () => {
    const namespace = `log${namespaceCount++}`;
    const store = open({ maxSessions: 100 }, namespace);
    const other = open({}, namespace);
    await store.update('logged', loggedTool('first'));
    // `store`'s copy goes stale: its first attempt loses, and only the retry's entry is appended.
    await other.update('logged', loggedTool('other'));
    await store.update('logged', loggedTool('stale'));
    expect((await store.readLog!('logged')).map((entry) => entry.seq)).toEqual([1, 2, 3]);
    await Promise.all(
      Array.from({ length: 60 }, (_, i) => (i % 2 ? store : other).update('logged', loggedTool(`r${i}`))),
    );
    const entries = await other.readLog!('logged');
    expect(entries.map((entry) => entry.seq)).toEqual(Array.from({ length: 63 }, (_, i) => i + 1));
    // Each entry is the state its own write stored: the history one tool longer each time,
    // every tool once, and the last entry's history is the stored one.
    expect(entries.map((entry) => entry.history.length)).toEqual(Array.from({ length: 63 }, (_, i) => i + 1));
    expect(new Set(entries.map((entry) => entry.history.at(-1))).size).toBe(63);
    expect(entries.at(-1)!.history).toEqual((await store.get('logged'))?.recentlyUsedTools);
  });

  it('expires the log with its session, renewed by writes that log nothing, and evicts it with the session', async () => {
    const namespace = `logttl${namespaceCount++}`;
    const store = open({ maxSessions: 2 }, namespace);
    const prefix = `${RUN_PREFIX}${namespace}:`;
    const logKey = (id: string) => `${redisSessionKey(id, prefix)}:log`;
    await store.update('brief', loggedTool('a', { ttl: 400 }));
    await pause(250);
    // A write without entries renews both keys alike.
    await store.update('brief', (current) => current && { ...current, sequenceIndex: 1 });
    const [stateTtl, logTtl] = [await raw.pttl(redisSessionKey('brief', prefix)), await raw.pttl(logKey('brief'))];
    expect(logTtl).toBeGreaterThan(300);
    expect(Math.abs(stateTtl - logTtl)).toBeLessThan(50);
    await pause(500);
    expect(await store.get('brief')).toBeUndefined();
    expect(await raw.exists(logKey('brief'))).toBe(0);
    // A session switched to ttl 0 keeps its log as long as itself: forever.
    await store.update('kept', loggedTool('a', { ttl: 400 }));
    await store.update('kept', (current) => current && { ...current, ttl: 0 });
    expect(await raw.pttl(logKey('kept'))).toBe(-1);
    for (const id of ['x', 'y']) await store.update(id, loggedTool(id));
    expect(await raw.exists(logKey('kept'))).toBe(0); // evicted with its session
    expect(await store.readLog!('kept')).toEqual([]);
    expect(await store.readLog!('y')).toHaveLength(1);
    await store.delete('y');
    expect(await raw.exists(logKey('y'))).toBe(0);
  });

  it('appends a write of more entries than Lua can unpack, keeping the newest capacity; capacity 0 keeps none', async () => {
    const store = open({}, `logbig${namespaceCount++}`);
    const many = (count: number, capacity: number) => (current: OrchestrationState | undefined) => {
      const next = current ?? state('big');
      const items = Array.from({ length: count }, (_, i) => ({
        event: { type: 'tool-recorded' as const, tool: `t${i}`, step: undefined },
        state: next,
      }));
      return appendToLog(next, capacity, items, 1, 'm');
    };
    await store.update('big', many(9_000, 1_000));
    const entries = await store.readLog!('big');
    expect(entries).toHaveLength(1_000);
    expect([entries[0]?.seq, entries.at(-1)?.seq]).toEqual([8_001, 9_000]);
    await store.update('big', many(3, 0));
    expect(await store.readLog!('big')).toEqual([]);
    expect((await store.get('big'))?.log?.seq).toBe(9_003);
  });

  it('writes nothing when the entries cannot be appended: never a state without its entries', async () => {
    const namespace = `logatomic${namespaceCount++}`;
    const store = open({}, namespace);
    await store.update('s', loggedTool('a'));
    // Damage the log key (another type), so appending to it fails inside the script.
    const logKey = `${redisSessionKey('s', `${RUN_PREFIX}${namespace}:`)}:log`;
    await raw.del(logKey);
    await raw.set(logKey, 'not a list');
    const error = await rejection(store.update('s', loggedTool('b')));
    expect(StoreUnavailableError.isInstance(error)).toBe(true);
    expect(String((error as Error).message)).toMatch(/WRONGTYPE/);
    expect((await store.get('s'))?.recentlyUsedTools).toEqual(['a']);
  });

  it('reports a corrupted event log entry clearly', async () => {
    const namespace = `logbad${namespaceCount++}`;
    const store = open({}, namespace);
    await store.update('bad', loggedTool('a'));
    await raw.rpush(`${redisSessionKey('bad', `${RUN_PREFIX}${namespace}:`)}:log`, '{"seq":2}');
    const error = await rejection(store.readLog!('bad'));
    expect(StoreUnavailableError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/event log of session "bad".*corrupted.*entry 1/);
  });

  it('puts the escaped session id in exactly one non-empty hash tag', async () => {
    const ids = ['a{b}c', '{}', '}{', '{', '}', '{{x}}', '%7B', '%', 'lone\uD800', 'pair😀', 'lru', 'x'.repeat(4096)];
    const keys = ids.map((id) => redisSessionKey(id, 'p:'));
    expect(new Set(keys).size).toBe(ids.length);
    for (const key of keys) {
      expect(key.split('{')).toHaveLength(2);
      expect(key.split('}')).toHaveLength(2);
      // Redis Cluster hashes what lies between the first `{` and the next `}`.
      const tag = key.slice(key.indexOf('{') + 1, key.indexOf('}'));
      expect(tag.length).toBeGreaterThan(0);
      expect(key.endsWith('}')).toBe(true);
    }
    expect(redisSessionKey('a{b}c', 'p:')).toBe('p:{a%7Bb%7Dc}');
    expect(redisSessionKey('lone\uD800', 'p:')).toBe('p:{lone%uD800}');

    const prefix = `${RUN_PREFIX}tags:`;
    const store = open({ maxSessions: 100 }, 'tags');
    for (const [i, id] of ids.entries()) await store.update(id, () => state(id, { sequenceIndex: i }));
    for (const [i, id] of ids.entries()) {
      expect(await raw.exists(redisSessionKey(id, prefix))).toBe(1);
      const read = await store.get(id);
      expect(read?.sessionId).toBe(id);
      expect(read?.sequenceIndex).toBe(i);
    }
    // A lone surrogate and the character UTF-8 would turn it into stay apart.
    await store.update('lone\uFFFD', () => state('lone\uFFFD', { sequenceIndex: 99 }));
    expect((await store.get('lone\uD800'))?.sequenceIndex).toBe(8);
  });

  it('rejects a prefix that would add a hash tag, and bad numbers', () => {
    expect(() => redisStore({ prefix: 'app{1}:' })).toThrow(InvalidArgumentError);
    expect(() => redisStore({ maxSessions: 0 })).toThrow(/maxSessions/);
    expect(() => redisStore({ maxSessions: 1.5 })).toThrow(/maxSessions/);
    expect(() => redisStore({ maxRetries: -1 })).toThrow(/maxRetries/);
    expect(() => redisStore({ commandTimeoutMs: 0 })).toThrow(/commandTimeoutMs/);
  });

  it('loses nothing when two instances append to one session concurrently', async () => {
    const first = open({}, 'pair');
    const second = open({}, 'pair');
    await Promise.all(Array.from({ length: 200 }, (_, i) => (i % 2 ? first : second).update('hot', addTool(`t${i}`))));
    const final = await first.get('hot');
    expect(final?.recentlyUsedTools).toHaveLength(200);
    expect(new Set(final?.recentlyUsedTools).size).toBe(200);
    expect(final?.version).toBe(200);
    expect(await second.get('hot')).toEqual(final);
  });

  it('does not mistake a recreated session for the one it cached (same version, other content)', async () => {
    const first = open({}, 'aba');
    const second = open({}, 'aba');
    for (const tool of ['a', 'b', 'c']) await first.update('s', addTool(tool)); // first caches version 3
    await second.delete('s');
    for (const tool of ['x', 'y', 'z']) await second.update('s', addTool(tool)); // version 3 again
    const final = await first.update('s', addTool('after'));
    expect(final?.recentlyUsedTools).toEqual(['x', 'y', 'z', 'after']);
    expect(final?.version).toBe(4);
  });

  it('gives up with StoreConflictError after maxRetries conflicts', async () => {
    const writer = open({}, 'conflict');
    const stale = open({ maxRetries: 0 }, 'conflict');
    await stale.update('s', addTool('a'));
    await writer.update('s', addTool('b')); // the stale instance's copy is now out of date
    const error = await rejection(stale.update('s', addTool('c')));
    expect(StoreConflictError.isInstance(error)).toBe(true);
    expect((error as StoreConflictError).store).toBe('redis');
    expect((await writer.get('s'))?.recentlyUsedTools).toEqual(['a', 'b']);
  });

  it('renews the TTL on writes only, stores ttl 0 without expiry, and rejects an invalid updater result', async () => {
    const prefix = `${RUN_PREFIX}ttl:`;
    const store = open({}, 'ttl');
    await store.update('s', () => state('s', { ttl: 1_000 }));
    await pause(600);
    // A read and an update that changes nothing write nothing, so they renew nothing.
    expect(await store.get('s')).toBeDefined();
    expect(await store.update('s', (c) => c)).toBeDefined();
    expect(await raw.pttl(redisSessionKey('s', prefix))).toBeLessThan(500);
    await store.update('s', (c) => c && { ...c, sequenceIndex: 1 });
    expect(await raw.pttl(redisSessionKey('s', prefix))).toBeGreaterThan(800);
    await pause(600); // 1,200 ms after the first write: alive because the second renewed it
    expect(await store.get('s')).toBeDefined();
    await store.update('forever', () => state('forever', { ttl: 0 }));
    expect(await raw.pttl(redisSessionKey('forever', prefix))).toBe(-1);
    // Switching an expiring session to ttl 0 removes its expiry.
    await store.update('s', (current) => current && { ...current, ttl: 0 });
    expect(await raw.pttl(redisSessionKey('s', prefix))).toBe(-1);

    const error = await rejection(store.update('forever', (current) => current && { ...current, ttl: -5 }));
    expect(InvalidArgumentError.isInstance(error)).toBe(true);
    expect((await store.get('forever'))?.version).toBe(1);
  });

  it('reports a corrupted stored value as StoreUnavailableError and can still delete it', async () => {
    const prefix = `${RUN_PREFIX}corrupt:`;
    const store = open({}, 'corrupt');
    await raw.set(redisSessionKey('bad', prefix), '{"ttl":0,"not":"a state"}');
    await raw.set(redisSessionKey('worse', prefix), 'not json');
    for (const call of [() => store.get('bad'), () => store.update('worse', addTool('x'))]) {
      const error = await rejection(call());
      expect(StoreUnavailableError.isInstance(error)).toBe(true);
      expect(String((error as Error).message)).toMatch(/corrupted/);
    }
    expect(await raw.get(redisSessionKey('worse', prefix))).toBe('not json');
    expect(await store.delete('bad')).toBe(true);
  });

  it('sweeps LRU index entries of sessions Redis expired, and counts them', async () => {
    const prefix = `${RUN_PREFIX}sweep:`;
    const store = open({ maxSessions: 100 }, 'sweep');
    for (const id of ['brief1', 'brief2', 'brief3']) await store.update(id, () => state(id, { ttl: 50 }));
    await store.update('forever', () => state('forever', { ttl: 0 }));
    await pause(150);
    expect(await store.sweep()).toBe(3);
    expect(await raw.zrange(`${prefix}lru`, 0, -1)).toEqual(['forever']);
    expect(await store.sweep()).toBe(0);
    expect(await store.get('forever')).toBeDefined();
    // Without maxSessions there is no index, and Redis already deleted what expired.
    expect(await open({}, 'sweep').sweep()).toBe(0);
  });

  it('evicts beyond maxSessions and keeps the LRU index at that size', async () => {
    const prefix = `${RUN_PREFIX}evict:`;
    const store = open({ maxSessions: 5 }, 'evict');
    for (let i = 0; i < 20; i++) await store.update(`s${i}`, () => state(`s${i}`));
    expect(await raw.zcard(`${prefix}lru`)).toBe(5);
    const alive = await Promise.all(Array.from({ length: 20 }, (_, i) => store.get(`s${i}`)));
    expect(alive.map((s) => s !== undefined)).toEqual(Array.from({ length: 20 }, (_, i) => i >= 15));
    expect(await store.delete('s19')).toBe(true);
    expect(await raw.zcard(`${prefix}lru`)).toBe(4);
  });

  it("evicts and sweeps the right keys through a caller's client that has a keyPrefix", async () => {
    const client = new Redis(URL, { keyPrefix: `${RUN_PREFIX}kp:` });
    clients.push(client);
    const store = open({ client, maxSessions: 2 }, 'inner');
    // c expires, but not before the checks below have run on a busy machine.
    for (const id of ['a', 'b', 'c']) await store.update(id, loggedTool(id, { ttl: id === 'c' ? 1_000 : 0 }));
    const key = (id: string) => redisSessionKey(id, `${RUN_PREFIX}kp:${RUN_PREFIX}inner:`);
    expect([await raw.exists(key('a')), await raw.exists(key('b')), await raw.exists(key('c'))]).toEqual([0, 1, 1]);
    // The evicted session's log goes with it; the others' stay, under the client's prefix too.
    const logs = ['a', 'b', 'c'].map((id) => `${key(id)}:log`);
    expect([await raw.exists(logs[0]!), await raw.exists(logs[1]!), await raw.exists(logs[2]!)]).toEqual([0, 1, 1]);
    expect(await store.readLog!('b')).toHaveLength(1);
    await pause(1_100);
    expect(await store.sweep()).toBe(1);
    expect(await raw.zrange(`${RUN_PREFIX}kp:${RUN_PREFIX}inner:lru`, 0, -1)).toEqual(['b']);
    expect(() => redisStore({ client: new Redis({ lazyConnect: true, keyPrefix: 'x{y}' }) })).toThrow(/keyPrefix/);
  });

  it('fails within the command timeout when Redis is unreachable', async () => {
    const port = await freePort();
    const store = redisStore({ url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 300 });
    stores.push(store);
    const started = performance.now();
    const error = await rejection(store.get('s'));
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(StoreUnavailableError.isInstance(error)).toBe(true);
    expect((error as StoreUnavailableError).store).toBe('redis');
    expect(String((error as Error).message)).toMatch(/ECONNREFUSED/);
  });

  it('refuses every call while the server refuses its database, instead of using database 0', async () => {
    // A server has 16 databases by default; ioredis only emits an error for the failed SELECT
    // and sends everything to database 0.
    const prefix = `${RUN_PREFIX}db99:`;
    const store = redisStore({ url: `${URL}/99`, prefix });
    stores.push(store);
    const calls = [() => store.update('s', () => state('s')), () => store.get('s'), () => store.readLog!('s')];
    for (const call of calls) {
      const error = await rejection(call());
      expect(error).toMatchObject({ code: 'store-failed' });
      expect((error as Error).message).toMatch(
        /^Session store "redis" cannot use database 99: the Redis server refused to select it \(ERR [^)]*\)\. This server has (\d+) \(0 to \d+\); name one of them in the URL/,
      );
    }
    expect(await raw.exists(redisSessionKey('s', prefix))).toBe(0);
    // A caller's client naming such a database: the same refusal.
    const own = new Redis({ db: 99, lazyConnect: true });
    own.on('error', () => undefined); // ioredis reports the failed SELECT there too
    const through = redisStore({ client: own, prefix });
    stores.push(through);
    await expect(through.update('s', () => state('s'))).rejects.toMatchObject({ code: 'store-failed' });
    expect(await raw.exists(redisSessionKey('s', prefix))).toBe(0);
    own.disconnect();
  });

  it('keeps its sessions in the database its URL names, and only there', async () => {
    const prefix = `${RUN_PREFIX}db1:`;
    const store = redisStore({ url: `${URL}/1`, prefix });
    stores.push(store);
    const one = new Redis(`${URL}/1`);
    clients.push(one);
    try {
      await store.update('s', () => state('s'));
      expect(await one.exists(redisSessionKey('s', prefix))).toBe(1);
      expect(await raw.exists(redisSessionKey('s', prefix))).toBe(0);
    } finally {
      await one.del(redisSessionKey('s', prefix), `${redisSessionKey('s', prefix)}:log`);
    }
  });

  it('refuses to work after close', async () => {
    const store = redisStore({ url: URL, prefix: `${RUN_PREFIX}closed:` });
    await store.update('s', () => state('s'));
    await store.close();
    await expect(store.get('s')).rejects.toThrow(/closed/);
  });

  it('sends a lone command before update() returns, and lets a burst of concurrent commands share one socket write', async () => {
    const store = open();
    // Connected, and the script loaded on this connection: what follows is the steady state.
    await store.update('warm', () => state('warm'));
    // What reaches the kernel: `_write` for one chunk, `_writev` for chunks released together.
    type Flush = (this: Socket, ...args: unknown[]) => void;
    const proto = Socket.prototype as unknown as Record<'_write' | '_writev', Flush>;
    const originals = { _write: proto._write, _writev: proto._writev };
    const flushes: string[] = [];
    const redisPort = Number(new globalThis.URL(URL).port);
    for (const name of ['_write', '_writev'] as const) {
      proto[name] = function (this: Socket, ...args: unknown[]) {
        // Only connections to Redis: the test runner may write to its own pipes meanwhile.
        if (this.remotePort === redisPort) flushes.push(name);
        originals[name].apply(this, args);
      };
    }
    const ids = Array.from({ length: 32 }, (_, i) => `burst-${i}`);
    try {
      // Not held back for the rest of the process's work (a model loop's), as auto-pipelining would.
      const lone = store.update('lone', () => state('lone'));
      expect(flushes).toEqual(['_write']);
      await lone;
      flushes.length = 0;
      const burst = Promise.all(ids.map((id) => store.update(id, () => state(id))));
      // The first goes at once; the 31 sent while it waits leave together once this code yields.
      expect(flushes).toEqual(['_write']);
      await burst;
      expect(flushes).toEqual(['_write', '_writev']);
    } finally {
      Object.assign(proto, originals);
    }
    const stored = await Promise.all(ids.map((id) => store.get(id)));
    expect(stored.map((st) => st?.sessionId)).toEqual(ids);
    expect(await store.get('lone')).toMatchObject({ sessionId: 'lone', version: 1 });
  });

  it('sustains thousands of state changes per second across 32 concurrent sessions', async () => {
    const store = open({}, 'throughput');
    const sessions = 32;
    const durationMs = 2_000;
    let changes = 0;
    const started = performance.now();
    await Promise.all(
      Array.from({ length: sessions }, async (_, s) => {
        const id = `session-${s}`;
        await store.update(id, () => state(id));
        while (performance.now() - started < durationMs) {
          await store.update(id, (current) => {
            const base = current ?? state(id);
            return {
              ...base,
              recentlyUsedTools: [...base.recentlyUsedTools, `tool${changes % 7}`].slice(-50),
              sequenceIndex: base.sequenceIndex + 1,
            };
          });
          changes++;
        }
      }),
    );
    const perSecond = changes / ((performance.now() - started) / 1_000);
    console.log(`redis store: ${Math.round(perSecond)} state changes/s with ${sessions} concurrent sessions`);
    // The 5,000/s target is measured on an idle machine; this floor only catches collapses,
    // since other test files run in parallel with this one.
    expect(perSecond).toBeGreaterThan(1_000);
    const total = await Promise.all(Array.from({ length: sessions }, (_, s) => store.get(`session-${s}`)));
    expect(total.reduce((sum, st) => sum + (st?.sequenceIndex ?? 0), 0)).toBe(changes);
  });
});
