import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { configErrorOf } from '../../test/helpers/config-errors.js';
import { InvalidArgumentError } from '../core/errors.js';
import { createState } from '../core/state.js';
import { createFakeClock } from '../testing/fake-clock.js';
import { testStore } from '../testing/test-store.js';
import { memoryStore } from './memory.js';

testStore({ name: 'memory', create: (options) => memoryStore(options), shared: false });

describe('memoryStore', () => {
  it('rejects a maxSessions below 1', () => {
    expect(() => memoryStore({ maxSessions: 0 })).toThrow(/maxSessions/);
  });

  it('refuses an option it does not know, naming it and the factory, with a did-you-mean when close', () => {
    // `sweepIntervalMS: 0` was ignored without a word: the sweep timer kept running.
    const misspelt = configErrorOf(() => memoryStore({ sweepIntervalMS: 0 } as never));
    expect(misspelt.message).toContain('Invalid memoryStore() options');
    expect(misspelt.issues).toEqual([
      expect.objectContaining({
        path: 'sweepIntervalMS',
        message: 'unknown option "sweepIntervalMS"',
        hint: 'did you mean "sweepIntervalMs"?',
      }),
    ]);
    const far = configErrorOf(() => memoryStore({ ttlSecond: 60, maxSesions: 5 } as never));
    expect(far.message).toContain('ttlSecond: unknown option "ttlSecond"');
    expect(far.message).toContain('maxSesions: unknown option "maxSesions"');
    expect(far.message).toContain('did you mean "maxSessions"?');
    expect(() => memoryStore(null as never)).toThrow(/Invalid memoryStore\(\) options/);
  });

  it('refuses a sweep interval or a clock of the wrong type, when it is created', () => {
    for (const sweepIntervalMs of [Number.NaN, -1, 2 ** 31, '1000']) {
      const attempt = () => memoryStore({ sweepIntervalMs } as never);
      expect(attempt).toThrow(InvalidArgumentError);
      expect(attempt).toThrow(/Invalid sweepIntervalMs: expected milliseconds from 0 \(no timer\)/);
    }
    expect(() => memoryStore({ now: 1_000 } as never)).toThrow(
      'Invalid now: expected a function returning milliseconds, got number',
    );
  });

  it('still takes every option it knows, and the namespace testStore() passes', async () => {
    const store = memoryStore({ maxSessions: 2, now: () => 0, sweepIntervalMs: 0, namespace: 'ignored' });
    await store.close();
    await memoryStore().close();
  });

  it('does not keep the process alive with its sweep timer', () => {
    // A child that creates a store and never closes it must still exit on its own.
    const script = `import { memoryStore } from ${JSON.stringify(new URL('./memory.ts', import.meta.url).pathname)};
      memoryStore({ sweepIntervalMs: 5 }); console.log('created');`;
    const started = Date.now();
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(out.trim()).toBe('created');
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it('forgets a session removed right after it was read (delete, expiry, sweep, eviction)', async () => {
    let time = 0;
    const store = memoryStore({ now: () => time, maxSessions: 2, sweepIntervalMs: 0 });
    const write = (id: string, ttl = 10) =>
      store.update(id, (s) => ({ ...(s ?? createState(id, time, ttl)), sequenceIndex: 1 }));
    await write('a');
    expect(await store.get('a')).toBeDefined();
    await store.delete('a');
    expect(await store.get('a')).toBeUndefined();
    expect((await write('a'))?.version).toBe(1);

    time = 20; // 'a' expired: read again right after, it stays gone
    expect(await store.get('a')).toBeUndefined();
    expect(await store.get('a')).toBeUndefined();

    await write('b', 5);
    expect(await store.get('b')).toBeDefined();
    time = 30;
    expect(await store.sweep()).toBe(1);
    expect(store.peek?.('b')).toBeNull();

    await write('c', 100);
    expect(await store.get('c')).toBeDefined();
    await write('d', 100);
    await write('e', 100); // evicts 'c', the least recently used
    expect(await store.get('c')).toBeUndefined();
    await store.close();
  });

  it('sweeps expired sessions on its timer', async () => {
    let time = 0;
    const store = memoryStore({ now: () => time, sweepIntervalMs: 5 });
    await store.update('a', () => createState('a', 0, 10));
    time = 100;
    await new Promise((resolve) => setTimeout(resolve, 30));
    // Swept by the timer: a manual sweep finds nothing left to remove.
    expect(await store.sweep()).toBe(0);
    await store.close();
  });

  it('slides the TTL from each write, whether or not the state is stamped with the write time', async () => {
    // The state manager stamps lastAccessed with the time it writes at; other updaters may not.
    // Either way a session lives `ttl` after its latest write, by the store's clock.
    const clock = createFakeClock(1_000_000);
    const store = memoryStore({ now: clock.now, sweepIntervalMs: 0 });
    await store.update('s', () => createState('s', clock.now(), 1_000));
    clock.advance(900);
    await store.update('s', (c) => c && { ...c, sequenceIndex: 1, lastAccessed: 5 });
    clock.advance(900);
    expect((await store.get('s'))?.sequenceIndex).toBe(1);
    await store.update('s', (c) => c && { ...c, sequenceIndex: 2, lastAccessed: clock.now() });
    clock.advance(999);
    expect(store.peek?.('s')?.sequenceIndex).toBe(2);
    expect(await store.sweep()).toBe(0);
    clock.advance(1);
    expect(store.peek?.('s')).toBeNull();
    // A state stamped later than its write does not outlive its TTL either.
    await store.update('t', () => ({ ...createState('t', clock.now(), 1_000), lastAccessed: clock.now() + 5_000 }));
    clock.advance(1_000);
    expect(await store.sweep()).toBe(1);
    expect(await store.get('t')).toBeUndefined();
    await store.close();
  });
});
