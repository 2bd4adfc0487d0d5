/**
 * The turn protocol as one pure function: `transition(plan, state, input, context)` returns
 * the next state, the events on the way and, for questions, a decision. Every shell (the seed
 * classes, `orchestrate()`, `LLMOrchestrationService`, `baton simulate`, the server) feeds
 * inputs through it and persists what it returns with one atomic store update; none of them
 * decides anything itself.
 *
 * Reserve before run (SPEC section 7). A `tool-requested` input decides and, when the call is
 * allowed, reserves it in the same update: the call joins `state.pending`, so a concurrent turn
 * (in this process or another sharing the store) sees it. The call commits on `tool-completed`
 * and is released on `tool-failed` or when its lease ends. Commits happen in reservation
 * order: a call that completes while an earlier one still runs waits (`done: true`), so the
 * history is always that of a serial run of the reservations.
 *
 * While a call runs, what arrives behind it (user messages, more reservations, unenforced
 * records) waits in the same log, `state.pending`, and is replayed in arrival order as calls
 * finish: the committed state is always a serial run of everything before the oldest running
 * call. A running call's outcome is unknown, so a new request is allowed only when it would be
 * allowed whichever of the running calls complete or fail (every combination, replayed in
 * order); when the answer depends on them the request is refused with reason `pending`. So
 * the calls that run are exactly those a serial run of their reservations allows; the price
 * is that a call racing a running one may be refused where waiting would have let it run.
 *
 * A turn whose user message is no longer the session's latest (a concurrent turn brought a
 * newer one) may not start tools: its requests are refused as `superseded`.
 *
 * Every question is answered from the same outcomes: what a model step is offered
 * (`step-started`), whether a call may run (`tool-requested`) and what `explain()` shows all
 * judge each tool in every combination of the running calls' outcomes, in the step each
 * outcome leaves the session in (so a shadow step's calls hold their place for the serial-order
 * guarantee like any other). A call runs when, in every outcome, the template allows it or that
 * outcome's step is in shadow mode.
 *
 * Bounds: at most {@link MAX_RUNNING_CALLS} running calls and {@link MAX_PENDING_ENTRIES} entries
 * waiting behind them per session; beyond, requests are refused as `pending` and user messages
 * as `session-busy`. A message that waits keeps only its key and the answers of the plan's
 * message conditions (`OrchestrationPlan.pendingMessage`), not its text.
 */

import {
  askApproval,
  type CallFacts,
  countCall,
  fingerprint,
  judgeRules,
  RuleInputs,
  resetStepCounts,
  spendApproval,
} from './call-rules.js';
import type { OrchestrationPlan } from './compile.js';
import type { MessageInfo } from './conditions.js';
import {
  activeStepOf,
  addTokenUsage,
  allowedTools,
  type BudgetStatus,
  budgetDenial,
  budgetOf,
  commitToolUse,
  denialOf,
  handleMessage,
  messageChange,
  type SequenceView,
  viewStep,
} from './engine.js';
import { NO_EVENTS, type OrchestrationEvent, type ToolDenial } from './events.js';
import { firstMatch } from './patterns.js';
import type { CompiledRule } from './rules.js';
import {
  MAX_DENIED_CALL_ID_LENGTH,
  type OrchestrationState,
  type PendingEntry,
  type PendingMessage,
  REPLAY_LIMIT,
  type ReplayedCall,
  type ReplayRecord,
  TOOL_CALL_IDS_LIMIT,
  type TokenUsage,
} from './state.js';

// Budgets are part of explaining a session, so they live in the engine; re-exported for the shells.
export { type BudgetStatus, budgetDenial, budgetOf };

/** What can happen to a session; see each member. */
export type TransitionInput =
  /**
   * A user message arrived (`context.message`): `resetSequenceOn`, then step selection (a
   * {@link MessageDecision}). With `agentId`, the session belongs to that agent from now on, and
   * a session of another agent refuses the message.
   */
  | { readonly type: 'user-message'; readonly agentId?: string | undefined }
  /**
   * A model step starts: decides which tools to offer (a {@link StepDecision}). Changes
   * nothing. It does not handle the message again: a turn does that once, with
   * `user-message`, so concurrent turns on one session do not reset each other's sequence.
   */
  | {
      readonly type: 'step-started';
      readonly agentTools: readonly string[];
      /**
       * A turn under a durable-execution engine: the tools recorded for model step `stepNumber`
       * of turn `turnId` are offered again (a replay sees what the original run saw).
       */
      readonly turnId?: string | undefined;
      readonly stepNumber?: number | undefined;
    }
  /** The tools offered at model step `stepNumber` of turn `turnId`, recorded for its replays. */
  | {
      readonly type: 'step-recorded';
      readonly turnId: string;
      readonly stepNumber: number;
      readonly tools: readonly string[];
      readonly toolChoice: 'auto' | 'none' | 'required';
    }
  /** The model asked to run a tool: decides, and reserves the call when it is allowed (a {@link ToolDecision}). */
  | {
      readonly type: 'tool-requested';
      readonly tool: string;
      readonly toolCallId: string;
      readonly agentTools: readonly string[];
      /** The tools the model was shown for the step that produced the call, when known. */
      readonly offered?: readonly string[] | undefined;
      /** The call's input, for rules on calls (`args` in their conditions). */
      readonly args?: unknown;
      /** A digest of the input (computed by the shell), which an approval is bound to. */
      readonly argsDigest?: string | undefined;
      /** The call comes with a person's approval (an approved call resumed from the history). */
      readonly approved?: boolean | undefined;
      /**
       * A turn under a durable-execution engine: the decision is recorded for turn `turnId`, and a
       * request of a call this turn already decided gets the recorded decision back (`replayed`).
       */
      readonly turnId?: string | undefined;
    }
  /**
   * An `approve` rule asks a person to approve a call (the shell shows the request): the session
   * keeps the approval it asked for, bound to the call id, the input's digest and the session as
   * it stands now, and emits `approval-requested`.
   */
  | {
      readonly type: 'approval-requested';
      readonly tool: string;
      readonly toolCallId: string;
      readonly argsDigest: string;
      /** The rule that asked (the `rule` of the `approval-required` refusal). */
      readonly rule: string;
    }
  /** A reserved call finished: it is committed (history, sequence, step selection) in reservation order. */
  | { readonly type: 'tool-completed'; readonly toolCallId: string }
  /** A reserved call threw: its reservation is released and nothing is recorded. */
  | { readonly type: 'tool-failed'; readonly toolCallId: string }
  /**
   * A reserved call whose outcome is unknown: it was sent on and then cancelled, or its answer
   * never came (a timeout, a closed connection). Released as a failed call is (nothing recorded:
   * history, sequence and step stay), but counted by the limit rules that counted its
   * reservation, in its place in reservation order, since it may have run: a client that cancels
   * every call after it was sent must not get past a limit on what runs.
   */
  | { readonly type: 'tool-abandoned'; readonly toolCallId: string }
  /**
   * A person denied a call's approval (the AI SDK answers the model with the denial; nothing
   * runs): its id counts as seen, so a later approval of the same call is refused as
   * `duplicate-call`, and the approval the session kept for it is dropped.
   */
  | { readonly type: 'approval-denied'; readonly toolCallId: string }
  /**
   * A reserved call still runs: its lease starts again from now (a {@link LeaseDecision}). The
   * process that runs a call renews it, so only a dead process's reservation expires.
   */
  | { readonly type: 'lease-renewed'; readonly toolCallId: string }
  /**
   * A tool ran outside enforcement (the seed's `processToolUsage`): recorded at once, with a
   * violation when it was out of sequence (a {@link RecordDecision}). A `toolCallId` already
   * seen is ignored.
   */
  | { readonly type: 'tool-used'; readonly tool: string; readonly toolCallId?: string | undefined }
  /**
   * One model call's token usage. With `turnId` and `stepNumber` (a turn under a
   * durable-execution engine), a model step's usage is counted once, however often it is replayed.
   */
  | {
      readonly type: 'usage';
      readonly usage: TokenUsage;
      readonly turnId?: string | undefined;
      readonly stepNumber?: number | undefined;
    }
  /**
   * The turn's model loop ended. Changes nothing; emits `sequence-incomplete` when the active
   * step's sequence is unfinished (as far as is known for sure: running calls count as failed).
   */
  | { readonly type: 'turn-ended'; readonly awaitingApproval?: boolean | undefined }
  /**
   * An event a shell decided without the store (a model step decided on the turn's last stored
   * state, a call the model loop refused before any hook), sent with the next write so that the
   * session's event log keeps it in its place. Changes nothing and emits nothing: the shell
   * dispatched it already. With `turnId`, a refusal (`tool-rejected`) is recorded for the turn's
   * replays, which get it back instead of deciding the call again.
   */
  | { readonly type: 'observed'; readonly event: OrchestrationEvent; readonly turnId?: string | undefined };

