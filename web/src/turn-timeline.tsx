/**
 * The orchestration before each model step of the last turn, as the stream reported it: which
 * step was active, how far its sequence was, which tools the model was offered.
 */
import type { TimelineEntry } from './types.js';

/** The timeline of the last turn. */
export function TurnTimeline({ entries }: { entries: TimelineEntry[] }) {
  if (entries.length === 0) return <p className="muted">Send a message to see each model step.</p>;
  return (
    <ol className="timeline" data-testid="turn-timeline">
      {entries.map(({ seq, snapshot }) => (
        <li key={seq} className={snapshot.final ? 'timeline-final' : undefined}>
          <span className="timeline-when">
            {snapshot.final || snapshot.stepNumber === null ? 'End of turn' : `Model step ${snapshot.stepNumber + 1}`}
          </span>
          <span className="timeline-step">{snapshot.activeStep ?? 'no step'}</span>
          {snapshot.sequence && (
            <span className="muted">
              sequence {snapshot.sequence.index}/{snapshot.sequence.length}
            </span>
          )}
          {!snapshot.final && (
            <span className="muted">
              offered: {snapshot.allowedTools.length > 0 ? snapshot.allowedTools.join(', ') : 'no tool'}
            </span>
          )}
        </li>
      ))}
    </ol>
  );
}
