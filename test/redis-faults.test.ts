/**
 * The Redis store against redis-server processes this file starts and kills: an outage in
 * the middle of traffic (calls fail fast with StoreUnavailableError, the store recovers, and
 * with an fsync-always append-only file no acknowledged write is lost), and a three-node
 * Redis Cluster running the whole conformance suite.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../src/core/errors.js';
import { appendToLog } from '../src/core/session-log.js';
import { createState, type OrchestrationState } from '../src/core/state.js';
import { redisSessionKey, redisStore } from '../src/stores/redis.js';
import type { SessionStore } from '../src/stores/types.js';
import { testStore } from '../src/testing/test-store.js';
import { freePort } from './helpers/free-port.js';
import { redisServerRuns, startRedisServer, stopProcess as stop } from './helpers/redis-server.js';
import { serviceAvailable } from './helpers/services.js';

const skip = await serviceAvailable('redis', redisServerRuns);

const children = new Set<ChildProcess>();
const directories: string[] = [];

afterAll(async () => {
  await Promise.all([...children].map((child) => stop(child)));
  await Promise.all(directories.map((dir) => rm(dir, { recursive: true, force: true })));
});

async function temporaryDirectory(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'baton-redis-'));
  directories.push(dir);
  return dir;
}

/** Starts redis-server on `port` (stopped after the file) and resolves once it answers PING. */
function startServer(port: number, dir: string, extra: string[] = []): Promise<ChildProcess> {
  return startRedisServer(port, dir, extra, (child) => {
    children.add(child);
    child.once('exit', () => children.delete(child));
  });
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const state = (sessionId: string, patch: Partial<OrchestrationState> = {}): OrchestrationState => ({
  ...createState(sessionId, 1_000, 0),
  ...patch,
});

/** Every element of `sub` appears in `list`, in the same order. */
function isSubsequence(sub: string[], list: string[]): boolean {
  let i = 0;
  for (const item of list) if (item === sub[i]) i++;
  return i === sub.length;
}

/**
 * Asserts that every kind of call, and a queue of calls on one session, rejects with a
 * StoreUnavailableError naming the store well within 3 seconds.
 */
async function expectFastFailures(store: SessionStore): Promise<void> {
  const calls = [
    () => store.get('session-0'),
    () => store.update('session-0', (current) => current),
    () => store.update('fresh', () => state('fresh')),
    // Not a session under verification: a timed-out command may still run once a hung
    // server resumes, and a late delete would legitimately remove acknowledged writes.
    () => store.delete('fresh'),
    // Twenty calls queued behind one another on a session share one timeout.
    async () => {
      const outcomes = await Promise.allSettled(
        Array.from({ length: 20 }, () => store.update('session-2', (current) => current)),
      );
      const reasons = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason] : []));
      expect(reasons).toHaveLength(20);
      throw reasons[reasons.length - 1];
    },
  ];
  for (const call of calls) {
    const started = performance.now();
    const error = await call().then(
      () => expect.fail('a call succeeded while Redis was down'),
      (e: unknown) => e,
    );
    expect(performance.now() - started).toBeLessThan(3_000);
    expect(StoreUnavailableError.isInstance(error)).toBe(true);
    expect((error as StoreUnavailableError).store).toBe('redis');
  }
}