/** Everything a transition needs besides the state: the clock, the user message, limits. */
export interface TransitionContext {
  /** Milliseconds since the epoch: leases are measured on it. */
  readonly now: number;
  /** The latest user message of the turn, for message conditions. */
  readonly message?: MessageInfo | undefined;
  /** Bound of `recentlyUsedTools` when the plan sets none. */
  readonly historyLimit?: number | undefined;
  /** How long a reservation lives without completing (default {@link DEFAULT_LEASE_MS}). */
  readonly leaseMs?: number | undefined;
  /** What the caller passes with the turn: `context` in the conditions of rules on calls. */
  readonly ruleContext?: Readonly<Record<string, unknown>> | undefined;
}

/** Why a session did not take a user message. */
export type MessageRefusal =
  /** Too much already waits behind the session's running calls: try again when they finish. */
  | { readonly code: 'session-busy'; readonly message: string; readonly queued: number; readonly limit: number }
  /** The session belongs to another agent, whose steps and sequence mean nothing to this one. */
  | { readonly code: 'session-of-another-agent'; readonly message: string; readonly owner: string };

/** The answer to a `user-message` input. */
export type MessageDecision =
  | { readonly type: 'message'; readonly accepted: true }
  | { readonly type: 'message'; readonly accepted: false; readonly reason: MessageRefusal };

/** The answer to a `lease-renewed` input: false when the call no longer holds a reservation. */
export interface LeaseDecision {
  readonly type: 'lease';
  readonly toolCallId: string;
  readonly held: boolean;
}

/** The answer to a `tool-used` input. */
export type RecordDecision =
  | { readonly type: 'record'; readonly recorded: true }
  | {
      readonly type: 'record';
      readonly recorded: false;
      readonly reason:
        | Extract<MessageRefusal, { code: 'session-busy' }>
        | { readonly code: 'duplicate-call'; readonly message: string };
    };

/** Where the session stands for one model step: what to offer, and why. */
export interface StepDecision {
  readonly type: 'step';
  readonly activeStep: string | undefined;
  readonly sequence: SequenceView;
  /**
   * The tools to offer: those that run whatever the running calls' outcomes (in shadow mode,
   * every agent tool).
   */
  readonly allowedTools: readonly string[];
  /**
   * `required` when the model must call one of `allowedTools` (a `requireSequence` step whose
   * sequence is unfinished), `none` when no tool is offered, else `auto`.
   */
  readonly toolChoice: 'auto' | 'none' | 'required';
  /** Tools of reserved calls still running (other turns'), oldest first. */
  readonly running: readonly string[];
  /** Shadow mode: every agent tool is offered; `wouldOffer` is what enforcement would offer. */
  readonly shadow: boolean;
  /** In shadow mode, the tools enforcement would offer. */
  readonly wouldOffer?: readonly string[];
  /**
   * A spent token budget: no tool is offered, and no model call should be made for the session
   * (in shadow mode, only reported).
   */
  readonly budget?: BudgetStatus;
}

/** One tool in an {@link Explanation}: allowed now, or why not. */
export interface ToolExplanation {
  readonly tool: string;
  /** Enforcement's answer: in shadow mode, whether the template would allow it. */
  readonly allowed: boolean;
  /** Why not, when not allowed. */
  readonly reason?: ToolDenial;
  /**
   * When allowed and the active step lists `availableTools.allowed`: the first of its patterns
   * that lets the tool through (a name, a glob, or an annotation selector such as `@readOnly`).
   */
  readonly allowedBy?: string;
  /**
   * Rules on calls whose condition depends on the call's input, so that they may still refuse a
   * call of it, or ask a person to approve one (`effect`: `deny`, `allow`, `approve` or `limit`).
   */
  readonly rules?: readonly { readonly rule: string; readonly effect: string; readonly reason: string }[];
}

/**
 * Everything about what the agent may do now and why: the step decision a model step would get,
 * with each tool judged as a call of it would be (see {@link explain}).
 */
export interface Explanation extends Omit<StepDecision, 'type'> {
  readonly sessionId: string;
  readonly stepDescription: string | undefined;
  /** Every agent tool, then every tool the config names that the agent does not have. */
  readonly tools: readonly ToolExplanation[];
}

/** The answer to a `tool-requested` input. */
export type ToolDecision =
  | {
      readonly type: 'tool';
      readonly tool: string;
      readonly toolCallId: string;
      readonly allowed: true;
      /** Shadow mode: the call runs, but enforcement would have refused it for this reason. */
      readonly wouldBlock?: ToolDenial;
      /**
       * A replay of a call its turn already decided (`turnId`): `running`, its reservation still
       * holds (it commits as usual); `settled`, it completed and was recorded, or failed (nothing
       * to commit or release: the engine replays its outcome).
       */
      readonly replayed?: 'running' | 'settled';
    }
  | {
      readonly type: 'tool';
      readonly tool: string;
      readonly toolCallId: string;
      readonly allowed: false;
      readonly reason: ToolDenial;
      /** What the model may call instead. */
      readonly allowedTools: readonly string[];
      /** The recorded refusal of a call its turn already decided. */
      readonly replayed?: 'settled';
    };

/** A decision of {@link transition}. */
export type TransitionDecision = StepDecision | ToolDecision | MessageDecision | LeaseDecision | RecordDecision;

/** The result of {@link transition}. `state` is the input object when nothing changed. */
export interface TransitionResult {
  readonly state: OrchestrationState;
  readonly events: readonly OrchestrationEvent[];
  readonly decision?: TransitionDecision;
}

/**
 * Default lease of a reservation: 2 minutes. The process that runs a call renews it while the
 * call runs (`lease-renewed`), so only a call whose process died loses its place.
 */
export const DEFAULT_LEASE_MS = 120_000;

/**
 * Most reserved calls that may run at once in one session. Deciding a request replays every
 * combination of their outcomes (2^n), so beyond this a request is refused as `pending`.
 */
export const MAX_RUNNING_CALLS = 8;

/**
 * Most entries (calls, user messages, unenforced records) that may wait in a session's pending
 * log behind its oldest running call. Every decision replays them; beyond this a request is
 * refused as `pending` and a user message as `session-busy`.
 */
export const MAX_PENDING_ENTRIES = 32;

/** Applies one input to `state` (see the module comment). Pure: no I/O, time from `context`. */
export function transition(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  input: TransitionInput,
  context: TransitionContext,
): TransitionResult {
  const decision = applyInput(plan, state, input, context);
  const next = applied.state ?? state;
  const events = applied.events;
  return decision === undefined ? { state: next, events } : { state: next, events, decision };
}

/**
 * The result of the latest {@link applyInput} besides its decision, read right after it:
 * `transitionAll` takes it from here instead of a result object per input. `state` is undefined
 * when the input changed nothing (most inputs): storing a new state in this long-lived object
 * costs V8 a write barrier, paid only for a change.
 */
const applied: { state: OrchestrationState | undefined; events: readonly OrchestrationEvent[] } = {
  state: undefined,
  events: NO_EVENTS,
};

/** {@link transition}, leaving the new state and the events in {@link applied}. */
function applyInput(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  input: TransitionInput,
  context: TransitionContext,
): TransitionDecision | undefined {
  // One scratch list, replaced only when something happened: most transitions emit nothing, and
  // this runs for every input of every turn. A transition started while one is under way (a
  // custom condition that calls into a manager) gets a list of its own, or it would empty the
  // outer one's.
  if (scratchInUse) return applyWith(plan, state, input, context, []);
  scratchInUse = true;
  try {
    return applyWith(plan, state, input, context, scratchEvents);
  } finally {
    scratchInUse = false;
  }
}

let scratchInUse = false;

