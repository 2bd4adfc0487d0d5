/**
 * The pending log (`state.pending`, SPEC section 7) and its one fold. A reserved call joins the
 * log before it runs; what arrives behind a running call (completed calls, user messages,
 * unenforced records, the counts of calls released without an outcome) waits behind it, in
 * arrival order. The committed fields of the state are everything before the oldest running
 * call, so the session is always a serial run of its reservations and messages.
 *
 * One fold applies the log's entries to the committed state, in order:
 * - {@link settle} folds, for real and with events, what no running call holds up any more;
 * - {@link settledView} folds everything but the running calls (as if each failed, counted by
 *   nobody), which is what a decision is judged on, with the running calls listed beside it for
 *   the dependence check (see `dependence.ts`).
 */
import { countCall, resetStepCounts, turnKey } from './call-rules.js';
import type { OrchestrationPlan } from './compile.js';
import type { MessageInfo } from './conditions.js';
import { activeStepOf, commitToolUse, handleMessage } from './engine.js';
import type { OrchestrationEvent } from './events.js';
import { applyWrites } from './facts.js';
import type { OrchestrationState, PendingEntry, PendingMessage } from './state.js';
import { TOOL_CALL_IDS_LIMIT } from './state.js';
import type { TransitionContext } from './transition-types.js';

/** A reserved call in the log. */
export type CallEntry = Extract<PendingEntry, { kind: 'call' }>;

/** Where a running call that limits count would commit: the turn and step they count it in. */
export interface CallPlace {
  /** The turn (user message key) a per-turn limit counts it in. */
  readonly turn: string;
  /** The step active where it commits, for per-step limits. */
  readonly step: string | undefined;
}

/** The session a decision is judged on: the log folded without its running calls. */
export interface SettledView {
  /**
   * Everything but the running calls, applied in order. When the log holds running calls only,
   * the session itself (nothing to fold): read its fields, never its `pending`.
   */
  readonly state: OrchestrationState;
  /** The running calls, oldest first (the log's own entries). */
  readonly running: readonly CallEntry[];
  /**
   * Where each running call that limits count would commit, by call id (only those: a call no
   * limit counts is judged the same wherever it stands).
   */
  readonly places: ReadonlyMap<string, CallPlace> | undefined;
  /**
   * A user message or an unenforced record waits behind a running call: how it applies may
   * depend on any running call's outcome, so every decision depends on all of them.
   */
  readonly tangled: boolean;
  /** The user message in effect at the end of the log. */
  readonly message: MessageInfo | undefined;
}

const NOT_RUNNING: readonly CallEntry[] = Object.freeze([]);

/** True for a reserved call still running. */
export function isRunning(entry: PendingEntry): entry is CallEntry {
  return entry.kind === 'call' && entry.done !== true;
}

/** Tools of the reserved calls still running, oldest first. */
export function runningTools(state: OrchestrationState): string[] {
  const out: string[] = [];
  for (const entry of state.pending ?? []) if (isRunning(entry)) out.push(entry.tool);
  return out;
}

/** The session a decision is judged on (see {@link SettledView}). */
export function settledView(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  context: TransitionContext,
): SettledView {
  const pending = state.pending;
  if (pending === undefined) {
    return { state, running: NOT_RUNNING, places: undefined, tangled: false, message: context.message };
  }
  let message = headMessage(pending, context);
  // The usual log holds running calls only: nothing to fold, and the session is as it stands.
  if (pending.every(isRunning)) {
    return {
      state,
      running: pending as CallEntry[],
      places: placesOf(pending, state, message),
      tangled: false,
      message,
    };
  }
  let current: OrchestrationState = { ...state, pending: undefined };
  const running: CallEntry[] = [];
  let places: Map<string, CallPlace> | undefined;
  let tangled = false;
  const dropped: OrchestrationEvent[] = [];
  for (const entry of pending) {
    if (isRunning(entry)) {
      running.push(entry);
      if (entry.limits !== undefined) {
        places ??= new Map();
        places.set(entry.id, { turn: turnKey(current, message), step: current.activeStep });
      }
      continue;
    }
    if (running.length > 0 && (entry.kind === 'message' || entry.kind === 'used')) tangled = true;
    if (entry.kind === 'message') message = messageInfo(entry);
    current = applyEntry(plan, current, entry, message, context, dropped);
    dropped.length = 0;
  }
  return { state: current, running, places, tangled, message };
}

/** Where the running calls limits count commit, when nothing behind the head moves them (see {@link SettledView}). */
function placesOf(
  calls: readonly PendingEntry[],
  state: OrchestrationState,
  message: MessageInfo | undefined,
): Map<string, CallPlace> | undefined {
  let places: Map<string, CallPlace> | undefined;
  for (const call of calls) {
    if (call.kind !== 'call' || call.limits === undefined) continue;
    places ??= new Map();
    places.set(call.id, { turn: turnKey(state, message), step: state.activeStep });
  }
  return places;
}

/**
 * The session as it stands if every running call fails: what is known for sure, and what
 * decisions are judged on (its `pending` left out).
 */
export function settledState(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  context: TransitionContext,
): OrchestrationState {
  if (state.pending === undefined) return state;
  const known = settledView(plan, state, context).state;
  return known === state ? { ...state, pending: undefined } : known;
}

