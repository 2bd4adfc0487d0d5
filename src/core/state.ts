/**
 * Per-session orchestration state (SPEC section 6): plain JSON, so every store can keep it.
 */
import { InvalidArgumentError } from './errors.js';
import type { ToolDenial } from './events.js';
import { type SessionLogState, sessionLogProblem } from './session-log.js';

/** Token usage summed over every model call of a session. */
export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

/** The full state of one session, as stores keep it. Plain JSON. */
export interface OrchestrationState {
  sessionId: string;
  /** Name of the active step; absent when no step is active. */
  activeStep?: string;
  /** Tool names, oldest first, newest last; repeats kept; at most `historyLimit` long. */
  recentlyUsedTools: string[];
  /** Position in the active step's sequence (0 = nothing done yet). */
  sequenceIndex: number;
  cumulativeTokenUsage: TokenUsage;
  /** Milliseconds since the epoch. */
  createdAt: number;
  /** Milliseconds since the epoch of the last change to this state. */
  lastAccessed: number;
  /** Sliding time to live in milliseconds (0 = never expires). */
  ttl: number;
  /** Incremented by every write; stores use it for compare-and-set. */
  version: number;
  /**
   * Identity of the latest user message already handled, so that `resetSequenceOn`
   * fires once per new message however many times a turn asks for the allowed tools.
   */
  lastMessageKey?: string;
  /**
   * Ids of the latest tool calls this session has seen (requested, allowed or not, or
   * recorded; at most {@link TOOL_CALL_IDS_LIMIT}), oldest first. A toolCallId is an
   * idempotency key: a call whose id is here (or pending) is refused, never run again.
   */
  toolCallIds?: string[];
  /**
   * The pending log: reserved tool calls that have not finished, and what arrived behind
   * them, in order (SPEC section 7). A concurrent turn, `explain` and the inspector all see
   * it. See {@link PendingEntry}.
   */
  pending?: PendingEntry[];
  /**
   * Tokens spent while each step was active, by step name (step budgets are checked against
   * it). A model call counts for the step that is active when its usage is recorded.
   */
  stepTokens?: Record<string, number>;
  /**
   * The agent this session belongs to, when a server created it: a session is served by one
   * agent only. Library users may leave it unset.
   */
  agentId?: string;
  /**
   * Committed calls counted by each limit rule, by rule id (`rules[0]`, `steps[2].rules[1]`):
   * `n` calls; `key`, the user message of the turn a per-turn count belongs to; `at`, the commit
   * times of the latest calls of a rolling window (at most the limit's `max`).
   */
  counts?: Record<string, { n: number; key?: string; at?: number[] }>;
  /**
   * Approvals a person was asked for and that were not answered or used yet (at most
   * {@link APPROVALS_LIMIT}): the call id, its tool, a digest of its input (computed by the shell),
   * the `approve` rule that asked (absent when the app's own policy asked: `needsApproval`,
   * `toolApproval`), and `at`, a fingerprint of the session when it was asked, so that an
   * approval cannot be used for another call, other arguments, or after the session moved on.
   */
  approvals?: { id: string; tool: string; digest: string; rule?: string; at: string }[];
  /**
   * How many tool uses the session committed, kept when its template has rules (only approvals
   * read it). Part of an approval's fingerprint: a history at its bound can look the same after
   * a tool use (the same tool, in and out), and a count that only grows cannot. Absent: none
   * counted yet (or a state stored before it was kept).
   */
  toolUses?: number;
  /**
   * The decisions of the latest turn that runs under a durable-execution engine (`turnId`), so
   * that a replay of it gets them back: the tools offered at each model step, and each call's
   * decision (`ran` once it completed), and the model steps whose token usage was counted. At
   * most {@link REPLAY_LIMIT} of each.
   */
  replay?: ReplayRecord;
  /**
   * The counters of the session's event log, when its manager keeps one (`eventLog`); the
   * entries themselves are kept by the store, next to the state (see `src/core/session-log.ts`).
   */
  log?: SessionLogState;
}

/**
 * A user message kept in the pending log: its identity, and what message conditions need of it
 * when it is replayed. Plans whose message conditions only read the message (the built-in ones)
 * keep `matches`, the indexes of those that hold, so the state does not grow with what users
 * type; a plan with a custom condition that reads more keeps the `text`.
 */
