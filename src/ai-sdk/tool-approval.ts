/**
 * `toolApprovalHook()`: the AI SDK's `toolApproval`, deciding every call before it runs. A call
 * orchestration refuses is denied with the reason the model reads (never shown to a person as an
 * approval prompt); an `approve` rule asks a person through the AI SDK's own approval flow; only
 * calls orchestration allows go on to the app's own approval (`needsApproval`, `toolApproval`).
 * Each call of a model step is decided as if the step's earlier calls ran (`StepProjection`); one
 * whose answer waits for another turn's running call waits for it here.
 */
import type { ModelMessage, ToolApprovalConfiguration, ToolApprovalStatus, ToolSet } from 'ai';
import type { ToolDecision, WaitEnd } from '../core/transition.js';
import { rejectionMessage } from '../orchestration/rejection-message.js';
import { callIdKey } from '../orchestration/turn.js';
import { isResumedCall } from './approval-history.js';
import { inputDigest } from './input-digest.js';
import type { RuntimeContext, ToolApprovalArguments } from './orchestrate-types.js';
import { SPREAD_LAST } from './orchestration-errors.js';
import { keptToolName, type TurnHooks } from './turn-hooks.js';

/** The approval hook of the turn of `hooks` (see the module comment). */
export function toolApprovalHook<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext>(
  hooks: TurnHooks<TOOLS, RUNTIME_CONTEXT>,
): (args: ToolApprovalArguments<TOOLS, RUNTIME_CONTEXT>) => Promise<ToolApprovalStatus> {
  return async (args) => {
    const { toolCall, messages } = args;
    // The model chose both: what the session keeps of them is bounded (see keptToolName and
    // callIdKey). The AI SDK asks only about calls of its tools, so the name is cut only when
    // the call runs tools that are not the orchestration's.
    const name = hooks.toolNames.includes(toolCall.toolName) ? toolCall.toolName : keptToolName(toolCall.toolName);
    const id = callIdKey(toolCall.toolCallId);
    hooks.approvalSeen.add(id);
    const tool = args.tools?.[toolCall.toolName];
    if (!hooks.unguarded && typeof tool?.execute === 'function' && !hooks.guardedTools.has(tool))
      hooks.unguarded = hooks.unguardedError([name]);
    if (hooks.unguarded) return { type: 'denied', reason: hooks.unguarded.message };
    // An approved call resumed from the history runs before the first model step; a fresh
    // call comes from a step this orchestration prepared.
    const resumed = isResumedCall(messages, toolCall.toolCallId, hooks.prepared);
    let decision: ToolDecision;
    try {
      if (resumed) {
        hooks.adoptMessages(messages);
        await hooks.begin();
        hooks.noteDenials(messages);
      } else if (hooks.prepared === 0) {
        const error = hooks.wiringProblem(
          'prepareStep',
          `the call's prepareStep is not the orchestration's, so the model is offered tools orchestration has not allowed; pass yours as orchestrate({ prepareStep }) and ${SPREAD_LAST}`,
        );
        return { type: 'denied', reason: error.message };
      }
      const offeredNow = resumed ? undefined : hooks.offered;
      decision = hooks.decideLocally(name, id, offeredNow, toolCall.input, resumed);
      // Its answer depends on a call still running in the session (another turn's): wait for it,
      // then decide on the session as it stands then.
      while (!decision.allowed && decision.waitFor !== undefined) {
        const started = Date.now();
        if (await hooks.turn.waitFor(decision.waitFor)) {
          hooks.projection.rebase(hooks.turn.state);
          decision = hooks.decideLocally(name, id, offeredNow, toolCall.input, resumed);
        } else {
          const waited: WaitEnd = { cause: 'wait-bound', waitedMs: Date.now() - started };
          decision = hooks.decideLocally(name, id, offeredNow, toolCall.input, resumed, waited);
        }
      }
    } catch (error) {
      // Fail closed, as the AI SDK's policy packages do: no decision, no run.
      hooks.fail(error);
      return { type: 'denied', reason: 'orchestration could not decide on this call; try again later' };
    }
    if (!decision.allowed && decision.reason.code === 'approval-required' && !resumed) {
      // An approve rule: a person is asked, through the AI SDK's own approval flow. The session
      // keeps what was asked, so the answer counts only for this call, input and state.
      const digest = inputDigest(toolCall.input);
      // A replay (turnId) of a call whose approval was asked already: asked and reported once.
      const asked =
        hooks.options.turnId !== undefined &&
        hooks.turn.state?.approvals?.some((approval) => approval.id === id && approval.digest === digest) === true;
      if (!asked) hooks.turn.approvalRequested(name, id, digest, decision.reason.rule);
      hooks.project(name, id, toolCall.input, false, decision.reason.rule);
      hooks.awaitingApproval = true;
      // The rule's reason goes to the person asked (the UI's `approval.requestReason`).
      return { type: 'user-approval', reason: decision.reason.message };
    }
    if (!decision.allowed) {
      // A replayed refusal was reported (and recorded) by the run this one replays.
      if (decision.replayed === undefined) hooks.rejected(name, id, decision);
      return { type: 'denied', reason: rejectionMessage(name, decision.reason, decision.allowedTools) };
    }
    const appStatus = appApproval(hooks.options.toolApproval, args);
    // Most calls need no approval of the app's: decided without another promise.
    const status = normalizeApprovalStatus(isPromiseLike(appStatus) ? await appStatus : appStatus);
    if (status.type === 'denied') return status;
    // The next call of the step is decided as if this one ran (it runs before the next
    // approval's call, or waits for a person who approves it): a person is never asked to
    // approve a call that could only run if an earlier one of the step were refused.
    const first = hooks.approvedInStep === 0;
    hooks.project(name, id, toolCall.input, resumed);
    if (status.type === 'user-approval') {
      if (!resumed) {
        hooks.awaitingApproval = true;
        // Kept as a rule's request is: an approval counts only for a call the session asked about.
        hooks.turn.approvalRequested(name, id, inputDigest(toolCall.input));
      }
    } else if (
      first &&
      !resumed &&
      hooks.reservesEarly &&
      !hooks.ending &&
      // Only a call the AI SDK will run through a guarded execute: not a client-side tool
      // (no execute) nor one the provider ran itself.
      tool !== undefined &&
      hooks.guardedTools.has(tool) &&
      toolCall.providerExecuted !== true
    ) {
      // Not once the turn is ending: its end releases what execute did not take.
      hooks.reserveEarly(name, id, toolCall.input);
    }
    return status;
  };
}

