/**
 * The conformance suite every {@link SessionStore} passes, published so third-party stores
 * can run it too. Call `testStore()` at the top level of a vitest test file:
 *
 * ```ts
 * testStore({ name: 'my-store', create: (options) => myStore(options) });
 * testStore({ name: 'memory', create: (options) => memoryStore(options), shared: false });
 * ```
 *
 * `create` gets the options of each test (a namespace, a fake clock, `maxSessions`) and must
 * pass them on; a test that fails because they were dropped says so, and what to pass.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { BatonError } from '../core/errors.js';
import { appendToLog, type LoggedEvent, type SessionLogEntry } from '../core/session-log.js';
import { createState, type OrchestrationState } from '../core/state.js';
import type { SessionStore, StoreOptions } from '../stores/types.js';
import { createFakeClock } from './fake-clock.js';

/** Options passed to a store factory by {@link testStore}. */
export interface TestStoreFactoryOptions extends StoreOptions {
  /**
   * A fresh random name for each test. Two calls with the same namespace must see the same
   * data (a second instance of the same store); calls with different namespaces must not.
   */
  namespace: string;
}

/** What {@link testStore} needs to know about the store under test. */
export interface TestStoreOptions {
  /** Shown in the suite's title. */
  name: string;
  /** Creates a store instance. The suite closes every instance it creates. */
  create: (options: TestStoreFactoryOptions) => SessionStore | Promise<SessionStore>;
  /**
   * `fake` (default): the store honours the injected `now` clock for expiry, so TTL tests
   * are instant. `real`: expiry runs on the server's own clock; the suite waits briefly.
   */
  clock?: 'fake' | 'real';
  /** False when two instances cannot share data (an in-process store). Default true. */
  shared?: boolean;
  /** Skip the whole suite, with this reason printed (e.g. a server is unreachable). */
  skip?: string | false;
}

/** What a failure caused by a factory that drops the suite's options says to do. */
const PASS_OPTIONS_ON =
  'create() must pass the options it is given on to the store, `create: (options) => yourStore(options)`';

