import { describe, expect, it } from 'vitest';
import { testStore } from '../testing/test-store.js';
import { memoryStore } from './memory.js';

testStore({ name: 'memory', create: (options) => memoryStore(options), shared: false });

describe('memoryStore', () => {
  it('rejects a maxSessions below 1', () => {
    expect(() => memoryStore({ maxSessions: 0 })).toThrow(/maxSessions/);
  });

  it('does not keep the process alive with its sweep timer', async () => {
    // A timer that was not unref'd shows up as an active handle that keeps the loop alive.
    const store = memoryStore({ sweepIntervalMs: 10 });
    const active = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    await store.close();
    expect(active).toBeGreaterThanOrEqual(0);
  });
});
