/**
 * The decision core's former algorithm, kept as a test oracle: every combination of the running
 * calls' outcomes (each completes, fails, or is abandoned and counted by its limits), each one
 * folded on its own, and a tool judged in each. Exponential in the running calls, which is why
 * the library no longer does it; a property test uses it to check that whenever the dependence
 * table says a request is independent of the running calls, every outcome agrees with the one
 * judgement the library makes.
 */
import { countCall, judgeRules, RuleInputs } from '../../src/core/call-rules.js';
import type { OrchestrationPlan } from '../../src/core/compile.js';
import type { MessageInfo } from '../../src/core/conditions.js';
import { budgetDenial, budgetOf, denialOf } from '../../src/core/engine.js';
import type { OrchestrationEvent, ToolDenial } from '../../src/core/events.js';
import { onMessage, recordInto, shadowOf } from '../../src/core/pending-log.js';
import type { OrchestrationState, PendingMessage } from '../../src/core/state.js';
import type { TransitionContext } from '../../src/core/transition.js';

/** How one running call ends in an outcome. */
export type Ending = 'complete' | 'fail' | 'abandon';

/** The session after every combination of endings of its running calls (3^n of them). */
export function outcomes(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  context: TransitionContext,
): OrchestrationState[] {
  const pending = state.pending ?? [];
  const running = pending.filter((entry) => entry.kind === 'call' && entry.done !== true).length;
  const out: OrchestrationState[] = [];
  const endings: Ending[] = new Array(running).fill('complete');
  const total = 3 ** running;
  for (let combination = 0; combination < total; combination++) {
    let rest = combination;
    for (let i = 0; i < running; i++) {
      endings[i] = (['complete', 'fail', 'abandon'] as const)[rest % 3]!;
      rest = Math.floor(rest / 3);
    }
    out.push(fold(plan, state, endings, context));
  }
  return out;
}

/** The log folded with running call i ending as `endings[i]`. */
function fold(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  endings: readonly Ending[],
  context: TransitionContext,
): OrchestrationState {
  const pending = state.pending ?? [];
  let current: OrchestrationState = { ...state, pending: undefined };
  const head = pending[0];
  let message = head?.kind === 'call' && head.message !== undefined ? read(head.message) : context.message;
  const events: OrchestrationEvent[] = [];
  let i = 0;
  for (const entry of pending) {
    if (entry.kind === 'message') {
      message = read(entry);
      current = onMessage(plan, current, message, events);
    } else if (entry.kind === 'used') {
      current = recordInto(plan, current, entry.tool, message, context, false, undefined, events);
    } else if (entry.kind === 'counted') {
      const at = entry.message === undefined ? message : read(entry.message);
      current = countCall(plan, current, entry.limits, at, context.now);
    } else {
      const ending = entry.done === true ? 'complete' : endings[i++]!;
      if (ending === 'complete') {
        const reserved = !shadowOf(plan, current);
        current = recordInto(plan, current, entry.tool, message, context, reserved, entry.limits, events);
      } else if (ending === 'abandon' && entry.limits !== undefined) {
        current = countCall(plan, current, entry.limits, message, context.now);
      }
    }
  }
  return current;
}

function read(message: PendingMessage): MessageInfo {
  const text = message.text ?? '';
  return message.matches === undefined
    ? { key: message.key, text, lower: text.toLowerCase() }
    : { key: message.key, text: '', lower: '', matches: new Set(message.matches) };
}

/** What a call of `tool` meets in one outcome: enforcement's reason, and whether it runs. */
export interface OutcomeAnswer {
  readonly denial: ToolDenial | undefined;
  readonly runs: boolean;
}

/** A call of `tool` with `args` judged in `outcome` as the library once judged it. */
export function answerIn(
  plan: OrchestrationPlan,
  outcome: OrchestrationState,
  tool: string,
  agentTools: readonly string[],
  args: unknown,
  context: TransitionContext,
): OutcomeAnswer {
  let denial = denialOf(plan, outcome, tool, agentTools);
  if (denial === undefined) {
    const budget = budgetOf(plan, outcome);
    if (budget !== undefined) denial = budgetDenial(budget);
  }
  if (denial === undefined && plan.hasRules) {
    const inputs = new RuleInputs({
      toolCallId: 'oracle',
      args,
      argsDigest: undefined,
      approved: false,
      context: context.ruleContext,
    });
    denial = judgeRules(plan, outcome, tool, inputs, context.message, context.now).denial;
  }
  return { denial, runs: denial === undefined || shadowOf(plan, outcome) };
}
