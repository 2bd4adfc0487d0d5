/**
 * The turn protocol as one pure function: `transition(plan, state, input, context)` returns the
 * next state, the events on the way and, for questions, a decision. Every shell (the seed
 * classes, `orchestrate()`, `LLMOrchestrationService`, `baton simulate`, the server, the MCP
 * gateway) feeds inputs through it and persists what it returns with one atomic store update;
 * none of them decides anything itself.
 *
 * This file is the switch over the inputs (`transition-types.ts`). What each one does lives
 * where its concept does: the pending log and its fold (`pending-log.ts`), how a reservation ends
 * without a commit (`leases.ts`), which running calls a request depends on (`dependence.ts`), the
 * judgement of requests, model steps and `explain()` (`judgement.ts`), the durable replay record
 * (`replay-record.ts`), and every refusal's text (`denials.ts`).
 *
 * Reserve before run (SPEC section 7). A `tool-requested` input decides and, when the call is
 * allowed, reserves it in the same update: the call joins `state.pending`, so a concurrent turn
 * (in this process or another sharing the store) sees it. It commits on `tool-completed`, in
 * reservation order, and is released on `tool-failed`, `tool-abandoned` or when its lease ends.
 * A request is judged once, on the settled session; one whose answer a running call could change
 * is answered with `waitFor` instead, and nothing is written for it: its shell waits for those
 * calls and asks again. So the calls that run are exactly those a serial run of their
 * reservations allows, and a call that depends on a running one runs after it instead of being
 * refused.
 */
import { askApproval, fingerprint, resetStepCounts, spendApproval } from './call-rules.js';
import type { OrchestrationPlan } from './compile.js';
import type { MessageInfo } from './conditions.js';
import { duplicateRecord, sessionBusy, sessionOfAnotherAgent } from './denials.js';
import { addTokenUsage, messageChange } from './engine.js';
import { NO_EVENTS, type OrchestrationEvent } from './events.js';
import { resultWrites } from './facts.js';
import { decideCall, decideStep, incompleteSequence, offers } from './judgement.js';
import { expireLeases, releaseCall, renewLease } from './leases.js';
import {
  appendEntry,
  callIndex,
  currentMessageKey,
  hasSeen,
  isSuperseded,
  recordInto,
  rememberCallId,
  settle,
  settledView,
} from './pending-log.js';
import { countUsageOnce, markRan, recordCall, recordOffer, replayedCall, replayRecord } from './replay-record.js';
import { MAX_DENIED_CALL_ID_LENGTH, type OrchestrationState, type PendingEntry } from './state.js';
import {
  DEFAULT_LEASE_MS,
  MAX_PENDING_ENTRIES,
  type MessageDecision,
  type MessageRefusal,
  type RecordDecision,
  type ToolCallRequest,
  type ToolDecision,
  type TransitionAllResult,
  type TransitionContext,
  type TransitionDecision,
  type TransitionInput,
  type TransitionResult,
} from './transition-types.js';

/** Applies one input to `state` (see the module comment). Pure: no I/O, time from `context`. */
export function transition(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  input: TransitionInput,
  context: TransitionContext,
): TransitionResult {
  const events = takeScratch();
  const { state: next, decision } = apply(plan, state, input, context, events);
  const emitted = giveBack(events);
  return decision === undefined ? { state: next, events: emitted } : { state: next, events: emitted, decision };
}

/**
 * Applies `inputs` in order, as one change: what a shell writes with one store update. A user
 * message the session refuses ends the batch: what follows it is not applied (its decision
 * slots stay undefined), so nothing runs on a session that did not take the turn.
 */
export function transitionAll(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  inputs: readonly TransitionInput[],
  context: TransitionContext,
): TransitionAllResult {
  let current = state;
  const events = takeScratch();
  const decisions: (TransitionDecision | undefined)[] = new Array(inputs.length);
  try {
    for (let i = 0; i < inputs.length; i++) {
      const applied = apply(plan, current, inputs[i]!, context, events);
      current = applied.state;
      decisions[i] = applied.decision;
      if (isRefusedMessage(applied.decision)) break;
    }
  } catch (error) {
    giveBack(events);
    throw error;
  }
  return { state: current, events: giveBack(events), decisions };
}

/**
 * One list the transitions collect events in, replaced only when it is handed out: most inputs
 * emit nothing, and they run for every step and call of every turn. A transition started while
 * one is under way (a custom condition that calls into a manager) gets a list of its own.
 */
let scratch: OrchestrationEvent[] | undefined = [];

function takeScratch(): OrchestrationEvent[] {
  const list = scratch ?? [];
  scratch = undefined;
  return list;
}

