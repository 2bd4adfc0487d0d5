/**
 * explain() and the decisions are one answer. In every state that racing turns reach (the cases
 * of the concurrency property test, with shadow steps and budgets mixed in, calls running and
 * waiting), for every agent tool: explain() allows it exactly when a request for it (with a
 * fresh call id) is allowed and enforcement would not have blocked it, with the same reason
 * when it is not (`pending` when it waits for a running call); and explain()'s offered tools,
 * shadow flag and budget are the step decision's.
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { compileOrchestration } from '../src/core/compile.js';
import type { MessageInfo } from '../src/core/conditions.js';
import type { OrchestrationConfig } from '../src/core/schema.js';
import type { OrchestrationState } from '../src/core/state.js';
import { decideToolCall, explain, type StepDecision, transition } from '../src/core/transition.js';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { TOOL_POOL } from '../src/testing/arbitraries.js';
import { caseArb, playTurns } from './helpers/concurrency-case.js';

/** The case's config with shadow mode and budgets sprinkled on by `flags`. */
function withRollout(config: OrchestrationConfig, flags: readonly number[]): OrchestrationConfig {
  const bit = (i: number) => (flags[i % flags.length] ?? 0) % 4;
  return {
    ...config,
    ...(bit(0) === 1 ? { shadow: true } : {}),
    ...(bit(1) === 2 ? { budget: { totalTokens: 40 } } : {}),
    steps: config.steps.map((step, i) => ({
      ...step,
      ...(bit(i + 2) === 1 ? { shadow: true } : bit(i + 2) === 2 ? { shadow: false } : {}),
      ...(bit(i + 3) === 3 ? { budget: { totalTokens: 20 } } : {}),
    })),
  };
}

function checkAgreement(
  config: OrchestrationConfig,
  agentTools: readonly string[],
  state: OrchestrationState,
  message: MessageInfo | undefined,
): void {
  const plan = compileOrchestration(config);
  const context = { now: Date.now(), message };
  const view = explain(plan, state, agentTools, context);
  const step = transition(plan, state, { type: 'step-started', agentTools }, context).decision as StepDecision;
  expect(view.allowedTools).toEqual(step.allowedTools);
  expect(view.shadow).toBe(step.shadow);
  expect(view.budget).toEqual(step.budget);
  expect(view.wouldOffer).toEqual(step.wouldOffer);
  for (const tool of [...agentTools, ...TOOL_POOL.filter((t) => !agentTools.includes(t)).slice(0, 2)]) {
    const decision = decideToolCall(plan, state, { tool, toolCallId: `fresh-${tool}`, agentTools }, context);
    const explained = view.tools.find((t) => t.tool === tool);
    const runsUnblocked = decision.allowed && decision.wouldBlock === undefined;
    if (explained === undefined) {
      expect(decision.allowed, `${tool} is not the agent's, yet it may run`).toBe(false);
      continue;
    }
    expect(explained.allowed, `explain() and the decision disagree on ${tool}`).toBe(runsUnblocked);
    if (!explained.allowed) {
      const reason = decision.allowed ? decision.wouldBlock : decision.reason;
      expect(explained.reason?.code, `the reasons for ${tool} differ`).toBe(reason?.code);
    }
    // A tool is offered exactly when a call of it would run; one whose answer waits for a running
    // call is offered as the session stands without it (the call then waits, and is decided).
    if (!decision.allowed && decision.waitFor !== undefined) continue;
    expect(step.allowedTools.includes(tool), `offers and calls disagree on ${tool}`).toBe(decision.allowed);
  }
}

it('explain() agrees with every decision in every state racing turns reach', async () => {
  const manager = createOrchestrationManager();
  let checked = 0;
  await fc.assert(
    fc.asyncProperty(caseArb, fc.array(fc.nat(7), { minLength: 1, maxLength: 8 }), async (c, flags) => {
      const config = withRollout(c.config, flags);
      const rollout = { ...c, config };
      const sessionId = `agree-${crypto.randomUUID()}`;
      // Usage between requests, so budgets get spent mid-race.
      await manager.apply(config, undefined, sessionId, [
        { type: 'usage', usage: { promptTokens: 15, completionTokens: 0, totalTokens: 15 } },
      ]);
      await playTurns(
        rollout,
        rollout.turns.map((_, i) => i),
        () => manager,
        sessionId,
        undefined,
        (state, message) => {
          checkAgreement(config, c.agentTools, state, message);
          checked++;
        },
      );
    }),
    { numRuns: 300 },
  );
  expect(checked).toBeGreaterThan(1_000);
}, 120_000);
