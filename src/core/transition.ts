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
 */
import type { OrchestrationPlan } from './compile.js';
import type { MessageInfo } from './conditions.js';
import {
  activeStepOf,
  addTokenUsage,
  allowedTools,
  type BudgetStatus,
  budgetDenial,
  budgetOf,
  denialOf,
  type Explanation,
  handleMessage,
  recordToolUse,
  viewStep,
} from './engine.js';
import { NO_EVENTS, type OrchestrationEvent, type ToolDenial } from './events.js';
import {
  type OrchestrationState,
  type PendingEntry,
  type PendingMessage,
  TOOL_CALL_IDS_LIMIT,
  type TokenUsage,
} from './state.js';

// Budgets are part of explaining a session, so they live in the engine; re-exported for the shells.
export { type BudgetStatus, budgetDenial, budgetOf };

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
  | { readonly type: 'usage'; readonly usage: TokenUsage }
  /**
   * The turn's model loop ended. Changes nothing; emits `sequence-incomplete` when the active
   * step's sequence is unfinished (as far as is known for sure: running calls count as failed).
   */
  | { readonly type: 'turn-ended'; readonly awaitingApproval?: boolean | undefined }
  /**
   * An event a shell decided without the store (a model step decided on the turn's last stored
   * state, a call the model loop refused before any hook), sent with the next write so that the
   * session's event log keeps it in its place. Changes nothing and emits nothing: the shell
   * dispatched it already.
   */
  | { readonly type: 'observed'; readonly event: OrchestrationEvent };

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
  /** A spent token budget: no tool is offered (in shadow mode, only reported). */
  readonly budget?: BudgetStatus;
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
    }
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
 * Most reserved calls that may run at once in one session. Deciding a request replays every
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
  // One scratch list, copied only when something happened: most transitions emit nothing, and
  // this runs for every input of every turn. `transition` never calls itself, so reuse is safe.
  const events = scratchEvents;
  events.length = 0;
  let current = expireLeases(plan, state, context, events);
  let decision: TransitionDecision | undefined;
  switch (input.type) {
    case 'user-message': {
      const message = context.message;
      if (current.pending === undefined) {
        current = collect(handleMessage(plan, current, message), events);
      } else if (message !== undefined && message.key !== currentMessageKey(current)) {
        // Behind a running call: replayed after it, in arrival order.
        current = appendEntry(current, { kind: 'message', key: message.key, text: message.text });
      }
      break;
    }
    case 'step-started':
      decision = decideStep(plan, current, input.agentTools, context, events);
      break;
    case 'tool-requested': {
      const tool = decideToolCall(plan, current, input, context);
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
        // The head of the log carries the message in effect, for replaying what follows it.
        if (current.pending === undefined && context.message !== undefined) {
          call.message = { key: context.message.key, text: context.message.text };
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
      const index = pending.findIndex((entry) => entry.kind === 'call' && entry.id === input.toolCallId);
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
      marked[index] = { ...(pending[index] as CallEntry), done: true };
      current = settle(plan, current, marked, context, events);
      break;
    }
    case 'tool-failed': {
      const pending = current.pending ?? [];
      const index = pending.findIndex((entry) => entry.kind === 'call' && entry.id === input.toolCallId);
      if (index < 0) break;
      events.push({
        type: 'tool-released',
        sessionId: state.sessionId,
        tool: (pending[index] as CallEntry).tool,
        toolCallId: input.toolCallId,
        reason: 'failed',
      });
      current = settle(plan, current, removeCall(pending, index), context, events);
      break;
    }
    case 'tool-used': {
      const id = input.toolCallId;
      if (id !== undefined && hasSeen(current, id)) break;
      if (id !== undefined) current = rememberCallId(current, id);
      if (current.pending !== undefined) current = appendEntry(current, { kind: 'used', tool: input.tool });
      else current = collect(record(plan, current, input.tool, context.message, context, false), events);
      break;
    }
    case 'usage':
      current = countStepTokens(plan, addTokenUsage(current, input.usage), input.usage.totalTokens, context);
      break;
    case 'observed':
      break;
    case 'turn-ended': {
      const incomplete = incompleteSequence(plan, current, input.awaitingApproval === true, context);
      if (incomplete !== undefined) events.push(incomplete);
      break;
    }
  }
  const emitted = events.length === 0 ? NO_EVENTS : events.slice();
  events.length = 0;
  return decision === undefined ? { state: current, events: emitted } : { state: current, events: emitted, decision };
}