export interface PendingMessage {
  key: string;
  /** The indexes of the plan's message-only conditions that hold for the message. */
  matches?: number[];
  /** The message's text, kept only when the plan needs it (see {@link PendingMessage}). */
  text?: string;
}

/**
 * One entry of the pending log (`state.pending`): what happened to a session since its
 * oldest reserved call that has not finished, in arrival order. The committed fields of the
 * state are everything before it; the log is replayed in order as its calls finish, so the
 * session always ends up as a serial run of reservations and messages in arrival order.
 *
 * - `call`: a tool call authorized and reserved before it runs. It holds its place (its
 *   sequence position, its entry in recency windows) until it completes (`done`), throws
 *   (removed) or its lease ends (removed: its process died or it ran too long). The head of
 *   the log is always a running call, and carries the user message in effect there.
 * - `message`: a user message that arrived behind a running call.
 * - `used`: a tool recorded without a reservation (the seed's `processToolUsage`).
 */
export type PendingEntry =
  | {
      kind: 'call';
      /** The tool call's id (the AI SDK's `toolCallId`). */
      id: string;
      tool: string;
      /** End of the lease, in milliseconds since the epoch. */
      expiresAt: number;
      /** True once the tool completed while an earlier call still runs. */
      done?: boolean;
      /** The user message in effect at this point (head of the log only). */
      message?: PendingMessage;
      /** Ids of the limit rules that count this call when it commits. */
      limits?: string[];
    }
  | ({ kind: 'message' } & PendingMessage)
  | { kind: 'used'; tool: string }
  /**
   * A call whose outcome is unknown (see the `tool-abandoned` input): nothing is recorded for it,
   * but the limit rules `limits` count it here, in its place. `message` is the user message it
   * ran for, kept only where the log no longer says it (a reset's counts, whose log is gone):
   * per-turn limits count it in that turn, not in whatever message the next write comes with.
   */
  | { kind: 'counted'; tool: string; limits: string[]; message?: PendingMessage };

/** How many recent tool call ids a state remembers to refuse repeats. */
export const TOOL_CALL_IDS_LIMIT = 256;

/**
 * Longest tool call id a denial is remembered under. Providers' ids are a few dozen characters;
 * a denial names its call through the request's history, which a client writes, and a session
 * keeps {@link TOOL_CALL_IDS_LIMIT} ids: without a bound a client could grow every later write
 * of the session by megabytes.
 */
export const MAX_DENIED_CALL_ID_LENGTH = 256;

/** The recorded decisions of one turn, for its replays (see `OrchestrationState.replay`). */
export interface ReplayRecord {
  turn: string;
  offers: ({ tools: string[]; toolChoice: 'auto' | 'none' | 'required' } | null)[];
  /**
   * Each call's decision; a refusal keeps what the model was told it may call instead
   * (`allowedTools`). `tool` and `digest` (the input's digest, when the shell computed one) are
   * what the decision was about: a replay gets it back only for the same tool and input, as the
   * call id is the model's to choose. Records stored before they were kept lack them.
   */
  calls: ReplayedCall[];
  /** The model steps whose token usage is counted, so that a replayed step is not counted twice. */
  usage?: number[];
}

/** One call's recorded decision in a {@link ReplayRecord}. */
export interface ReplayedCall {
  id: string;
  /** The tool the call was decided for (absent in records stored before it was kept). */
  tool?: string;
  /** The digest of the input the call was decided for, when the shell gave one. */
  digest?: string;
  allowed: boolean;
  reason?: ToolDenial;
  allowedTools?: string[];
  ran?: boolean;
}

/** Most model steps and calls a turn's replay record keeps. */
export const REPLAY_LIMIT = 64;

/** How many unanswered approvals a state keeps (the oldest go first). */
export const APPROVALS_LIMIT = 16;

/** The AI-facing subset of the state (AgentDock's `AIOrchestrationState`). */
export interface AIOrchestrationState {
  sessionId: string;
  activeStep?: string;
  recentlyUsedTools: string[];
  sequenceIndex: number;
  cumulativeTokenUsage: TokenUsage;
}

