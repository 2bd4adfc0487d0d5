/**
 * One tool call of the answer as a collapsible card: its input, then its output, its error, or
 * the orchestration's rejection (a call that was never run because the tool, or a rule, did not
 * allow it). A call that waits for a person's approval shows Approve and Deny; the answer goes
 * back to the server as the AI SDK's approval response, which runs or denies the call. A call a
 * person denied shows as declined, apart from one orchestration rejected.
 */
import type { DynamicToolUIPart, ToolUIPart } from 'ai';

/** How a tool call ended, as the card shows it. */
export type ToolCallState = 'running' | 'stopped' | 'done' | 'error' | 'rejected' | 'denied' | 'awaiting-approval';

// Baton's guard (ToolRejectedError: `Tool "search" was not run: step "X" expects ...`), or the
// AI SDK refusing a tool that orchestration did not offer for the model step (NoSuchToolError).
const REJECTED = /^Tool "[^"]*" (was not run|is not allowed)|Model tried to call unavailable tool/;

/** Whether a tool error text is Baton refusing the call (rather than the tool failing). */
export function isRejection(errorText: string): boolean {
  return REJECTED.test(errorText);
}

/**
 * Why orchestration refused a call the AI SDK reports as denied, or undefined when a person (or
 * the app's own approval policy) denied it. Orchestration refuses a call through the AI SDK's
 * approval hook: the SDK marks that approval automatic and gives Baton's reason.
 */
export function orchestrationRefusal(approval: { isAutomatic?: boolean; reason?: string }): string | undefined {
  return approval.isAutomatic === true && approval.reason !== undefined && isRejection(approval.reason)
    ? approval.reason
    : undefined;
}

/** The state of a tool part, as the card shows it; `live` while its answer still streams. */
export function toolCallState(part: ToolUIPart | DynamicToolUIPart, live: boolean): ToolCallState {
  switch (part.state) {
    case 'output-available':
      return 'done';
    case 'output-error':
      return isRejection(part.errorText) ? 'rejected' : 'error';
    case 'output-denied':
      return orchestrationRefusal(part.approval) === undefined ? 'denied' : 'rejected';
    case 'approval-requested':
      return 'awaiting-approval';
    case 'approval-responded':
      // Denied: that is its outcome, a rule's or a person's. Approved: it runs once the answer
      // reaches the server.
      if (!part.approval.approved) return orchestrationRefusal(part.approval) === undefined ? 'denied' : 'rejected';
      return live ? 'running' : 'stopped';
    default:
      // Without an outcome after the answer ended, the call was cut short (Stop, a lost connection).
      return live ? 'running' : 'stopped';
  }
}

const LABELS: Record<ToolCallState, string> = {
  running: 'running…',
  stopped: 'stopped',
  done: 'done',
  error: 'failed',
  rejected: 'rejected by orchestration',
  denied: 'declined by a person',
  'awaiting-approval': 'awaiting approval',
};

function show(value: unknown): string {
  if (value === undefined) return '(none)';
  return typeof value === 'string' ? value : JSON.stringify(value, null, 2);
}

/** Answers a call's approval request (`approval.id`). */
export type AnswerApproval = (approvalId: string, approved: boolean) => void;

/**
 * A tool call card; rejected calls and calls that wait for an approval start open, since why
 * matters. `onAnswer` (absent while an answer streams) answers an approval request.
 */
export function ToolCard({
  name,
  part,
  live,
  onAnswer,
}: {
  name: string;
  part: ToolUIPart | DynamicToolUIPart;
  live: boolean;
  onAnswer?: AnswerApproval | undefined;
}) {
  const state = toolCallState(part, live);
  // Denied without a person: the app's own approval policy said no (orchestration's refusals
  // are `rejected`).
  const byApp = state === 'denied' && 'approval' in part && part.approval?.isAutomatic === true;
  return (
    <details
      className={`tool-card tool-${state}`}
      data-testid="tool-card"
      data-tool={name}
      data-state={state}
      open={state === 'rejected' || state === 'awaiting-approval'}
    >
      <summary>
        <span className="tool-name">{name}</span>
        <span className={`badge badge-${state}`}>{byApp ? 'denied by the app' : LABELS[state]}</span>
      </summary>
      <div className="tool-body">
        <div className="tool-section">
          <div className="field-label">Input</div>
          <pre className="json">{show(part.input)}</pre>
        </div>
        {part.state === 'output-available' && (
          <div className="tool-section">
            <div className="field-label">Output</div>
            <pre className="json">{show(part.output)}</pre>
          </div>
        )}
        {part.state === 'approval-requested' && (
          <div className="tool-section approval" data-testid="approval">
            <div className="field-label">Run this call?</div>
            {part.approval.requestReason && (
              <p className="approval-reason" data-testid="approval-reason">
                {part.approval.requestReason}
              </p>
            )}
            <div className="button-row">
              <button
                type="button"
                className="primary"
                disabled={!onAnswer}
                onClick={() => onAnswer?.(part.approval.id, true)}
              >
                Approve
              </button>
              <button type="button" disabled={!onAnswer} onClick={() => onAnswer?.(part.approval.id, false)}>
                Deny
              </button>
            </div>
          </div>
        )}
        {part.state === 'output-error' && (
          <div className="tool-section">
            <div className="field-label">{state === 'rejected' ? 'Why it was not run' : 'Error'}</div>
            <pre className="json error-text">{part.errorText}</pre>
          </div>
        )}
        {state === 'rejected' && part.state !== 'output-error' && 'approval' in part && part.approval && (
          <div className="tool-section">
            <div className="field-label">Why it was not run</div>
            <pre className="json error-text">{orchestrationRefusal(part.approval)}</pre>
          </div>
        )}
      </div>
    </details>
  );
}
