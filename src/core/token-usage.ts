/**
 * Counting the tokens a session spends: a provider's usage report normalized (the seeds and the
 * AI SDK name the counts differently, and providers report odd values) and added to the session,
 * in total and per step. Kept apart from the engine because it is arithmetic on reports, not a
 * decision: budgets (`budget-status.ts`) read what is counted here.
 */
import type { OrchestrationState, TokenUsage } from './state.js';

/** Token usage as the seeds (`promptTokens`) or the AI SDK (`inputTokens`) report it. */
export interface TokenUsageInput {
  promptTokens?: number | undefined;
  completionTokens?: number | undefined;
  inputTokens?: number | undefined;
  outputTokens?: number | undefined;
  totalTokens?: number | undefined;
}

/** Normalizes a usage report: AI SDK names map to the seed's; a missing total is the sum. */
export function normalizeUsage(usage: TokenUsageInput): TokenUsage {
  const promptTokens = tokenCount(usage.promptTokens ?? usage.inputTokens);
  const completionTokens = tokenCount(usage.completionTokens ?? usage.outputTokens);
  const totalTokens =
    usage.totalTokens === undefined ? addCounts(promptTokens, completionTokens) : tokenCount(usage.totalTokens);
  return { promptTokens, completionTokens, totalTokens };
}

/**
 * A provider's reported count as a token count: a negative, NaN or missing value counts nothing
 * (it must never refund a budget), a fraction counts as the next whole token, and a count
 * saturates at the largest safe integer (the stores accept only non-negative safe integers).
 */
function tokenCount(value: number | undefined): number {
  if (value === undefined || !(value > 0)) return 0;
  return Math.min(Math.ceil(value), Number.MAX_SAFE_INTEGER);
}

/** `a + b`, saturating at the largest safe integer: a sum past it would make every later write refused. */
function addCounts(a: number, b: number): number {
  return Math.min(a + b, Number.MAX_SAFE_INTEGER);
}

/**
 * Adds one model call's token usage to the session: to its cumulative usage, and to the tokens
 * of the step active now (`stepTokens`), which step budgets are checked against. Every step is
 * counted, whether or not it has a budget, so that usage needs no template to be counted right:
 * the seed API's `addTokenUsage(sessionId, usage)` and the model loop's `usage` input are one
 * function.
 */
export function addTokenUsage(state: OrchestrationState, usage: TokenUsage): OrchestrationState {
  if (usage.promptTokens === 0 && usage.completionTokens === 0 && usage.totalTokens === 0) return state;
  const c = state.cumulativeTokenUsage;
  const step = state.activeStep;
  return {
    ...state,
    cumulativeTokenUsage: {
      promptTokens: addCounts(c.promptTokens, usage.promptTokens),
      completionTokens: addCounts(c.completionTokens, usage.completionTokens),
      totalTokens: addCounts(c.totalTokens, usage.totalTokens),
    },
    stepTokens:
      step === undefined || usage.totalTokens === 0
        ? state.stepTokens
        : { ...state.stepTokens, [step]: addCounts(state.stepTokens?.[step] ?? 0, usage.totalTokens) },
  };
}
