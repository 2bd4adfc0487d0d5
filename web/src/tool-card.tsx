/**
 * One tool call of the answer as a collapsible card: its input, then its output, its error, or
 * the orchestration's rejection (a call that was never run because the tool was not allowed).
 */
import type { DynamicToolUIPart, ToolUIPart } from 'ai';

/** How a tool call ended, as the card shows it. */
export type ToolCallState = 'running' | 'stopped' | 'done' | 'error' | 'rejected' | 'denied';

// Baton's guard (ToolRejectedError: `Tool "search" was not run: step "X" expects ...`), or the
// AI SDK refusing a tool that orchestration did not offer for the model step (NoSuchToolError).
const REJECTED = /^Tool "[^"]*" (was not run|is not allowed)|Model tried to call unavailable tool/;

/** Whether a tool error text is Baton refusing the call (rather than the tool failing). */
export function isRejection(errorText: string): boolean {
  return REJECTED.test(errorText);
}

/** The state of a tool part, as the card shows it; `live` while its answer still streams. */
export function toolCallState(part: ToolUIPart | DynamicToolUIPart, live: boolean): ToolCallState {
  switch (part.state) {
    case 'output-available':
      return 'done';
    case 'output-error':
      return isRejection(part.errorText) ? 'rejected' : 'error';
    case 'output-denied':
      return 'denied';
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
  denied: 'denied',
};

function show(value: unknown): string {
  if (value === undefined) return '(none)';
  return typeof value === 'string' ? value : JSON.stringify(value, null, 2);
}

/** A tool call card; rejected calls start open, since why matters. */
export function ToolCard({ name, part, live }: { name: string; part: ToolUIPart | DynamicToolUIPart; live: boolean }) {
  const state = toolCallState(part, live);
  return (
    <details
      className={`tool-card tool-${state}`}
      data-testid="tool-card"
      data-tool={name}
      data-state={state}
      open={state === 'rejected'}
    >
      <summary>
        <span className="tool-name">{name}</span>
        <span className={`badge badge-${state}`}>{LABELS[state]}</span>
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
        {part.state === 'output-error' && (
          <div className="tool-section">
            <div className="field-label">{state === 'rejected' ? 'Why it was not run' : 'Error'}</div>
            <pre className="json error-text">{part.errorText}</pre>
          </div>
        )}
      </div>
    </details>
  );
}