/** Default sliding TTL of a session: 24 hours. */
export const DEFAULT_SESSION_TTL_MS = 24 * 60 * 60 * 1000;

/** Default bound of `recentlyUsedTools`. */
export const DEFAULT_HISTORY_LIMIT = 50;

/** A new, empty state for `sessionId` at time `now`. */
export function createState(sessionId: string, now: number, ttl: number = DEFAULT_SESSION_TTL_MS): OrchestrationState {
  // Every field a turn touches exists from the start (optional ones as undefined, which JSON
  // drops), so all states share one hidden class in V8 and the turn's writes never reshape them.
  // Rule counts, approvals, the replay record of a durable turn and the event log counters are
  // left out: only limit rules, approve rules, durable turns and the event log write them, and as
  // undefined they would cost every idle session 8 bytes each (Node runs without pointer
  // compression). A session that gets one moves to another hidden class when it does.
  return {
    sessionId,
    activeStep: undefined,
    recentlyUsedTools: [],
    sequenceIndex: 0,
    cumulativeTokenUsage: NO_TOKENS,
    createdAt: now,
    lastAccessed: now,
    ttl,
    version: 0,
    lastMessageKey: undefined,
    toolCallIds: undefined,
    pending: undefined,
    stepTokens: undefined,
    agentId: undefined,
  };
}

/**
 * True when `a` and `b` are both a session nothing was ever written to, as {@link createState}
 * makes it, for the same session and TTL: they differ at most in their times, which no
 * transition reads. A turn that applied inputs to one of them for its first model step gives its
 * result to the store, which made the other when it found no session: the result stands for
 * both, and the inputs are not applied a second time.
 */
export function isSameNewSession(a: OrchestrationState, b: OrchestrationState): boolean {
  if (a.version !== 0 || b.version !== 0) return false;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  const fieldsOfA = a as unknown as Record<string, unknown>;
  const fieldsOfB = b as unknown as Record<string, unknown>;
  for (const key of keys) {
    if (key === 'createdAt' || key === 'lastAccessed') continue;
    const x = fieldsOfA[key];
    const y = fieldsOfB[key];
    if (x === y) continue;
    // Each new state has its own empty history.
    if (Array.isArray(x) && Array.isArray(y) && x.length === 0 && y.length === 0) continue;
    return false;
  }
  return true;
}

/** Zero usage, shared by every new state (states are never mutated, only replaced). */
const NO_TOKENS: TokenUsage = Object.freeze({ promptTokens: 0, completionTokens: 0, totalTokens: 0 });

/** The AI-facing subset of `state` (copies, so callers cannot change stored state). */
export function toAIState(state: OrchestrationState): AIOrchestrationState {
  const ai: AIOrchestrationState = {
    sessionId: state.sessionId,
    recentlyUsedTools: [...state.recentlyUsedTools],
    sequenceIndex: state.sequenceIndex,
    cumulativeTokenUsage: { ...state.cumulativeTokenUsage },
  };
  if (state.activeStep !== undefined) ai.activeStep = state.activeStep;
  return ai;
}

/** Longest session id accepted, in UTF-16 code units. */
export const MAX_SESSION_ID_LENGTH = 4096;

/**
 * Throws an {@link InvalidArgumentError} unless `sessionId` is a usable session id:
 * a non-empty string of at most {@link MAX_SESSION_ID_LENGTH} characters.
 */
export function assertSessionId(sessionId: unknown, path = 'sessionId'): asserts sessionId is string {
  if (typeof sessionId !== 'string') {
    throw new InvalidArgumentError(path, `expected a string, got ${describeType(sessionId)}`);
  }
  if (sessionId.length === 0) {
    throw new InvalidArgumentError(path, 'the session id is empty; pass a non-empty string');
  }
  if (sessionId.length > MAX_SESSION_ID_LENGTH) {
    throw new InvalidArgumentError(
      path,
      `the session id is ${sessionId.length} characters long; the limit is ${MAX_SESSION_ID_LENGTH}`,
    );
  }
}

/**
 * {@link assertSessionId} for a store that keeps ids as UTF-8 text (SQLite, PostgreSQL): an
 * unpaired UTF-16 surrogate is refused too, because UTF-8 encodes every lone surrogate as
 * U+FFFD, and two such ids (or one and the id spelled with U+FFFD) would share one session.
 */
