/**
 * The session's event log: its latest decisions, each with where the session stood right after
 * it, for timelines such as the inspector's.
 *
 * The entries are not part of the state: every write of a session would carry all of them
 * (26 KB for 100 entries of a research agent, which made a PostgreSQL turn 7.7 times slower).
 * Instead a store appends the entries of a write next to the session, in the same atomic write,
 * keeps the newest `capacity` of them and removes them with the session; only the log's counters
 * (`state.log`: capacity, last seq, turn) live in the state. The manager hands a write's entries
 * to the store attached to the state it returns ({@link withLogEntries}), so the store contract
 * (`update(sessionId, fn)`) is unchanged; a store that keeps logs reads them with
 * {@link logEntriesOf} and implements `SessionStore.readLog`.
 *
 * Each entry is self-contained (the whole tool history, not a change from the entry before), so
 * trimming the oldest never makes a newer one unreadable.
 */
import type { OrchestrationEvent } from './events.js';
import type { FactValue, OrchestrationState } from './state.js';

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

/** One entry of a session's event log, as stores keep it (plain JSON). */
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
  /** The tool history right after the event, oldest first. */
  history: string[];
  /** Cumulative token usage: prompt, completion, total. */
  usage: [number, number, number];
  /** Tokens spent per budgeted step (templates with step budgets only). */
  stepTokens?: Record<string, number>;
  /** The facts right after the event (absent: none), each as {@link LoggedFact} says. */
  facts?: Record<string, LoggedFact>;
  /** The labels raised right after the event, in the order they rose (absent: none). */
  labels?: string[];
}

/**
 * A fact as a log entry keeps it: as the session kept it (its value, or why it is unknown), or,
 * when its value is more than {@link MAX_LOGGED_FACT_CHARACTERS} characters of JSON, only that
 * length (`omitted`). Every entry is self-contained, so a fact of thousands of values copied into
 * each would multiply the log; the session itself keeps the whole value.
 */
export type LoggedFact = FactValue | { omitted: number };

/** Longest value of a fact, in characters of JSON, that a log entry copies (see {@link LoggedFact}). */
export const MAX_LOGGED_FACT_CHARACTERS = 256;

/** The log's counters, kept in the state (`state.log`); the entries are kept by the store. */
export interface SessionLogState {
  /** Most entries the store keeps for the session. */
  capacity: number;
  /** Seq of the newest entry (0: none yet). */
  seq: number;
  /** Current turn number. */
  turn: number;
  /** Identity of the user message of the current turn. */
  key?: string;
}

/** One thing to log: the event and the state right after it. */
export interface LogItem {
  readonly event: LoggedEvent;
  readonly state: OrchestrationState;
}

/** Largest capacity a log may have. */
export const MAX_LOG_CAPACITY = 1000;

/**
 * Logs `items` onto `state`: the state with its log counters moved on, and the new entries
 * attached for the store to append ({@link logEntriesOf}). `key` identifies the user message
 * the items belong to: a new one starts a new turn. `capacity` is the number of entries the
 * store keeps. Pure.
 */
export function appendToLog(
  state: OrchestrationState,
  capacity: number,
  items: readonly LogItem[],
  at: number,
  key: string | undefined,
): OrchestrationState {
  const log = state.log;
  let turn = log?.turn ?? 0;
  let currentKey = log?.key;
  if (key !== undefined && key !== currentKey) {
    turn += 1;
    currentKey = key;
  }
  let seq = log?.seq ?? 0;
  const entries: SessionLogEntry[] = [];
  for (const { event, state: after } of items) {
    const usage = after.cumulativeTokenUsage;
    const entry: SessionLogEntry = {
      seq: ++seq,
      at,
      turn: Math.max(turn, 1),
      event,
      index: after.sequenceIndex,
      history: after.recentlyUsedTools,
      usage: [usage.promptTokens, usage.completionTokens, usage.totalTokens],
    };
    if (after.activeStep !== undefined) entry.step = after.activeStep;
    if (after.stepTokens !== undefined) entry.stepTokens = after.stepTokens;
    if (after.facts !== undefined) entry.facts = loggedFacts(after.facts);
    if (after.labels !== undefined && after.labels.length > 0) entry.labels = after.labels;
    entries.push(entry);
  }
  const next: SessionLogState = { capacity, seq, turn };
  if (currentKey !== undefined) next.key = currentKey;
  const logged = { ...state, log: next };
  // Several applies may log onto one state object in a row (a reset right after a turn):
  // keep the entries of each.
  const earlier = pendingEntries.get(state);
  pendingEntries.set(logged, earlier ? [...earlier, ...entries] : entries);
  return logged;
}

/**
 * The facts as entries keep them, by the facts object of the states they were made from. Facts
 * change only when a call's result sets one, so most entries of a session share one facts object:
 * each is measured once, not once per entry.
 */
