/**
 * The hooks at a turn's edges: `onStart` checks that the AI SDK call runs the guarded tools and
 * reads its `activeTools` and `toolChoice`; `onStepEnd` records a model step (its token usage, the
 * calls the AI SDK refused before any hook) and, after a step without tool calls, ends the turn;
 * `onEnd` and `settled()` write what the turn still holds.
 */
import type { GenerateTextEndEvent, StepResult, ToolSet } from 'ai';
import type { CallStart, RuntimeContext } from './orchestrate-types.js';
import { SPREAD_LAST } from './orchestration-errors.js';
import type { TurnHooks } from './turn-hooks.js';

/** The `onStart` of the turn of `hooks`. */
export function onStartHook<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext>(
  hooks: TurnHooks<TOOLS, RUNTIME_CONTEXT>,
): (event: CallStart) => Promise<void> {
  return async (event) => {
    hooks.callActiveTools = event.activeTools;
    hooks.callToolChoice = event.toolChoice;
    const bypassing = Object.entries(event.tools ?? {})
      .filter(([, tool]) => typeof tool.execute === 'function' && !hooks.guardedTools.has(tool))
      .map(([name]) => name);
    if (bypassing.length > 0) hooks.unguarded = hooks.unguardedError(bypassing);
  };
}

/** The `onStepEnd` of the turn of `hooks`: the app's runs after the step was recorded. */
export function onStepEndHook<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext>(
  hooks: TurnHooks<TOOLS, RUNTIME_CONTEXT>,
): (step: StepResult<TOOLS, RUNTIME_CONTEXT>) => Promise<void> {
  const { options } = hooks;
  return async (step) => {
    hooks.onStepEndRan = true;
    hooks.recordStep(step);
    if (hooks.pending.size > 0) await hooks.idle();
    // A step without tool calls ends the turn: write what waits, with the turn's end. Otherwise
    // it rides on the next step's first tool request (or on onEnd / settled()).
    if (step.toolCalls.length === 0) {
      const ended = hooks.end();
      // The app's onStepEnd sees the end stored. Without one, the write travels while the AI
      // SDK wraps up the call (about 100 µs of its own work before onEnd); onEnd waits for it,
      // and the AI SDK ends the response only after onEnd, so nobody sees the turn over before.
      if (options.onStepEnd !== undefined) await ended;
    }
    if (options.onStepEnd !== undefined) await options.onStepEnd(step);
  };
}

/** The `onEnd` of the turn of `hooks`: the app's runs after the turn's writes are stored. */
export function onEndHook<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext>(
  hooks: TurnHooks<TOOLS, RUNTIME_CONTEXT>,
): (event?: GenerateTextEndEvent<TOOLS, RUNTIME_CONTEXT>) => Promise<void> {
  const { options, turn } = hooks;
  return async (event) => {
    hooks.onEndRan = true;
    if (event) {
      const missed = event.steps.filter((s) => !hooks.recordedSteps.has(s.stepNumber));
      for (const s of missed) hooks.recordStep(s);
      if (missed.length > 0 && !hooks.onStepEndRan) hooks.noteMissingOnStepEnd();
    }
    await hooks.end();
    if (turn.dirty) await hooks.flush();
    if (event && options.onEnd !== undefined) await options.onEnd(event);
  };
}

/**
 * `settled()` of the turn of `hooks`: ends the turn if the AI SDK did not (an error, an abort)
 * and resolves when every write has finished; rejects with the first failure.
 */
export function settledOf<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext>(
  hooks: TurnHooks<TOOLS, RUNTIME_CONTEXT>,
): () => Promise<void> {
  return async () => {
    if (hooks.pending.size > 0) await hooks.idle();
    await hooks.end();
    if (hooks.turn.dirty) await hooks.flush();
    // Without the orchestration's onStepEnd, the last step's usage only comes with its onEnd.
    if (hooks.onStepEndMissing && !hooks.onEndRan) {
      hooks.wiringProblem(
        'onStepEnd',
        `neither the call's onStepEnd nor its onEnd is the orchestration's, so the last model step's token usage was not recorded; pass yours as orchestrate({ onStepEnd, onEnd }) and ${SPREAD_LAST}`,
      );
    }
    if (hooks.failures.length > 0) throw hooks.failures[0];
  };
}
