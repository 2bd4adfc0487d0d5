/**
 * The session's event log: its latest decisions, each with where the session stood right after
 * it, kept in the state itself (`state.log`) so that it is written in the same atomic update as
 * the change it describes, by every store, and goes when the session goes. The inspector's
 * session timeline reads it.
 *
 * It is bounded (`capacity` entries, the oldest dropped first) and compact, because every
 * write of the session carries it: an entry keeps the active step, the sequence position and
 * the token counts, but the tool history only as a change from the previous entry (`add`,
 * `drop`), replayed from `base` (the history before the oldest entry kept). `tail` is the
 * history at the newest entry, so appending never replays the log.
 */
import type { OrchestrationEvent } from './events.js';
import type { OrchestrationState } from './state.js';

/** `Omit` applied to each member of a union. */
type OmitEach<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/**
 * What an entry records: an engine event without its `sessionId`, or one of the log's own
 * markers, for what the engine reports with no event of its own: a tool use committed to the
 * history (`tool-recorded`), the end of a turn's model loop (`turn-ended`, where the turn left
 * the session), and a reset of the session (`session-reset`).
 */
export type LoggedEvent =
  | OmitEach<OrchestrationEvent, 'sessionId'>
  | { type: 'tool-recorded'; tool: string; toolCallId?: string; step: string | undefined }
  | { type: 'turn-ended'; step: string | undefined; awaitingApproval?: true }
  | { type: 'session-reset' };

/** One entry of {@link SessionLog}. Field names are short: every write of the session carries them. */
export interface SessionLogEntry {
  /** 1 for the session's first entry, one more for each next. */
  seq: number;
  /** Milliseconds since the epoch. */
  at: number;
  /** The user turn: 1 for the first user message the log saw, one more for each new one. */
  turn: number;
  event: LoggedEvent;
  /** Active step right after the event (absent: none). */
  step?: string;
  /** Sequence position right after the event. */
  index: number;
  /** Tools appended to the history since the previous entry. */
  add?: string[];
  /** Tools dropped from the front of the history since the previous entry. */
  drop?: number;
  /** Cumulative token usage: prompt, completion, total. */
  usage: [number, number, number];
  /** Tokens spent per budgeted step (templates with step budgets only). */
  stepTokens?: Record<string, number>;
}

/** The bounded event log of a session (`state.log`); see the module comment. */
export interface SessionLog {
  /** Most entries kept. */
  capacity: number;
  /** Seq of the newest entry (0: none yet). */
  seq: number;
  /** Current turn number. */
  turn: number;
  /** Identity of the user message of the current turn. */
  key?: string;
  /** The history before the oldest entry kept. */
  base: string[];
  /** The history at the newest entry. */
  tail: string[];
  entries: SessionLogEntry[];
}

/** One thing to log: the event and the state right after it. */
export interface LogItem {
  readonly event: LoggedEvent;
  readonly state: OrchestrationState;
}

/** Largest capacity a log may have: every write carries the whole log. */
export const MAX_LOG_CAPACITY = 1000;

/**
 * `log` with `items` appended (at most `capacity` entries kept; the oldest go first). `key`
 * identifies the user message the items belong to: a new one starts a new turn. Pure.
 */
export function appendToLog(
  log: SessionLog | undefined,
  capacity: number,
  items: readonly LogItem[],
  at: number,
  key: string | undefined,
): SessionLog {
  let turn = log?.turn ?? 0;
  let currentKey = log?.key;
  if (key !== undefined && key !== currentKey) {
    turn += 1;
    currentKey = key;
  }
  let seq = log?.seq ?? 0;
  let tail = log?.tail ?? [];
  const entries = log ? log.entries.slice() : [];
  for (const { event, state } of items) {
    const history = state.recentlyUsedTools;
    const usage = state.cumulativeTokenUsage;
    const entry: SessionLogEntry = {
      seq: ++seq,
      at,
      turn: Math.max(turn, 1),
      event,
      index: state.sequenceIndex,
      usage: [usage.promptTokens, usage.completionTokens, usage.totalTokens],
    };
    if (state.activeStep !== undefined) entry.step = state.activeStep;
    const delta = historyDelta(tail, history);
    if (delta.add.length > 0) entry.add = delta.add;
    if (delta.drop > 0) entry.drop = delta.drop;
    if (state.stepTokens !== undefined) entry.stepTokens = { ...state.stepTokens };
    entries.push(entry);
    tail = history;
  }
  let base = log?.base ?? [];
  const excess = entries.length - capacity;
  if (excess > 0) {
    for (const dropped of entries.slice(0, excess)) base = applyDelta(base, dropped);
    entries.splice(0, excess);
  }
  const next: SessionLog = { capacity, seq, turn, base, tail: tail.slice(), entries };
  if (currentKey !== undefined) next.key = currentKey;
  return next;
}

