/**
 * Rolling-window limits against a reference that keeps the time of every call: whatever the
 * calls' times, however they overlap, end (completed, failed, outcome unknown) and wait for each
 * other, no window of the limit's length ever holds more than `max` calls that may have run, and
 * the count the session keeps (in buckets, see `countCall`) is never below the exact count of
 * the window, nor above the exact count of a window one bucket longer.
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { createFakeClock } from '../testing/fake-clock.js';
import { usedCount, WINDOW_BUCKETS } from './call-rules.js';
import { compileOrchestration } from './compile.js';
import { latestUserMessage } from './messages.js';
import { limitPeriod } from './rules.js';
import { createState, type OrchestrationState } from './state.js';
import { type ToolDecision, type TransitionInput, transition } from './transition.js';

const PERIODS = ['1s', '7s', '1m', '1h', '1d'] as const;
const TOOLS = ['search', 'other'];

type End = 'tool-completed' | 'tool-failed' | 'tool-abandoned';

type Action =
  /** A call of `tool`; `runs`: left running (else it ends at once, as `end`). */
  | { kind: 'call'; tool: string; runs: boolean; end: End }
  /** The running call `pick` (modulo how many run) ends. */
  | { kind: 'finish'; pick: number; end: End }
  /** The clock moves by `fraction` thousandths of the window, plus `ms`. */
  | { kind: 'tick'; fraction: number; ms: number };

const endArb = fc.constantFrom<End>('tool-completed', 'tool-completed', 'tool-failed', 'tool-abandoned');

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('call' as const),
      tool: fc.constantFrom('search', 'search', 'search', 'other'),
      runs: fc.boolean(),
      end: endArb,
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('finish' as const), pick: fc.nat(5), end: endArb }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('tick' as const),
      // Mostly short steps (within a bucket or a few), some near a whole window.
      fraction: fc.oneof(
        { weight: 2, arbitrary: fc.constant(0) },
        { weight: 3, arbitrary: fc.integer({ min: 0, max: 60 }) },
        { weight: 1, arbitrary: fc.integer({ min: 900, max: 1_100 }) },
      ),
      ms: fc.integer({ min: 0, max: 300 }),
    }),
  },
);

const caseArb = fc.record({
  max: fc.integer({ min: 1, max: 4 }),
  per: fc.constantFrom(...PERIODS),
  // Anywhere on the epoch: bucket slots are counted from it, so a window starts anywhere in one.
  start: fc.integer({ min: 0, max: 4_000_000_000_000 }),
  actions: fc.array(actionArb, { minLength: 1, maxLength: 80, size: 'max' }),
});

/** A call the reference keeps: when it was reserved, how it ended, and when its count was folded into the state. */
interface Reserved {
  readonly id: string;
  readonly reservedAt: number;
  end?: End;
  committedAt?: number;
}

it('never lets more than max calls run in any window of its length, and counts within one bucket of exact', () => {
  fc.assert(
    fc.property(caseArb, ({ max, per, start, actions }) => {
      const window = limitPeriod(per);
      if (window?.kind !== 'window') throw new Error(`not a window: ${per}`);
      const W = window.ms;
      const width = Math.max(1, Math.ceil(W / WINDOW_BUCKETS));
      const plan = compileOrchestration({
        rules: [{ tools: ['search'], limit: { max, per }, reason: 'enough' }],
        steps: [{ name: 'Work', isDefault: true }],
      });
      const rule = plan.rule('rules[0]')!;
      const clock = createFakeClock(start);
      const message = latestUserMessage([{ role: 'user', content: 'go', id: 'm1' }]);
      // No lease runs out here: a call's count is folded when it ends, as the reference assumes.
      const context = () => ({ now: clock.now(), message, leaseMs: 1_000 * W });
      let state: OrchestrationState = createState('s', start);
      const apply = (input: TransitionInput) => {
        const result = transition(plan, state, input, context());
        state = result.state;
        // A call's count is folded into the state once it and every call reserved before it
        // ended (the pending log replays in order, up to its first running call).
        for (const call of reserved) {
          if (call.end === undefined) break;
          if (call.end !== 'tool-failed') call.committedAt ??= clock.now();
        }
        return result;
      };
      const reserved: Reserved[] = [];
      const running: Reserved[] = [];
      apply({ type: 'user-message' });
      let n = 0;
      for (const action of actions) {
        if (action.kind === 'tick') {
          clock.advance(Math.round((W * action.fraction) / 1_000) + action.ms);
        } else if (action.kind === 'finish') {
          if (running.length === 0) continue;
          const [call] = running.splice(action.pick % running.length, 1);
          call!.end = action.end;
          apply({ type: action.end, toolCallId: call!.id });
        } else {
          const id = `c${n++}`;
          const decision = apply({ type: 'tool-requested', tool: action.tool, toolCallId: id, agentTools: TOOLS })
            .decision as ToolDecision;
          if (!decision.allowed || action.tool !== 'search') {
            if (decision.allowed) apply({ type: 'tool-completed', toolCallId: id });
            continue;
          }
          const call: Reserved = { id, reservedAt: clock.now() };
          reserved.push(call);
          if (action.runs) running.push(call);
          else {
            call.end = action.end;
            apply({ type: action.end, toolCallId: id });
          }
        }
        // The count kept is the exact one, rounded up by at most one bucket's width.
        const now = clock.now();
        const committed = reserved.filter((call) => call.committedAt !== undefined);
        const exact = (length: number) => committed.filter((call) => call.committedAt! > now - length).length;
        const used = usedCount(rule, state, message, now);
        expect(used, `count at ${now - start}`).toBeGreaterThanOrEqual(exact(W));
        expect(used, `count at ${now - start}`).toBeLessThanOrEqual(exact(W + width - 1));
        expect(state.counts?.['rules[0]']?.at?.length ?? 0).toBeLessThanOrEqual(WINDOW_BUCKETS + 1);
      }
      // Every call that may have run (any that did not fail, and those still running), by the
      // time it was allowed: no window of the limit's length holds more than max of them.
      const ran = reserved
        .filter((call) => call.end !== 'tool-failed')
        .map((call) => call.reservedAt)
        .sort((a, b) => a - b);
      for (let i = 0; i < ran.length; i++) {
        let inWindow = 0;
        for (let j = i; j < ran.length && ran[j]! < ran[i]! + W; j++) inWindow++;
        expect(inWindow, `calls in the ${per} from ${ran[i]! - start}`).toBeLessThanOrEqual(max);
      }
    }),
    { numRuns: 1_000 },
  );
});