/**
 * Sets the log to `pending` and folds everything before its first running call into the
 * committed state, for real (with events). The new head carries the message in effect.
 */
export function settle(
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
    if (isRunning(entry)) break;
    if (entry.kind === 'message') message = messageInfo(entry);
    current = applyEntry(plan, current, entry, message, context, events);
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

/** Applies one entry that is not a running call (a user message is `message`, already read). */
function applyEntry(
  plan: OrchestrationPlan,
  current: OrchestrationState,
  entry: PendingEntry,
  message: MessageInfo | undefined,
  context: TransitionContext,
  events: OrchestrationEvent[],
): OrchestrationState {
  switch (entry.kind) {
    case 'message':
      return onMessage(plan, current, message, events);
    case 'used':
      return recordInto(plan, current, entry.tool, message, context, false, undefined, events);
    case 'counted': {
      const at = entry.message === undefined ? message : messageInfo(entry.message);
      return countCall(plan, current, entry.limits, at, context.now);
    }
    default: {
      // A completed call. In shadow mode it may not fit the sequence: its violation is reported.
      const reserved = !shadowOf(plan, current);
      const recorded = recordInto(plan, current, entry.tool, message, context, reserved, entry.limits, events);
      if (entry.writes === undefined) return recorded;
      return applyWrites(plan, recorded, entry.writes, { tool: entry.tool, toolCallId: entry.id }, events);
    }
  }
}

/**
 * Commits a tool use (the engine's `recordToolUse`), counting it first for the limit rules that
 * counted its reservation (`limits`): the call belongs to the step active before it commits.
 */
export function recordInto(
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

/** Handles a user message (the engine's `handleMessage`); a step change drops per-step counts. */
export function onMessage(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  message: MessageInfo | undefined,
  events: OrchestrationEvent[],
): OrchestrationState {
  const handled = handleMessage(plan, state, message);
  if (handled.events.length > 0) events.push(...handled.events);
  return plan.hasRules ? resetStepCounts(plan, state, handled.state) : handled.state;
}

/** True when the session's active step (or, without its own setting, the plan) is in shadow mode. */
export function shadowOf(plan: OrchestrationPlan, state: OrchestrationState): boolean {
  return activeStepOf(plan, state)?.shadow ?? plan.shadow;
}

/** The user message in effect at the head of the log. */
function headMessage(pending: readonly PendingEntry[], context: TransitionContext): MessageInfo | undefined {
  const head = pending[0];
  if (head?.kind === 'call' && head.message !== undefined) return messageInfo(head.message);
  return context.message;
}

/** A kept message as conditions read it (cached per kept object, which folds read again and again). */
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
export function currentMessageKey(state: OrchestrationState): string | undefined {
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
export function isSuperseded(state: OrchestrationState, context: TransitionContext): boolean {
  const message = context.message;
  if (message === undefined) return false;
  const latest = currentMessageKey(state);
  return latest !== undefined && latest !== message.key;
}

/** `state` with `entry` at the end of its log. */
export function appendEntry(state: OrchestrationState, entry: PendingEntry): OrchestrationState {
  return { ...state, pending: [...(state.pending ?? []), entry] };
}

/** The index of the reserved call `toolCallId` in the log (running only, with `running`), or -1. */
export function callIndex(state: OrchestrationState, toolCallId: string, running = false): number {
  const pending = state.pending;
  if (pending === undefined) return -1;
  for (let i = 0; i < pending.length; i++) {
    const entry = pending[i]!;
    if (entry.kind === 'call' && entry.id === toolCallId && !(running && entry.done === true)) return i;
  }
  return -1;
}

/**
 * True when the session has seen this call id (recorded, or in the pending log): a call that
 * is refused as `duplicate-call`, never run again.
 */
export function hasSeen(state: OrchestrationState, toolCallId: string): boolean {
  const ids = state.toolCallIds;
  if (ids?.includes(toolCallId) === true) return true;
  // Every reserved call's id is remembered as it is reserved: the log needs looking at only once
  // the oldest ids have been dropped, when a long-running call's may be among them.
  return (ids === undefined || ids.length >= TOOL_CALL_IDS_LIMIT) && callIndex(state, toolCallId) >= 0;
}

/**
 * `state` remembering `toolCallId` among the latest ids it has seen (`unseen`: the caller knows
 * it is not among them yet).
 */
export function rememberCallId(state: OrchestrationState, toolCallId: string, unseen = false): OrchestrationState {
  const ids = state.toolCallIds ?? [];
  if (!unseen && ids.includes(toolCallId)) return state;
  const kept = ids.length >= TOOL_CALL_IDS_LIMIT ? ids.slice(ids.length - TOOL_CALL_IDS_LIMIT + 1) : ids;
  return { ...state, toolCallIds: [...kept, toolCallId] };
}

/** `pending` without the call at `index`; a head's message passes to the next entry. */
export function removeCall(pending: readonly PendingEntry[], index: number): PendingEntry[] {
  const out = pending.filter((_, i) => i !== index);
  const removed = pending[index] as CallEntry;
  if (index === 0 && removed.message !== undefined) {
    const next = out[0];
    // What followed the removed head was folded under its message: keep it in effect.
    if (next !== undefined && next.kind !== 'message') {
      if (next.kind === 'call') out[0] = { ...next, message: next.message ?? removed.message };
      else out.unshift({ kind: 'message', ...removed.message });
    }
  }
  return out;
}
