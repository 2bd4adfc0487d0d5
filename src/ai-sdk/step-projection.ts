/**
 * The session as a model step's approvals see it: the state the step was decided on, plus the
 * calls approved so far in the step, as if they completed (they run after every approval). So a
 * person is never asked to approve a call that could only run if an earlier one of the step were
 * refused, and the step's calls are judged as a serial run in emission order judges them.
 */
import type { OrchestrationPlan } from '../core/compile.js';
import type { OrchestrationState } from '../core/state.js';
import { type TransitionContext, type TransitionInput, transitionAll } from '../core/transition.js';

/** One model step's projection (see the module comment). */
export class StepProjection {
  readonly #plan: OrchestrationPlan;
  readonly #context: () => TransitionContext;
  /** The step's base with the calls of `#applied` projected on it (undefined: no base yet). */
  #projected: OrchestrationState | undefined;
  /**
   * Calls projected but not yet applied to `#projected`: applied only when a later approval of
   * the same step needs them (most steps make one call, and never pay for it).
   */
  #unapplied: TransitionInput[] = [];
  /** Every call projected in this step, for {@link rebase}. */
  #calls: TransitionInput[] = [];

  constructor(plan: OrchestrationPlan, context: () => TransitionContext) {
    this.#plan = plan;
    this.#context = context;
  }

  /** A new step (or a history that changes what is known), decided on `base`. */
  reset(base: OrchestrationState | undefined): void {
    this.#projected = base;
    this.#unapplied = [];
    this.#calls = [];
  }

  /** Sets the base when the step has none yet (a call that comes before any model step). */
  begin(base: OrchestrationState | undefined): void {
    this.#projected ??= base;
  }

  /** The session the step's next approval is decided on; `fallback` when the step has no base. */
  state(fallback: OrchestrationState | undefined): OrchestrationState | undefined {
    const base = this.#projected ?? fallback;
    if (this.#unapplied.length === 0 || base === undefined) return base;
    this.#projected = transitionAll(this.#plan, base, this.#unapplied, this.#context()).state;
    this.#unapplied = [];
    return this.#projected;
  }

  /** Projects `calls` (a call's request and completion) on the step. */
  project(calls: readonly TransitionInput[], fallback: OrchestrationState | undefined): void {
    this.#calls.push(...calls);
    // Deferred only on a fixed base (a prepared step's state): `fallback` moves as calls run.
    if (this.#projected !== undefined) this.#unapplied.push(...calls);
    else if (fallback !== undefined)
      this.#projected = transitionAll(this.#plan, fallback, calls, this.#context()).state;
  }

  /**
   * Projects the step's calls again on `base`, the turn's latest state: after an approval waited
   * for a running call (another turn's), whose end the turn has read since.
   */
  rebase(base: OrchestrationState | undefined): void {
    this.#projected =
      base === undefined ? undefined : transitionAll(this.#plan, base, this.#calls, this.#context()).state;
    this.#unapplied = [];
  }
}
