/**
 * Replays of a turn under a durable-execution engine, as a property of the one transition: for
 * random rules (limits per turn and per session, conditions on arguments), random calls (some
 * tools fail) and a random crash point (between calls, or while a call runs), replaying the
 * whole turn with its `turnId` from the state the crash left gives every call the decision the
 * uninterrupted run gave it, runs no call twice, and ends in the state the uninterrupted run
 * ended in.
 *
 * The replay acts as `orchestrate()` does under an engine: it requests every call again with
 * the same id; a call answered `replayed: 'settled'` is not completed or failed again (its
 * outcome is recorded), any other allowed call is completed or failed as its tool did.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileOrchestration } from '../src/core/compile.js';
import { latestUserMessage } from '../src/core/messages.js';
import type { OrchestrationConfig, Rule } from '../src/core/schema.js';
import { createState, type OrchestrationState } from '../src/core/state.js';
import { type ToolDecision, type TransitionContext, type TransitionInput, transition } from '../src/core/transition.js';

const TOOLS = ['pay', 'refund', 'search'];
const TURN = 'workflow-1';
const message = latestUserMessage([{ role: 'user', content: 'pay what is due', id: 'm1' }]);
const context: TransitionContext = { now: 1_000, message, leaseMs: 60_000 };

interface Call {
  tool: string;
  amount: number;
  fails: boolean;
}

const ruleArb: fc.Arbitrary<Rule> = fc.oneof(
  fc.integer({ min: 1, max: 3 }).map((max) => ({
    tools: ['pay'],
    limit: { max, per: 'turn' },
    reason: 'pay limit',
  })),
  fc.integer({ min: 1, max: 4 }).map((max) => ({
    tools: ['*'],
    limit: { max, per: 'session' },
    reason: 'call limit',
  })),
  fc.integer({ min: 0, max: 150 }).map((t) => ({
    tools: ['pay'],
    when: `args.amount > ${t}`,
    effect: 'deny' as const,
    reason: 'too much',
  })),
  fc.integer({ min: 0, max: 150 }).map((t) => ({
    tools: ['refund'],
    when: `args.amount <= ${t}`,
    effect: 'allow' as const,
    reason: 'small refunds',
  })),
);
const callArb: fc.Arbitrary<Call> = fc.record({
  tool: fc.constantFrom(...TOOLS),
  amount: fc.integer({ min: 0, max: 200 }),
  fails: fc.boolean(),
});

/** What a decision says, as the model reads it. */
const said = (decision: ToolDecision) =>
  decision.allowed
    ? { allowed: true }
    : { allowed: false, code: decision.reason.code, message: decision.reason.message, instead: decision.allowedTools };

function harness(config: OrchestrationConfig) {
  const plan = compileOrchestration(config);
  const apply = (state: OrchestrationState, input: TransitionInput) => transition(plan, state, input, context);
  const request = (state: OrchestrationState, call: Call, id: string) =>
    apply(state, {
      type: 'tool-requested',
      tool: call.tool,
      toolCallId: id,
      agentTools: TOOLS,
      args: { amount: call.amount },
      turnId: TURN,
    });
  return { apply, request };
}

describe('a turn replayed with its turnId after a crash', () => {
  it('gets every decision back, runs no call twice and ends where the uninterrupted run ended', () => {
    fc.assert(
      fc.property(
        fc.array(ruleArb, { maxLength: 4 }),
        fc.array(callArb, { minLength: 1, maxLength: 8 }),
        fc.nat(),
        fc.boolean(),
        (rules, calls, crashAt, midCall) => {
          const { apply, request } = harness({ rules, steps: [{ name: 'Work', isDefault: true }] });
          const begin = (state: OrchestrationState) => apply(state, { type: 'user-message' }).state;
          const finish = (state: OrchestrationState, call: Call, id: string) =>
            apply(state, { type: call.fails ? 'tool-failed' : 'tool-completed', toolCallId: id }).state;

          // The uninterrupted run (the reference), and the state the crashed run left: it ran
          // the calls before the crash point, and with midCall also the one at it, whose
          // outcome was never written.
          const crash = crashAt % (calls.length + 1);
          let state = begin(createState('s', 0));
          let crashed: OrchestrationState | undefined;
          const original: ReturnType<typeof said>[] = [];
          const allowed = new Set<string>();
          /** Bodies run, per call id: by the crashed run, then by the replay. */
          const bodies = new Map<string, number>();
          calls.forEach((call, i) => {
            const id = `c${i}`;
            if (i === crash) crashed = state;
            const result = request(state, call, id);
            const decision = result.decision as ToolDecision;
            original.push(said(decision));
            state = result.state;
            if (!decision.allowed) return;
            allowed.add(id);
            if (i < crash || (i === crash && midCall)) bodies.set(id, 1);
            if (i === crash && midCall) crashed = state;
            state = finish(state, call, id);
          });
          const uninterrupted = state;
          crashed ??= state;

          // The replay, from the state the crash left: the same message, the same calls.
          state = begin(crashed);
          calls.forEach((call, i) => {
            const id = `c${i}`;
            const result = request(state, call, id);
            const decision = result.decision as ToolDecision;
            expect(said(decision), `call ${id} (${call.tool} ${call.amount})`).toEqual(original[i]);
            state = result.state;
            if (!decision.allowed) return;
            // The tool is the engine's step: its body runs unless the crashed run ran it.
            if (!bodies.has(id)) bodies.set(id, 1);
            if (decision.replayed !== 'settled') state = finish(state, call, id);
          });
          // Exactly the calls the uninterrupted run allowed ran, each once.
          expect(new Set(bodies.keys())).toEqual(allowed);
          expect(state.pending).toBeUndefined();
          expect(state.recentlyUsedTools).toEqual(uninterrupted.recentlyUsedTools);
          expect(state.counts).toEqual(uninterrupted.counts);
          expect(new Set(state.toolCallIds)).toEqual(new Set(uninterrupted.toolCallIds));
        },
      ),
      { numRuns: 1_000 },
    );
  });
});
