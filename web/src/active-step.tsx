/**
 * The active step of a snapshot, with what changes how it decides: shadow mode, and a spent
 * token budget.
 */
import type { OrchestrationSnapshot } from './types.js';

/** The active step block; `testIdPrefix` keeps a second block's test ids apart (the session timeline's). */
export function ActiveStep({
  snapshot,
  testIdPrefix = '',
}: {
  snapshot: OrchestrationSnapshot | null;
  testIdPrefix?: string;
}) {
  const activeStep = snapshot?.activeStep ?? null;
  const budget = snapshot?.budget;
  return (
    <div className="active-step" data-testid={`${testIdPrefix}active-step`} data-step={activeStep ?? ''}>
      <span className="field-label">Active step</span>
      <strong>{activeStep ?? (snapshot ? 'none (every tool allowed)' : 'none yet')}</strong>
      {snapshot?.stepDescription && <p className="muted step-description">{snapshot.stepDescription}</p>}
      {snapshot?.shadow && (
        <p className="muted" data-testid={`${testIdPrefix}shadow-mode`}>
          Shadow mode: nothing is enforced; decisions are only reported.
        </p>
      )}
      {budget && (
        <p className="error-text" data-testid={`${testIdPrefix}budget-spent`} role="status">
          Token budget {budget.scope === 'session' ? 'of the session' : `of step ${budget.step}`} spent (
          {budget.used.toLocaleString('en-US')} of {budget.limit.toLocaleString('en-US')}):{' '}
          {/* In shadow mode a spent budget is only reported: the tools are still offered. */}
          {snapshot.shadow ? 'reported only (shadow mode).' : 'no tool is offered.'}
        </p>
      )}
    </div>
  );
}