/** {@link applyInput} collecting events in `events`, which it leaves empty or hands over as its events. */
function applyWith(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  input: TransitionInput,
  context: TransitionContext,
  events: OrchestrationEvent[],
): TransitionDecision | undefined {
  // Setting an array's length is a runtime call in V8, costlier than the usual transition itself:
  // the list is emptied only when something is in it (a transition that threw left it so).
  if (events.length !== 0) events.length = 0;
  let current = expireLeases(plan, state, context, events);
  let decision: TransitionDecision | undefined;
  switch (input.type) {
    case 'user-message': {
      const refused = messageRefusal(current, input.agentId, context.message);
      if (refused !== undefined) {
        decision = { type: 'message', accepted: false, reason: refused };
        break;
      }
      decision = ACCEPTED;
      if (input.agentId !== undefined && current.agentId === undefined)
        current = { ...current, agentId: input.agentId };
      const message = context.message;
      if (current.pending === undefined) {
        // Most turns bring a message already handled, and selection keeps the step: no change.
        const changed = messageChange(plan, current, message);
        if (changed !== undefined) current = collect(withStepCounts(plan, current, changed), events);
      } else if (message !== undefined && message.key !== currentMessageKey(current)) {
        // Behind a running call: replayed after it, in arrival order.
        current = appendEntry(current, { kind: 'message', ...plan.pendingMessage(message) });
      }
      break;
    }
    case 'step-started': {
      const step = decideStep(plan, current, undefined, input.agentTools, context, events);
      const recorded =
        input.turnId !== undefined && current.replay?.turn === input.turnId
          ? current.replay.offers[input.stepNumber ?? -1]
          : undefined;
      decision = recorded ? { ...step, allowedTools: recorded.tools, toolChoice: recorded.toolChoice } : step;
      break;
    }
    case 'step-recorded': {
      const record = replayRecord(current, input.turnId);
      if (input.stepNumber >= REPLAY_LIMIT || record.offers[input.stepNumber]) break;
      const offers = record.offers.slice();
      while (offers.length < input.stepNumber) offers.push(null);
      offers[input.stepNumber] = { tools: [...input.tools], toolChoice: input.toolChoice };
      current = { ...current, replay: { ...record, offers } };
      break;
    }
    case 'tool-requested': {
      const replayed = replayedCall(plan, current, input, context);
      if (replayed !== undefined) {
        decision = replayed;
        // A call id of the turn reused for another call is refused now, and reported like any
        // refusal; it is not recorded, so the turn's record keeps the original call's decision.
        if (!replayed.allowed && replayed.replayed === undefined) {
          events.push(rejectedEvent(state.sessionId, current, input, replayed));
        }
        break;
      }
      const limits: string[] = [];
      // A recorded call whose reservation ended without completing is decided again, as new.
      const again = input.turnId !== undefined && current.replay?.turn === input.turnId;
      const tool = decideCall(plan, current, outcomesOf(plan, current, context), input, context, limits, again);
      decision = tool;
      current = rememberCallId(current, input.toolCallId);
      if (tool.allowed) {
        const lease = context.leaseMs ?? DEFAULT_LEASE_MS;
        const call: PendingEntry = {
          kind: 'call',
          id: input.toolCallId,
          tool: input.tool,
          expiresAt: context.now + lease,
        };
        if (limits.length > 0) call.limits = limits;
        // An approval is used once: by the call it was asked for.
        if (input.approved === true) current = spendApproval(current, input.toolCallId);
        // The head of the log carries the message in effect, for replaying what follows it.
        if (current.pending === undefined && context.message !== undefined) {
          call.message = plan.pendingMessage(context.message);
        }
        current = appendEntry(current, call);
        if (tool.wouldBlock !== undefined) {
          events.push({
            type: 'tool-would-block',
            sessionId: state.sessionId,
            tool: input.tool,
            toolCallId: input.toolCallId,
            step: current.activeStep,
            reason: tool.wouldBlock,
          });
        }
        events.push({
          type: 'tool-reserved',
          sessionId: state.sessionId,
          tool: input.tool,
          toolCallId: input.toolCallId,
          step: current.activeStep,
        });
      } else {
        events.push(rejectedEvent(state.sessionId, current, input, tool));
      }
      if (input.turnId !== undefined) current = recordCall(current, input.turnId, tool, input.argsDigest);
      break;
    }
    case 'tool-completed': {
      const pending = current.pending ?? [];
      const index = pending.findIndex((entry) => entry.kind === 'call' && entry.id === input.toolCallId);
      if (index < 0) {
        // Its lease ended (or it was never reserved): its place may have gone to another call.
        // Reported, not recorded: recording it now could break the serial order of what ran.
        events.push({
          type: 'tool-released',
          sessionId: state.sessionId,
          tool: undefined,
          toolCallId: input.toolCallId,
          reason: 'late',
        });
        break;
      }
      const marked = pending.slice();
      marked[index] = { ...(pending[index] as CallEntry), done: true };
      current = settle(plan, markRan(current, input.toolCallId, true), marked, context, events);
      break;
    }
    case 'tool-failed':
    case 'tool-abandoned': {
      const pending = current.pending ?? [];
      const index = pending.findIndex((entry) => entry.kind === 'call' && entry.id === input.toolCallId);
      if (index < 0) break;
      const call = pending[index] as CallEntry;
      const abandoned = input.type === 'tool-abandoned';
      events.push({
        type: 'tool-released',
        sessionId: state.sessionId,
        tool: call.tool,
        toolCallId: input.toolCallId,
        reason: abandoned ? 'abandoned' : 'failed',
      });
      // An abandoned call that limits count keeps its place as a count only, so the limits see
      // it where it would have committed; anything else leaves the log.
      const rest =
        abandoned && call.limits !== undefined
          ? countedInstead(pending, index, call.limits)
          : removeCall(pending, index);
      current = settle(plan, markRan(current, input.toolCallId, false), rest, context, events);
      break;
    }
    case 'approval-denied':
      // No decision and no event: the shell answered the model with the person's denial itself.
      // An id no provider makes is no call that could be approved later: not kept (see the bound).
      if (input.toolCallId.length > MAX_DENIED_CALL_ID_LENGTH) break;
      current = spendApproval(rememberCallId(current, input.toolCallId), input.toolCallId);
      break;
    case 'approval-requested': {
      // Bound to the session as the rules judge it: the outcome where every running call fails.
      current = askApproval(current, input, fingerprint(settledState(plan, current, context)));
      const rule = plan.rule(input.rule);
      events.push({
        type: 'approval-requested',
        sessionId: state.sessionId,
        tool: input.tool,
        toolCallId: input.toolCallId,
        step: current.activeStep,
        rule: input.rule,
        reason: rule?.reason ?? '',
      });
      break;
    }
    case 'lease-renewed': {
      const pending = current.pending ?? [];
      const index = pending.findIndex(
        (entry) => entry.kind === 'call' && entry.id === input.toolCallId && entry.done !== true,
      );
      decision = { type: 'lease', toolCallId: input.toolCallId, held: index >= 0 };
      if (index < 0) break;
      const entry = pending[index] as CallEntry;
      const expiresAt = context.now + (context.leaseMs ?? DEFAULT_LEASE_MS);
      if (expiresAt <= entry.expiresAt) break;
      const renewed = pending.slice();
      renewed[index] = { ...entry, expiresAt };
      current = { ...current, pending: renewed };
      break;
    }
    case 'tool-used': {
      const id = input.toolCallId;
      if (id !== undefined && hasSeen(current, id)) {
        decision = {
          type: 'record',
          recorded: false,
          reason: { code: 'duplicate-call', message: `tool call id "${id}" was already recorded in this session` },
        };
        break;
      }
      if (current.pending !== undefined && current.pending.length >= MAX_PENDING_ENTRIES) {
        decision = { type: 'record', recorded: false, reason: busy(current.pending.length) };
        break;
      }
      decision = RECORDED;
      if (id !== undefined) current = rememberCallId(current, id);
      if (current.pending !== undefined) current = appendEntry(current, { kind: 'used', tool: input.tool });
      else current = recordInto(plan, current, input.tool, context.message, context, false, undefined, events);
      break;
    }
    case 'usage': {
      const { turnId, stepNumber } = input;
      if (turnId === undefined || stepNumber === undefined) {
        current = addTokenUsage(current, input.usage);
        break;
      }
      const record = replayRecord(current, turnId);
      if (record.usage?.includes(stepNumber)) break; // a replayed model step: counted already
      const usage = [...(record.usage ?? []), stepNumber].slice(-REPLAY_LIMIT);
      current = { ...addTokenUsage(current, input.usage), replay: { ...record, usage } };
      break;
    }
    case 'observed': {
      const event = input.event;
      if (input.turnId === undefined || event.type !== 'tool-rejected' || event.toolCallId === undefined) break;
      if (replayRecord(current, input.turnId).calls.some((call) => call.id === event.toolCallId)) break;
      current = recordCall(current, input.turnId, {
        type: 'tool',
        tool: event.tool,
        toolCallId: event.toolCallId,
        allowed: false,
        reason: event.reason,
        allowedTools: event.allowedTools,
      });
      break;
    }
    case 'turn-ended': {
      const incomplete = incompleteSequence(plan, current, input.awaitingApproval === true, context);
      if (incomplete !== undefined) events.push(incomplete);
      break;
    }
  }
  let emitted: readonly OrchestrationEvent[] = NO_EVENTS;
  if (events.length !== 0) {
    // The list itself is the result, and the scratch list starts anew: cheaper than copying it
    // and emptying it (a runtime call), which every recorded tool would pay.
    emitted = events;
    if (events === scratchEvents) scratchEvents = [];
  }
  applied.state = current === state ? undefined : current;
  applied.events = emitted;
  return decision;
}