describe.skipIf(skip)('redis store during a Redis outage', () => {
  it('fails fast while the server hangs or is down, recovers, and loses no acknowledged write', async () => {
    const port = await freePort();
    const dir = await temporaryDirectory();
    const durable = ['--appendonly', 'yes', '--appendfsync', 'always'];
    let server = await startServer(port, dir, durable);
    const store = redisStore({ url: `redis://127.0.0.1:${port}`, commandTimeoutMs: 1_000, prefix: 'faults:' });

    // Eight writers, one per session, each appending numbered tools for as long as `running`.
    const sessions = Array.from({ length: 8 }, (_, i) => `session-${i}`);
    const attempted = new Map<string, string[]>(sessions.map((id) => [id, []]));
    const acknowledged = new Map<string, string[]>(sessions.map((id) => [id, []]));
    const failures: { ms: number; error: unknown }[] = [];
    let running = true;
    let acknowledgedAfterRestart = 0;
    let restarted = false;
    const writers = sessions.map(async (id) => {
      for (let n = 0; running; n++) {
        const tool = `${id}-t${n}`;
        attempted.get(id)?.push(tool);
        const started = performance.now();
        try {
          await store.update(id, (current) => {
            const base = current ?? state(id);
            return { ...base, recentlyUsedTools: [...base.recentlyUsedTools, tool] };
          });
          acknowledged.get(id)?.push(tool);
          if (restarted) acknowledgedAfterRestart++;
        } catch (error) {
          failures.push({ ms: performance.now() - started, error });
          await pause(20);
        }
      }
    });

    await pause(500);
    const acknowledgedBeforeOutage = [...acknowledged.values()].reduce((sum, tools) => sum + tools.length, 0);
    expect(acknowledgedBeforeOutage).toBeGreaterThan(50);

    // A server that stops answering (the connection stays open, replies never come).
    process.kill(server.pid ?? 0, 'SIGSTOP');
    await expectFastFailures(store);
    process.kill(server.pid ?? 0, 'SIGCONT');
    await pause(300);
    expect((await store.update('session-3', (current) => current))?.sessionId).toBe('session-3');

    // A server that is gone (connections refused until it restarts).
    await stop(server, 'SIGKILL');
    await expectFastFailures(store);
    await pause(300);

    server = await startServer(port, dir, durable);
    restarted = true;
    // The store reconnects by itself; the first call after the restart already succeeds.
    expect((await store.get('session-0'))?.sessionId).toBe('session-0');
    await pause(700);
    running = false;
    await Promise.all(writers);

    const slowest = Math.max(...failures.map((f) => f.ms));
    console.log(
      `redis outage: ${acknowledgedBeforeOutage} writes acknowledged before the kill, ${failures.length} calls failed ` +
        `(slowest after ${Math.round(slowest)} ms), ${acknowledgedAfterRestart} acknowledged after the restart`,
    );
    expect(failures.length).toBeGreaterThan(0);
    for (const { ms, error } of failures) {
      expect(StoreUnavailableError.isInstance(error)).toBe(true);
      expect((error as StoreUnavailableError).store).toBe('redis');
      expect(ms).toBeLessThan(3_000);
    }
    expect(acknowledgedAfterRestart).toBeGreaterThan(0);

    // Kill the server once more, without warning: fsync-always means the AOF has every reply.
    await stop(server, 'SIGKILL');
    server = await startServer(port, dir, durable);
    const check = redisStore({ url: `redis://127.0.0.1:${port}`, prefix: 'faults:' });
    try {
      for (const id of sessions) {
        const stored = await check.get(id);
        const tools = stored?.recentlyUsedTools ?? [];
        // Nothing acknowledged is missing; a failed call may or may not have landed (its
        // reply was lost), but nothing was written twice or out of order.
        expect(isSubsequence(acknowledged.get(id) ?? [], tools)).toBe(true);
        expect(isSubsequence(tools, attempted.get(id) ?? [])).toBe(true);
        expect(stored?.version).toBe(tools.length);
      }
    } finally {
      await check.close();
      await store.close();
      await stop(server, 'SIGTERM');
    }
  });
});

