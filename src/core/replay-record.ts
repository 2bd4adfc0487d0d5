/**
 * The durable replay record (`state.replay`): what a turn run by a durable-execution engine
 * (`turnId`) decided, so that a replay of the turn gets every decision back as the original run
 * saw it. The tools offered at each model step, each call's decision (`ran` once it completed or
 * failed), and the model steps whose token usage was counted.
 */
import { duplicateCall } from './denials.js';
import type { ReplayedCall, ReplayRecord } from './state.js';
import { type OrchestrationState, REPLAY_LIMIT } from './state.js';
import type { ToolCallRequest, ToolDecision } from './transition-types.js';

/** The session's replay record of `turnId`: its own, or a new one (a new turn replaces the old). */
export function replayRecord(state: OrchestrationState, turnId: string): ReplayRecord {
  const record = state.replay;
  return record?.turn === turnId ? record : { turn: turnId, offers: [], calls: [] };
}

/** True when `call` is a durable turn's request of a call the turn recorded. */
export function isRecordedCall(state: OrchestrationState, call: ToolCallRequest): boolean {
  return call.turnId !== undefined && state.replay?.turn === call.turnId;
}

/**
 * The recorded decision of a call its turn already decided, for a replay (undefined: decide it
 * now). An allowed call whose reservation ended without an outcome (its process died and its
 * lease ran out) is decided again, as a new call: what runs is still what the store allows.
 *
 * A replay is the same call: the same tool with the same input. The id is the model's to
 * choose, so a request that reuses a recorded id for another tool or another input (another
 * digest) is refused as `duplicate-call` (without `replayed`): handing it the original's decision
 * would let it skip the step's tools and every rule, and deciding it as new would run an id twice.
 * `instead` gives what the model may call instead, for that refusal.
 */
export function replayedCall(
  state: OrchestrationState,
  input: ToolCallRequest,
  instead: () => readonly string[],
): ToolDecision | undefined {
  if (!isRecordedCall(state, input)) return undefined;
  const recorded = state.replay!.calls.find((call) => call.id === input.toolCallId);
  if (recorded === undefined) return undefined;
  const { tool, toolCallId } = input;
  if (!isSameCall(state, recorded, input)) {
    const reason = duplicateCall(toolCallId, 'other-call');
    return { type: 'tool', tool, toolCallId, allowed: false, reason, allowedTools: instead() };
  }
  if (!recorded.allowed) {
    const reason = recorded.reason ?? duplicateCall(toolCallId, 'refused');
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
export function recordCall(
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
export function markRan(state: OrchestrationState, toolCallId: string, ran: boolean): OrchestrationState {
  const record = state.replay;
  const index = record?.calls.findIndex((call) => call.id === toolCallId) ?? -1;
  if (record === undefined || index < 0) return state;
  const calls = record.calls.slice();
  calls[index] = { ...calls[index]!, ran };
  return { ...state, replay: { ...record, calls } };
}

/** `state` with the tools offered at model step `stepNumber` of turn `turnId` recorded (once). */
export function recordOffer(
  state: OrchestrationState,
  turnId: string,
  stepNumber: number,
  tools: readonly string[],
  toolChoice: 'auto' | 'none' | 'required',
): OrchestrationState {
  const record = replayRecord(state, turnId);
  if (stepNumber >= REPLAY_LIMIT || record.offers[stepNumber]) return state;
  const offers = record.offers.slice();
  while (offers.length < stepNumber) offers.push(null);
  offers[stepNumber] = { tools: [...tools], toolChoice };
  return { ...state, replay: { ...record, offers } };
}

/**
 * `state` with model step `stepNumber`'s usage counted for turn `turnId`, or undefined when it was
 * counted already (a replayed model step).
 */
export function countUsageOnce(
  state: OrchestrationState,
  turnId: string,
  stepNumber: number,
): OrchestrationState | undefined {
  const record = replayRecord(state, turnId);
  if (record.usage?.includes(stepNumber)) return undefined;
  const usage = [...(record.usage ?? []), stepNumber].slice(-REPLAY_LIMIT);
  return { ...state, replay: { ...record, usage } };
}
