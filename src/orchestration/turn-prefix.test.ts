/**
 * A turn applies what it buffered (completions, usage) to decide its next model step, and its
 * next write hands that result to the store, which starts from it when nothing was written
 * since, at the same time or later. These tests check the result is the one applying everything
 * again gives, that the work is really done once, and that a session another writer changed in
 * between is never decided on the turn's stale copy.
 */
import { describe, expect, it } from 'vitest';
import { ConditionRegistry } from '../core/conditions.js';
import type { OrchestrationEvent } from '../core/events.js';
import type { OrchestrationConfig } from '../core/schema.js';
import type { OrchestrationState } from '../core/state.js';
import { createFakeClock } from '../testing/fake-clock.js';
import { createOrchestrationManager, type OrchestrationManager } from './orchestration-manager.js';
import { Turn } from './turn.js';

const agentTools = ['a', 'b', 'c', 'other'];
const messages = [{ role: 'user', content: 'work on it' }];

/** A registry whose `counted` condition never matches and counts how often it is evaluated. */
function countingRegistry(): { registry: ConditionRegistry; evaluations: () => number } {
  let count = 0;
  const registry = new ConditionRegistry();
  registry.register({
    type: 'counted',
    evaluate: () => {
      count++;
      return false;
    },
  });
  return { registry, evaluations: () => count };
}

const config = {
  steps: [
    // Judged again whenever the history changes: its condition counts the transitions that do.
    { name: 'Never', conditions: [{ type: 'counted' }], availableTools: { allowed: ['other'] } },
    { name: 'Work', isDefault: true, sequence: ['a', 'b', 'c'], requireSequence: true },
  ],
} as OrchestrationConfig;

/** The same work, on the default conditions. */
const plain = {
  steps: [{ name: 'Work', isDefault: true, sequence: ['a', 'b', 'c'], requireSequence: true }],
} as OrchestrationConfig;

/** A research turn: three model steps that each call the next tool, then a last model step. */
async function researchTurn(manager: OrchestrationManager, sessionId: string): Promise<void> {
  const turn = new Turn({ manager, config, sessionId, agentTools, messages });
  for (const [i, tool] of ['a', 'b', 'c'].entries()) {
    const { decision } = await turn.stepStarted(i);
    expect(decision.allowedTools).toEqual([tool]);
    const call = await turn.request(tool, `call-${i}`, decision.allowedTools);
    expect(call.allowed).toBe(true);
    turn.completed(`call-${i}`);
    turn.usage({ inputTokens: 10, outputTokens: 5, totalTokens: 15 });
  }
  // The sequence is done: the step offers all its tools again.
  expect((await turn.stepStarted(3)).decision.allowedTools).toEqual(agentTools);
  turn.usage({ inputTokens: 10, outputTokens: 5, totalTokens: 15 });
  await turn.end();
}

/** What a session is, without the times (the two runs below run on different clocks). */
function progress(state: OrchestrationState | null) {
  return {
    activeStep: state?.activeStep,
    recentlyUsedTools: state?.recentlyUsedTools,
    sequenceIndex: state?.sequenceIndex,
    cumulativeTokenUsage: state?.cumulativeTokenUsage,
    pending: state?.pending,
    version: state?.version,
  };
}

