/**
 * The active step's required tool sequence as a progress strip: done, current (or blocked,
 * when no allowed tool can fill it), to do.
 */
import type { SequenceProgress } from './types.js';

/** The state of one position of the strip. */
export type PositionState = 'done' | 'current' | 'blocked' | 'todo';

/** The state of position `index` of `sequence`. */
export function positionState(sequence: SequenceProgress, index: number): PositionState {
  if (index < sequence.index) return 'done';
  if (index === sequence.index && !sequence.completed) return sequence.blocked ? 'blocked' : 'current';
  return 'todo';
}

const STATE_TEXT: Record<PositionState, string> = {
  done: 'done',
  current: 'next',
  blocked: 'blocked',
  todo: 'to do',
};

/** The strip, or a note when the step has no sequence; `testIdPrefix` keeps a second strip's test ids apart. */
export function SequenceStrip({
  sequence,
  step,
  testIdPrefix = '',
}: {
  sequence: SequenceProgress | null;
  step: string | null;
  testIdPrefix?: string;
}) {
  if (!sequence) {
    return (
      <p className="muted" data-testid={`${testIdPrefix}sequence-none`}>
        {step ? `Step ${step} requires no tool order.` : 'No active step yet.'}
      </p>
    );
  }
  const summary = sequence.completed
    ? `complete (${sequence.length} of ${sequence.length})`
    : `${sequence.index} of ${sequence.length} done${sequence.blocked ? ', blocked: no allowed tool fits' : ''}`;
  return (
    <div className="sequence">
      <ol
        className="sequence-strip"
        data-testid={`${testIdPrefix}sequence-strip`}
        aria-label={`Sequence of ${step ?? 'the step'}`}
      >
        {sequence.tools.map((alternatives, index) => {
          const state = positionState(sequence, index);
          const label = alternatives.join(' / ');
          return (
            <li
              // biome-ignore lint/suspicious/noArrayIndexKey: positions may repeat a tool; the index identifies a position
              key={`${index}:${label}`}
              className={`position position-${state}`}
              data-testid={`${testIdPrefix}sequence-position`}
              data-tool={label}
              data-state={state}
              aria-current={state === 'current' || state === 'blocked' ? 'step' : undefined}
            >
              <span className="position-index" aria-hidden="true">
                {state === 'done' ? '✓' : index + 1}
              </span>
              <span className="position-tool">{label}</span>
              <span className="position-state">{STATE_TEXT[state]}</span>
            </li>
          );
        })}
      </ol>
      <p className="muted sequence-summary" data-testid={`${testIdPrefix}sequence-summary`}>
        Sequence {summary}
      </p>
    </div>
  );
}