/** The events collected in `list` as a result (the list itself, or the shared empty one), and the scratch list back. */
function giveBack(list: OrchestrationEvent[]): readonly OrchestrationEvent[] {
  if (list.length === 0) {
    scratch = list;
    return NO_EVENTS;
  }
  scratch = [];
  return list;
}

/** True for the decision of a user message the session did not take. */
export function isRefusedMessage(
  decision: TransitionDecision | undefined,
): decision is Extract<MessageDecision, { accepted: false }> {
  return decision?.type === 'message' && !decision.accepted;
}

/**
 * Decides a tool call without changing anything: what `tool-requested` would answer. For checks
 * that must not reserve (an approval prompt shown to a person before the call runs).
 */
export function decideToolCall(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  call: ToolCallRequest,
  context: TransitionContext,
): ToolDecision {
  const current = expireLeases(plan, state, context, []);
  const view = settledView(plan, current, context);
  const instead = () => offers(plan, view, call.agentTools, isSuperseded(current, context), context).offered;
  return (
    replayedCall(current, call, instead) ??
    decideCall(plan, current, view, call, context, [], isRecordedCallOf(current, call))
  );
}

const ACCEPTED: MessageDecision = Object.freeze({ type: 'message', accepted: true });
const RECORDED: RecordDecision = Object.freeze({ type: 'record', recorded: true });

/** One input: the switch. */
function apply(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  input: TransitionInput,
  context: TransitionContext,
  events: OrchestrationEvent[],
): { state: OrchestrationState; decision?: TransitionDecision } {
  const current = expireLeases(plan, state, context, events);
  switch (input.type) {
    case 'user-message':
      return userMessage(plan, current, input.agentId, context, events);
    case 'step-started': {
      const step = decideStep(plan, current, input.agentTools, context, events);
      const recorded =
        input.turnId !== undefined && current.replay?.turn === input.turnId
          ? current.replay.offers[input.stepNumber ?? -1]
          : undefined;
      const decision = recorded ? { ...step, allowedTools: recorded.tools, toolChoice: recorded.toolChoice } : step;
      return { state: current, decision };
    }
    case 'step-recorded':
      return { state: recordOffer(current, input.turnId, input.stepNumber, input.tools, input.toolChoice) };
    case 'tool-requested':
      return toolRequested(plan, current, input, context, events);
    case 'tool-completed': {
      const index = callIndex(current, input.toolCallId);
      if (index < 0) {
        // Its lease ended (or it was never reserved): its place may have gone to another call.
        // Reported, not recorded: recording it now could break the serial order of what ran.
        const reason = 'late';
        events.push({
          type: 'tool-released',
          sessionId: state.sessionId,
          tool: undefined,
          toolCallId: input.toolCallId,
          reason,
        });
        return { state: current };
      }
      const marked = current.pending!.slice();
      const call = marked[index] as Extract<PendingEntry, { kind: 'call' }>;
      // What its result sets, computed now (the result is at hand only now), applied as it commits.
      const writes =
        plan.facts.length + plan.labels.length === 0
          ? undefined
          : resultWrites(plan, call.tool, input.args, input.result, () => settledView(plan, current, context).state);
      marked[index] = writes === undefined ? { ...call, done: true } : { ...call, done: true, writes };
      return { state: settle(plan, markRan(current, input.toolCallId, true), marked, context, events) };
    }
    case 'tool-failed':
    case 'tool-abandoned': {
      if (callIndex(current, input.toolCallId) < 0) return { state: current };
      const how = input.type === 'tool-failed' ? 'failed' : 'abandoned';
      return {
        state: releaseCall(plan, markRan(current, input.toolCallId, false), input.toolCallId, how, context, events),
      };
    }
    case 'approval-denied': {
      // No decision: the shell answered the model with the person's denial itself. The event says
      // who refused what when the session had asked about the call; a denial of one it never
      // asked about (or whose answer it already took) is no news.
      const asked = current.approvals?.find((approval) => approval.id === input.toolCallId);
      if (asked !== undefined) {
        events.push({
          type: 'approval-declined',
          sessionId: state.sessionId,
          tool: asked.tool,
          toolCallId: input.toolCallId,
          step: current.activeStep,
          ...(asked.rule === undefined ? {} : { rule: asked.rule }),
        });
      }
      return { state: decidedElsewhere(current, input.toolCallId) };
    }
    case 'approval-requested': {
      // Bound to the session as decisions judge it: the settled session.
      const asked = askApproval(current, input, fingerprint(settledView(plan, current, context).state));
      // The app's own requests are the app's to report: the event names the rule that asked.
      if (input.rule === undefined) return { state: asked };
      events.push({
        type: 'approval-requested',
        sessionId: state.sessionId,
        tool: input.tool,
        toolCallId: input.toolCallId,
        step: current.activeStep,
        rule: input.rule,
        reason: plan.rule(input.rule)?.reason ?? '',
      });
      return { state: asked };
    }
    case 'lease-renewed':
      return renewLease(current, input.toolCallId, context);
    case 'tool-used':
      return toolUsed(plan, current, input.tool, input.toolCallId, context, events);
    case 'usage': {
      const { turnId, stepNumber } = input;
      if (turnId === undefined || stepNumber === undefined) return { state: addTokenUsage(current, input.usage) };
      const counted = countUsageOnce(current, turnId, stepNumber);
      return { state: counted === undefined ? current : addTokenUsage(counted, input.usage) };
    }
    case 'observed': {
      const event = input.event;
      if (event.type !== 'tool-rejected' || event.toolCallId === undefined) return { state: current };
      // A call the shell refused is decided, as one refused here is: the AI SDK hands the client
      // a signed approval request for a call its approval hook denied, and that call must not come
      // back approved to be decided again on a session that has moved on.
      const decided = decidedElsewhere(current, event.toolCallId);
      if (input.turnId === undefined) return { state: decided };
      if (replayRecord(current, input.turnId).calls.some((call) => call.id === event.toolCallId))
        return { state: decided };
      const { tool, toolCallId, reason, allowedTools } = event;
      const decision: ToolDecision = { type: 'tool', tool, toolCallId, allowed: false, reason, allowedTools };
      return { state: recordCall(decided, input.turnId, decision) };
    }
    case 'turn-ended': {
      const incomplete = incompleteSequence(plan, current, input.awaitingApproval === true, context);
      if (incomplete !== undefined) events.push(incomplete);
      return { state: current };
    }
  }
}

