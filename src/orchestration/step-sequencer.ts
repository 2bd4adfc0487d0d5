/**
 * The seed's `StepSequencer`: sequence operations on one step for one session. It works on
 * a step object, not a whole config, so it does not run step selection; the
 * `OrchestrationManager` does that.
 */
import { compileOrchestration, compileStep, type OrchestrationPlan } from '../core/compile.js';
import type { CompiledStep } from '../core/compiled-step.js';
import type { ConditionRegistry } from '../core/conditions.js';
import type { OrchestrationStep } from '../core/schema.js';
import { transition } from '../core/transition.js';
import { assertToolName, type OrchestrationStateManager } from './state-manager.js';

/** One-step plans, per step object, so the transition can run against a lone step. */
const stepPlans = new WeakMap<OrchestrationStep, OrchestrationPlan>();

/** Tracks and enforces a step's tool sequence (AgentDock's `StepSequencer`). */
export class StepSequencer {
  readonly #states: OrchestrationStateManager;
  readonly #conditions: ConditionRegistry | undefined;

  constructor(stateManager: OrchestrationStateManager, conditions?: ConditionRegistry) {
    this.#states = stateManager;
    this.#conditions = conditions;
  }

  #compile(step: OrchestrationStep): CompiledStep {
    return compileStep(step, this.#conditions);
  }

  async #index(sessionId: string): Promise<number> {
    return (await this.#states.getState(sessionId))?.sequenceIndex ?? 0;
  }

  /** True when `step` has a sequence and the session has not finished it. */
  async hasActiveSequence(step: OrchestrationStep, sessionId: string): Promise<boolean> {
    const compiled = this.#compile(step);
    return compiled.sequence.length > 0 && (await this.#index(sessionId)) < compiled.sequence.length;
  }

  /** The tool (or alternatives) the sequence expects next, or null when there is none. */
  async getCurrentSequenceTool(step: OrchestrationStep, sessionId: string): Promise<string | string[] | null> {
    const compiled = this.#compile(step);
    const slot = compiled.sequence[await this.#index(sessionId)];
    if (slot === undefined) return null;
    return slot.tools.length === 1 ? slot.tools[0]! : [...slot.tools];
  }

  /**
   * Moves the sequence forward by one. Resolves to true when it advanced; false when the step
   * has no sequence, the session does not exist (nothing is created, as in AgentDock) or the
   * sequence is already complete (it never moves past its end).
   */
  async advanceSequence(step: OrchestrationStep, sessionId: string): Promise<boolean> {
    const length = this.#compile(step).sequence.length;
    if (length === 0) return false;
    let advanced = false;
    const stored = await this.#states.update(sessionId, (s) => {
      advanced = s.sequenceIndex < length;
      return advanced ? { ...s, sequenceIndex: s.sequenceIndex + 1 } : s;
    });
    return stored !== null && advanced;
  }

  /**
   * Records `usedTool` through the transition, as the step sees it: the sequence advances when
   * the tool fills its current position, otherwise a `sequence-violation` is reported and
   * `out_of_sequence` applies. One atomic update. Resolves to whether the sequence advanced.
   */
  async processTool(step: OrchestrationStep, sessionId: string, usedTool: string): Promise<boolean> {
    assertToolName(usedTool, 'usedTool');
    const plan = this.#planOf(step);
    let advanced = false;
    const now = this.#states.clock();
    await this.#states.modify(sessionId, (s) => {
      // The seed's sequencer works on the step it is given, whichever step is active: view the
      // session through it, and keep the session's own active step.
      const result = transition(
        plan,
        { ...s, activeStep: step.name },
        { type: 'tool-used', tool: usedTool },
        { now, historyLimit: this.#states.historyLimit },
      );
      advanced = result.events.some((event) => event.type === 'sequence-advanced');
      return { ...result.state, activeStep: s.activeStep };
    });
    return advanced;
  }

  #planOf(step: OrchestrationStep): OrchestrationPlan {
    let plan = stepPlans.get(step);
    if (plan === undefined) {
      plan = compileOrchestration(
        { steps: [step] },
        this.#conditions === undefined ? {} : { conditions: this.#conditions },
      );
      stepPlans.set(step, plan);
    }
    return plan;
  }

  /**
   * Filters `allToolIds` by the sequence (SPEC section 4, rule 3): while the sequence runs,
   * only the tools of its current position; none if the agent has none of them.
   */
  async filterToolsBySequence(
    step: OrchestrationStep,
    sessionId: string,
    allToolIds: readonly string[],
  ): Promise<string[]> {
    const compiled = this.#compile(step);
    const slot = compiled.sequence[await this.#index(sessionId)];
    if (slot === undefined) return allToolIds.slice();
    return allToolIds.filter((tool) => slot.set.has(tool));
  }
}

/** Creates a {@link StepSequencer} over a state manager. */
export function createStepSequencer(
  stateManager: OrchestrationStateManager,
  conditions?: ConditionRegistry,
): StepSequencer {
  return new StepSequencer(stateManager, conditions);
}
