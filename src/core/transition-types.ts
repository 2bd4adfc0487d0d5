/**
 * The turn protocol's vocabulary: what can happen to a session (`TransitionInput`), what a
 * transition needs besides the state (`TransitionContext`), and what it answers (the decisions).
 * `transition.ts` is the function over them; shells build inputs and read decisions.
 */
import type { MessageInfo } from './conditions.js';
import type { BudgetStatus, SequenceView } from './engine.js';
import type { OrchestrationEvent, ToolDenial } from './events.js';
import type { OrchestrationState, TokenUsage } from './state.js';

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
  | ({ readonly type: 'tool-requested' } & ToolCallRequest)
  /**
   * A person is asked to approve a call (the shell shows the request), by an `approve` rule or by
   * the app's own policy: the session keeps the approval it asked for, bound to the call id, the
   * input's digest and the session as it stands now, so that only an approval it asked for is
   * answered, once. A rule's request also emits `approval-requested`.
   */
  | {
      readonly type: 'approval-requested';
      readonly tool: string;
      readonly toolCallId: string;
      readonly argsDigest: string;
      /**
       * The rule that asked (the `rule` of the `approval-required` refusal); absent when the app's
       * policy (`needsApproval`, `toolApproval`) asked, which only a rule's refusal answers.
       */
      readonly rule?: string | undefined;
    }
  /**
   * A reserved call finished: it is committed (history, sequence, step selection) in reservation
   * order. With its `result` (and `args`, its input), the facts and labels of the template that
   * name its tool are set from them when it commits (SPEC section 11).
   */
  | { readonly type: 'tool-completed'; readonly toolCallId: string; readonly result?: unknown; readonly args?: unknown }
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
   * A person denied a call's approval (the shell answers the model with the denial; nothing
   * runs): its id counts as seen, so a later approval of the same call is refused as
   * `duplicate-call`, and the approval the session kept for it is dropped. When the session had
   * asked about the call, emits `approval-declined`.
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
   * state, a call the model loop refused), sent with the next write so that the session's event
   * log keeps it in its place. Emits nothing: the shell dispatched it already. A refusal
   * (`tool-rejected`) counts the call as decided, as `approval-denied` does (its id is seen, an
   * approval kept for it is dropped), so it cannot come back approved; with `turnId` it is also
   * recorded for the turn's replays, which get it back instead of deciding the call again.
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
   * The tools to offer: those a call of would run on the settled session (running calls left
   * out; a call that depends on one waits for it). In shadow mode, every agent tool.
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
  readonly rules?: readonly ExplainedRule[];
}

/**
 * A rule on calls that may still decide a call of a tool (see {@link ToolExplanation.rules}), with
 * what its condition reads of the session's facts and labels (SPEC section 11): what a completed
 * call's result can change about its answer.
 */
export interface ExplainedRule {
  /** Where the rule is: `rules[0]`, `steps[2].rules[1]`, `policy.rules[0]`. */
  readonly rule: string;
  /** `deny`, `allow`, `approve` or `limit`. */
  readonly effect: string;
  readonly reason: string;
  /**
   * The facts its condition reads (`state.facts.<name>`), by name; every fact the template
   * declares when it reads them some other way. Absent when it reads none. A rule that reads a
   * fact that is unknown or not set yet refuses the call, naming the fact.
   */
  readonly facts?: readonly string[];
  /** True when its condition reads the session's labels (`state.labels`). */
  readonly labels?: true;
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

/**
 * Why a shell stopped waiting for the running calls a request depends on: the wait passed its
 * bound (`waited` ms), or too many requests already wait on the session (`queue-full`).
 */
export type WaitEnd =
  | { readonly cause: 'wait-bound'; readonly waitedMs: number }
  | { readonly cause: 'queue-full'; readonly queued: number };

/**
 * The answer to a `tool-requested` input. A refusal with `waitFor` is no answer yet: the call's
 * answer depends on how those running calls of the session end, so nothing was reserved or
 * recorded, and the shell asks again once they ended (or, past its bound, with `waited`).
 */
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
      /**
       * Not decided yet: the ids of the running calls whose outcome the answer depends on (the
       * reason is `pending` with cause `running`). Wait for them to end, then ask again.
       */
      readonly waitFor?: readonly string[];
    };

/** A decision of {@link transition}. */
export type TransitionDecision = StepDecision | ToolDecision | MessageDecision | LeaseDecision | RecordDecision;

/** The result of {@link transition}. `state` is the input object when nothing changed. */
export interface TransitionResult {
  readonly state: OrchestrationState;
  readonly events: readonly OrchestrationEvent[];
  readonly decision?: TransitionDecision;
}
/** A tool call to decide: what `tool-requested` carries. */
export interface ToolCallRequest {
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
  /**
   * The shell waited for this call's running dependencies as long as it may, and asks for the
   * final answer: a request that still depends on a running call is refused as `pending` with
   * this cause (see {@link ToolDecision}`.waitFor`).
   */
  readonly waited?: WaitEnd | undefined;
}

/** The result of {@link transitionAll}: one decision slot per input. */
export interface TransitionAllResult {
  readonly state: OrchestrationState;
  readonly events: readonly OrchestrationEvent[];
  readonly decisions: readonly (TransitionDecision | undefined)[];
}

/**
 * Default lease of a reservation: 15 seconds. The process that runs a call renews it every
 * quarter of the lease while the call runs (`lease-renewed`), so a slow tool keeps its place and
 * only a call whose process died loses it, at most one lease after its last renewal.
 */
export const DEFAULT_LEASE_MS = 15_000;

/**
 * Most entries (running calls, and what waits behind them: completed calls, user messages,
 * unenforced records, counts) a session's pending log holds. It bounds the size of the state
 * that every write of a busy session carries (about 100 bytes an entry); a request that finds the
 * log full waits for room, and a user message is refused as `session-busy`.
 */
export const MAX_PENDING_ENTRIES = 256;