let scratchEvents: OrchestrationEvent[] = [];
const ACCEPTED: MessageDecision = Object.freeze({ type: 'message', accepted: true });
const RECORDED: RecordDecision = Object.freeze({ type: 'record', recorded: true });

/** The session's replay record of `turnId`: its own, or a new one (a new turn replaces the old). */
function replayRecord(state: OrchestrationState, turnId: string): ReplayRecord {
  const record = state.replay;
  return record?.turn === turnId ? record : { turn: turnId, offers: [], calls: [] };
}

/**
 * The recorded decision of a call its turn already decided, for a replay (undefined: decide it
 * now). An allowed call whose reservation ended without an outcome (its process died and its
 * lease ran out) is decided again, as a new call: what runs is still what the store allows.
 *
 * A replay is the same call: the same tool with the same input. The id is the model's to
 * choose, so a request that reuses a recorded id for another tool or another input (another
 * digest) is refused as `duplicate-call` (without `replayed`): handing it the original's
 * decision would let it skip the step's tools and every rule, and deciding it as new would run
 * an id twice.
 */
function replayedCall(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  input: ToolCallRequest,
  context: TransitionContext,
): ToolDecision | undefined {
  if (input.turnId === undefined || state.replay?.turn !== input.turnId) return undefined;
  const recorded = state.replay.calls.find((call) => call.id === input.toolCallId);
  if (recorded === undefined) return undefined;
  const { tool, toolCallId } = input;
  if (!isSameCall(state, recorded, input)) {
    const reason: ToolDenial = {
      code: 'duplicate-call',
      toolCallId,
      message: `tool call id "${toolCallId}" was already used in this turn for another tool or input; a call id runs at most once`,
    };
    const outcomes = outcomesOf(plan, state, context);
    const instead = offers(plan, outcomes, input.agentTools, isSuperseded(state, context), isCapped(state), context);
    return refusal(input, reason, instead.offered);
  }
  if (!recorded.allowed) {
    const reason: ToolDenial = recorded.reason ?? {
      code: 'duplicate-call',
      toolCallId,
      message: `tool call id "${toolCallId}" was refused before`,
    };
    const allowedTools = recorded.allowedTools ?? [];
    return { type: 'tool', tool, toolCallId, allowed: false, reason, allowedTools, replayed: 'settled' };
  }
  const running = state.pending?.some((entry) => entry.kind === 'call' && entry.id === toolCallId) === true;
  if (running) return { type: 'tool', tool, toolCallId, allowed: true, replayed: 'running' };
  // Completed or failed: its tool ran, and the engine replays its outcome (a failure too), so the
  // replay gets the same decision, not one on a session later calls have moved on.
  if (recorded.ran !== undefined) return { type: 'tool', tool, toolCallId, allowed: true, replayed: 'settled' };
  return undefined;
}

/** The `tool-rejected` event of a refused request, in the step the session is in. */
function rejectedEvent(
  sessionId: string,
  state: OrchestrationState,
  input: ToolCallRequest,
  decision: Extract<ToolDecision, { allowed: false }>,
): OrchestrationEvent {
  return {
    type: 'tool-rejected',
    sessionId,
    tool: input.tool,
    toolCallId: input.toolCallId,
    step: state.activeStep,
    allowedTools: decision.allowedTools,
    reason: decision.reason,
  };
}

/**
 * True when `input` is the call `recorded` was decided for: the same tool and, when the record
 * has a digest, the same one (a request without a digest does not match it: fail closed). A
 * record stored before tools were kept has none: the tool of the call's reservation, while it
 * holds, stands in for it.
 */
function isSameCall(state: OrchestrationState, recorded: ReplayedCall, input: ToolCallRequest): boolean {
  let tool = recorded.tool;
  if (tool === undefined) {
    const reserved = state.pending?.find((entry) => entry.kind === 'call' && entry.id === input.toolCallId);
    tool = reserved?.kind === 'call' ? reserved.tool : undefined;
  }
  if (tool !== undefined && tool !== input.tool) return false;
  // A refused call's input counts too: a refusal such as `approval-required` was judged on it.
  return recorded.digest === undefined || recorded.digest === input.argsDigest;
}

/**
 * `state` with `decision` recorded for the replays of turn `turnId`, with its tool and the
 * digest of its input (`digest`, when the shell computed one), which a replay must match.
 */
function recordCall(
  state: OrchestrationState,
  turnId: string,
  decision: ToolDecision,
  digest?: string,
): OrchestrationState {
  const record = replayRecord(state, turnId);
  const call: ReplayedCall = { id: decision.toolCallId, tool: decision.tool, allowed: decision.allowed };
  if (digest !== undefined) call.digest = digest;
  if (!decision.allowed) {
    call.reason = decision.reason;
    call.allowedTools = [...decision.allowedTools];
  }
  const calls = [...record.calls.filter((c) => c.id !== call.id), call].slice(-REPLAY_LIMIT);
  return { ...state, replay: { ...record, calls } };
}

/** `state` with the recorded call `toolCallId` marked as run (completed) or not (failed). */
function markRan(state: OrchestrationState, toolCallId: string, ran: boolean): OrchestrationState {
  const record = state.replay;
  const index = record?.calls.findIndex((call) => call.id === toolCallId) ?? -1;
  if (record === undefined || index < 0) return state;
  const calls = record.calls.slice();
  calls[index] = { ...calls[index]!, ran };
  return { ...state, replay: { ...record, calls } };
}

/** True for the decision of a user message the session did not take. */
export function isRefusedMessage(
  decision: TransitionDecision | undefined,
): decision is Extract<MessageDecision, { accepted: false }> {
  return decision?.type === 'message' && !decision.accepted;
}

/** Why the session does not take this user message (of `agentId`), or undefined when it does. */
function messageRefusal(
  state: OrchestrationState,
  agentId: string | undefined,
  message: MessageInfo | undefined,
): MessageRefusal | undefined {
  if (agentId !== undefined && state.agentId !== undefined && state.agentId !== agentId) {
    return {
      code: 'session-of-another-agent',
      owner: state.agentId,
      message: `session "${state.sessionId}" belongs to agent "${state.agentId}"; start a new session for "${agentId}"`,
    };
  }
  const pending = state.pending;
  if (
    pending !== undefined &&
    pending.length >= MAX_PENDING_ENTRIES &&
    message !== undefined &&
    message.key !== currentMessageKey(state)
  ) {
    return busy(pending.length);
  }
  return undefined;
}

function busy(queued: number): Extract<MessageRefusal, { code: 'session-busy' }> {
  return {
    code: 'session-busy',
    queued,
    limit: MAX_PENDING_ENTRIES,
    message: `${queued} calls and messages already wait behind the calls running in this session (at most ${MAX_PENDING_ENTRIES}); try again when they finish`,
  };
}

/** The result of {@link transitionAll}: one decision slot per input. */
export interface TransitionAllResult {
  readonly state: OrchestrationState;
  readonly events: readonly OrchestrationEvent[];
  readonly decisions: readonly (TransitionDecision | undefined)[];
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
  // The first input's events that are not empty are taken as they are (each transition returns
  // a list of its own); a second list is joined to a copy.
  let events: readonly OrchestrationEvent[] = NO_EVENTS;
  let joined: OrchestrationEvent[] | undefined;
  const decisions: (TransitionDecision | undefined)[] = new Array(inputs.length);
  for (let i = 0; i < inputs.length; i++) {
    const decision = applyInput(plan, current, inputs[i]!, context);
    current = applied.state ?? current;
    const emitted = applied.events;
    if (emitted.length > 0) {
      if (events.length === 0) events = emitted;
      else {
        joined ??= events.slice();
        joined.push(...emitted);
        events = joined;
      }
    }
    decisions[i] = decision;
    if (isRefusedMessage(decision)) break;
  }
  return { state: current, events, decisions };
}

