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
 * A running call's outcome is unknown, so a new request is allowed only when it would be
 * allowed whichever of the running calls complete or fail (every combination, in reservation
 * order); when the answer depends on them the request is refused with reason `pending`. So
 * the calls that run are exactly those a serial run of their reservations allows; the price
 * is that a call racing a running one may be refused where waiting would have let it run.
 */
import type { OrchestrationPlan } from './compile.js';
import type { MessageInfo } from './conditions.js';
import {
  addTokenUsage,
  allowedTools,
  denialOf,
  type Explanation,
  handleMessage,
  recordToolUse,
  viewStep,
} from './engine.js';
import { NO_EVENTS, type OrchestrationEvent, type ToolDenial } from './events.js';
import { type OrchestrationState, type PendingCall, TOOL_CALL_IDS_LIMIT, type TokenUsage } from './state.js';

/** What can happen to a session; see each member. */
export type TransitionInput =
  /** A user message arrived (`context.message`): `resetSequenceOn`, then step selection. */
  | { readonly type: 'user-message' }
  /**
   * A model step starts: decides which tools to offer (a {@link StepDecision}). Changes
   * nothing. It does not handle the message again: a turn does that once, with
   * `user-message`, so concurrent turns on one session do not reset each other's sequence.
   */
  | { readonly type: 'step-started'; readonly agentTools: readonly string[] }
  /** The model asked to run a tool: decides, and reserves the call when it is allowed (a {@link ToolDecision}). */
  | {
      readonly type: 'tool-requested';
      readonly tool: string;
      readonly toolCallId: string;
      readonly agentTools: readonly string[];
      /** The tools the model was shown for the step that produced the call, when known. */
      readonly offered?: readonly string[] | undefined;
    }
  /** A reserved call finished: it is committed (history, sequence, step selection) in reservation order. */
  | { readonly type: 'tool-completed'; readonly toolCallId: string }
  /** A reserved call threw: its reservation is released and nothing is recorded. */
  | { readonly type: 'tool-failed'; readonly toolCallId: string }
  /**
   * A tool ran outside enforcement (the seed's `processToolUsage`): recorded at once, with a
   * violation when it was out of sequence. A `toolCallId` already seen is ignored.
   */
  | { readonly type: 'tool-used'; readonly tool: string; readonly toolCallId?: string | undefined }
  /** One model call's token usage. */
  | { readonly type: 'usage'; readonly usage: TokenUsage };

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
}

/** Where the session stands for one model step: what to offer, and why. */
export interface StepDecision {
  readonly type: 'step';
  readonly activeStep: string | undefined;
  readonly sequence: Explanation['sequence'];
  /** The tools to offer: allowed now whatever the running calls' outcomes. */
  readonly allowedTools: readonly string[];
  /** Tools of reserved calls still running (other turns'), oldest first. */
  readonly running: readonly string[];
}

/** The answer to a `tool-requested` input. */
export type ToolDecision =
  | { readonly type: 'tool'; readonly tool: string; readonly toolCallId: string; readonly allowed: true }
  | {
      readonly type: 'tool';
      readonly tool: string;
      readonly toolCallId: string;
      readonly allowed: false;
      readonly reason: ToolDenial;
      /** What the model may call instead. */
      readonly allowedTools: readonly string[];
    };

/** A decision of {@link transition}. */
export type TransitionDecision = StepDecision | ToolDecision;

/** The result of {@link transition}. `state` is the input object when nothing changed. */
export interface TransitionResult {
  readonly state: OrchestrationState;
  readonly events: readonly OrchestrationEvent[];
  readonly decision?: TransitionDecision;
}

/** Default lease of a reservation: 2 minutes. A tool running longer loses its place. */
export const DEFAULT_LEASE_MS = 120_000;

/**
 * Most reserved calls that may run at once in one session. Deciding a request looks at every
 * combination of their outcomes (2^n), so beyond this a request is refused as `pending`.
 */
export const MAX_RUNNING_CALLS = 8;