/** Registers the store conformance tests with vitest. */
export function testStore(options: TestStoreOptions): void {
  const clockMode = options.clock ?? 'fake';
  const open: SessionStore[] = [];

  async function make(extra: Partial<TestStoreFactoryOptions> = {}): Promise<SessionStore> {
    const store = await options.create({ namespace: `t${randomUUID().slice(0, 8)}`, ...extra });
    open.push(store);
    return store;
  }

  const state = (sessionId: string, patch: Partial<OrchestrationState> = {}): OrchestrationState => ({
    ...createState(sessionId, 1_000, 60_000),
    ...patch,
  });
  const addTool = (tool: string) => (current: OrchestrationState | undefined) => {
    const base = current ?? state('unused');
    return { ...base, recentlyUsedTools: [...base.recentlyUsedTools, tool] };
  };

  const suite = options.skip ? describe.skip : describe;
  suite(`SessionStore conformance: ${options.name}`, () => {
    afterAll(async () => {
      await Promise.all(open.map((s) => s.close().catch(() => undefined)));
    });

    it('returns undefined for a session that does not exist', async () => {
      const store = await make();
      expect(await store.get('missing')).toBeUndefined();
    });

    it('creates, reads back and versions a state', async () => {
      const store = await make();
      const created = await store.update('s1', () => state('s1', { activeStep: 'A' }));
      expect(created?.version).toBe(1);
      expect(created?.activeStep).toBe('A');
      const read = await store.get('s1');
      expect(read).toEqual(created);
      const changed = await store.update('s1', (current) => current && { ...current, sequenceIndex: 2 });
      expect(changed?.version).toBe(2);
      expect((await store.get('s1'))?.sequenceIndex).toBe(2);
    });

    it('writes nothing when the updater returns the current state or undefined', async () => {
      const store = await make();
      expect(await store.update('none', () => undefined)).toBeUndefined();
      expect(await store.get('none')).toBeUndefined();
      await store.update('s', () => state('s'));
      const same = await store.update('s', (current) => current);
      expect(same?.version).toBe(1);
      const unchanged = await store.update('s', () => undefined);
      expect(unchanged?.version).toBe(1);
    });

    it('keeps the state unchanged when the updater throws', async () => {
      const store = await make();
      await store.update('s', () => state('s', { sequenceIndex: 1 }));
      await expect(
        store.update('s', () => {
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
      expect((await store.get('s'))?.sequenceIndex).toBe(1);
    });

    it('refuses a malformed state with an invalid-argument error naming the field, and keeps the stored one', async () => {
      const store = await make();
      await store.update('m', () => state('m', { sequenceIndex: 1 }));
      const malformed: [string, Partial<Record<keyof OrchestrationState, unknown>>][] = [
        ['sequenceIndex', { sequenceIndex: -1 }],
        ['sequenceIndex', { sequenceIndex: 1.5 }],
        ['recentlyUsedTools', { recentlyUsedTools: 'search' }],
        ['recentlyUsedTools', { recentlyUsedTools: [1] }],
        ['cumulativeTokenUsage', { cumulativeTokenUsage: { promptTokens: -1, completionTokens: 0, totalTokens: 0 } }],
        ['activeStep', { activeStep: 7 }],
        ['ttl', { ttl: Number.NaN }],
        ['pending', { pending: [{ kind: 'call', id: 'c', tool: 't', expiresAt: -5 }] }],
      ];
      for (const [field, patch] of malformed) {
        const error = await store
          .update('m', (current) => ({ ...(current ?? state('m')), ...patch }) as OrchestrationState)
          .then(
            () => undefined,
            (caught: unknown) => caught,
          );
        expect(BatonError.isInstance(error), `${field}: ${String(error)}`).toBe(true);
        expect((error as BatonError).code, field).toBe('invalid-argument');
        expect((error as Error).message, field).toContain(field);
      }
      expect(await store.get('m')).toMatchObject({ sequenceIndex: 1, version: 1 });
    });

    it('keeps the sessions of two namespaces apart', async () => {
      const first = await make();
      const second = await make();
      await first.update('apart', () => state('apart'));
      expect(
        await second.get('apart'),
        `a ${first.name} store created with another namespace sees this one's session: the tests would see each other's data. ${PASS_OPTIONS_ON}, and keep each namespace's data apart (its key prefix, its table).`,
      ).toBeUndefined();
    });

    it('deletes a session and says whether it existed', async () => {
      const store = await make();
      await store.update('d', () => state('d'));
      expect(await store.delete('d')).toBe(true);
      expect(await store.get('d')).toBeUndefined();
      expect(await store.delete('d')).toBe(false);
    });

    it('loses none of 200 concurrent updates to one session', async () => {
      const store = await make();
      await Promise.all(Array.from({ length: 200 }, (_, i) => store.update('hot', addTool(`t${i}`))));
      const final = await store.get('hot');
      expect(final?.recentlyUsedTools).toHaveLength(200);
      expect(new Set(final?.recentlyUsedTools).size).toBe(200);
      expect(final?.version).toBe(200);
    });

    it('stores a large state intact', async () => {
      const store = await make();
      const tools = Array.from({ length: 20_000 }, (_, i) => `tool_${i}_${'x'.repeat(10)}`);
      await store.update('big', () => state('big', { recentlyUsedTools: tools }));
      expect((await store.get('big'))?.recentlyUsedTools).toEqual(tools);
    });

    it('accepts strange session ids and keeps them apart', async () => {
      const store = await make();
      const ids = [
        'セッション🎉',
        'x'.repeat(1024),
        '../../etc/passwd',
        'a:b{c}*?[d]',
        ' spaced \n id ',
        'quote\'"`',
        '%00%',
      ];
      for (const [i, id] of ids.entries()) await store.update(id, () => state(id, { sequenceIndex: i }));
      for (const [i, id] of ids.entries()) {
        const read = await store.get(id);
        expect(read?.sessionId).toBe(id);
        expect(read?.sequenceIndex).toBe(i);
      }
    });

    it('rejects an empty session id with a clear error', async () => {
      const store = await make();
      for (const call of [() => store.get(''), () => store.update('', () => state('')), () => store.delete('')]) {
        const error = await call().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(BatonError.isInstance(error)).toBe(true);
        expect(String((error as Error).message)).toMatch(/session id is empty/);
      }
    });

    if (clockMode === 'fake') {
      it('expires a session after its sliding TTL, renewed by writes only', async () => {
        const clock = createFakeClock(1_000_000);
        const store = await make({ now: clock.now });
        await store.update('ttl', () => state('ttl', { ttl: 1_000 }));
        clock.advance(900);
        // Reads and updates that change nothing renew nothing: TTLs ride on writes.
        expect(await store.get('ttl')).toBeDefined();
        expect(await store.update('ttl', (c) => c)).toBeDefined();
        clock.advance(200);
        expect(await store.get('ttl'), clockHint(store)).toBeUndefined();
        expect(await store.update('ttl', (current) => current)).toBeUndefined();
        // Every write renews: the session lives on while it is being changed.
        await store.update('slide', () => state('slide', { ttl: 1_000 }));
        clock.advance(900);
        await store.update('slide', (c) => c && { ...c, sequenceIndex: c.sequenceIndex + 1 });
        clock.advance(900);
        expect((await store.get('slide'))?.sequenceIndex).toBe(1);
        clock.advance(101);
        expect(await store.get('slide')).toBeUndefined();
      });

      it('never expires a session whose ttl is 0, and sweeps expired ones', async () => {
        const clock = createFakeClock(1_000_000);
        const store = await make({ now: clock.now });
        await store.update('forever', () => state('forever', { ttl: 0 }));
        await store.update('brief1', () => state('brief1', { ttl: 10 }));
        await store.update('brief2', () => state('brief2', { ttl: 10 }));
        clock.advance(10 * 365 * 24 * 3600 * 1000);
        expect(await store.sweep(), clockHint(store)).toBe(2);
        expect(await store.get('forever')).toBeDefined();
        expect(await store.get('brief1')).toBeUndefined();
      });
    } else {
      it('expires a session after its TTL (server clock)', async () => {
        const store = await make();
        await store.update('ttl', () => state('ttl', { ttl: 300 }));
        expect(await store.get('ttl')).toBeDefined();
        await new Promise((resolve) => setTimeout(resolve, 600));
        expect(await store.get('ttl')).toBeUndefined();
        await store.update('forever', () => state('forever', { ttl: 0 }));
        await new Promise((resolve) => setTimeout(resolve, 50));
        expect(await store.get('forever')).toBeDefined();
      });
    }

    it('evicts the least recently used session beyond maxSessions', async () => {
      const clock = createFakeClock(5_000_000);
      const store = await make({ maxSessions: 3, now: clock.now });
      for (const id of ['a', 'b', 'c']) {
        await store.update(id, () => state(id));
        clock.advance(10);
      }
      // A write makes a more recent than b (reads do not count: they write nothing).
      await store.update('a', (c) => c && { ...c, sequenceIndex: 1 });
      clock.advance(10);
      await store.update('d', () => state('d'));
      expect(
        await store.get('b'),
        `${store.name} kept 4 sessions with maxSessions: 3. ${PASS_OPTIONS_ON} (they carry maxSessions and the clock, now).`,
      ).toBeUndefined();
      for (const id of ['a', 'c', 'd']) expect(await store.get(id)).toBeDefined();
    });

    describe('event log', () => {
      /** An updater that adds `tool` and logs it, as the manager does, keeping `capacity` entries. */
      const logged =
        (tool: string, capacity = 100, patch: Partial<OrchestrationState> = {}) =>
        (current: OrchestrationState | undefined) => {
          const base = current ?? state('unused');
          const next = { ...base, ...patch, recentlyUsedTools: [...base.recentlyUsedTools, tool] };
          const event: LoggedEvent = { type: 'tool-recorded', tool, step: undefined };
          return appendToLog(next, capacity, [{ event, state: next }], 1_000, 'm1');
        };
      const tools = (entries: readonly SessionLogEntry[]) =>
        entries.map((entry) => (entry.event.type === 'tool-recorded' ? entry.event.tool : entry.event.type));
      /** The store's log, failing clearly for a store that keeps none. */
      const readLog = (store: SessionStore, sessionId: string) => {
        if (store.readLog === undefined) throw new Error(`${store.name} keeps no event log (no readLog)`);
        return store.readLog(sessionId);
      };
      const keepsLog = async () => (await make()).readLog !== undefined;

      it('appends the entries of each write with it, in order, whole', async () => {
        const store = await make();
        if (store.readLog === undefined) {
          // A store without an event log still writes the state of an update that logs.
          await store.update('plain', logged('a'));
          expect((await store.get('plain'))?.recentlyUsedTools).toEqual(['a']);
          return;
        }
        expect(await readLog(store, 'nobody')).toEqual([]);
        await store.update('s', logged('a'));
        await store.update('s', logged('b'));
        // An update that changes nothing appends nothing.
        await store.update('s', (current) => current);
        const entries = await readLog(store, 's');
        expect(entries.map((entry) => entry.seq)).toEqual([1, 2]);
        expect(tools(entries)).toEqual(['a', 'b']);
        expect(entries[1]).toMatchObject({ turn: 1, at: 1_000, history: ['a', 'b'], index: 0, usage: [0, 0, 0] });
        expect((await store.get('s'))?.log).toMatchObject({ capacity: 100, seq: 2, turn: 1 });
      });

      it('keeps only the newest capacity entries', async () => {
        if (!(await keepsLog())) return;
        const store = await make();
        for (let i = 0; i < 12; i++) await store.update('bounded', logged(`t${i}`, 5));
        const entries = await readLog(store, 'bounded');
        expect(entries.map((entry) => entry.seq)).toEqual([8, 9, 10, 11, 12]);
        expect(tools(entries)).toEqual(['t7', 't8', 't9', 't10', 't11']);
      });

      it('appends nothing for an update that throws, and loses none of 100 concurrent logged updates', async () => {
        if (!(await keepsLog())) return;
        const store = await make();
        await store.update('hot', logged('first'));
        await store
          .update('hot', () => {
            throw new Error('boom');
          })
          .catch(() => undefined);
        await Promise.all(Array.from({ length: 100 }, (_, i) => store.update('hot', logged(`t${i}`, 1000))));
        const entries = await readLog(store, 'hot');
        // Every write's entry once, numbered without gaps in the order the writes were applied.
        expect(entries.map((entry) => entry.seq)).toEqual(Array.from({ length: 101 }, (_, i) => i + 1));
        expect(new Set(tools(entries)).size).toBe(101);
        // Each entry's history is the state's at that write: one tool longer than the entry before.
        expect(entries.map((entry) => entry.history.length)).toEqual(Array.from({ length: 101 }, (_, i) => i + 1));
        expect(entries.at(-1)!.history).toEqual((await store.get('hot'))?.recentlyUsedTools);
      });

      it('removes the log with the session, and a new session with that id starts a new log', async () => {
        if (!(await keepsLog())) return;
        const store = await make();
        await store.update('gone', logged('a'));
        await store.delete('gone');
        expect(await readLog(store, 'gone')).toEqual([]);
        await store.update('gone', (current) => {
          const fresh = current ?? state('gone');
          const event: LoggedEvent = { type: 'session-reset' };
          return appendToLog(fresh, 100, [{ event, state: fresh }], 2_000, undefined);
        });
        expect((await readLog(store, 'gone')).map((entry) => entry.seq)).toEqual([1]);
      });

      if (clockMode === 'fake') {
        it('expires and sweeps the log with its session', async () => {
          if (!(await keepsLog())) return;
          const clock = createFakeClock(1_000_000);
          const store = await make({ now: clock.now });
          await store.update('brief', logged('a', 100, { ttl: 10 }));
          expect(await readLog(store, 'brief')).toHaveLength(1);
          clock.advance(11);
          expect(await readLog(store, 'brief'), clockHint(store)).toEqual([]);
          await store.sweep();
          expect(await readLog(store, 'brief')).toEqual([]);
        });
      }
    });

    if (options.shared !== false) {
      it('reads in one instance what another instance wrote', async () => {
        const namespace = `t${randomUUID().slice(0, 8)}`;
        const first = await options.create({ namespace });
        const second = await options.create({ namespace });
        open.push(first, second);
        await first.update('shared', () => state('shared', { activeStep: 'X', recentlyUsedTools: ['a', 'b'] }));
        expect(
          await second.get('shared'),
          `two ${first.name} stores created with the same namespace do not share data. An in-process store (such as memoryStore) cannot: pass shared: false to testStore. A store on a server must keep the data of options.namespace where every instance given it finds it (its key prefix, its table); ${PASS_OPTIONS_ON}.`,
        ).toMatchObject({
          activeStep: 'X',
          recentlyUsedTools: ['a', 'b'],
          version: 1,
        });
        await Promise.all(
          Array.from({ length: 50 }, (_, i) => (i % 2 ? first : second).update('shared', addTool(`t${i}`))),
        );
        expect((await first.get('shared'))?.recentlyUsedTools).toHaveLength(52);
      });
    }
  });
}

/** What a failure caused by a store that did not use the suite's fake clock says to do. */
function clockHint(store: SessionStore): string {
  return `${store.name} did not expire on the suite's fake clock. ${PASS_OPTIONS_ON} (they carry the clock, now); a store whose server keeps the time passes clock: 'real' to testStore.`;
}