type NormalizedApprovalStatus = Exclude<ToolApprovalStatus, string | undefined>;

function normalizeApprovalStatus(status: ToolApprovalStatus): NormalizedApprovalStatus {
  if (status === undefined) return { type: 'not-applicable' };
  if (typeof status === 'string') return { type: status };
  return status;
}

/** A per-tool approval function of the app, as the AI SDK calls it. */
type ToolApprovalFunction = (
  input: unknown,
  options: { toolCallId: string; messages: ModelMessage[]; toolContext: unknown; runtimeContext: unknown },
) => ToolApprovalStatus | PromiseLike<ToolApprovalStatus>;

/** A tool's own `needsApproval`, as the AI SDK calls it. */
type NeedsApproval =
  | boolean
  | ((
      input: unknown,
      options: { toolCallId: string; messages: ModelMessage[]; context: unknown },
    ) => boolean | PromiseLike<boolean>);

/**
 * The app's approval of a call orchestration allows, resolved as the AI SDK resolves it when
 * no orchestration is involved: the generic function; else the tool's entry of the per-tool
 * configuration; else the tool's `needsApproval`.
 */
function appApproval<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext>(
  configuration: ToolApprovalConfiguration<TOOLS, RUNTIME_CONTEXT> | undefined,
  args: ToolApprovalArguments<TOOLS, RUNTIME_CONTEXT>,
): ToolApprovalStatus | PromiseLike<ToolApprovalStatus> {
  if (typeof configuration === 'function') return configuration(args);
  const { toolCall, messages } = args;
  const name = toolCall.toolName;
  const toolContext: unknown = (args.toolsContext as Record<string, unknown> | undefined)?.[name];
  const entry: unknown =
    configuration !== undefined && Object.hasOwn(configuration, name)
      ? configuration[name as keyof typeof configuration]
      : undefined;
  if (typeof entry === 'function') {
    // The SDK validated the input against this tool's schema before asking.
    return (entry as ToolApprovalFunction)(toolCall.input, {
      toolCallId: toolCall.toolCallId,
      messages,
      toolContext,
      runtimeContext: args.runtimeContext,
    });
  }
  if (entry != null) return entry as ToolApprovalStatus;
  const needsApproval = (args.tools?.[name] as { needsApproval?: NeedsApproval } | undefined)?.needsApproval;
  if (needsApproval == null) return undefined;
  if (typeof needsApproval !== 'function') return needsApproval ? 'user-approval' : undefined;
  return (async () => {
    const needed = await needsApproval(toolCall.input, {
      toolCallId: toolCall.toolCallId,
      messages,
      context: toolContext,
    });
    return needed ? 'user-approval' : undefined;
  })();
}

function isPromiseLike<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as { then?: unknown } | undefined)?.then === 'function';
}