const loggedFactsOf = new WeakMap<Readonly<Record<string, FactValue>>, Record<string, LoggedFact>>();

/** `facts` as a log entry keeps them (see {@link LoggedFact}). */
function loggedFacts(facts: Readonly<Record<string, FactValue>>): Record<string, LoggedFact> {
  let logged = loggedFactsOf.get(facts);
  if (logged !== undefined) return logged;
  logged = {};
  for (const [name, fact] of Object.entries(facts)) {
    const characters = 'value' in fact ? (JSON.stringify(fact.value)?.length ?? 0) : 0;
    // Defined, not assigned: a fact may be named __proto__.
    Object.defineProperty(logged, name, {
      value: characters > MAX_LOGGED_FACT_CHARACTERS ? { omitted: characters } : fact,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  loggedFactsOf.set(facts, logged);
  return logged;
}

/**
 * Entries waiting to be appended, by the state object a store is given to write. A WeakMap, not
 * a field: the entries never become part of the state, and a store that keeps no log ignores
 * them without any cost.
 */
const pendingEntries = new WeakMap<OrchestrationState, readonly SessionLogEntry[]>();

/**
 * `to`, a copy of `from` made after logging (to stamp a field), with the entries `from` waits to
 * append: a copy is a new object, and the entries are attached to the object, not its fields.
 */
export function keepLogEntries(from: OrchestrationState, to: OrchestrationState): OrchestrationState {
  const entries = pendingEntries.get(from);
  if (entries !== undefined) pendingEntries.set(to, entries);
  return to;
}

/**
 * The log entries a store must append, in the same atomic write, when it writes `state` (the
 * object its updater returned), or undefined when there are none.
 */
export function logEntriesOf(state: OrchestrationState): readonly SessionLogEntry[] | undefined {
  return pendingEntries.get(state);
}

/**
 * The state of the session right after `entry`, as far as the log knows it (no running calls). A
 * fact whose value the entry left out (`omitted`) is unknown there: what the log does not know
 * must not be judged as known.
 */
export function stateAtEntry(current: OrchestrationState, entry: SessionLogEntry): OrchestrationState {
  const [promptTokens, completionTokens, totalTokens] = entry.usage;
  return {
    ...current,
    activeStep: entry.step,
    recentlyUsedTools: entry.history,
    sequenceIndex: entry.index,
    cumulativeTokenUsage: { promptTokens, completionTokens, totalTokens },
    stepTokens: entry.stepTokens,
    facts: entry.facts === undefined ? undefined : factsAtEntry(entry.facts),
    labels: entry.labels,
    pending: undefined,
  };
}

function factsAtEntry(logged: Readonly<Record<string, LoggedFact>>): Record<string, FactValue> {
  const facts: Record<string, FactValue> = {};
  for (const [name, fact] of Object.entries(logged)) {
    const value: FactValue =
      'omitted' in fact
        ? { unknown: `its value (${fact.omitted} characters of JSON) is not kept in the event log` }
        : fact;
    Object.defineProperty(facts, name, { value, enumerable: true, writable: true, configurable: true });
  }
  return facts;
}

/** What is wrong with `value` as {@link SessionLogState}, or undefined when nothing is. */
export function sessionLogProblem(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'expected an object';
  const log = value as Record<string, unknown>;
  if (!isCount(log.capacity) || !isCount(log.seq) || !isCount(log.turn)) {
    return 'expected capacity, seq and turn to be non-negative integers';
  }
  if (log.key !== undefined && typeof log.key !== 'string') return 'expected key to be a string';
  return undefined;
}

/**
 * Checks an entry read back from a store and returns it; throws an Error naming what is wrong
 * (a store's log is its own data: damage there is a fault of the store, not of a request).
 */
export function assertLogEntry(value: unknown, where: string): SessionLogEntry {
  const entry = value as Record<string, unknown> | null;
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
    Array.isArray(entry.history) &&
    entry.history.every((tool) => typeof tool === 'string') &&
    Array.isArray(entry.usage) &&
    entry.usage.length === 3 &&
    entry.usage.every(isCount) &&
    (entry.labels === undefined ||
      (Array.isArray(entry.labels) && entry.labels.every((label) => typeof label === 'string'))) &&
    (entry.facts === undefined || isLoggedFacts(entry.facts));
  if (!ok) throw new Error(`${where} is not an event log entry (seq, at, turn, event, index, history, usage)`);
  return value as SessionLogEntry;
}

/** Whether `value` is an object of {@link LoggedFact}s by name. */
function isLoggedFacts(value: unknown): boolean {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  return Object.values(value).every((fact: unknown) => {
    if (typeof fact !== 'object' || fact === null) return false;
    const f = fact as Record<string, unknown>;
    return 'value' in f || typeof f.unknown === 'string' || isCount(f.omitted);
  });
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}
