/**
 * The dependence table against the enumeration it replaced. Random templates (steps with every
 * built-in condition type, sequences, budgets of rules: limits per session, turn and step,
 * conditions on arguments, on the history, on the sequence position and on the step), random
 * sessions reached by racing requests, completions, failures, abandons and new messages, with up
 * to four calls running. In every state, for every agent tool: whenever the library decides a
 * request at once (no `waitFor`), every combination of the running calls' outcomes (each
 * completes, fails or is abandoned) gives the same answer, judged the old way in each; and when
 * it refuses, every outcome refuses for the same reason.
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { compileOrchestration } from '../src/core/compile.js';
import { latestUserMessage } from '../src/core/messages.js';
import type { OrchestrationConfig, Rule } from '../src/core/schema.js';
import { createState, type OrchestrationState } from '../src/core/state.js';
import {
  decideToolCall,
  runningTools,
  type TransitionContext,
  type TransitionInput,
  transition,
} from '../src/core/transition.js';
import { orchestrationConfigArb, TOOL_POOL } from '../src/testing/arbitraries.js';
import { answerIn, outcomes } from './helpers/enumeration-oracle.js';

const AGENT_TOOLS = TOOL_POOL.slice(0, 6);

const toolsArb: fc.Arbitrary<string[]> = fc.oneof(
  fc.constant<string[]>(['*']),
  fc.subarray([...AGENT_TOOLS], { minLength: 1, maxLength: 3 }),
);

const ruleArb: fc.Arbitrary<Rule> = fc.oneof(
  fc.record({
    tools: toolsArb,
    limit: fc.record({ max: fc.integer({ min: 0, max: 3 }), per: fc.constantFrom('session', 'turn', 'step') }),
    reason: fc.constant('enough'),
  }),
  fc.record({
    tools: toolsArb,
    when: fc.integer({ min: 0, max: 100 }).map((n) => `args.amount > ${n}`),
    effect: fc.constantFrom('deny' as const, 'approve' as const),
    reason: fc.constant('too much'),
  }),
  fc.record({
    tools: toolsArb,
    when: fc.integer({ min: 0, max: 4 }).map((n) => `state.recentlyUsedTools.size() > ${n}`),
    effect: fc.constant('deny' as const),
    reason: fc.constant('busy enough'),
  }),
  fc.record({
    tools: toolsArb,
    when: fc.integer({ min: 0, max: 2 }).map((n) => `state.sequenceIndex <= ${n}`),
    effect: fc.constant('allow' as const),
    reason: fc.constant('early only'),
  }),
  fc.record({
    tools: toolsArb,
    when: fc.constantFrom("state.activeStep == 'Research'", "state.activeStep != ''"),
    effect: fc.constant('deny' as const),
    reason: fc.constant('not here'),
  }),
);

type Action =
  | { kind: 'request'; tool: number; amount: number }
  | { kind: 'end'; pick: number; how: 'tool-completed' | 'tool-failed' | 'tool-abandoned' }
  | { kind: 'message'; text: number };

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('request' as const), tool: fc.nat(5), amount: fc.nat(120) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('end' as const),
      pick: fc.nat(4),
      how: fc.constantFrom(
        'tool-completed' as const,
        'tool-completed' as const,
        'tool-failed' as const,
        'tool-abandoned' as const,
      ),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('message' as const), text: fc.nat(2) }) },
);

const TEXTS = ['research the market', 'please review this', 'summarize and decide'];

const caseArb = fc.record({
  config: orchestrationConfigArb({ maxSteps: 4 }),
  rules: fc.array(ruleArb, { maxLength: 3 }),
  actions: fc.array(actionArb, { minLength: 1, maxLength: 24 }),
  probes: fc.array(fc.nat(120), { minLength: 1, maxLength: 3 }),
});

function check(
  config: OrchestrationConfig,
  state: OrchestrationState,
  context: TransitionContext,
  amounts: readonly number[],
): number {
  const plan = compileOrchestration(config);
  const all = outcomes(plan, state, context);
  let compared = 0;
  for (const tool of AGENT_TOOLS) {
    for (const amount of amounts) {
      const args = { amount };
      const call = { tool, toolCallId: 'probe', agentTools: AGENT_TOOLS, args };
      const decision = decideToolCall(plan, state, call, context);
      if (!decision.allowed && decision.waitFor !== undefined) continue;
      if (!decision.allowed && decision.reason.code === 'superseded') continue;
      compared++;
      for (const outcome of all) {
        const answer = answerIn(plan, outcome, tool, AGENT_TOOLS, args, context);
        const where = `${tool}(${amount}) with ${runningTools(state).join(', ')} running`;
        if (decision.allowed) {
          expect(answer.runs, `${where}: allowed, but an outcome refuses it`).toBe(true);
          expect(answer.denial?.code, `${where}: the would-block reason differs in an outcome`).toBe(
            decision.wouldBlock?.code,
          );
        } else {
          expect(answer.runs, `${where}: refused, but an outcome runs it`).toBe(false);
          expect(answer.denial?.code, `${where}: an outcome refuses it for another reason`).toBe(decision.reason.code);
        }
      }
    }
  }
  return compared;
}

it('whenever a request is decided at once, every outcome of the running calls gives that answer', () => {
  let compared = 0;
  let withRunning = 0;
  fc.assert(
    fc.property(caseArb, ({ config: base, rules, actions, probes }) => {
      const config: OrchestrationConfig = rules.length === 0 ? base : { ...base, rules };
      let plan: ReturnType<typeof compileOrchestration>;
      try {
        plan = compileOrchestration(config);
      } catch {
        return; // a rule the template's steps make invalid (none expected; skip rather than fail)
      }
      let state: OrchestrationState = createState('s', 0);
      let text = 0;
      let n = 0;
      const context = (): TransitionContext => ({
        now: 1_000,
        leaseMs: 60_000,
        message: latestUserMessage([{ role: 'user', content: TEXTS[text]!, id: `m${text}` }]),
      });
      const run = (input: TransitionInput) => {
        const result = transition(plan, state, input, context());
        state = result.state;
        return result.decision;
      };
      run({ type: 'user-message' });
      for (const action of actions) {
        const running = (state.pending ?? []).filter((e) => e.kind === 'call' && e.done !== true);
        if (action.kind === 'request') {
          if (running.length >= 4) continue;
          run({
            type: 'tool-requested',
            tool: AGENT_TOOLS[action.tool]!,
            toolCallId: `c${n++}`,
            agentTools: AGENT_TOOLS,
            args: { amount: action.amount },
          });
        } else if (action.kind === 'end') {
          const call = running[action.pick % Math.max(1, running.length)];
          if (call?.kind === 'call') run({ type: action.how, toolCallId: call.id });
        } else {
          text = action.text;
          run({ type: 'user-message' });
        }
        const found = check(config, state, context(), probes);
        compared += found;
        if (runningTools(state).length > 0) withRunning += found;
      }
    }),
    { numRuns: 400 },
  );
  // The property must have been put to the test, with calls running.
  expect(compared).toBeGreaterThan(5_000);
  expect(withRunning).toBeGreaterThan(1_000);
}, 120_000);
