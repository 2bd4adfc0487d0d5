/**
 * How a reservation ends without a commit, and what it leaves in the pending log. A call that
 * failed leaves nothing. A call whose outcome is unknown (abandoned after it was sent, its lease
 * expired because its process died, released by a session reset) may have run: the limit rules
 * that counted its reservation count it, in its place (a `counted` entry), so a client cannot get
 * past a limit by cancelling calls once sent, or by letting them time out.
 */
import type { OrchestrationPlan } from './compile.js';
import type { OrchestrationEvent } from './events.js';
import { type CallEntry, callIndex, isRunning, removeCall, settle } from './pending-log.js';
import type { OrchestrationState, PendingEntry } from './state.js';
import { DEFAULT_LEASE_MS, type LeaseDecision, type TransitionContext } from './transition-types.js';

/** Releases reservations whose lease ended, then folds in what they held up. */
export function expireLeases(
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
    if (!isRunning(entry) || entry.expiresAt > context.now) continue;
    events.push({
      type: 'tool-released',
      sessionId: state.sessionId,
      tool: entry.tool,
      toolCallId: entry.id,
      reason: 'expired',
    });
    // Its process died or stalled while the tool ran: it may have run, so its limits count it.
    // Not a call of a turn under a durable engine (in the turn's replay record): the engine runs
    // the turn again, and the same call is decided, and counted, once more then.
    const replayed = state.replay?.calls.some((call) => call.id === entry.id) === true;
    kept = entry.limits === undefined || replayed ? removeCall(kept, i) : countedInstead(kept, i, entry.limits);
  }
  // A log with nothing running is folded at once. Only a reset leaves one: the counts of the
  // calls it released, which it cannot fold itself without the plan.
  if (kept === pending && pending[0] !== undefined && isRunning(pending[0])) return state;
  return settle(plan, state, kept, context, events);
}

/**
 * Releases the running call `toolCallId` without a commit: `failed` (nothing is left of it) or
 * `abandoned` (its limits count it in its place). Unknown ids change nothing.
 */
export function releaseCall(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  toolCallId: string,
  how: 'failed' | 'abandoned',
  context: TransitionContext,
  events: OrchestrationEvent[],
): OrchestrationState {
  const index = callIndex(state, toolCallId);
  if (index < 0) return state;
  const pending = state.pending!;
  const call = pending[index] as CallEntry;
  events.push({ type: 'tool-released', sessionId: state.sessionId, tool: call.tool, toolCallId, reason: how });
  const rest =
    how === 'abandoned' && call.limits !== undefined
      ? countedInstead(pending, index, call.limits)
      : removeCall(pending, index);
  return settle(plan, state, rest, context, events);
}

/** Renews the lease of a running call: it starts again from now. */
export function renewLease(
  state: OrchestrationState,
  toolCallId: string,
  context: TransitionContext,
): { state: OrchestrationState; decision: LeaseDecision } {
  const index = callIndex(state, toolCallId, true);
  const decision: LeaseDecision = { type: 'lease', toolCallId, held: index >= 0 };
  if (index < 0) return { state, decision };
  const pending = state.pending!;
  const entry = pending[index] as CallEntry;
  const expiresAt = context.now + (context.leaseMs ?? DEFAULT_LEASE_MS);
  if (expiresAt <= entry.expiresAt) return { state, decision };
  const renewed = pending.slice();
  renewed[index] = { ...entry, expiresAt };
  return { state: { ...state, pending: renewed }, decision };
}

/**
 * `pending` with the call at `index` replaced by a count for its `limits`. No message is carried:
 * a count at the head is folded by the `settle` that follows, which reads the head's message from
 * the log before this change.
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