/**
 * `state` with call `toolCallId`, which the shell decided not to run (a person's denial, a refusal
 * of the model loop's approval hook), counted as decided: its id is seen, so an approval of it
 * sent later is refused, and the approval kept for it is dropped. An id no provider makes is no
 * call that could be approved later: not kept (see the bound).
 */
function decidedElsewhere(state: OrchestrationState, toolCallId: string): OrchestrationState {
  if (toolCallId.length > MAX_DENIED_CALL_ID_LENGTH) return state;
  return spendApproval(rememberCallId(state, toolCallId), toolCallId);
}

/** A user message: refused, or handled now, or queued behind the running calls. */
function userMessage(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  agentId: string | undefined,
  context: TransitionContext,
  events: OrchestrationEvent[],
): { state: OrchestrationState; decision: MessageDecision } {
  const refused = messageRefusal(state, agentId, context.message);
  if (refused !== undefined) return { state, decision: { type: 'message', accepted: false, reason: refused } };
  let current = state;
  if (agentId !== undefined && current.agentId === undefined) current = { ...current, agentId };
  const message = context.message;
  if (current.pending === undefined) {
    // Most turns bring a message already handled, and selection keeps the step: no change.
    const changed = messageChange(plan, current, message);
    if (changed !== undefined) {
      if (changed.events.length > 0) events.push(...changed.events);
      current = plan.hasRules ? resetStepCounts(plan, current, changed.state) : changed.state;
    }
  } else if (message !== undefined && message.key !== currentMessageKey(current)) {
    // Behind a running call: folded after it, in arrival order.
    current = appendEntry(current, { kind: 'message', ...plan.pendingMessage(message) });
  }
  return { state: current, decision: ACCEPTED };
}

/** Why the session does not take this user message (of `agentId`), or undefined when it does. */
function messageRefusal(
  state: OrchestrationState,
  agentId: string | undefined,
  message: MessageInfo | undefined,
): MessageRefusal | undefined {
  if (agentId !== undefined && state.agentId !== undefined && state.agentId !== agentId) {
    return sessionOfAnotherAgent(state.sessionId, state.agentId, agentId);
  }
  const pending = state.pending;
  const full = pending !== undefined && pending.length >= MAX_PENDING_ENTRIES;
  // A message already in the log (another write of the same turn) takes no room.
  if (full && message !== undefined && message.key !== currentMessageKey(state)) {
    return sessionBusy(pending.length, MAX_PENDING_ENTRIES);
  }
  return undefined;
}