/** A tool call to decide: what `tool-requested` carries. */
export interface ToolCallRequest {
  readonly tool: string;
  readonly toolCallId: string;
  readonly agentTools: readonly string[];
  /** The tools the model was shown for the step that produced the call, when known. */
  readonly offered?: readonly string[] | undefined;
  /** The call's input, for rules on calls. */
  readonly args?: unknown;
  /** A digest of the input, which an approval is bound to. */
  readonly argsDigest?: string | undefined;
  /** The call comes with a person's approval. */
  readonly approved?: boolean | undefined;
  /** A turn under a durable-execution engine: a call it already decided gets that decision back. */
  readonly turnId?: string | undefined;
}

/** A refusal of `call` for `reason`, with what the model may call instead. */
function refusal(call: ToolCallRequest, reason: ToolDenial, allowedTools: readonly string[]): ToolDecision {
  return { type: 'tool', tool: call.tool, toolCallId: call.toolCallId, allowed: false, reason, allowedTools };
}

/**
 * Decides a tool call without changing anything: what `tool-requested` would answer. For
 * checks that must not reserve (an approval prompt shown to a person before the call runs).
 */
export function decideToolCall(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  call: ToolCallRequest,
  context: TransitionContext,
): ToolDecision {
  const replayed = replayedCall(plan, state, call, context);
  if (replayed !== undefined) return replayed;
  const again = call.turnId !== undefined && state.replay?.turn === call.turnId;
  return decideCall(plan, state, outcomesOf(plan, state, context), call, context, [], again);
}

/**
 * Explains, for every tool, whether a call of it would be allowed now and why not, with the
 * step decision a model step would get: the same judgement of the same outcomes as
 * `tool-requested` and `step-started`, so a view never disagrees with a decision (running
 * calls, shadow mode and budgets included). Pure: nothing is written, no event is kept.
 */
export function explain(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  agentTools: readonly string[],
  context: TransitionContext,
): Explanation {
  const current = expireLeases(plan, state, context, []);
  const outcomes = outcomesOf(plan, current, context);
  const { type: _type, ...step } = decideStep(plan, current, outcomes, agentTools, context, []);
  const capped = isCapped(current);
  const preset = isSuperseded(current, context) ? SUPERSEDED : undefined;
  const active = plan.step(step.activeStep);
  const tools: ToolExplanation[] = agentTools.map((tool) => {
    if (capped) return { tool, allowed: false, reason: capDenial(step.running) };
    const judged = judge(plan, current, outcomes, tool, agentTools, preset, undefined, context);
    const rules =
      judged.conditional.length === 0
        ? {}
        : {
            rules: judged.conditional.map((rule) => ({
              rule: rule.id,
              effect: rule.effect ?? 'limit',
              reason: rule.reason,
            })),
          };
    if (judged.enforced === 'all') {
      const by = active === undefined || active.allowed.length === 0 ? undefined : firstMatch(active.allowed, tool);
      return by === undefined
        ? { tool, allowed: true, ...rules }
        : { tool, allowed: true, allowedBy: by.pattern, ...rules };
    }
    // The decision's own reason: whether it runs, or would be blocked, depends on running calls
    // unless every outcome agrees (see decideCall).
    const depends = judged.runs === 'some' || judged.enforced === 'some';
    return { tool, allowed: false, reason: depends ? pendingDenial(tool, step.running) : judged.first!, ...rules };
  });
  const known = new Set(agentTools);
  for (const tool of plan.referencedTools) {
    if (!known.has(tool)) {
      tools.push({
        tool,
        allowed: false,
        reason: { code: 'no-such-tool', message: `the orchestration names "${tool}", but the agent has no such tool` },
      });
    }
  }
  return {
    ...step,
    sessionId: current.sessionId,
    stepDescription: plan.step(step.activeStep)?.description,
    tools,
  };
}

/**
 * Decides `call` on `state`, whose outcomes are `outcomes` (see the module comment). The ids of
 * the limit rules that count the call, if it runs, are pushed to `limits`.
 */
function decideCall(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  outcomes: readonly OrchestrationState[],
  call: ToolCallRequest,
  context: TransitionContext,
  limits: string[] = [],
  again = false,
): ToolDecision {
  const { tool, toolCallId, agentTools } = call;
  const instead = () =>
    offers(plan, outcomes, agentTools, isSuperseded(state, context), isCapped(state), context).offered;
  if (hasSeen(state, toolCallId) && !(again && state.replay?.calls.some((c) => c.id === toolCallId))) {
    return refusal(
      call,
      {
        code: 'duplicate-call',
        toolCallId,
        message: `tool call id "${toolCallId}" was already used in this session; a call id runs at most once`,
      },
      instead(),
    );
  }
  const running = runningTools(state);
  // Resource limits, kept in shadow mode too: deciding replays 2^n outcomes of the whole log.
  if (isCapped(state)) return refusal(call, capDenial(running), []);
  if (!agentTools.includes(tool)) {
    return refusal(call, { code: 'no-such-tool', message: `"${tool}" is not one of the agent's tools` }, instead());
  }
  let preset: ToolDenial | undefined;
  let alternatives: (() => readonly string[]) | undefined;
  if (isSuperseded(state, context)) {
    preset = SUPERSEDED;
    alternatives = () => [];
  } else if (call.offered !== undefined && !call.offered.includes(tool)) {
    const offered = call.offered;
    preset = { code: 'not-offered', offered, message: `"${tool}" was not offered for this model step` };
    alternatives = () => offered;
  }
  const facts: CallFacts = {
    toolCallId,
    args: call.args,
    argsDigest: call.argsDigest,
    approved: call.approved === true,
    context: context.ruleContext,
  };
  const judged = judge(plan, state, outcomes, tool, agentTools, preset, new RuleInputs(facts), context);
  limits.push(...judged.limits);
  if (judged.runs === 'all') {
    if (judged.enforced === 'all') return { type: 'tool', tool, toolCallId, allowed: true };
    // Shadow mode: it runs, and enforcement's answer is reported.
    const wouldBlock = judged.enforced === 'none' ? judged.first! : pendingDenial(tool, running);
    return { type: 'tool', tool, toolCallId, allowed: true, wouldBlock };
  }
  const reason = judged.runs === 'none' ? judged.first! : pendingDenial(tool, running);
  return refusal(call, reason, (alternatives ?? instead)());
}

/** How many outcomes of the running calls something holds in. */
type Extent = 'all' | 'none' | 'some';

/** A tool judged in every outcome of the running calls. */
interface Judgement {
  /** Where a call of it runs: the template allows it, or the outcome's step is in shadow mode. */
  readonly runs: Extent;
  /** Where the template allows it. */
  readonly enforced: Extent;
  /** The first reason it is refused, in outcome order (all running calls failing comes first). */
  readonly first: ToolDenial | undefined;
  /** Limit rules that count the call when it commits (in any outcome). */
  readonly limits: readonly string[];
  /** Rules whose condition needs the call's input, which `explain` cannot judge. */
  readonly conditional: readonly CompiledRule[];
}

/**
 * Judges `tool` in every outcome of `state`'s running calls (`outcomes`, see {@link outcomesOf}):
 * each completes, fails or is abandoned. `outcomes` take every call that does not complete as
 * abandoned (counted), which is exact for "allowed in all". Where some refuse and a running call
 * is counted by a limit, whether all refuse is told by the outcomes where those calls fail
 * instead: counts only make refusals, so an outcome refused with fewer counts is refused with more.
 */
function judge(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  outcomes: readonly OrchestrationState[],
  tool: string,
  agentTools: readonly string[],
  preset: ToolDenial | undefined,
  inputs: RuleInputs | undefined,
  context: TransitionContext,
): Judgement {
  const counted = judgeIn(plan, outcomes, tool, agentTools, preset, inputs, context);
  if (counted.runs === 'all' || !hasCountedRunning(state)) return counted;
  const failed = judgeIn(plan, outcomesOf(plan, state, context, false), tool, agentTools, preset, inputs, context);
  return {
    runs: failed.runs === 'none' ? 'none' : 'some',
    enforced: counted.enforced === 'all' ? 'all' : failed.enforced === 'none' ? 'none' : 'some',
    // In outcome order, all running calls failing first: what holds for sure comes first.
    first: failed.first ?? counted.first,
    limits: failed.limits.length === 0 ? counted.limits : union([...counted.limits], failed.limits),
    conditional:
      failed.conditional.length === 0 ? counted.conditional : union([...counted.conditional], failed.conditional),
  };
}