const scratchEvents: OrchestrationEvent[] = [];

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

/** A tool call to decide: what `tool-requested` carries. */
export interface ToolCallRequest {
  readonly tool: string;
  readonly toolCallId: string;
  readonly agentTools: readonly string[];
  /** The tools the model was shown for the step that produced the call, when known. */
  readonly offered?: readonly string[] | undefined;
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
  const { tool, toolCallId, agentTools } = call;
  const deny = (reason: ToolDenial, allowed: readonly string[]) => refusal(call, reason, allowed);
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
  const running = runningTools(state);
  if (running.length >= MAX_RUNNING_CALLS) {
    // A resource limit, kept in shadow mode too: deciding looks at 2^n outcomes.
    return deny(
      {
        code: 'pending',
        running,
        message: `${running.length} calls are still running in this session (at most ${MAX_RUNNING_CALLS}); try again when they finish`,
      },
      [],
    );
  }
  const enforced = policyDecision(plan, state, call, context, running);
  if (enforced.allowed || enforced.reason.code === 'no-such-tool') return enforced;
  // Shadow mode: what the template decides is reported, and the call runs. Only what is no
  // template policy stays enforced: repeated call ids, tools the agent does not have, the cap.
  if (shadowOf(plan, settledState(plan, state, context))) {
    return { type: 'tool', tool, toolCallId, allowed: true, wouldBlock: enforced.reason };
  }
  return enforced;
}