/** A durable turn's request of a call it recorded, whose id it may have seen already. */
function isRecordedCallOf(state: OrchestrationState, call: ToolCallRequest): boolean {
  return call.turnId !== undefined && state.replay?.turn === call.turnId;
}

/** A tool call: decided once, and reserved when allowed; a call that must wait changes nothing. */
function toolRequested(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  input: Extract<TransitionInput, { type: 'tool-requested' }>,
  context: TransitionContext,
  events: OrchestrationEvent[],
): { state: OrchestrationState; decision: ToolDecision } {
  const view = settledView(plan, state, context);
  const instead = () => offers(plan, view, input.agentTools, isSuperseded(state, context), context).offered;
  const replayed = replayedCall(state, input, instead);
  if (replayed !== undefined) {
    // A call id of the turn reused for another call is refused now, and reported like any
    // refusal; it is not recorded, so the turn's record keeps the original call's decision.
    if (!replayed.allowed && replayed.replayed === undefined) events.push(rejectedEvent(state, input, replayed));
    return { state, decision: replayed };
  }
  const limits: string[] = [];
  const decision = decideCall(plan, state, view, input, context, limits, isRecordedCallOf(state, input));
  // Not decided yet: the shell waits for the running calls it depends on, then asks again.
  if (!decision.allowed && decision.waitFor !== undefined) return { state, decision };
  // An approval is used once, by the call it was asked for, however it is decided: a refused
  // call's approval must not outlive the id's place among the seen ones.
  // A call decided anew has an id the session has not seen (else it was refused as a repeat).
  const repeat = !decision.allowed && decision.reason.code === 'duplicate-call';
  const unseen = !repeat && !isRecordedCallOf(state, input);
  let current = spendApproval(rememberCallId(state, input.toolCallId, unseen), input.toolCallId);
  if (decision.allowed) {
    const call: PendingEntry = {
      kind: 'call',
      id: input.toolCallId,
      tool: input.tool,
      expiresAt: context.now + (context.leaseMs ?? DEFAULT_LEASE_MS),
    };
    if (limits.length > 0) call.limits = limits;
    // The head of the log carries the message in effect, for folding what follows it.
    if (current.pending === undefined && context.message !== undefined) {
      call.message = plan.pendingMessage(context.message);
    }
    current = appendEntry(current, call);
    const reserved = {
      sessionId: state.sessionId,
      tool: input.tool,
      toolCallId: input.toolCallId,
      step: current.activeStep,
    };
    if (decision.wouldBlock !== undefined)
      events.push({ type: 'tool-would-block', ...reserved, reason: decision.wouldBlock });
    events.push({ type: 'tool-reserved', ...reserved });
  } else {
    events.push(rejectedEvent(current, input, decision));
  }
  if (input.turnId !== undefined) current = recordCall(current, input.turnId, decision, input.argsDigest);
  return { state: current, decision };
}

/** The `tool-rejected` event of a refused request, in the step the session is in. */
function rejectedEvent(
  state: OrchestrationState,
  input: ToolCallRequest,
  decision: Extract<ToolDecision, { allowed: false }>,
): OrchestrationEvent {
  return {
    type: 'tool-rejected',
    sessionId: state.sessionId,
    tool: input.tool,
    toolCallId: input.toolCallId,
    step: state.activeStep,
    allowedTools: decision.allowedTools,
    reason: decision.reason,
  };
}

/** A tool that ran outside enforcement: recorded now, or behind the running calls. */
function toolUsed(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  tool: string,
  toolCallId: string | undefined,
  context: TransitionContext,
  events: OrchestrationEvent[],
): { state: OrchestrationState; decision: RecordDecision } {
  if (toolCallId !== undefined && hasSeen(state, toolCallId)) {
    return { state, decision: { type: 'record', recorded: false, reason: duplicateRecord(toolCallId) } };
  }
  if (state.pending !== undefined && state.pending.length >= MAX_PENDING_ENTRIES) {
    return {
      state,
      decision: { type: 'record', recorded: false, reason: sessionBusy(state.pending.length, MAX_PENDING_ENTRIES) },
    };
  }
  let current = toolCallId === undefined ? state : rememberCallId(state, toolCallId);
  if (current.pending !== undefined) current = appendEntry(current, { kind: 'used', tool });
  else current = recordInto(plan, current, tool, context.message, context, false, undefined, events);
  return { state: current, decision: RECORDED };
}

export {
  type BudgetStatus,
  budgetDenial,
  budgetOf,
} from './engine.js';
export { explain } from './judgement.js';
export { countsKeptByReset } from './leases.js';
export { hasSeen, runningTools, settledState, shadowOf } from './pending-log.js';
export * from './transition-types.js';
