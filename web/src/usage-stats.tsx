/**
 * The session's recently used tools (newest first) and its cumulative token usage.
 */
import type { OrchestrationSnapshot } from './types.js';

/** How many recent tools to show; the session keeps up to its template's historyLimit. */
const SHOWN = 12;

/** Recently used tools, newest first. */
export function RecentTools({ tools }: { tools: string[] }) {
  if (tools.length === 0) return <p className="muted">No tool used in this session yet.</p>;
  const newest = tools.slice(-SHOWN).reverse();
  return (
    <div>
      <ol className="recent-tools" data-testid="recent-tools" aria-label="Recently used tools, newest first">
        {newest.map((tool, index) => (
          // biome-ignore lint/suspicious/noArrayIndexKey: the history repeats tools; its position identifies an entry
          <li key={`${tools.length - index}:${tool}`} className="chip">
            {tool}
          </li>
        ))}
      </ol>
      {tools.length > SHOWN && <p className="muted">and {tools.length - SHOWN} earlier</p>}
    </div>
  );
}

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
