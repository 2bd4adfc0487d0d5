/**
 * The session's cumulative token usage (every model call of every turn).
 */
import type { OrchestrationSnapshot } from './types.js';

/** Cumulative token usage of the session; `testIdPrefix` keeps a second one's test ids apart. */
export function TokenUsage({
  usage,
  testIdPrefix = '',
}: {
  usage: OrchestrationSnapshot['tokenUsage'];
  testIdPrefix?: string;
}) {
  const format = (n: number) => n.toLocaleString('en-US');
  return (
    <dl className="token-usage" data-testid={`${testIdPrefix}token-usage`}>
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
        <dd data-testid={`${testIdPrefix}token-total`}>{format(usage.totalTokens)}</dd>
      </div>
    </dl>
  );
}
