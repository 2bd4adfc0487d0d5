/**
 * Every tool of the agent: allowed now, or blocked and why. "Now" is the snapshot the sequence
 * strip shows, so while an answer streams both change together, before every model step.
 */
import { type LiveTool, NOT_OFFERED } from './live-tools.js';

/** How the list words a conditional rule's effect: what it may do to a call of the tool. */
const RULE_EFFECTS: Record<string, string> = {
  deny: 'may refuse',
  allow: 'allowed only if',
  approve: 'may ask a person',
  limit: 'limited',
};

/** `, reads facts quote, listed_ids and labels`: what of the session's facts and labels a rule's condition reads. */
function reads(rule: LiveTool['rules'][number]): string {
  const read: string[] = [];
  if (rule.facts !== undefined && rule.facts.length > 0) read.push(`facts ${rule.facts.join(', ')}`);
  if (rule.labels) read.push('labels');
  return read.length === 0 ? '' : `, reads ${read.join(' and ')}`;
}

/**
 * The tool list; before the first message nothing is decided yet, so it names the tools only.
 * `testIdPrefix` keeps the test ids of a second list on the page (the session timeline's) apart.
 */
export function ToolList({
  tools,
  agentTools,
  testIdPrefix = '',
}: {
  tools: LiveTool[] | null;
  agentTools: string[];
  testIdPrefix?: string;
}) {
  if (!tools) {
    return (
      <>
        <p className="muted tool-note">Your first message picks the step, and with it the allowed tools.</p>
        <ul className="tool-list" data-testid={`${testIdPrefix}tool-list`}>
          {agentTools.map((tool) => (
            <li
              key={tool}
              className="tool-status"
              data-testid={`${testIdPrefix}tool-status`}
              data-tool={tool}
              data-allowed="unknown"
            >
              <span className="tool-name">{tool}</span>
            </li>
          ))}
        </ul>
      </>
    );
  }
  return (
    <ul className="tool-list" data-testid={`${testIdPrefix}tool-list`}>
      {tools.map(({ tool, allowed, reason, wouldBlock, rules }) => (
        <li
          key={tool}
          className={`tool-status ${allowed ? 'is-allowed' : 'is-blocked'}`}
          data-testid={`${testIdPrefix}tool-status`}
          data-tool={tool}
          data-allowed={String(allowed)}
        >
          <span className="tool-name">{tool}</span>
          <span className={`badge ${allowed ? 'badge-done' : 'badge-blocked'}`}>{allowed ? 'allowed' : 'blocked'}</span>
          {wouldBlock && (
            <span
              className="tool-reason"
              data-testid={`${testIdPrefix}tool-would-block`}
              data-code={reason?.code ?? 'pending'}
            >
              would have blocked (shadow mode){reason ? `: ${reason.message}` : ''}
            </span>
          )}
          {!allowed && (
            <span
              className="tool-reason"
              data-testid={`${testIdPrefix}tool-reason`}
              data-code={reason?.code ?? 'pending'}
            >
              {reason?.message ?? NOT_OFFERED}
              {reason && 'rule' in reason ? ` (${reason.rule})` : ''}
            </span>
          )}
          {allowed && rules.length > 0 && (
            <span className="tool-reason" data-testid={`${testIdPrefix}tool-rules`}>
              {rules
                .map(
                  (rule) => `${RULE_EFFECTS[rule.effect] ?? rule.effect}: ${rule.reason} (${rule.rule}${reads(rule)})`,
                )
                .join('; ')}
            </span>
          )}
        </li>
      ))}
    </ul>
  );
}