/** True when a running call of `state` is counted by a limit rule, however it ends but failing. */
function hasCountedRunning(state: OrchestrationState): boolean {
  return state.pending?.some((entry) => isRunning(entry) && entry.limits !== undefined) === true;
}

/**
 * Judges `tool` in every one of `outcomes`: `preset` (a reason that holds whatever the outcome),
 * else the step's rules (SPEC sections 4 and 5), else a spent budget, else the rules on calls
 * (SPEC section 9; `inputs` undefined: the call's input is unknown, as in `explain`).
 */
function judgeIn(
  plan: OrchestrationPlan,
  outcomes: readonly OrchestrationState[],
  tool: string,
  agentTools: readonly string[],
  preset: ToolDenial | undefined,
  inputs: RuleInputs | undefined,
  context: TransitionContext,
): Judgement {
  let first: ToolDenial | undefined;
  let allowed = 0;
  let runs = 0;
  let limits: string[] | undefined;
  let conditional: CompiledRule[] | undefined;
  for (const outcome of outcomes) {
    let denial = preset ?? denialOf(plan, outcome, tool, agentTools) ?? budgetDenialIn(plan, outcome);
    if (denial === undefined && plan.hasRules) {
      const verdict = judgeRules(plan, outcome, tool, inputs, context.message, context.now);
      denial = verdict.denial;
      if (verdict.limits.length > 0) limits = union(limits, verdict.limits);
      if (verdict.conditional.length > 0) conditional = union(conditional, verdict.conditional);
    }
    if (denial === undefined) {
      allowed++;
      runs++;
    } else {
      first ??= denial;
      if (shadowOf(plan, outcome)) runs++;
    }
  }
  return {
    runs: extent(runs, outcomes.length),
    enforced: extent(allowed, outcomes.length),
    first,
    limits: limits ?? NO_TOOLS,
    conditional: conditional ?? NO_RULES,
  };
}

const NO_RULES: readonly CompiledRule[] = Object.freeze([]);

function union<T>(into: T[] | undefined, items: readonly T[]): T[] {
  const out = into ?? [];
  for (const item of items) if (!out.includes(item)) out.push(item);
  return out;
}

function extent(count: number, of: number): Extent {
  return count === of ? 'all' : count === 0 ? 'none' : 'some';
}

function budgetDenialIn(plan: OrchestrationPlan, state: OrchestrationState): ToolDenial | undefined {
  const budget = budgetOf(plan, state);
  return budget === undefined ? undefined : budgetDenial(budget);
}

const SUPERSEDED: ToolDenial = Object.freeze({
  code: 'superseded',
  message: 'a newer user message arrived in this session, so this turn may not start tools; answer without tools',
});

function pendingDenial(tool: string, running: readonly string[]): ToolDenial {
  return {
    code: 'pending',
    running,
    message: `whether "${tool}" may run depends on ${running.join(', ')}, still running in this session; try again when ${running.length === 1 ? 'it finishes' : 'they finish'}`,
  };
}

function capDenial(running: readonly string[]): ToolDenial {
  return {
    code: 'pending',
    running,
    message: `${running.length} calls are still running in this session, with ${MAX_PENDING_ENTRIES} entries at most waiting behind them (at most ${MAX_RUNNING_CALLS} running); try again when they finish`,
  };
}

/** True when the session is at a bound of its pending log: nothing more may be reserved. */
function isCapped(state: OrchestrationState): boolean {
  const pending = state.pending;
  if (pending === undefined) return false;
  return pending.length >= MAX_PENDING_ENTRIES || runningTools(state).length >= MAX_RUNNING_CALLS;
}

/**
 * The tools a model step is offered (those a call of would run in every outcome) and, for shadow
 * mode, those enforcement would offer. `blocked`: the turn is superseded; `capped`: a bound of
 * the pending log is reached.
 */
function offers(
  plan: OrchestrationPlan,
  outcomes: readonly OrchestrationState[],
  agentTools: readonly string[],
  blocked: boolean,
  capped: boolean,
  context: TransitionContext,
): { offered: readonly string[]; enforced: readonly string[] } {
  if (capped) return { offered: NO_TOOLS, enforced: NO_TOOLS };
  let offered: readonly string[] | undefined;
  let enforced: readonly string[] | undefined;
  for (const outcome of outcomes) {
    let allowed =
      blocked || budgetOf(plan, outcome) !== undefined ? NO_TOOLS : allowedTools(plan, outcome, agentTools).tools;
    if (plan.hasRules && allowed.length > 0) allowed = allowedByRules(plan, outcome, allowed, context);
    const runs = shadowOf(plan, outcome) ? plan.allTools(agentTools) : allowed;
    enforced = enforced === undefined ? allowed : intersect(enforced, allowed);
    offered = offered === undefined ? runs : intersect(offered, runs);
  }
  return { offered: offered ?? NO_TOOLS, enforced: enforced ?? NO_TOOLS };
}

const NO_TOOLS: readonly string[] = Object.freeze([]);
const NOTHING_OFFERED = Object.freeze({ offered: NO_TOOLS, enforced: NO_TOOLS });

/** {@link offers} for one outcome without rules, budget or shadow mode. */
function simpleOffer(
  allowed: readonly string[],
  refused: boolean,
): { offered: readonly string[]; enforced: readonly string[] } {
  return refused ? NOTHING_OFFERED : { offered: allowed, enforced: allowed };
}

/**
 * The tools of `tools` that the rules on calls let a model be offered in `state`: those no
 * unconditional rule refuses (a spent limit, a `deny` without condition). A tool an `approve`
 * rule guards is offered: a person is asked when it is called.
 */
function allowedByRules(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  tools: readonly string[],
  context: TransitionContext,
): readonly string[] {
  let out: string[] | undefined;
  for (let i = 0; i < tools.length; i++) {
    const tool = tools[i]!;
    const denial = judgeRules(plan, state, tool, undefined, context.message, context.now).denial;
    const offered = denial === undefined || denial.code === 'approval-required';
    if (!offered && out === undefined) out = tools.slice(0, i);
    else if (offered && out !== undefined) out.push(tool);
  }
  return out ?? tools;
}

function intersect(a: readonly string[], b: readonly string[]): readonly string[] {
  if (a === b || a.length === 0) return a;
  return a.filter((tool) => b.includes(tool));
}

/** True when the session's active step (or, without its own setting, the plan) is in shadow mode. */
export function shadowOf(plan: OrchestrationPlan, state: OrchestrationState): boolean {
  return activeStepOf(plan, state)?.shadow ?? plan.shadow;
}

/** True for a reserved call still running. */
function isRunning(entry: PendingEntry): entry is CallEntry {
  return entry.kind === 'call' && entry.done !== true;
}

/** Tools of the reserved calls still running, oldest first. */
export function runningTools(state: OrchestrationState): string[] {
  const pending = state.pending;
  if (pending === undefined) return [];
  const out: string[] = [];
  for (const entry of pending) if (entry.kind === 'call' && !entry.done) out.push(entry.tool);
  return out;
}

/**
 * The session as it stands if every running call fails: what is known for sure (the decisions'
 * outcomes take calls that do not complete as abandoned instead: see {@link judge}).
 */
export function settledState(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  context: TransitionContext,
): OrchestrationState {
  if (state.pending === undefined) return state;
  return replay(plan, state, 0, context);
}

/**
 * The session after each combination of outcomes of its running calls (bit i of the index set:
 * running call i completes; else it is abandoned, counted by its limits, or with
 * `countUnfinished` false it fails), computed once per input; the first is every call not
 * completing.
 */
function outcomesOf(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  context: TransitionContext,
  countUnfinished = true,
): readonly OrchestrationState[] {
  if (state.pending === undefined) return [state];
  const running = Math.min(runningTools(state).length, MAX_RUNNING_CALLS);
  const outcomes = new Array<OrchestrationState>(1 << running);
  for (let mask = 0; mask < outcomes.length; mask++)
    outcomes[mask] = replay(plan, state, mask, context, countUnfinished);
  return outcomes;
}

type CallEntry = Extract<PendingEntry, { kind: 'call' }>;

