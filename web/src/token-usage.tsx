/**
 * The session's cumulative token usage (every model call of every turn).
 */
import type { OrchestrationSnapshot } from './types.js';

/** Cumulative token usage of the session. */
export function TokenUsage({ usage }: { usage: OrchestrationSnapshot['tokenUsage'] }) {
  const format = (n: number) => n.toLocaleString('en-US');
  return (
    <dl className="token-usage" data-testid="token-usage">
      <div>
        <dt>Prompt</dt>
        <dd>{format(usage.promptTokens)}</dd>
      </div>
      <div>
        <dt>Completion</dt>
        <dd>{format(usage.completionTokens)}</dd>
      </div>
      <div>
        <dt>Total</dt>
        <dd data-testid="token-total">{format(usage.totalTokens)}</dd>
      </div>
    </dl>
  );
}
