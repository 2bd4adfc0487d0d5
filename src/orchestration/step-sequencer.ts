/**
 * The seed's `StepSequencer`: sequence operations on one step for one session. It works on
 * a step object, not a whole config, so it does not run step selection; the
 * `OrchestrationManager` does that.
 */
import { type CompiledStep, compileStep } from '../core/compile.js';
import type { ConditionRegistry } from '../core/conditions.js';
import { appendBounded } from '../core/engine.js';
import type { OrchestrationStep } from '../core/schema.js';
import type { OrchestrationState } from '../core/state.js';
import { assertToolName, type OrchestrationStateManager } from './state-manager.js';

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

  /** Moves the sequence forward by one (never past its end); resolves to the new position. */
  async advanceSequence(step: OrchestrationStep, sessionId: string): Promise<number> {
    const length = this.#compile(step).sequence.length;
    const state = await this.#states.modify(sessionId, (s) =>
      s.sequenceIndex < length ? { ...s, sequenceIndex: s.sequenceIndex + 1 } : s,
    );
    return state.sequenceIndex;
  }

  /**
   * Records `usedTool` and, when it fills the sequence's current position, advances, in one
   * atomic update. Resolves to whether the sequence advanced.
   */
  async processTool(step: OrchestrationStep, sessionId: string, usedTool: string): Promise<boolean> {
    assertToolName(usedTool, 'usedTool');
    const compiled = this.#compile(step);
    const limit = this.#states.historyLimit;
    let advanced = false;
    await this.#states.modify(sessionId, (s: OrchestrationState) => {
      advanced = compiled.sequence[s.sequenceIndex]?.set.has(usedTool) ?? false;
      return {
        ...s,
        recentlyUsedTools: appendBounded(s.recentlyUsedTools, usedTool, limit),
        sequenceIndex: advanced ? s.sequenceIndex + 1 : s.sequenceIndex,
      };
    });
    return advanced;
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
