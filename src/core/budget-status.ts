/**
 * Token budgets (`budget: { totalTokens }` on the orchestration or on a step): whether the
 * session or its active step has spent its tokens, and the denial a call gets then. Apart from
 * the engine's steps and sequences because a budget reads only what `token-usage.ts` counted,
 * never the history or the sequence.
 */
import type { OrchestrationPlan } from './compile.js';
import type { ToolDenial } from './events.js';
import type { OrchestrationState } from './state.js';

/** A spent token budget. */
export interface BudgetStatus {
  /** `session`: the orchestration's budget; `step`: the active step's. */
  readonly scope: 'session' | 'step';
  readonly step: string | undefined;
  readonly limit: number;
  readonly used: number;
}

/** The spent token budget of the session or its active step, if one is spent. */
export function budgetOf(plan: OrchestrationPlan, state: OrchestrationState): BudgetStatus | undefined {
  if (!plan.hasBudgets) return undefined;
  const total = state.cumulativeTokenUsage.totalTokens;
  if (plan.tokenBudget !== undefined && total >= plan.tokenBudget) {
    return { scope: 'session', step: undefined, limit: plan.tokenBudget, used: total };
  }
  // The engine's `activeStepOf`, written out: engine.ts re-exports this module, and importing
  // it back would make the two modules load each other.
  const step = plan.step(state.activeStep);
  if (step?.tokenBudget !== undefined) {
    const used = state.stepTokens?.[step.name] ?? 0;
    if (used >= step.tokenBudget) return { scope: 'step', step: step.name, limit: step.tokenBudget, used };
  }
  return undefined;
}

/** Why a call is refused while `budget` is spent (reason code `budget`). */
export function budgetDenial(budget: BudgetStatus): ToolDenial {
  const whose = budget.scope === 'session' ? 'this session' : `step "${budget.step}"`;
  return {
    code: 'budget',
    scope: budget.scope,
    limit: budget.limit,
    used: budget.used,
    message: `the token budget of ${whose} is spent (${budget.used} of ${budget.limit} tokens); answer without tools`,
  };
}
