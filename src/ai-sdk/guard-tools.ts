/**
 * `guardTools()`: the app's tools, each with its `execute` wrapped so that a call is decided and
 * reserved in one atomic store update before it runs (the authority, and the fail-closed backstop
 * when the other hooks were not wired). The calls of a model step are decided one after another,
 * in the order the model emitted them (a call that depends on a running sibling waits for it),
 * and run side by side, as the AI SDK runs them; under a durable engine one after another.
 */
import type { FlexibleSchema, Schema, ToolExecutionOptions, ToolSet } from 'ai';
import { asSchema } from 'ai';
import type { ToolDecision } from '../core/transition.js';
import { callIdKey, releaseEvents, requestNow } from '../orchestration/turn.js';
import { isResumedCall } from './approval-history.js';
import type { RuntimeContext } from './orchestrate-types.js';
import { SPREAD_LAST, ToolRejectedError } from './orchestration-errors.js';
import { resultOf } from './tool-results.js';
import type { TurnHooks } from './turn-hooks.js';

/** The guarded tools of the turn of `hooks` (see the module comment). */
export function guardTools<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext>(
  hooks: TurnHooks<TOOLS, RUNTIME_CONTEXT>,
): ToolSet {
  const guarded: ToolSet = {};
  for (const [name, original] of Object.entries(hooks.options.tools)) {
    const execute = original.execute;
    if (typeof execute !== 'function') {
      guarded[name] = original; // a client-side tool: the loop stops at it, nothing runs here
      continue;
    }
    const tool = {
      ...original,
      // A schema given as a function (the AI SDK's lazySchema) is left alone: it is the app's to memoize.
      ...(typeof original.inputSchema === 'object' && original.inputSchema !== null
        ? { inputSchema: convertedSchema(original.inputSchema) }
        : {}),
      execute: (input: unknown, execution: ToolExecutionOptions<unknown>) => {
        const decided = hooks.inOrder(() => decide(hooks, name, input, execution));
        const ran = decided.then(async (decision) => {
          const toolCallId = decision.toolCallId;
          if (!decision.allowed) throw new ToolRejectedError(name, decision.reason, decision.allowedTools);
          let output: unknown;
          try {
            output = await execute.call(original, input as never, execution as never);
          } catch (error) {
            // A tool that throws is not recorded: its reservation is released. One that threw
            // because its call was aborted (a client that left, a timeout) may have done its work
            // before it stopped: limit rules count it, or aborting each call once it started
            // would get a client past them.
            if (execution.abortSignal?.aborted === true) hooks.turn.abandoned(toolCallId);
            else hooks.turn.failed(toolCallId);
            throw error;
          }
          // Buffered: written with the next update. A store failure then is reported
          // (onError, settled()) and never turns this result into an error for the model. The
          // result goes with it when the template's facts or labels may read it.
          const { plan } = hooks;
          if (plan.facts.length + plan.labels.length === 0) hooks.turn.completed(toolCallId);
          else hooks.turn.completed(toolCallId, { result: resultOf(original, output), args: input });
          return output;
        });
        // Under a durable engine the next call is decided once this one ran: a crash leaves one
        // call of the step in flight at most, and which calls the dead run decided cannot move.
        if (hooks.options.turnId !== undefined) hooks.decisions = ran.catch(() => undefined);
        return hooks.track(ran);
      },
    };
    hooks.guardedTools.add(tool);
    guarded[name] = tool;
  }
  return guarded;
}

/** Decides the call `execute` was asked to run, and reserves it when it may run. */
async function decide<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext>(
  hooks: TurnHooks<TOOLS, RUNTIME_CONTEXT>,
  name: string,
  input: unknown,
  execution: ToolExecutionOptions<unknown>,
): Promise<ToolDecision> {
  const { turn } = hooks;
  // The session keeps (and the turn is told) the id's key: the model chose the id.
  const toolCallId = callIdKey(execution.toolCallId);
  if (hooks.unguarded) throw hooks.unguarded;
  const resumed = isResumedCall(execution.messages, execution.toolCallId, hooks.prepared);
  if (!resumed && !hooks.approvalSeen.has(toolCallId)) {
    // Enforcement holds (decided below), but approval prompts may have been raised for calls
    // orchestration refuses.
    hooks.wiringProblem(
      'toolApproval',
      `the call's toolApproval is not the orchestration's, so a person may be asked to approve calls it would refuse; pass yours as orchestrate({ toolApproval }) and ${SPREAD_LAST}`,
      true,
    );
  }
  try {
    if (!turn.started) {
      hooks.adoptMessages(execution.messages);
      await turn.begin();
    }
    // A resumed call the approval hook did not see (a replaced toolApproval).
    if (resumed) hooks.noteDenials(execution.messages);
    // Decided and reserved in one atomic update: a concurrent turn sees the reservation. An
    // approved call resumed from the history was offered by an earlier request: what counts is
    // whether it is allowed now. On a synchronous store, without a promise. The step's first
    // call was reserved when it was approved (`reserveEarly`).
    const early = hooks.reserving.get(toolCallId);
    hooks.reserving.delete(toolCallId);
    const requested =
      early?.request ??
      requestNow(
        turn,
        name,
        toolCallId,
        resumed ? undefined : hooks.offered,
        // A resumed call ran through the AI SDK's approval: an approve rule checks that Baton
        // asked for it, for this input, in this state.
        hooks.callInput(input, resumed),
      );
    try {
      return requested instanceof Promise ? await requested : requested;
    } finally {
      // An early reservation's events, here in the context that runs the call.
      if (early !== undefined) releaseEvents(turn, toolCallId);
    }
  } catch (error) {
    hooks.fail(error);
    throw error; // not run: the model is told it failed, which is true
  }
}

/**
 * Tools' input schemas, each converted once, by the app's schema object. The AI SDK converts a
 * zod (or other standard) schema to JSON Schema again for every tool it offers at every model
 * step (`asSchema` makes a new converter each time), which costs more per step than deciding
 * the step; a converted `Schema` it reuses, and that one keeps its JSON Schema once made. Guarded
 * tools carry the converted schema: the same JSON Schema and the same validation, converted once
 * for every turn of the process.
 */
const convertedSchemas = new WeakMap<object, Schema<unknown>>();

function convertedSchema(schema: FlexibleSchema<unknown> & object): Schema<unknown> {
  let converted = convertedSchemas.get(schema);
  if (converted === undefined) {
    converted = asSchema(schema);
    convertedSchemas.set(schema, converted);
  }
  return converted;
}
