/**
 * `budgetSpentModel()`: what a model step gets once its session's token budget is spent. It
 * answers, without calling any provider, that the budget is spent, with no token usage: so once
 * a budget is spent no further model call is made for the session, the client reads why, and the
 * AI SDK's loop ends as after any answer without tool calls.
 *
 * Why a model and not an error: `prepareStep` can replace a step's model but cannot skip the step,
 * and an error would end the turn as a failure (a 200 whose stream says "An error occurred.")
 * where the session is fine and only out of budget.
 */
import type {
  LanguageModelV4,
  LanguageModelV4GenerateResult,
  LanguageModelV4StreamPart,
  LanguageModelV4StreamResult,
  LanguageModelV4Usage,
} from '@ai-sdk/provider';
import type { BudgetStatus } from '../core/budget-status.js';

/** The answer the client reads once a budget is spent. */
export function budgetSpentText(budget: BudgetStatus): string {
  const whose = budget.scope === 'session' ? 'this conversation' : `the step "${budget.step}"`;
  return `The token budget of ${whose} is spent (${budget.used.toLocaleString('en-US')} of ${budget.limit.toLocaleString('en-US')} tokens), so no more model calls are made for it.`;
}

const NO_USAGE: LanguageModelV4Usage = Object.freeze({
  inputTokens: { total: 0, noCache: 0, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 0, text: 0, reasoning: undefined },
}) as LanguageModelV4Usage;

/** A model that only says that `budget` is spent (see the module comment). */
export function budgetSpentModel(budget: BudgetStatus): LanguageModelV4 {
  const text = budgetSpentText(budget);
  const finishReason = { unified: 'stop', raw: 'budget-spent' } as const;
  return {
    specificationVersion: 'v4',
    provider: 'baton',
    modelId: 'budget-spent',
    supportedUrls: {},
    async doGenerate(): Promise<LanguageModelV4GenerateResult> {
      return { content: [{ type: 'text', text }], finishReason, usage: NO_USAGE, warnings: [] };
    },
    async doStream(): Promise<LanguageModelV4StreamResult> {
      const parts: LanguageModelV4StreamPart[] = [
        { type: 'stream-start', warnings: [] },
        { type: 'text-start', id: 'budget' },
        { type: 'text-delta', id: 'budget', delta: text },
        { type: 'text-end', id: 'budget' },
        { type: 'finish', finishReason, usage: NO_USAGE },
      ];
      return {
        stream: new ReadableStream<LanguageModelV4StreamPart>({
          start(controller) {
            for (const part of parts) controller.enqueue(part);
            controller.close();
          },
        }),
      };
    },
  };
}
