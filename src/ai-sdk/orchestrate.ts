/**
 * `orchestrate()`: orchestration for one turn of an AI SDK 7 tool loop. It returns what to
 * spread into `streamText`, `generateText` or `ToolLoopAgent`, enforcing SPEC section 7 through
 * the SDK's own hooks:
 *
 * - `prepareStep` offers exactly the allowed tools before every model step (and forces the next
 *   tool of a `requireSequence` step), and tells the model where it stands;
 * - `toolApproval` decides every call before it runs: a call orchestration refuses is denied as
 *   a result with the reason the model reads (never shown to a person as an approval prompt),
 *   and only calls it allows go on to the app's own approval (`needsApproval`, `toolApproval`);
 * - every tool's `execute` decides again and reserves the call in one atomic store update (the
 *   authority, and the fail-closed backstop when the hooks above were not wired);
 * - `onStepEnd`/`onEnd` add token usage and write what the turn holds; `onStart` checks that the
 *   call really runs the guarded tools;
 * - once a token budget is spent, `prepareStep` gives the step a stand-in model that says so
 *   (`budgetSpentModel`): no further model call is made for the session.
 *
 * The app's own `prepareStep`, `toolApproval`, `onStepEnd`, `onEnd`, `activeTools`, `toolChoice`
 * and `instructions` go into `orchestrate()`'s options, and both apply, Baton's restrictions
 * winning. What the AI SDK gets wrong silently when the spread is not last (unguarded tools, a
 * replaced `prepareStep`, lost token usage) is detected and reported as an
 * {@link OrchestrationWiringError}.
 */
import type { ToolSet } from 'ai';
import { readAhead } from '../orchestration/turn.js';
import { assertOrchestrateOptions } from './check-orchestrate-options.js';
import { guardTools } from './guard-tools.js';
import type { OrchestrateOptions, Orchestration, RuntimeContext } from './orchestrate-types.js';
import { prepareStepHook } from './prepare-step.js';
import { onEndHook, onStartHook, onStepEndHook, settledOf } from './step-end.js';
import { toolApprovalHook } from './tool-approval.js';
import { TurnHooks } from './turn-hooks.js';

export type {
  CallStart,
  OrchestrateOptions,
  Orchestration,
  RuntimeContext,
  SequenceIncomplete,
  StepInfo,
  ToolApprovalArguments,
} from './orchestrate-types.js';
export { OrchestrationWiringError, ToolRejectedError, type WiringProblem } from './orchestration-errors.js';

/**
 * Orchestrates one turn of an AI SDK tool loop (see the module comment): the hooks of one turn,
 * joined over what they share (`TurnHooks`).
 *
 * @example
 * ```ts
 * const orchestration = orchestrate({ manager, config: template, sessionId, tools, messages });
 * const result = streamText({ model, messages, ...orchestration });
 * ```
 */
export function orchestrate<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext = RuntimeContext>(
  options: OrchestrateOptions<TOOLS, RUNTIME_CONTEXT>,
): Orchestration<TOOLS, RUNTIME_CONTEXT> {
  assertOrchestrateOptions(options);
  const hooks = new TurnHooks(options);
  // A session this process does not know is read now, while the AI SDK sets up its loop.
  readAhead(hooks.turn);
  const tools = guardTools(hooks);
  return {
    // Each tool is the app's own with `execute` wrapped: the same tool types.
    tools: tools as TOOLS,
    prepareStep: prepareStepHook(hooks, tools),
    toolApproval: toolApprovalHook(hooks),
    onStart: onStartHook(hooks),
    onStepEnd: onStepEndHook(hooks),
    onEnd: onEndHook(hooks),
    lastStep: () => hooks.last,
    sequenceIncomplete: () => hooks.incomplete,
    sessionState: () => hooks.turn.state,
    settled: settledOf(hooks),
  };
}