describe('a turn writes what it buffered without applying it twice', () => {
  it('gives the store the result it would compute, and saves it the work', async () => {
    // Same millisecond throughout: the store starts from what the turn applied.
    const still = countingRegistry();
    const frozen = createFakeClock(1_000_000);
    const reusing = createOrchestrationManager({ conditions: still.registry, clock: frozen.now });
    const reusedEvents: OrchestrationEvent[] = [];
    reusing.subscribe((event) => reusedEvents.push(event));
    // A clock that steps back at every read: the store takes a prefix only when it writes at
    // the same time or later, so here every write applies its whole batch again.
    const moving = countingRegistry();
    let time = 1_000_000;
    const fresh = createOrchestrationManager({ conditions: moving.registry, clock: () => time-- });
    const freshEvents: OrchestrationEvent[] = [];
    fresh.subscribe((event) => freshEvents.push(event));

    await researchTurn(reusing, 's');
    await researchTurn(fresh, 's');

    const reused = await reusing.getStateManager().getState('s');
    expect(progress(reused)).toEqual(progress(await fresh.getStateManager().getState('s')));
    expect(progress(reused)).toMatchObject({
      recentlyUsedTools: ['a', 'b', 'c'],
      pending: undefined,
      cumulativeTokenUsage: { promptTokens: 40, completionTokens: 20, totalTokens: 60 },
    });
    // The same events, each dispatched once, in the same order.
    expect(reusedEvents.map((event) => event.type)).toEqual(freshEvents.map((event) => event.type));
    expect(reusedEvents.filter((event) => event.type === 'sequence-advanced')).toHaveLength(3);
    // Each completion's history change is judged once instead of twice.
    expect(still.evaluations()).toBeLessThan(moving.evaluations());
  });

  it('applies the buffer again to a session another writer changed since', async () => {
    const { manager, turn, errors } = await completedFirstCall('r');
    // The next model step applies the completion locally: 'b' comes next.
    expect((await turn.stepStarted(1)).decision.allowedTools).toEqual(['b']);
    // Meanwhile the session is reset: the reservation of call-0 is gone.
    await manager.resetState('r');
    await turn.end();
    // Decided on what the store holds: the completion came too late, and is reported, not recorded.
    expect(errors).toEqual([expect.objectContaining({ code: 'lease-lost', toolCallId: 'call-0' })]);
    expect((await manager.getStateManager().getState('r'))?.recentlyUsedTools).toEqual([]);
  });

  it('a completion the turn applied before its lease ended counts, when nothing came between', async () => {
    // The turn applied the completion (for its next model step) while the lease held; the write
    // comes after the lease's end, and nothing was written to the session in between: the
    // completion took effect when the turn applied it, as a write at that time would have.
    const { clock, manager, turn, errors } = await completedFirstCall('l', 10);
    clock.advance(5);
    expect((await turn.stepStarted(1)).decision.allowedTools).toEqual(['b']);
    clock.advance(10);
    await turn.end();
    expect(errors).toEqual([]);
    expect((await manager.getStateManager().getState('l'))?.recentlyUsedTools).toEqual(['a']);
  });

  it('a completion applied after its lease ended is reported and not recorded', async () => {
    const { clock, manager, turn, errors } = await completedFirstCall('k', 10);
    clock.advance(15);
    // Applied for the next model step after the lease's end: the call is released, 'a' is due again.
    expect((await turn.stepStarted(1)).decision.allowedTools).toEqual(['a']);
    await turn.end();
    expect(errors).toEqual([expect.objectContaining({ code: 'lease-lost', toolCallId: 'call-0' })]);
    expect((await manager.getStateManager().getState('k'))?.recentlyUsedTools).toEqual([]);
  });
});

/** A turn on a fake clock whose first model step called 'a', which completed (buffered, not written). */
async function completedFirstCall(sessionId: string, leaseMs?: number) {
  const clock = createFakeClock(1_000_000);
  const errors: unknown[] = [];
  const manager = createOrchestrationManager({ clock: clock.now, ...(leaseMs ? { leaseMs } : {}) });
  const turn = new Turn({ manager, config: plain, sessionId, agentTools, messages, onError: (e) => errors.push(e) });
  const { decision } = await turn.stepStarted(0);
  expect((await turn.request('a', 'call-0', decision.allowedTools)).allowed).toBe(true);
  turn.completed('call-0');
  return { clock, manager, turn, errors };
}

describe("a new session's first write", () => {
  it('starts from what the turn applied, not from another empty session', async () => {
    const { registry, evaluations } = countingRegistry();
    const clock = createFakeClock(1_000_000);
    const manager = createOrchestrationManager({ conditions: registry, clock: clock.now });
    const turn = new Turn({ manager, config, sessionId: 'new', agentTools, messages });
    const { decision } = await turn.stepStarted(0);
    expect(decision.allowedTools).toEqual(['a']);
    const applied = evaluations();
    expect(applied).toBeGreaterThan(0);
    clock.advance(3);
    // The session's first write: the message and the first model step were applied for the step
    // above, and the store had no session then or now, so they are not judged again.
    expect((await turn.request('a', 'call-0', decision.allowedTools)).allowed).toBe(true);
    expect(evaluations()).toBe(applied);
    const stored = await manager.getStateManager().getState('new');
    expect(stored).toMatchObject({ version: 1, pending: [expect.objectContaining({ id: 'call-0' })] });
  });
});

describe('two turns that begin one new session', () => {
  it('decides the second on what the first wrote, not on its own empty session', async () => {
    const clock = createFakeClock(1_000_000);
    const manager = createOrchestrationManager({ clock: clock.now });
    const first = new Turn({ manager, config: plain, sessionId: 'both', agentTools, messages });
    const second = new Turn({ manager, config: plain, sessionId: 'both', agentTools, messages });
    // Both began the session as new, and both would offer 'a'.
    const offeredFirst = (await first.stepStarted(0)).decision.allowedTools;
    const offeredSecond = (await second.stepStarted(0)).decision.allowedTools;
    expect(offeredSecond).toEqual(['a']);
    expect((await first.request('a', 'first-0', offeredFirst)).allowed).toBe(true);
    // The session is no longer new: the first turn's reservation holds 'a', so the second waits.
    const waiting = second.request('a', 'second-0', offeredSecond);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const stored = await manager.getStateManager().getState('both');
    expect(stored?.pending).toEqual([expect.objectContaining({ kind: 'call', id: 'first-0', tool: 'a' })]);
    // Once 'a' completed, the sequence expects 'b': the second 'a' is refused as a serial run would.
    first.completed('first-0');
    await first.flush();
    expect(await waiting).toMatchObject({ allowed: false, reason: { code: 'sequence', expected: ['b'] } });
  });
});
