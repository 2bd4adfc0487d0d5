/**
 * The judgement's cost: a decision is judged once, so it does not grow with the calls running in
 * its session. With a rule whose condition is expensive (a nested macro over 300 paths, within the
 * documented bounds: a few milliseconds), a request decided while 7 or 31 independent calls run
 * costs at most twice what it costs with none running; the enumeration it replaced evaluated the
 * rule in each of the 2^n outcomes of the running calls (128 times with 7 running).
 */
import { describe, expect, it } from 'vitest';
import { compileOrchestration } from './compile.js';
import { createState, type OrchestrationState } from './state.js';
import { type ToolDecision, type TransitionContext, transition } from './transition.js';

const TOOLS = ['search', 'write'];
const PATHS = Array.from({ length: 300 }, (_, i) => `/data/file-${i}.txt`);
const plan = compileOrchestration({
  rules: [
    {
      tools: ['write'],
      when: 'args.paths.all(p, args.paths.exists_one(q, q == p))',
      effect: 'allow',
      reason: 'No path twice',
    },
  ],
  steps: [{ name: 'Work', isDefault: true }],
});
const context: TransitionContext = { now: 1_000, leaseMs: 3_600_000 };

/** A session with `n` reserved `search` calls still running. */
function running(n: number): OrchestrationState {
  let state = transition(plan, createState('s', 0), { type: 'user-message' }, context).state;
  for (let i = 0; i < n; i++) {
    state = transition(
      plan,
      state,
      { type: 'tool-requested', tool: 'search', toolCallId: `r${i}`, agentTools: TOOLS },
      context,
    ).state;
  }
  expect(state.pending?.length ?? 0).toBe(n);
  return state;
}

/** The median time of deciding a `write` on `state`, in ms, over `times` decisions. */
function decisionMs(state: OrchestrationState, times: number): number {
  const samples: number[] = [];
  for (let i = 0; i < times; i++) {
    const start = performance.now();
    const decision = transition(
      plan,
      state,
      { type: 'tool-requested', tool: 'write', toolCallId: `w${i}`, agentTools: TOOLS, args: { paths: PATHS } },
      context,
    ).decision as ToolDecision;
    samples.push(performance.now() - start);
    expect(decision).toMatchObject({ allowed: true });
  }
  samples.sort((a, b) => a - b);
  return samples[samples.length >> 1]!;
}

describe('a decision while calls run', () => {
  it('costs at most twice a decision with none running, with 7 and with 31 running', () => {
    const states = [running(0), running(7), running(31)];
    decisionMs(states[0]!, 3); // warm up the evaluator
    // Alternating, so the machine's noise hits each alike.
    const times: number[][] = [[], [], []];
    for (let round = 0; round < 5; round++) {
      for (const [i, state] of states.entries()) times[i]!.push(decisionMs(state, 3));
    }
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;
    const [none, seven, thirtyOne] = times.map(median) as [number, number, number];
    expect(seven / none, `7 running: ${seven.toFixed(2)} ms against ${none.toFixed(2)} ms`).toBeLessThan(2);
    expect(thirtyOne / none, `31 running: ${thirtyOne.toFixed(2)} ms against ${none.toFixed(2)} ms`).toBeLessThan(2);
  }, 60_000);
});