export function assertTextSessionId(sessionId: unknown): asserts sessionId is string {
  assertSessionId(sessionId);
  if (/\p{Cs}/u.test(sessionId)) {
    throw new InvalidArgumentError('sessionId', 'the session id contains an unpaired UTF-16 surrogate');
  }
}

/** A short human description of a value's type, for error messages. */
export function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : typeof value;
}

/**
 * Checks that `value` is a well-formed {@link OrchestrationState} (as read back from a store
 * or a token) and returns it; throws an {@link InvalidArgumentError} naming the bad field.
 */
export function assertState(value: unknown, path = 'state'): OrchestrationState {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidArgumentError(path, `expected an object, got ${describeType(value)}`);
  }
  const s = value as Record<string, unknown>;
  // Every store checks every state it writes: no closures or iterator callbacks on this path.
  if (typeof s.sessionId !== 'string') failField(path, s, 'sessionId', 'a string');
  if (s.activeStep !== undefined && typeof s.activeStep !== 'string') failField(path, s, 'activeStep', 'a string');
  if (!isStringArray(s.recentlyUsedTools)) {
    failField(path, s, 'recentlyUsedTools', 'an array of strings');
  }
  if (!isCount(s.sequenceIndex)) failField(path, s, 'sequenceIndex', 'a non-negative integer');
  const usage = s.cumulativeTokenUsage as Record<string, unknown> | undefined;
  if (
    typeof usage !== 'object' ||
    usage === null ||
    !isCount(usage.promptTokens) ||
    !isCount(usage.completionTokens) ||
    !isCount(usage.totalTokens)
  ) {
    failField(path, s, 'cumulativeTokenUsage', 'an object of non-negative integer token counts');
  }
  if (!isCount(s.createdAt)) failField(path, s, 'createdAt', 'a non-negative integer');
  if (!isCount(s.lastAccessed)) failField(path, s, 'lastAccessed', 'a non-negative integer');
  if (!isCount(s.ttl)) failField(path, s, 'ttl', 'a non-negative integer');
  if (!isCount(s.version)) failField(path, s, 'version', 'a non-negative integer');
  if (s.lastMessageKey !== undefined && typeof s.lastMessageKey !== 'string')
    failField(path, s, 'lastMessageKey', 'a string');
  if (s.agentId !== undefined && typeof s.agentId !== 'string') failField(path, s, 'agentId', 'a string');
  if (s.toolCallIds !== undefined && !isStringArray(s.toolCallIds)) {
    failField(path, s, 'toolCallIds', 'an array of strings');
  }
  if (
    s.stepTokens !== undefined &&
    !(
      typeof s.stepTokens === 'object' &&
      s.stepTokens !== null &&
      !Array.isArray(s.stepTokens) &&
      Object.values(s.stepTokens).every(isCount)
    )
  ) {
    failField(path, s, 'stepTokens', 'an object of token counts by step name');
  }
  if (s.pending !== undefined && !(Array.isArray(s.pending) && s.pending.every(isPendingEntry))) {
    failField(path, s, 'pending', 'an array of pending log entries (call, message, used or counted)');
  }
  if (s.counts !== undefined && !isCounts(s.counts)) {
    failField(path, s, 'counts', 'an object of limit counts ({ n, key?, at? }) by rule id');
  }
  if (
    s.approvals !== undefined &&
    !(Array.isArray(s.approvals) && s.approvals.length <= APPROVALS_LIMIT && s.approvals.every(isApproval))
  ) {
    failField(
      path,
      s,
      'approvals',
      `an array of at most ${APPROVALS_LIMIT} approvals ({ id, tool, digest, rule?, at })`,
    );
  }
  if (s.toolUses !== undefined && !isCount(s.toolUses)) failField(path, s, 'toolUses', 'a non-negative integer');
  if (s.replay !== undefined && !isReplayRecord(s.replay)) {
    failField(path, s, 'replay', 'a replay record ({ turn, offers, calls: [{ id, tool?, digest?, allowed }] })');
  }
  if (s.log !== undefined) {
    const problem = sessionLogProblem(s.log);
    if (problem !== undefined) throw new InvalidArgumentError(`${path}.log`, problem);
  }
  return value as OrchestrationState;
}