/** Applies one input to `state` (see the module comment). Pure: no I/O, time from `context`. */
export function transition(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  input: TransitionInput,
  context: TransitionContext,
): TransitionResult {
  const events: OrchestrationEvent[] = [];
  let current = expireLeases(plan, state, context, events);
  let decision: TransitionDecision | undefined;
  switch (input.type) {
    case 'user-message':
      current = collect(handleMessage(plan, current, context.message), events);
      break;
    case 'step-started':
      decision = decideStep(plan, current, input.agentTools, context, events);
      break;
    case 'tool-requested': {
      const tool = decideToolCall(plan, current, input, context);
      decision = tool;
      current = rememberCallId(current, input.toolCallId);
      if (tool.allowed) {
        const lease = context.leaseMs ?? DEFAULT_LEASE_MS;
        const call: PendingCall = { id: input.toolCallId, tool: input.tool, expiresAt: context.now + lease };
        current = { ...current, pending: [...(current.pending ?? []), call] };
        events.push({
          type: 'tool-reserved',
          sessionId: state.sessionId,
          tool: input.tool,
          toolCallId: input.toolCallId,
          step: current.activeStep,
        });
      } else {
        events.push({
          type: 'tool-rejected',
          sessionId: state.sessionId,
          tool: input.tool,
          toolCallId: input.toolCallId,
          step: current.activeStep,
          allowedTools: tool.allowedTools,
          reason: tool.reason,
        });
      }
      break;
    }
    case 'tool-completed': {
      const pending = current.pending ?? [];
      const index = pending.findIndex((call) => call.id === input.toolCallId);
      if (index < 0) {
        // Its lease ended (or it was never reserved): its place may have gone to another call.
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
      marked[index] = { ...pending[index]!, done: true };
      current = flush(plan, { ...current, pending: marked }, context, events);
      break;
    }
    case 'tool-failed': {
      const pending = current.pending ?? [];
      const index = pending.findIndex((call) => call.id === input.toolCallId);
      if (index < 0) break;
      events.push({
        type: 'tool-released',
        sessionId: state.sessionId,
        tool: pending[index]!.tool,
        toolCallId: input.toolCallId,
        reason: 'failed',
      });
      current = flush(
        plan,
        withPending(
          current,
          pending.filter((_, i) => i !== index),
        ),
        context,
        events,
      );
      break;
    }
    case 'tool-used': {
      const id = input.toolCallId;
      if (id !== undefined && hasSeen(current, id)) break;
      if (id !== undefined) current = rememberCallId(current, id);
      current = collect(
        recordToolUse(plan, current, {
          tool: input.tool,
          message: context.message,
          historyLimit: context.historyLimit,
        }),
        events,
      );
      break;
    }
    case 'usage':
      current = addTokenUsage(current, input.usage);
      break;
  }
  const result: TransitionResult = { state: current, events: events.length === 0 ? NO_EVENTS : events };
  return decision === undefined ? result : { ...result, decision };
}

/** The result of {@link transitionAll}: one decision slot per input. */
export interface TransitionAllResult {
  readonly state: OrchestrationState;
  readonly events: readonly OrchestrationEvent[];
  readonly decisions: readonly (TransitionDecision | undefined)[];
}

/** Applies `inputs` in order, as one change: what a shell writes with one store update. */
export function transitionAll(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  inputs: readonly TransitionInput[],
  context: TransitionContext,
): TransitionAllResult {
  let current = state;
  let events: OrchestrationEvent[] | undefined;
  const decisions: (TransitionDecision | undefined)[] = [];
  for (const input of inputs) {
    const result = transition(plan, current, input, context);
    current = result.state;
    if (result.events.length > 0) {
      events ??= [];
      events.push(...result.events);
    }
    decisions.push(result.decision);
  }
  return { state: current, events: events ?? NO_EVENTS, decisions };
}

/**
 * Decides a tool call without changing anything: what `tool-requested` would answer. For
 * checks that must not reserve (an approval prompt shown to a person before the call runs).
 */
export function decideToolCall(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  call: {
    readonly tool: string;
    readonly toolCallId: string;
    readonly agentTools: readonly string[];
    readonly offered?: readonly string[] | undefined;
  },
  context: TransitionContext,
): ToolDecision {
  const { tool, toolCallId, agentTools } = call;
  const deny = (reason: ToolDenial, allowed: readonly string[]): ToolDecision => ({
    type: 'tool',
    tool,
    toolCallId,
    allowed: false,
    reason,
    allowedTools: allowed,
  });
  if (hasSeen(state, toolCallId)) {
    return deny(
      {
        code: 'duplicate-call',
        toolCallId,
        message: `tool call id "${toolCallId}" was already used in this session; a call id runs at most once`,
      },
      safeAllowedTools(plan, state, agentTools, context),
    );
  }
  if (call.offered !== undefined && !call.offered.includes(tool)) {
    return deny(
      { code: 'not-offered', offered: call.offered, message: `"${tool}" was not offered for this model step` },
      call.offered,
    );
  }
  const running = runningTools(state);
  if (running.length > MAX_RUNNING_CALLS) {
    return deny(
      {
        code: 'pending',
        running,
        message: `${running.length} calls are still running in this session (at most ${MAX_RUNNING_CALLS}); try again when they finish`,
      },
      [],
    );
  }
  let first: ToolDenial | undefined;
  let allowedSomewhere = false;
  let deniedSomewhere = false;
  forEachOutcome(plan, state, context, (outcome) => {
    const denial = denialOf(plan, outcome, tool, agentTools);
    if (denial === undefined) allowedSomewhere = true;
    else {
      deniedSomewhere = true;
      first ??= denial;
    }
  });
  if (!deniedSomewhere) return { type: 'tool', tool, toolCallId, allowed: true };
  const allowed = safeAllowedTools(plan, state, agentTools, context);
  if (!allowedSomewhere) return deny(first!, allowed);
  return deny(
    {
      code: 'pending',
      running,
      message: `whether "${tool}" may run depends on ${running.join(', ')}, still running in this session; try again when ${running.length === 1 ? 'it finishes' : 'they finish'}`,
    },
    allowed,
  );
}

/** Tools of the reserved calls still running, oldest first. */
export function runningTools(state: OrchestrationState): string[] {
  const pending = state.pending;
  if (pending === undefined || pending.length === 0) return [];
  const out: string[] = [];
  for (const call of pending) if (!call.done) out.push(call.tool);
  return out;
}

function decideStep(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  agentTools: readonly string[],
  context: TransitionContext,
  events: OrchestrationEvent[],
): StepDecision {
  const view = viewStep(plan, state, agentTools);
  if (view.sequence?.blocked) events.push(...allowedTools(plan, state, agentTools).events);
  const running = runningTools(state);
  return {
    type: 'step',
    activeStep: view.activeStep?.name,
    sequence: view.sequence,
    allowedTools: running.length === 0 ? view.allowedTools : safeAllowedTools(plan, state, agentTools, context),
    running,
  };
}

/** The tools allowed in every outcome of the running calls (all of them when none runs). */
function safeAllowedTools(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  agentTools: readonly string[],
  context: TransitionContext,
): readonly string[] {
  if (runningTools(state).length > MAX_RUNNING_CALLS) return [];
  let safe: readonly string[] | undefined;
  forEachOutcome(plan, state, context, (outcome) => {
    const tools = allowedTools(plan, outcome, agentTools).tools;
    safe = safe === undefined ? tools : safe.filter((tool) => tools.includes(tool));
  });
  return safe ?? [];
}

/**
 * Calls `visit` with the state after each combination of outcomes of the running calls
 * (completed ones commit in reservation order, failed ones vanish). With none running, that
 * is `state` itself, once.
 */
function forEachOutcome(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  context: TransitionContext,
  visit: (outcome: OrchestrationState) => void,
): void {
  const pending = state.pending;
  if (pending === undefined || pending.length === 0) {
    visit(state);
    return;
  }
  const base: OrchestrationState = { ...state, pending: undefined };
  let runningCount = 0;
  for (const call of pending) if (!call.done) runningCount++;
  for (let mask = 0; mask < 1 << runningCount; mask++) {
    let outcome = base;
    let bit = 0;
    for (const call of pending) {
      let completes = true;
      if (call.done !== true) completes = (mask & (1 << bit++)) !== 0;
      if (completes) outcome = commit(plan, outcome, call, context).state;
    }
    visit(outcome);
  }
}

function commit(plan: OrchestrationPlan, state: OrchestrationState, call: PendingCall, context: TransitionContext) {
  return recordToolUse(plan, state, {
    tool: call.tool,
    message: context.message,
    historyLimit: context.historyLimit,
    reserved: true,
  });
}

/** Commits the completed calls at the head of the reservation queue. */
function flush(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  context: TransitionContext,
  events: OrchestrationEvent[],
): OrchestrationState {
  const pending = state.pending;
  if (pending === undefined || pending.length === 0 || !pending[0]!.done) return state;
  let current: OrchestrationState = state;
  let head = 0;
  while (head < pending.length && pending[head]!.done) {
    current = collect(commit(plan, current, pending[head]!, context), events);
    head++;
  }
  return withPending(current, pending.slice(head));
}

/** Releases reservations whose lease ended, then commits what they held up. */
function expireLeases(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  context: TransitionContext,
  events: OrchestrationEvent[],
): OrchestrationState {
  const pending = state.pending;
  if (pending === undefined || pending.length === 0) return state;
  let kept: PendingCall[] | undefined;
  for (let i = 0; i < pending.length; i++) {
    const call = pending[i]!;
    // A completed call waiting for an earlier one keeps its place: it did run.
    if (!call.done && call.expiresAt <= context.now) {
      kept ??= pending.slice(0, i);
      events.push({
        type: 'tool-released',
        sessionId: state.sessionId,
        tool: call.tool,
        toolCallId: call.id,
        reason: 'expired',
      });
    } else kept?.push(call);
  }
  if (kept === undefined) return state;
  return flush(plan, withPending(state, kept), context, events);
}

function withPending(state: OrchestrationState, pending: PendingCall[]): OrchestrationState {
  return { ...state, pending: pending.length === 0 ? undefined : pending };
}

function hasSeen(state: OrchestrationState, toolCallId: string): boolean {
  if (state.toolCallIds?.includes(toolCallId)) return true;
  return state.pending?.some((call) => call.id === toolCallId) === true;
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
) {
  if (result.events.length > 0) into.push(...result.events);
  return result.state;
}
