/**
 * On a narrow screen (a phone) the chat and the orchestration are two tabs under the header,
 * instead of one long page where the orchestration starts a screen or more below the chat. The
 * orchestration's tab says where the session stands (active step, sequence position), so it can
 * be read from the chat. On a wide screen both panels show side by side and the tabs are hidden.
 */
import type { OrchestrationSnapshot } from './types.js';

/** Which panel a narrow screen shows. */
export type View = 'chat' | 'orchestration';

/** `ResearchMode 2/3`: the active step and its sequence position, or null before a session. */
export function stepSummary(snapshot: OrchestrationSnapshot | null): string | null {
  if (!snapshot) return null;
  const step = snapshot.activeStep ?? 'no step';
  const sequence = snapshot.sequence;
  if (!sequence) return step;
  return sequence.completed
    ? `${step} ✓`
    : `${step} ${Math.min(sequence.index + 1, sequence.length)}/${sequence.length}`;
}

/** The tab bar; the panels carry the ids it controls (`chat-panel`, `orchestration-panel`). */
export function ViewTabs({
  view,
  onChange,
  snapshot,
}: {
  view: View;
  onChange: (view: View) => void;
  snapshot: OrchestrationSnapshot | null;
}) {
  const summary = stepSummary(snapshot);
  return (
    <div className="view-tabs" role="tablist" aria-label="Show">
      <button
        type="button"
        role="tab"
        id="chat-tab"
        aria-selected={view === 'chat'}
        aria-controls="chat-panel"
        data-testid="tab-chat"
        onClick={() => onChange('chat')}
      >
        Chat
      </button>
      <button
        type="button"
        role="tab"
        id="orchestration-tab"
        aria-selected={view === 'orchestration'}
        aria-controls="orchestration-panel"
        data-testid="tab-orchestration"
        onClick={() => onChange('orchestration')}
      >
        Orchestration
        {summary && (
          <span className="tab-summary" data-testid="tab-step-summary">
            {summary}
          </span>
        )}
      </button>
    </div>
  );
}
