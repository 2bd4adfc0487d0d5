/**
 * The session timeline: every decision the session's event log kept, grouped by user turn
 * (the newest turn open, the older ones folded so the newest decisions are in view), each a
 * button that opens the session as it stood right after that decision: active step, sequence,
 * every tool allowed or blocked and why, facts and labels, recent tools, token usage.
 */
import { useId } from 'react';
import { ActiveStep } from './active-step.js';
import { byTurn, loggedEvent, summarizeEvent } from './event-summary.js';
import { FactsAndLabels } from './facts-and-labels.js';
import { liveTools } from './live-tools.js';
import { RecentTools } from './recent-tools.js';
import { SequenceStrip } from './sequence-strip.js';
import { TokenUsage } from './token-usage.js';
import { ToolList } from './tool-list.js';
import type { SessionEventEntry } from './types.js';
import type { SessionTimeline } from './use-session-timeline.js';

/** Test ids inside an opened entry start with this, apart from the live panel's. */
const PREFIX = 'timeline-';

/**
 * The session as it stood right after one logged decision; its facts and labels when `showFacts`
 * (the agent declares some) or it has some.
 */
function TimelineState({
  entry,
  agentTools,
  id,
  showFacts,
}: {
  entry: SessionEventEntry;
  agentTools: string[];
  id: string;
  showFacts: boolean;
}) {
  const state = entry.state;
  const when = new Date(entry.at).toLocaleTimeString('en-GB');
  return (
    <div className="timeline-state" id={id} data-testid="timeline-state" data-seq={entry.seq}>
      <p className="muted timeline-state-when">
        Right after #{entry.seq} (turn {entry.turn}, {when})
      </p>
      <ActiveStep snapshot={state} testIdPrefix={PREFIX} />
      <div className="timeline-state-grid">
        <section>
          <h4>Sequence</h4>
          <SequenceStrip sequence={state.sequence} step={state.activeStep} testIdPrefix={PREFIX} />
        </section>
        <section>
          <h4>Tools</h4>
          <ToolList tools={liveTools(agentTools, state, entry.tools)} agentTools={agentTools} testIdPrefix={PREFIX} />
        </section>
        {(showFacts || state.facts !== undefined || state.labels !== undefined) && (
          <section>
            <h4>Facts and labels</h4>
            <FactsAndLabels snapshot={state} testIdPrefix={PREFIX} />
          </section>
        )}
        <section>
          <h4>Recently used</h4>
          <RecentTools tools={state.recentlyUsedTools} testIdPrefix={PREFIX} />
        </section>
        <section>
          <h4>Tokens (session)</h4>
          <TokenUsage usage={state.tokenUsage} testIdPrefix={PREFIX} />
        </section>
      </div>
    </div>
  );
}

/** The timeline's body: the turns and their decisions, or why there are none. */
function TimelineBody({
  timeline,
  agentTools,
  hasSession,
  showFacts,
}: {
  timeline: SessionTimeline;
  agentTools: string[];
  hasSession: boolean;
  showFacts: boolean;
}) {
  const detailId = useId();
  if (timeline.unavailable !== null) {
    return (
      <p className="muted" data-testid="session-timeline-unavailable">
        {timeline.unavailable}
      </p>
    );
  }
  if (!hasSession || (timeline.entries.length === 0 && timeline.dropped === 0)) {
    return (
      <p className="muted" data-testid="session-timeline-empty">
        {hasSession && !timeline.loaded ? 'Loading the decisions…' : 'Every decision of the session appears here.'}
      </p>
    );
  }
  const groups = byTurn(timeline.entries);
  const selectedSeq = timeline.selected?.seq ?? null;
  return (
    <>
      {timeline.dropped > 0 && (
        <p className="muted" data-testid="session-timeline-dropped">
          {timeline.dropped.toLocaleString('en-US')} older {timeline.dropped === 1 ? 'decision' : 'decisions'} dropped
          (the server keeps the last {timeline.capacity.toLocaleString('en-US')}).
        </p>
      )}
      <ol className="session-turns">
        {groups.map(({ turn, entries }, index) => {
          const newest = index === groups.length - 1;
          const holdsSelected = entries.some((entry) => entry.seq === selectedSeq);
          return (
            <li key={turn}>
              <details
                className="session-turn"
                open={newest || holdsSelected}
                data-testid="timeline-turn"
                data-turn={turn}
              >
                <summary>
                  <span className="session-turn-title">Turn {turn}</span>{' '}
                  <span className="muted">
                    {entries.length} {entries.length === 1 ? 'decision' : 'decisions'}
                  </span>
                </summary>
                <ol className="session-events">
                  {entries.map((entry) => {
                    const { kind, text } = summarizeEvent(loggedEvent(entry));
                    const selected = entry.seq === selectedSeq;
                    return (
                      <li key={entry.seq}>
                        <button
                          type="button"
                          className={`session-event event-${kind}`}
                          data-testid="timeline-entry"
                          data-seq={entry.seq}
                          data-type={entry.event.type}
                          aria-expanded={selected}
                          aria-controls={selected ? detailId : undefined}
                          onClick={() => timeline.select(selected ? null : entry.seq)}
                        >
                          <span className="session-event-seq">#{entry.seq}</span>
                          <span className="session-event-text">{text}</span>
                        </button>
                        {selected && (
                          <TimelineState entry={entry} agentTools={agentTools} id={detailId} showFacts={showFacts} />
                        )}
                      </li>
                    );
                  })}
                </ol>
              </details>
            </li>
          );
        })}
      </ol>
    </>
  );
}

/** The session timeline panel; `showFacts`: the agent declares facts or labels, so each state shows them. */
export function SessionTimelinePanel({
  timeline,
  agentTools,
  hasSession,
  showFacts,
}: {
  timeline: SessionTimeline;
  agentTools: string[];
  hasSession: boolean;
  showFacts: boolean;
}) {
  const titleId = useId();
  return (
    <section className="subpanel session-timeline" aria-labelledby={titleId} data-testid="session-timeline">
      <h3 id={titleId}>Session timeline</h3>
      <p className="muted session-timeline-note">Every decision of the session; open one to see the session then.</p>
      {timeline.error && (
        <p className="error-text" data-testid="session-timeline-error">
          {timeline.error}
        </p>
      )}
      <TimelineBody timeline={timeline} agentTools={agentTools} hasSession={hasSession} showFacts={showFacts} />
    </section>
  );
}