function decideStep(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  /** The state's outcomes, when the caller has them (else computed here, only if needed). */
  outcomes: readonly OrchestrationState[] | undefined,
  agentTools: readonly string[],
  context: TransitionContext,
  events: OrchestrationEvent[],
): StepDecision {
  // The usual step (no running calls, rules, budgets or shadow mode, a turn neither superseded
  // nor capped) depends only on the active step, the sequence position and the agent's tools:
  // its decision is computed once per position and shared (frozen), as this runs every step.
  if (state.pending === undefined && !plan.hasRules && !plan.hasBudgets && !isSuperseded(state, context)) {
    const step = activeStepOf(plan, state);
    if (step !== undefined && !(step.shadow ?? plan.shadow)) {
      const view = step.view(agentTools);
      const index = state.sequenceIndex;
      let decision = view.decisions[index] as StepDecision | undefined;
      if (decision === undefined) {
        const all = outcomes ?? outcomesOf(plan, state, context);
        decision = Object.freeze(computeStepDecision(plan, state, all, agentTools, context, events));
        view.decisions[index] = decision;
      } else if (decision.sequence?.blocked) {
        events.push(...allowedTools(plan, state, agentTools).events);
      }
      return decision;
    }
  }
  return computeStepDecision(plan, state, outcomes ?? outcomesOf(plan, state, context), agentTools, context, events);
}

function computeStepDecision(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  outcomes: readonly OrchestrationState[],
  agentTools: readonly string[],
  context: TransitionContext,
  events: OrchestrationEvent[],
): StepDecision {
  const known = outcomes[0]!;
  const view = viewStep(plan, known, agentTools);
  if (view.sequence?.blocked) events.push(...allowedTools(plan, known, agentTools).events);
  const running = state.pending === undefined ? NO_TOOLS : runningTools(state);
  const budget = budgetOf(plan, known);
  const shadow = shadowOf(plan, known);
  if (budget !== undefined) {
    events.push({ type: 'budget-exceeded', sessionId: state.sessionId, ...budget, shadow });
  }
  // One outcome (no running calls), no rules, no budget, no shadow: what is offered is the
  // view's allowed tools, already computed (the usual step; offers() would compute them again).
  const simple = outcomes.length === 1 && !plan.hasRules && budget === undefined && !shadow;
  const { offered, enforced } = simple
    ? simpleOffer(view.allowedTools, isSuperseded(state, context) || isCapped(state))
    : offers(plan, outcomes, agentTools, isSuperseded(state, context), isCapped(state), context);
  const sequence = view.sequence;
  let toolChoice: StepDecision['toolChoice'] = offered.length === 0 ? 'none' : 'auto';
  // Forced only while every offered tool fills the next position: never force a tool that
  // would not advance the sequence (nor in shadow mode, which must not change what the model does).
  if (
    toolChoice === 'auto' &&
    !shadow &&
    view.activeStep?.requireSequence === true &&
    sequence?.expected !== undefined &&
    offered.every((tool) => sequence.expected?.includes(tool))
  ) {
    toolChoice = 'required';
  }
  const decision: StepDecision = {
    type: 'step',
    activeStep: view.activeStep?.name,
    sequence,
    allowedTools: offered,
    toolChoice,
    running,
    shadow,
  };
  // The usual decision is built without spreading empty objects into it (this runs every step).
  if (!shadow && budget === undefined) return decision;
  return { ...decision, ...(shadow ? { wouldOffer: enforced } : {}), ...(budget === undefined ? {} : { budget }) };
}

/** The `sequence-incomplete` event for the session as known for sure, if its sequence is unfinished. */
function incompleteSequence(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  awaitingApproval: boolean,
  context: TransitionContext,
): OrchestrationEvent | undefined {
  const known = settledState(plan, state, context);
  const step = activeStepOf(plan, known);
  if (step === undefined || step.sequence.length === 0) return undefined;
  const index = known.sequenceIndex;
  if (index >= step.sequence.length) return undefined;
  return {
    type: 'sequence-incomplete',
    sessionId: state.sessionId,
    step: step.name,
    index,
    length: step.sequence.length,
    expected: step.sequence[index]!.tools,
    required: step.requireSequence,
    awaitingApproval,
  };
}

/**
 * Replays the pending log on the committed state: running call number i (in log order)
 * completes when bit i of `completes` is set; done calls complete; messages and unenforced
 * records apply in their place. Events are dropped: this is a what-if.
 *
 * A running call that does not complete either fails (nothing happens) or is abandoned (its
 * limit rules count it: see the `tool-abandoned` input). With `countUnfinished` it is taken as
 * abandoned: that outcome is the failed one with more counted, and counts only ever make limits
 * refuse more (rules read no counts), so a call allowed there and where it completes is allowed
 * in all three. Without, it fails: the session as known for sure ({@link settledState}).
 */
function replay(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  completes: number,
  context: TransitionContext,
  countUnfinished = false,
): OrchestrationState {
  const pending = state.pending ?? [];
  let current: OrchestrationState = { ...state, pending: undefined };
  let message = headMessage(pending, context);
  let bit = 0;
  for (const entry of pending) {
    if (entry.kind === 'message') {
      message = messageInfo(entry);
      current = onMessage(plan, current, message).state;
    } else if (entry.kind === 'used') {
      current = record(plan, current, entry.tool, message, context, false).state;
    } else if (entry.kind === 'counted') {
      current = countCall(plan, current, entry.limits, countedMessage(entry, message), context.now);
    } else {
      const done = entry.done === true || (completes & (1 << bit)) !== 0;
      if (entry.done !== true) bit++;
      if (done)
        current = record(plan, current, entry.tool, message, context, !shadowOf(plan, current), entry.limits).state;
      else if (countUnfinished && entry.limits !== undefined)
        current = countCall(plan, current, entry.limits, message, context.now);
    }
  }
  return current;
}

/**
 * Sets the log to `pending` and folds everything before its first running call into the
 * committed state, for real (with events). The new head carries the message in effect.
 */
function settle(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  pending: readonly PendingEntry[],
  context: TransitionContext,
  events: OrchestrationEvent[],
): OrchestrationState {
  let current: OrchestrationState = state;
  let message = headMessage(state.pending ?? pending, context);
  let head = 0;
  for (; head < pending.length; head++) {
    const entry = pending[head]!;
    if (entry.kind === 'call' && entry.done !== true) break;
    if (entry.kind === 'message') {
      message = messageInfo(entry);
      current = collect(onMessage(plan, current, message), events);
    } else if (entry.kind === 'used') {
      current = collect(record(plan, current, entry.tool, message, context, false), events);
    } else if (entry.kind === 'counted') {
      current = countCall(plan, current, entry.limits, countedMessage(entry, message), context.now);
    } else {
      // In shadow mode a call may not fit the sequence: report the violation it would have been.
      current = collect(
        record(plan, current, entry.tool, message, context, !shadowOf(plan, current), entry.limits),
        events,
      );
    }
  }
  if (head === pending.length) return { ...current, pending: undefined };
  const rest = pending.slice(head);
  const first = rest[0] as CallEntry;
  const carried = message === undefined ? undefined : keptMessage(plan, message);
  if (first.message?.key !== carried?.key) {
    const { message: _dropped, ...call } = first;
    rest[0] = carried === undefined ? call : { ...call, message: carried };
  }
  return { ...current, pending: rest };
}

/** Releases reservations whose lease ended, then folds in what they held up. */
function expireLeases(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  context: TransitionContext,
  events: OrchestrationEvent[],
): OrchestrationState {
  const pending = state.pending;
  if (pending === undefined) return state;
  let kept: PendingEntry[] = pending as PendingEntry[];
  for (let i = kept.length - 1; i >= 0; i--) {
    const entry = kept[i]!;
    // A completed call waiting for an earlier one keeps its place: it did run.
    if (entry.kind === 'call' && entry.done !== true && entry.expiresAt <= context.now) {
      events.push({
        type: 'tool-released',
        sessionId: state.sessionId,
        tool: entry.tool,
        toolCallId: entry.id,
        reason: 'expired',
      });
      // Its process died or stalled while the tool ran: it may have run, so its limits count it.
      // Not a call of a turn under a durable engine (in the turn's replay record): the engine
      // runs the turn again, and the same call is decided, and counted, once more then.
      const replayed = state.replay?.calls.some((call) => call.id === entry.id) === true;
      kept = entry.limits === undefined || replayed ? removeCall(kept, i) : countedInstead(kept, i, entry.limits);
    }
  }
  // A log with nothing running is folded at once. Only a reset leaves one: the counts of the
  // calls it released, which it cannot fold itself without the plan.
  if (kept === pending && pending.some(isRunning)) return state;
  return settle(plan, state, kept, context, events);
}

