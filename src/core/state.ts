/**
 * Per-session orchestration state (SPEC section 6): plain JSON, so every store can keep it.
 */
import type { ToolDenial } from './events.js';
import type { SessionLogState } from './session-log.js';

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
   * `n` calls; `key`, the user message of the turn a per-turn count belongs to. A rolling window
   * keeps its calls in buckets (at most 61, whatever the limit's `max`): `at`, the time each
   * bucket's calls are counted as made (the end of its slot, ascending), and `calls`, how many
   * calls each holds. States stored before the buckets have no `calls`: each `at` is one call.
   */
  counts?: Record<string, { n: number; key?: string; at?: number[]; calls?: number[] }>;
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
  /**
   * The facts completed calls' results set (SPEC section 11), by name: each a value (JSON), or
   * why it is unknown (its expression failed, or a union passed its bound). Rules read the known
   * ones as `state.facts.<name>`; a rule that reads an unknown one refuses.
   */
  facts?: Record<string, FactValue>;
  /** The labels completed calls' results raised (SPEC section 11), in the order they rose; never lowered. */
  labels?: string[];
  /** Which of `labels` a reset of the session lowers (their template says `clearOnReset`). */
  resetLabels?: string[];
}

/** A fact as a session keeps it: its value, or why it is unknown. */
export type FactValue = { value: unknown } | { unknown: string };

/**
 * What a completed call's result sets, computed when it completed and applied when it commits
 * (in reservation order): each fact's new value (merged as the fact keeps it) or why it is
 * unknown, and the labels it raises.
 */
export interface ResultWrites {
  facts?: { name: string; value?: unknown; unknown?: string }[];
  labels?: string[];
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
      /** What its result sets, once it completed (applied when it commits). */
      writes?: ResultWrites;
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