/** A logged entry with the session's history at that point, replayed. */
export interface ReplayedEntry {
  readonly entry: SessionLogEntry;
  /** The state right after the entry's event, as far as the log knows it (no pending calls). */
  readonly state: OrchestrationState;
}

/** Every entry of `state.log` with the state at its point, oldest first. */
export function replayLog(state: OrchestrationState): ReplayedEntry[] {
  const log = state.log;
  if (log === undefined) return [];
  let history = log.base;
  return log.entries.map((entry) => {
    history = applyDelta(history, entry);
    const [promptTokens, completionTokens, totalTokens] = entry.usage;
    const at: OrchestrationState = {
      ...state,
      activeStep: entry.step,
      recentlyUsedTools: history,
      sequenceIndex: entry.index,
      cumulativeTokenUsage: { promptTokens, completionTokens, totalTokens },
      stepTokens: entry.stepTokens,
      pending: undefined,
      log: undefined,
    };
    return { entry, state: at };
  });
}

/** How many entries the log has dropped so far to stay within its capacity. */
export function droppedEntries(log: SessionLog | undefined): number {
  if (log === undefined) return 0;
  return log.seq - log.entries.length;
}

/**
 * How `before` became `after`: `drop` tools removed from its front, then `add` appended. The
 * history only ever grows at the end and is trimmed at the front (or cleared), so the common
 * cases cost a comparison or two; any other change is stored as a full replacement.
 */
export function historyDelta(before: readonly string[], after: readonly string[]): { add: string[]; drop: number } {
  if (before === after) return NO_DELTA;
  for (let drop = 0; drop <= before.length; drop++) {
    const kept = before.length - drop;
    if (kept > after.length) continue;
    let same = true;
    for (let i = 0; i < kept; i++) {
      if (before[drop + i] !== after[i]) {
        same = false;
        break;
      }
    }
    if (same) return { add: after.slice(kept), drop };
  }
  // Unreachable: dropping everything always matches.
  return { add: after.slice(), drop: before.length };
}

const NO_DELTA: { add: string[]; drop: number } = Object.freeze({ add: [], drop: 0 }) as {
  add: string[];
  drop: number;
};

function applyDelta(history: readonly string[], entry: SessionLogEntry): string[] {
  const kept = entry.drop ? history.slice(entry.drop) : history.slice();
  if (entry.add) kept.push(...entry.add);
  return kept;
}

/** What is wrong with `value` as a {@link SessionLog}, or undefined when nothing is. */
export function sessionLogProblem(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'expected an object';
  const log = value as Record<string, unknown>;
  if (!isCount(log.capacity) || !isCount(log.seq) || !isCount(log.turn)) {
    return 'expected capacity, seq and turn to be non-negative integers';
  }
  if (log.key !== undefined && typeof log.key !== 'string') return 'expected key to be a string';
  if (!isNames(log.base) || !isNames(log.tail)) return 'expected base and tail to be arrays of tool names';
  if (!Array.isArray(log.entries)) return 'expected entries to be an array';
  for (const [i, raw] of log.entries.entries()) {
    const entry = raw as Record<string, unknown> | null;
    const ok =
      typeof entry === 'object' &&
      entry !== null &&
      isCount(entry.seq) &&
      isCount(entry.at) &&
      isCount(entry.turn) &&
      isCount(entry.index) &&
      typeof entry.event === 'object' &&
      entry.event !== null &&
      typeof (entry.event as { type?: unknown }).type === 'string' &&
      (entry.step === undefined || typeof entry.step === 'string') &&
      (entry.add === undefined || isNames(entry.add)) &&
      (entry.drop === undefined || isCount(entry.drop)) &&
      Array.isArray(entry.usage) &&
      entry.usage.length === 3 &&
      entry.usage.every(isCount);
    if (!ok) return `entries[${i}] is not a log entry (seq, at, turn, event, index, usage)`;
  }
  return undefined;
}

function isNames(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((item) => typeof item === 'string');
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}
