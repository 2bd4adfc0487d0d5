/**
 * A call's ending (completion, failure, abandon) whose write failed because the store was down is
 * written again by its turn as soon as the store answers, on its own: not only with the turn's
 * next write, nor at the next lease renewal, while later turns queue behind the call's stale
 * reservation. Against a store that this test takes down and brings back; the lease is a minute,
 * so a renewal cannot be what writes it here.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { SessionDeletedError, StoreUnavailableError } from '../core/errors.js';
import type { OrchestrationConfig } from '../core/schema.js';
import { memoryStore } from '../stores/memory.js';
import type { SessionStore } from '../stores/types.js';
import { createOrchestrationManager } from './orchestration-manager.js';
import { Turn } from './turn.js';

/** `pay` runs once per session: a second one depends on how the first ends. */
const PAY_ONCE: OrchestrationConfig = {
  steps: [
    { name: 'Done', conditions: [{ type: 'tool_used', value: 'pay' }], availableTools: { denied: ['pay'] } },
    { name: 'Checkout', isDefault: true },
  ],
};
const agentTools = ['pay', 'think'];
const messages = [{ role: 'user', content: 'pay the invoice' }];

/** A memory store that can be taken down: while down, every call fails as an outage would. */
function outageStore() {
  const inner = memoryStore();
  const control = { down: false, updates: 0, failed: 0 };
  const unavailable = () => new StoreUnavailableError('outage', 'the test took it down');
  const store: SessionStore = {
    name: 'outage',
    get: (id) => (control.down ? Promise.reject(unavailable()) : inner.get(id)),
    update: (id, fn) => {
      control.updates++;
      if (!control.down) return inner.update(id, fn);
      control.failed++;
      return Promise.reject(unavailable());
    },
    delete: (id) => inner.delete(id),
    sweep: () => inner.sweep(),
    close: () => inner.close(),
  };
  return { store, inner, control };
}

/** Polls until `condition` holds; resolves to how long that took, or fails after `boundMs`. */
async function within(boundMs: number, condition: () => Promise<boolean>): Promise<number> {
  const started = performance.now();
  while (!(await condition())) {
    if (performance.now() - started > boundMs) throw new Error(`not within ${boundMs} ms`);
    await sleep(5);
  }
  return performance.now() - started;
}

describe('a call ending whose write failed in a store outage', () => {
  it.each([
    ['its own flush', 'flush'],
    ['the next request, which carried it', 'request'],
  ] as const)('is written once the store answers again, after failing in %s', async (_, how) => {
    const { store, inner, control } = outageStore();
    const manager = createOrchestrationManager({ store, leaseMs: 60_000 });
    const errors: unknown[] = [];
    const sessionId = `outage-${how}`;
    const turn = new Turn({
      manager,
      config: PAY_ONCE,
      sessionId,
      agentTools,
      messages,
      onError: (e) => errors.push(e),
    });
    await turn.begin();
    expect(await turn.request('pay', 'pay-1')).toMatchObject({ allowed: true });

    control.down = true;
    turn.completed('pay-1');
    // The write that carries the completion fails; the caller hears of it (the gateway reports
    // it, orchestrate() passes it to onError and settled()).
    const failing = how === 'flush' ? turn.flush() : turn.request('think', 'think-1');
    await expect(failing).rejects.toSatisfy(StoreUnavailableError.isInstance);
    const failedBefore = control.failed;
    await sleep(1_500);
    // Tried again while down, backing off: neither a busy loop nor only the renewal's pace.
    const retries = control.failed - failedBefore;
    expect(retries).toBeGreaterThanOrEqual(4);
    expect(retries).toBeLessThanOrEqual(12);
    // Every failed retry went to onError, none silently.
    expect(errors).toHaveLength(retries);
    expect(errors.every(StoreUnavailableError.isInstance)).toBe(true);

    control.down = false;
    // The retries are at most a second apart by now: written within that (and some slack for a
    // loaded machine), with nothing else of the turn writing; the renewal would take 15 s.
    const tookMs = await within(2_500, async () => (await inner.get(sessionId))?.pending === undefined);
    expect(tookMs).toBeLessThan(2_000);
    expect(await inner.get(sessionId)).toMatchObject({ recentlyUsedTools: ['pay'], activeStep: 'Done' });
    expect(turn.dirty).toBe(false);
    // Written: the retries stop.
    const updates = control.updates;
    await sleep(300);
    expect(control.updates).toBe(updates);
    expect(errors).toHaveLength(retries);
    await manager.close();
  });

  it('is not tried again when the failure is not an outage (the session was deleted)', async () => {
    const { store, control } = outageStore();
    const manager = createOrchestrationManager({ store, leaseMs: 60_000 });
    const errors: unknown[] = [];
    const sessionId = 'deleted-mid-call';
    const turn = new Turn({
      manager,
      config: PAY_ONCE,
      sessionId,
      agentTools,
      messages,
      onError: (e) => errors.push(e),
    });
    await turn.begin();
    expect(await turn.request('pay', 'pay-1')).toMatchObject({ allowed: true });
    await manager.removeSession(sessionId);
    turn.completed('pay-1');
    await expect(turn.flush()).rejects.toSatisfy(SessionDeletedError.isInstance);
    const updates = control.updates;
    await sleep(300);
    // Trying again cannot bring a deleted session back: nothing more is written or reported.
    expect(control.updates).toBe(updates);
    expect(errors).toEqual([]);
    await manager.close();
  });
});
