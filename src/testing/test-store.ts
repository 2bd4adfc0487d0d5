/**
 * The conformance suite every {@link SessionStore} passes, published so third-party stores
 * can run it too. Call `testStore()` at the top level of a vitest test file.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { BatonError } from '../core/errors.js';
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
        expect(await store.get('ttl')).toBeUndefined();
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
        expect(await store.sweep()).toBe(2);
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
      expect(await store.get('b')).toBeUndefined();
      for (const id of ['a', 'c', 'd']) expect(await store.get(id)).toBeDefined();
    });

    if (options.shared !== false) {
      it('reads in one instance what another instance wrote', async () => {
        const namespace = `t${randomUUID().slice(0, 8)}`;
        const first = await options.create({ namespace });
        const second = await options.create({ namespace });
        open.push(first, second);
        await first.update('shared', () => state('shared', { activeStep: 'X', recentlyUsedTools: ['a', 'b'] }));
        expect(await second.get('shared')).toMatchObject({
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