/**
 * `pending` with the call at `index` replaced by a count for its `limits`. No message is carried:
 * a count at the head is folded by the {@link settle} that follows, which reads the head's
 * message from the log before this change.
 */
function countedInstead(pending: readonly PendingEntry[], index: number, limits: string[]): PendingEntry[] {
  const out = pending.slice();
  out[index] = countOf(pending[index] as CallEntry, limits);
  return out;
}

/** The count a released call leaves in the log: its tool, its limits, and the turn's `message` key when given. */
function countOf(call: CallEntry, limits: string[], messageKey?: string): PendingEntry {
  return messageKey === undefined
    ? { kind: 'counted', tool: call.tool, limits }
    : { kind: 'counted', tool: call.tool, limits, message: { key: messageKey } };
}

/**
 * What a session reset keeps of a pending log: a count for every call limit rules count (running,
 * completed behind a running one, or already a count), in order; undefined when there is none.
 * The reset clears the session's message identity and the log's message entries, so each keeps
 * the key of the user message it ran for (the head's, or `lastMessageKey`, as messages in the log
 * change it): otherwise the next write would count it under its own message, or under none, and
 * a per-turn limit would lose the call's turn (or the turn's earlier calls). The session's next
 * transition folds them in (see {@link expireLeases}).
 */
export function countsKeptByReset(
  pending: readonly PendingEntry[] | undefined,
  lastMessageKey: string | undefined,
): PendingEntry[] | undefined {
  if (pending === undefined) return undefined;
  const head = pending[0];
  let key = head?.kind === 'call' && head.message !== undefined ? head.message.key : lastMessageKey;
  const counted: PendingEntry[] = [];
  for (const entry of pending) {
    if (entry.kind === 'message') key = entry.key;
    else if (entry.kind === 'counted') {
      counted.push(entry.message !== undefined || key === undefined ? entry : { ...entry, message: { key } });
    } else if (entry.kind === 'call' && entry.limits !== undefined) counted.push(countOf(entry, entry.limits, key));
  }
  return counted.length === 0 ? undefined : counted;
}

/**
 * The message a counted call counts under: its own when it keeps one (a reset's counts, whose
 * log and message identity are gone), else the one in effect at its place in the log.
 */
function countedMessage(
  entry: Extract<PendingEntry, { kind: 'counted' }>,
  inEffect: MessageInfo | undefined,
): MessageInfo | undefined {
  return entry.message === undefined ? inEffect : messageInfo(entry.message);
}

/** `pending` without the call at `index`; a head's message passes to the next entry. */
function removeCall(pending: readonly PendingEntry[], index: number): PendingEntry[] {
  const out = pending.filter((_, i) => i !== index);
  const removed = pending[index] as CallEntry;
  if (index === 0 && removed.message !== undefined) {
    const next = out[0];
    // What followed the removed head was replayed under its message: keep it in effect.
    if (next !== undefined && next.kind !== 'message') {
      if (next.kind === 'call') out[0] = { ...next, message: next.message ?? removed.message };
      else out.unshift({ kind: 'message', ...removed.message });
    }
  }
  return out;
}

/**
 * Commits a tool use (the engine's `recordToolUse`), counting it first for the limit rules that
 * counted its reservation (`limits`): the call belongs to the step active before it commits.
 */
function record(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  tool: string,
  message: MessageInfo | undefined,
  context: TransitionContext,
  reserved: boolean,
  limits?: readonly string[],
) {
  const events: OrchestrationEvent[] = [];
  const next = recordInto(plan, state, tool, message, context, reserved, limits, events);
  return { state: next, events };
}

/** {@link record}, pushing its events to `events`: no result object or event list of its own. */
function recordInto(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  tool: string,
  message: MessageInfo | undefined,
  context: TransitionContext,
  reserved: boolean,
  limits: readonly string[] | undefined,
  events: OrchestrationEvent[],
): OrchestrationState {
  const counted = limits === undefined ? state : countCall(plan, state, limits, message, context.now);
  const next = commitToolUse(plan, counted, tool, message, context.historyLimit, reserved, events);
  // A step change restarts the counts of per-step limits.
  return plan.hasRules ? resetStepCounts(plan, counted, next) : next;
}

/** Handles a user message (the engine's `handleMessage`), then drops per-step counts if the step changed. */
function onMessage(plan: OrchestrationPlan, state: OrchestrationState, message: MessageInfo | undefined) {
  return withStepCounts(plan, state, handleMessage(plan, state, message));
}

/** A step change restarts the counts of per-step limits. */
function withStepCounts(
  plan: OrchestrationPlan,
  before: OrchestrationState,
  result: { state: OrchestrationState; events: readonly OrchestrationEvent[] },
): { state: OrchestrationState; events: readonly OrchestrationEvent[] } {
  if (!plan.hasRules) return result;
  const state = resetStepCounts(plan, before, result.state);
  return state === result.state ? result : { state, events: result.events };
}

/** The user message in effect at the head of the log. */
function headMessage(pending: readonly PendingEntry[], context: TransitionContext): MessageInfo | undefined {
  const head = pending[0];
  if (head?.kind === 'call' && head.message !== undefined) return messageInfo(head.message);
  return context.message;
}

/** A kept message as conditions read it (cached per kept object, which replays read again and again). */
const infos = new WeakMap<PendingMessage, MessageInfo>();
/** The kept message an info was read from, so carrying it on keeps the same answers. */
const sources = new WeakMap<MessageInfo, PendingMessage>();

function messageInfo(message: PendingMessage): MessageInfo {
  let info = infos.get(message);
  if (info === undefined) {
    const text = message.text ?? '';
    info =
      message.matches === undefined
        ? { key: message.key, text, lower: text.toLowerCase() }
        : { key: message.key, text: '', lower: '', matches: new Set(message.matches) };
    infos.set(message, info);
    sources.set(info, message);
  }
  return info;
}

/** What the log keeps of `message`: the kept form it was read from, or the plan's digest of it. */
function keptMessage(plan: OrchestrationPlan, message: MessageInfo): PendingMessage {
  const source = sources.get(message);
  if (source === undefined) return plan.pendingMessage(message);
  const kept: PendingMessage = { key: source.key };
  if (source.matches !== undefined) kept.matches = source.matches;
  if (source.text !== undefined) kept.text = source.text;
  return kept;
}

/** The key of the latest user message the session has seen, behind running calls included. */
function currentMessageKey(state: OrchestrationState): string | undefined {
  const pending = state.pending;
  if (pending !== undefined) {
    for (let i = pending.length - 1; i >= 0; i--) {
      const entry = pending[i]!;
      if (entry.kind === 'message') return entry.key;
    }
  }
  return state.lastMessageKey;
}

/** True when the turn's message is not the session's latest: a newer turn took over. */
function isSuperseded(state: OrchestrationState, context: TransitionContext): boolean {
  const message = context.message;
  if (message === undefined) return false;
  const latest = currentMessageKey(state);
  return latest !== undefined && latest !== message.key;
}

function appendEntry(state: OrchestrationState, entry: PendingEntry): OrchestrationState {
  return { ...state, pending: [...(state.pending ?? []), entry] };
}

/**
 * True when the session has seen this call id (recorded, or in the pending log): a call that
 * is refused as `duplicate-call`, never run again.
 */
export function hasSeen(state: OrchestrationState, toolCallId: string): boolean {
  if (state.toolCallIds?.includes(toolCallId)) return true;
  return state.pending?.some((entry) => entry.kind === 'call' && entry.id === toolCallId) === true;
}

function rememberCallId(state: OrchestrationState, toolCallId: string): OrchestrationState {
  const ids = state.toolCallIds ?? [];
  if (ids.includes(toolCallId)) return state;
  const kept = ids.length >= TOOL_CALL_IDS_LIMIT ? ids.slice(ids.length - TOOL_CALL_IDS_LIMIT + 1) : ids;
  return { ...state, toolCallIds: [...kept, toolCallId] };
}

function collect(
  result: { state: OrchestrationState; events: readonly OrchestrationEvent[] },
  into: OrchestrationEvent[],
): OrchestrationState {
  if (result.events.length > 0) into.push(...result.events);
  return result.state;
}