describe.skipIf(skip)('redis store on a three-node Redis Cluster', () => {
  let cluster: Cluster | undefined;
  const ports: number[] = [];

  beforeAll(async () => {
    for (let i = 0; i < 3; i++) ports.push(await freePort());
    await Promise.all(
      ports.map(async (port) =>
        startServer(port, await temporaryDirectory(), [
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          'nodes.conf',
          '--appendonly',
          'no',
        ]),
      ),
    );
    const nodes = ports.map((port) => new Redis(port, '127.0.0.1'));
    try {
      const ranges: [number, number][] = [
        [0, 5460],
        [5461, 10922],
        [10923, 16383],
      ];
      await Promise.all(nodes.map((node, i) => node.call('CLUSTER', 'ADDSLOTSRANGE', ...(ranges[i] ?? []))));
      for (const port of ports.slice(1)) await nodes[0]?.call('CLUSTER', 'MEET', '127.0.0.1', String(port));
      const deadline = Date.now() + 15_000;
      for (;;) {
        const infos = await Promise.all(nodes.map((node) => node.call('CLUSTER', 'INFO')));
        if (infos.every((info) => String(info).includes('cluster_state:ok'))) break;
        if (Date.now() > deadline) throw new Error('the test cluster did not converge');
        await pause(100);
      }
    } finally {
      for (const node of nodes) node.disconnect();
    }
    cluster = new Cluster([{ host: '127.0.0.1', port: ports[0] ?? 0 }]);
    await new Promise((resolve) => cluster?.once('ready', resolve));
  });

  afterAll(async () => {
    await cluster?.quit();
  });

  testStore({
    name: 'redis (cluster)',
    clock: 'real',
    create: ({ namespace, ...o }) => {
      if (cluster === undefined) throw new Error('the test cluster is not running');
      return redisStore({ client: cluster, prefix: `${namespace}:`, ...o });
    },
  });

  it('keeps each session key in the slot of its escaped id, spreads sessions over the nodes, sweeps the index', async () => {
    if (cluster === undefined) throw new Error('the test cluster is not running');
    const store: SessionStore = redisStore({ client: cluster, prefix: 'slots:', maxSessions: 100 });
    const ids = Array.from({ length: 30 }, (_, i) => `s{${i}}`);
    for (const id of ids) await store.update(id, () => state(id, { activeStep: id }));
    const node = new Redis(ports[0] ?? 0, '127.0.0.1');
    try {
      const slots = new Set<number>();
      for (const id of ids) {
        const key = redisSessionKey(id, 'slots:');
        const tag = key.slice(key.indexOf('{') + 1, key.indexOf('}'));
        const slot = Number(await node.call('CLUSTER', 'KEYSLOT', key));
        expect(slot).toBe(Number(await node.call('CLUSTER', 'KEYSLOT', tag)));
        slots.add(Math.floor(slot / 5461));
        expect((await store.get(id))?.activeStep).toBe(id);
      }
      expect(slots.size).toBe(3);
      expect(await store.delete(ids[0] ?? '')).toBe(true);
      expect(await cluster.zcard('slots:lru')).toBe(ids.length - 1);
      // sweep() checks each indexed key on its own node.
      for (const id of ['brief{1}', 'brief{2}', 'brief{3}']) await store.update(id, () => state(id, { ttl: 50 }));
      await pause(150);
      expect(await store.sweep()).toBe(3);
      expect(await cluster.zcard('slots:lru')).toBe(ids.length - 1);
    } finally {
      node.disconnect();
      await store.close();
    }
  });

  it("keeps each event log in its session's slot, and evicts and deletes it with the session", async () => {
    if (cluster === undefined) throw new Error('the test cluster is not running');
    // On a Cluster the LRU index lives in another slot: eviction deletes the evicted session's
    // keys in round trips of their own, the log's among them.
    const store: SessionStore = redisStore({ client: cluster, prefix: 'logs:', maxSessions: 2 });
    const logged = (id: string) => (current: OrchestrationState | undefined) => {
      const next = { ...(current ?? state(id)), recentlyUsedTools: [id] };
      return appendToLog(
        next,
        10,
        [{ event: { type: 'tool-recorded', tool: id, step: undefined }, state: next }],
        1,
        'm',
      );
    };
    const logKey = (id: string) => `${redisSessionKey(id, 'logs:')}:log`;
    const node = new Redis(ports[0] ?? 0, '127.0.0.1');
    try {
      const ids = ['a{1}', 'b{2}', 'c{3}'];
      for (const id of ids) {
        await store.update(id, logged(id));
        const slot = Number(await node.call('CLUSTER', 'KEYSLOT', logKey(id)));
        expect(slot).toBe(Number(await node.call('CLUSTER', 'KEYSLOT', redisSessionKey(id, 'logs:'))));
      }
      expect(await cluster.exists(logKey('a{1}'))).toBe(0); // evicted when c{3} came
      expect(await store.readLog?.('a{1}')).toEqual([]);
      expect((await store.readLog?.('c{3}'))?.map((entry) => entry.seq)).toEqual([1]);
      expect(await store.delete('c{3}')).toBe(true);
      expect(await cluster.exists(logKey('c{3}'))).toBe(0);
      expect(await cluster.exists(logKey('b{2}'))).toBe(1);
    } finally {
      node.disconnect();
      await store.close();
    }
  });
});