function failField(path: string, s: Record<string, unknown>, field: string, expected: string): never {
  throw new InvalidArgumentError(`${path}.${field}`, `expected ${expected}, got ${describeType(s[field])}`);
}

function isStringArray(value: unknown): value is string[] {
  if (!Array.isArray(value)) return false;
  for (let i = 0; i < value.length; i++) if (typeof value[i] !== 'string') return false;
  return true;
}

function isPendingEntry(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const p = value as Record<string, unknown>;
  if (p.kind === 'message') return isMessage(p);
  if (p.kind === 'used') return typeof p.tool === 'string';
  if (p.kind === 'counted') {
    return typeof p.tool === 'string' && isStringArray(p.limits) && (p.message === undefined || isMessage(p.message));
  }
  return (
    p.kind === 'call' &&
    typeof p.id === 'string' &&
    typeof p.tool === 'string' &&
    isCount(p.expiresAt) &&
    (p.done === undefined || typeof p.done === 'boolean') &&
    (p.message === undefined || isMessage(p.message)) &&
    (p.limits === undefined || (Array.isArray(p.limits) && p.limits.every((id) => typeof id === 'string')))
  );
}

function isCounts(value: unknown): boolean {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  return Object.values(value).every((count: unknown) => {
    const c = count as Record<string, unknown> | null;
    return (
      typeof c === 'object' &&
      c !== null &&
      isCount(c.n) &&
      (c.key === undefined || typeof c.key === 'string') &&
      (c.at === undefined || (Array.isArray(c.at) && c.at.every(isCount)))
    );
  });
}

function isReplayRecord(value: unknown): boolean {
  const r = value as Record<string, unknown> | null;
  if (typeof r !== 'object' || r === null || typeof r.turn !== 'string') return false;
  if (
    !Array.isArray(r.offers) ||
    r.offers.length > REPLAY_LIMIT ||
    !Array.isArray(r.calls) ||
    r.calls.length > REPLAY_LIMIT ||
    (r.usage !== undefined &&
      (!Array.isArray(r.usage) ||
        r.usage.length > REPLAY_LIMIT ||
        !r.usage.every((step) => Number.isSafeInteger(step) && step >= 0)))
  ) {
    return false;
  }
  const offersOk = r.offers.every((offer: unknown) => {
    if (offer === null) return true;
    const o = offer as Record<string, unknown>;
    return (
      typeof o === 'object' &&
      Array.isArray(o.tools) &&
      o.tools.every((tool) => typeof tool === 'string') &&
      (o.toolChoice === 'auto' || o.toolChoice === 'none' || o.toolChoice === 'required')
    );
  });
  const callsOk = r.calls.every((call: unknown) => {
    const c = call as Record<string, unknown>;
    const reason = c?.reason as Record<string, unknown> | undefined;
    return (
      typeof c === 'object' &&
      c !== null &&
      typeof c.id === 'string' &&
      (c.tool === undefined || typeof c.tool === 'string') &&
      (c.digest === undefined || typeof c.digest === 'string') &&
      typeof c.allowed === 'boolean' &&
      (c.ran === undefined || typeof c.ran === 'boolean') &&
      (c.allowedTools === undefined ||
        (Array.isArray(c.allowedTools) && c.allowedTools.every((tool) => typeof tool === 'string'))) &&
      (reason === undefined || (typeof reason.code === 'string' && typeof reason.message === 'string'))
    );
  });
  return offersOk && callsOk;
}

function isApproval(value: unknown): boolean {
  const a = value as Record<string, unknown> | null;
  return (
    typeof a === 'object' &&
    a !== null &&
    typeof a.id === 'string' &&
    typeof a.tool === 'string' &&
    typeof a.digest === 'string' &&
    (a.rule === undefined || typeof a.rule === 'string') &&
    typeof a.at === 'string'
  );
}

function isMessage(value: unknown): boolean {
  const m = value as Record<string, unknown> | null;
  return (
    typeof m === 'object' &&
    m !== null &&
    typeof m.key === 'string' &&
    (m.text === undefined || typeof m.text === 'string') &&
    (m.matches === undefined || (Array.isArray(m.matches) && m.matches.every(isCount)))
  );
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}