/** The template's decision on a call (SPEC sections 4 and 7, budgets), before shadow mode. */
function policyDecision(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  call: ToolCallRequest,
  context: TransitionContext,
  running: readonly string[],
): ToolDecision {
  const { tool, toolCallId, agentTools } = call;
  const deny = (reason: ToolDenial, allowed: readonly string[]) => refusal(call, reason, allowed);
  if (!agentTools.includes(tool)) {
    return deny(
      { code: 'no-such-tool', message: `"${tool}" is not one of the agent's tools` },
      safeAllowedTools(plan, state, agentTools, context),
    );
  }
  if (isSuperseded(state, context)) {
    return deny(
      {
        code: 'superseded',
        message: 'a newer user message arrived in this session, so this turn may not start tools; answer without tools',
      },
      [],
    );
  }
  if (call.offered !== undefined && !call.offered.includes(tool)) {
    return deny(
      { code: 'not-offered', offered: call.offered, message: `"${tool}" was not offered for this model step` },
      call.offered,
    );
  }
  const budget = budgetOf(plan, settledState(plan, state, context));
  if (budget !== undefined) return deny(budgetDenial(budget), []);
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

/** True when the session's active step (or, without its own setting, the plan) is in shadow mode. */
export function shadowOf(plan: OrchestrationPlan, state: OrchestrationState): boolean {
  return activeStepOf(plan, state)?.shadow ?? plan.shadow;
}

/** Counts a model call's tokens against the active step when that step has a budget. */
function countStepTokens(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  tokens: number,
  context: TransitionContext,
): OrchestrationState {
  if (!plan.hasBudgets || tokens === 0) return state;
  const step = activeStepOf(plan, settledState(plan, state, context));
  if (step?.tokenBudget === undefined) return state;
  const stepTokens = { ...state.stepTokens, [step.name]: (state.stepTokens?.[step.name] ?? 0) + tokens };
  return { ...state, stepTokens };
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
 * The session as it stands if every running call fails: what is known for sure. For views
 * (`explain`, the inspector); decisions consider every outcome.
 */
export function settledState(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  context: TransitionContext,
): OrchestrationState {
  if (state.pending === undefined) return state;
  return replay(plan, state, 0, context);
}

type CallEntry = Extract<PendingEntry, { kind: 'call' }>;

function decideStep(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  agentTools: readonly string[],
  context: TransitionContext,
  events: OrchestrationEvent[],
): StepDecision {
  const known = settledState(plan, state, context);
  const view = viewStep(plan, known, agentTools);
  if (view.sequence?.blocked) events.push(...allowedTools(plan, known, agentTools).events);
  const running = runningTools(state);
  let offered = view.allowedTools;
  if (isSuperseded(state, context)) offered = [];
  else if (running.length > 0) offered = safeAllowedTools(plan, state, agentTools, context);
  const budget = budgetOf(plan, known);
  const shadow = shadowOf(plan, known);
  if (budget !== undefined) {
    offered = [];
    events.push({ type: 'budget-exceeded', sessionId: state.sessionId, ...budget, shadow });
  }
  const sequence = view.sequence;
  if (shadow) {
    // Nothing is enforced: every agent tool is offered, and what enforcement would offer is reported.
    return {
      type: 'step',
      activeStep: view.activeStep?.name,
      sequence,
      allowedTools: plan.allTools(agentTools),
      toolChoice: 'auto',
      running,
      shadow,
      wouldOffer: offered,
      ...(budget === undefined ? {} : { budget }),
    };
  }
  let toolChoice: StepDecision['toolChoice'] = offered.length === 0 ? 'none' : 'auto';
  // Forced only while every offered tool fills the next position: never force a tool that
  // would not advance the sequence.
  if (
    toolChoice === 'auto' &&
    view.activeStep?.requireSequence === true &&
    sequence?.expected !== undefined &&
    offered.every((tool) => sequence.expected?.includes(tool))
  ) {
    toolChoice = 'required';
  }
  return {
    type: 'step',
    activeStep: view.activeStep?.name,
    sequence,
    allowedTools: offered,
    toolChoice,
    running,
    shadow,
    ...(budget === undefined ? {} : { budget }),
  };
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

/** The tools allowed in every outcome of the running calls (all of them when none runs). */
function safeAllowedTools(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  agentTools: readonly string[],
  context: TransitionContext,
): readonly string[] {
  if (runningTools(state).length >= MAX_RUNNING_CALLS) return [];
  let safe: readonly string[] | undefined;
  forEachOutcome(plan, state, context, (outcome) => {
    const tools = allowedTools(plan, outcome, agentTools).tools;
    safe = safe === undefined ? tools : safe.filter((tool) => tools.includes(tool));
  });
  return safe ?? [];
}

/** Calls `visit` with the session after each combination of outcomes of the running calls. */
function forEachOutcome(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  context: TransitionContext,
  visit: (outcome: OrchestrationState) => void,
): void {
  if (state.pending === undefined) {
    visit(state);
    return;
  }
  const combinations = 1 << runningTools(state).length;
  for (let mask = 0; mask < combinations; mask++) visit(replay(plan, state, mask, context));
}

/**
 * Replays the pending log on the committed state: running call number i (in log order)
 * completes when bit i of `completes` is set; done calls complete; messages and unenforced
 * records apply in their place. Events are dropped: this is a what-if.
 */
function replay(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  completes: number,
  context: TransitionContext,
): OrchestrationState {
  const pending = state.pending ?? [];
  let current: OrchestrationState = { ...state, pending: undefined };
  let message = headMessage(pending, context);
  let bit = 0;
  for (const entry of pending) {
    if (entry.kind === 'message') {
      message = messageInfo(entry);
      current = handleMessage(plan, current, message).state;
    } else if (entry.kind === 'used') {
      current = record(plan, current, entry.tool, message, context, false).state;
    } else {
      const done = entry.done === true || (completes & (1 << bit)) !== 0;
      if (entry.done !== true) bit++;
      if (done) current = record(plan, current, entry.tool, message, context, !shadowOf(plan, current)).state;
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
      current = collect(handleMessage(plan, current, message), events);
    } else if (entry.kind === 'used') {
      current = collect(record(plan, current, entry.tool, message, context, false), events);
    } else {
      // In shadow mode a call may not fit the sequence: report the violation it would have been.
      current = collect(record(plan, current, entry.tool, message, context, !shadowOf(plan, current)), events);
    }
  }
  if (head === pending.length) return { ...current, pending: undefined };
  const rest = pending.slice(head);
  const first = rest[0] as CallEntry;
  const carried: PendingMessage | undefined = message && { key: message.key, text: message.text };
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
      kept = removeCall(kept, i);
    }
  }
  if (kept === pending) return state;
  return settle(plan, state, kept, context, events);
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

function record(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  tool: string,
  message: MessageInfo | undefined,
  context: TransitionContext,
  reserved: boolean,
) {
  return recordToolUse(plan, state, { tool, message, historyLimit: context.historyLimit, reserved });
}

/** The user message in effect at the head of the log. */
function headMessage(pending: readonly PendingEntry[], context: TransitionContext): MessageInfo | undefined {
  const head = pending[0];
  if (head?.kind === 'call' && head.message !== undefined) return messageInfo(head.message);
  return context.message;
}

function messageInfo(message: PendingMessage): MessageInfo {
  return { key: message.key, text: message.text, lower: message.text.toLowerCase() };
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

function hasSeen(state: OrchestrationState, toolCallId: string): boolean {
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
