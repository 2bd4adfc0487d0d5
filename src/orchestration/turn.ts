/**
 * `Turn`: one turn of a model loop on one session, as a shell over the transition. It feeds
 * the turn's inputs through `OrchestrationManager.apply` and writes as little as it can:
 *
 * - the first model step handles the user message and reads where the session stands (one
 *   update, which writes only when the message changes the session);
 * - every tool request is one update that decides and reserves;
 * - completions, failures and token usage wait in a buffer and ride on the next update (the
 *   next request, or `flush()` at the end of the turn), so a research turn of 4 model steps
 *   and 3 tools costs 5 store round trips;
 * - later model steps are decided locally from the last stored state plus the buffer: what is
 *   offered may be stale by another turn's writes, but what runs is decided by the store
 *   (templates with token budgets write at every step instead, so spending is seen at once).
 *
 * A buffered completion is written at the latest when the turn ends. A call's ending whose write
 * failed because the store did not answer is written again by the turn itself, from 25 ms later
 * backing off to a second apart, until it is stored: once the store answers again, it is written
 * within about a second, not only with the turn's next write or lease renewal (while the call's
 * stale reservation held later turns back). While a reserved call runs,
 * and until its completion is written, the turn renews its lease (every quarter of the lease), so a
 * slow tool or a slow model step never loses its place; only a process that died stops renewing,
 * and then the lease ends and the call is released: the record of a call that ran can be lost
 * that way, but a call that was not allowed can never run. A call whose reservation ended before
 * its completion took effect is reported (`onError`, a {@link LeaseLostError}), never dropped
 * silently. A completion takes effect when it is written, or, when the turn applied it earlier
 * to decide a model step and nothing was written to the session in between, when the turn
 * applied it: the store then starts from the turn's result instead of applying the buffer again.
 */
import { createHash } from 'node:crypto';
import type { OrchestrationPlan, OrchestrationSource } from '../core/compile.js';
import { duplicateCall } from '../core/denials.js';
import { LeaseLostError, StoreConflictError, StoreUnavailableError } from '../core/errors.js';
import { joinEvents, NO_EVENTS, type OrchestrationEvent } from '../core/events.js';
import type { ChatMessage } from '../core/messages.js';
import { createState, type OrchestrationState } from '../core/state.js';
import { normalizeUsage, type TokenUsageInput } from '../core/token-usage.js';
import type { ToolAnnotations } from '../core/tool-annotations.js';
import {
  DEFAULT_LEASE_MS,
  type StepDecision,
  type ToolDecision,
  type TransitionContext,
  type TransitionDecision,
  type TransitionInput,
  transition,
  transitionAll,
  type WaitEnd,
} from '../core/transition.js';
import { decideWaiting } from './call-waits.js';
import type { AppliedInputs, AppliedPrefix, OrchestrationManager } from './orchestration-manager.js';
import { applyNow, contextFollows, messageOf, takesEvents, throwIfRefused, waitsOf } from './orchestration-manager.js';
import { type CallOwner, reserveInScopes, type ScopeHold, scopesOf, settleInScopes } from './policy-scopes.js';

/** Options of {@link Turn}. */
export interface TurnOptions {
  manager: OrchestrationManager;
  /** The template or its `orchestration` block. */
  config: OrchestrationSource;
  /** What the agent's MCP tools declare, by tool name: annotation selectors resolve against it. */
  toolAnnotations?: ReadonlyMap<string, ToolAnnotations> | undefined;
  sessionId: string;
  /** Every tool of the agent, in order. */
  agentTools: readonly string[];
  /** The conversation; its latest user message drives message conditions. */
  messages?: readonly ChatMessage[] | undefined;
  /**
   * The agent the turn runs for: a new session becomes its own, and a session of another agent
   * refuses the turn (a `SessionRefusedError`, code `session-of-another-agent`).
   */
  agentId?: string | undefined;
  /**
   * The session as the caller already stored it with this turn's user message (see
   * {@link Turn.begin}): the first model step is decided on it, without a store round trip.
   */
  state?: OrchestrationState | undefined;
  /** Receives what the turn cannot throw: a call that lost its reservation (default `console.error`). */
  onError?: ((error: unknown) => void) | undefined;
  /** What the caller passes for rules on calls: `context` in their conditions. */
  context?: Readonly<Record<string, unknown>> | undefined;
  /**
   * The caller knows the session is new (it made up its id just now): the turn starts from an
   * empty state without reading the store.
   */
  fresh?: boolean | undefined;
  /**
   * Identifies the turn across replays of a durable-execution engine (e.g. a DBOS workflow id):
   * its decisions are recorded, and a replay of it gets them back (see `orchestrate({ turnId })`).
   */
  turnId?: string | undefined;
}

/** What a request says about its call besides the tool, for rules on calls. */
export interface CallInput {
  /** The call's input (`args` in rule conditions). */
  readonly args?: unknown;
  /** A digest of the input, which approvals are bound to. */
  readonly argsDigest?: string | undefined;
  /** The call comes with a person's approval (an approved call resumed from the history). */
  readonly approved?: boolean | undefined;
}

/** A tool request, as the operator's scopes are asked it. */
type ScopedRequest = Extract<TransitionInput, { type: 'tool-requested' }>;

/** What a completed call returned and was given, for the template's facts and labels. */
export interface CallOutcome {
  /** What the tool returned (an MCP call: its structured content, else its text as JSON, else its text). */
  readonly result?: unknown;
  /** The call's input. */
  readonly args?: unknown;
}

/** A model step's orchestration, and the state it was decided on. */
export interface TurnStep {
  readonly decision: StepDecision;
  readonly state: OrchestrationState;
}

/**
 * {@link Turn.stepStarted}, answered without a promise when it needs no store round trip or the
 * store is synchronous (the memory store). Internal: the AI SDK shell's hooks run before every
 * model step and call, and each promise hop there is paid per step.
 */
export let stepStartedNow: (turn: Turn, stepNumber?: number) => TurnStep | Promise<TurnStep>;

/**
 * {@link Turn.request}, answered without a promise on a synchronous store (see {@link stepStartedNow}).
 * With `hold`, the write's events wait for {@link releaseEvents} (a call reserved before the
 * model loop takes it up, whose events belong in the context that runs it).
 */
export let requestNow: (
  turn: Turn,
  tool: string,
  toolCallId: string,
  offered?: readonly string[],
  call?: CallInput,
  hold?: boolean,
) => ToolDecision | Promise<ToolDecision>;

/** Dispatches the events a `hold` request of call `toolCallId` kept back (none: nothing happens). */
export let releaseEvents: (turn: Turn, toolCallId: string) => void;

/**
 * Starts reading the session at once when the turn's first model step would read it (a session
 * this process does not know): the read travels while the model loop sets itself up (about 100-
 * 200 µs of the AI SDK's own work before its first `prepareStep`), and the step decides on it.
 * The same read, earlier; nothing is read that the turn would not read anyway. Internal, for
 * orchestrate().
 */
export let readAhead: (turn: Turn) => void;

/** {@link Turn.end}, answered without a promise on a synchronous store (see {@link stepStartedNow}). */
export let endNow: (
  turn: Turn,
  options?: { awaitingApproval?: boolean },
) => readonly OrchestrationEvent[] | Promise<readonly OrchestrationEvent[]>;

/** `f(value)`, after `value` resolves when it is a promise; at once otherwise. */
function then<T, U>(value: T | Promise<T>, f: (value: T) => U): U | Promise<U> {
  return value instanceof Promise ? value.then(f) : f(value);
}

/** One turn on one session; see the module comment. */
export class Turn {
  readonly #manager: OrchestrationManager;
  readonly #plan: OrchestrationPlan;
  readonly #sessionId: string;
  readonly #agentTools: readonly string[];
  readonly #agentId: string | undefined;
  readonly #onError: (error: unknown) => void;
  readonly #ruleContext: Readonly<Record<string, unknown>> | undefined;
  readonly #turnId: string | undefined;
  readonly #fresh: boolean;
  /** Call ids this turn requested: a model that repeats one within the turn is refused here. */
  readonly #requested = new Set<string>();
  /** Replayed calls that were already recorded: their completion is not written again. */
  readonly #replayedSettled = new Set<string>();
  #messages: readonly ChatMessage[] | undefined;
  #buffer: TransitionInput[] = [];
  #stored: OrchestrationState | undefined;
  #begun = false;
  /** A write of this turn was stored: the session exists, unless deleted since. */
  #wrote = false;
  /** Calls this turn reserved whose completion or failure is not written yet: their leases are renewed. */
  readonly #held = new Set<string>();
  /** Events of `hold` requests, by call id, until {@link releaseEvents} dispatches them. */
  readonly #heldEvents = new Map<string, readonly OrchestrationEvent[]>();
  /** This turn's renewal, run by its manager's {@link LeaseRenewals}; registered while calls are held. */
  #renewal: (() => void) | undefined;
  #renewalRegistered = false;
  #renewing: Promise<void> | undefined;
  /** The session as read ahead of the first model step (see {@link readAhead}), until used. */
  #ahead: Promise<OrchestrationState | null> | undefined;
  /** Writes of this turn under way: a retry waits for them (see {@link #retryEndings}). */
  #writing = 0;
  /** The next try of call endings whose write failed in an outage, while one is due. */
  #retry: ReturnType<typeof setTimeout> | undefined;
  /** How long the next retry waits: doubles from {@link FIRST_RETRY_MS} up to {@link LAST_RETRY_MS}. */
  #retryMs = FIRST_RETRY_MS;

  constructor(options: TurnOptions) {
    this.#manager = options.manager;
    this.#plan = options.manager.plan(options.config, options.toolAnnotations);
    this.#sessionId = options.sessionId;
    this.#agentTools = options.agentTools;
    this.#messages = options.messages;
    this.#agentId = options.agentId;
    this.#onError = options.onError ?? ((error) => console.error('[baton]', error));
    this.#ruleContext = options.context;
    this.#turnId = options.turnId;
    messageOf(options.messages); // fail now on a bad messages argument, not mid-turn
    this.#fresh = options.fresh === true;
    if (options.state !== undefined) {
      this.#stored = options.state;
      this.#begun = true;
      // The caller may have handled the message without writing it (see begin()): it rides on
      // this turn's first write, where it changes nothing if it was written already.
      this.#buffer.push(this.#userMessage());
    }
  }

  /** The conversation, when it is only known once the model loop starts. Ignored once set. */
  useMessages(messages: readonly ChatMessage[]): void {
    this.#messages ??= messages;
  }

  /** The plan the turn runs on. */
  get plan(): OrchestrationPlan {
    return this.#plan;
  }

  /** True once the turn knows the session's state (`state` is defined): a test without computing it. */
  get started(): boolean {
    return this.#stored !== undefined;
  }

  /** The last stored state with the buffered inputs applied (undefined before the first step). */
  get state(): OrchestrationState | undefined {
    if (this.#stored === undefined || this.#buffer.length === 0) return this.#stored;
    return this.#local(this.#stored, this.#context());
  }

  /**
   * The last local state: `stored` (`base`) with the first `count` inputs of `buffer` applied,
   * with their events and decisions. The buffer only grows until a write replaces it, so the
   * next local state applies only what was buffered since (a model step, an approval and the
   * next step read it in turn). The next write hands it to the store (see {@link AppliedPrefix}),
   * which starts from it when nothing was written to the session since: what the turn buffered
   * is then applied once, not once here and again in the store.
   */
  #memo: (AppliedPrefix & { readonly buffer: TransitionInput[]; readonly reusable: boolean }) | undefined;

  /** `stored` with the buffer applied, from the memo when it is of the same stored state and buffer. */
  #local(stored: OrchestrationState, context: TransitionContext): OrchestrationState {
    const buffer = this.#buffer;
    const memo = this.#memo;
    if (memo !== undefined && memo.base === stored && memo.buffer === buffer && memo.count <= buffer.length) {
      if (memo.count === buffer.length) return memo.state;
      const more = transitionAll(this.#plan, memo.state, buffer.slice(memo.count), context);
      this.#memo = {
        base: stored,
        buffer,
        count: buffer.length,
        state: more.state,
        events: joinEvents(memo.events, more.events),
        decisions: memo.decisions.concat(more.decisions),
        context,
        // Reused by the store only when the parts were applied in time order, on one message.
        reusable: memo.reusable && contextFollows(memo.context, context),
      };
      return more.state;
    }
    // Nothing buffered (a step right after a write): nothing to apply, nothing to allocate.
    const all =
      buffer.length === 0
        ? { state: stored, events: NO_EVENTS, decisions: NO_DECISIONS }
        : transitionAll(this.#plan, stored, buffer, context);
    this.#memo = { base: stored, buffer, count: buffer.length, ...all, context, reusable: true };
    return all.state;
  }

  /**
   * Begins the turn before its first model step: writes the user message (and claims a new
   * session for the turn's agent), decides no step. Resolves to the stored state. Throws a
   * `SessionRefusedError` when the session does not take the turn (another agent's, or too much
   * waits behind its running calls), before anything ran.
   */
  async begin(): Promise<OrchestrationState> {
    if (this.#begun && this.#stored !== undefined) return this.state ?? this.#stored;
    this.#begun = true;
    // A session the store knows is absent is written now: begin() claims a new session at once
    // (the MCP gateway's tools/list and the session routes read it from the store).
    const local = this.#beginLocally(false);
    if (local !== undefined) return local;
    // Read ahead (an approved call resumed before any model step): a session that exists
    // begins on what was read, as one this process knows; an absent one is claimed below.
    const ahead = this.#takeAhead();
    const read = ahead === undefined ? null : await ahead;
    if (read !== null) return this.#beginOn(read);
    const { state, decisions } = await this.#write([this.#userMessage()]);
    throwIfRefused(decisions[0], this.#sessionId);
    return state;
  }

  /**
   * Begins without a store round trip when the session's state is known without one (a new
   * session, or the copy the store kept from its last read or write): the message is handled
   * on it (a refusal thrown at once), and written with the turn's first write, where the store
   * decides again. Undefined when the state is not known so, and for a session the store knows
   * is absent unless `absent` (a model step's begin: the claim rides on the first tool request).
   */
  #beginLocally(absent: boolean): OrchestrationState | undefined {
    const states = this.#manager.getStateManager();
    // Only while the store answers: one that is down is found here, before a model is called.
    if (!states.answering) return undefined;
    const peeked = this.#fresh ? null : states.peek(this.#sessionId);
    if (peeked === undefined || (peeked === null && !absent && !this.#fresh)) return undefined;
    return this.#beginOn(peeked);
  }

  /**
   * Begins on `known`, the session's state as last read (null: there is none): the message is
   * handled on it (a refusal thrown at once) and buffered for the turn's first write, where the
   * store decides again on the state it holds then.
   */
  #beginOn(peeked: OrchestrationState | null): OrchestrationState {
    const states = this.#manager.getStateManager();
    // A session the store knows is absent (or the caller knows is new) starts empty, as the
    // store would start it on the turn's first write.
    const known = peeked ?? createState(this.#sessionId, states.clock(), states.ttl);
    const message = this.#userMessage();
    const result = transition(this.#plan, known, message, this.#context());
    throwIfRefused(result.decision, this.#sessionId);
    this.#stored = known;
    this.#buffer.push(message);
    // The step that follows reads this state again: kept, when the message is all the buffer holds.
    if (this.#buffer.length === 1) {
      this.#memo = {
        base: known,
        buffer: this.#buffer,
        count: 1,
        state: result.state,
        events: result.events,
        decisions: [result.decision],
        context: this.#context(),
        reusable: true,
      };
    }
    return result.state;
  }

  /**
   * Where the session stands for the next model step (`stepNumber`, counted from 0 in the turn),
   * and what to offer.
   */
  async stepStarted(stepNumber?: number): Promise<TurnStep> {
    return this.#stepStarted(stepNumber);
  }

  #stepStarted(stepNumber?: number): TurnStep | Promise<TurnStep> {
    const started: TransitionInput = {
      type: 'step-started',
      agentTools: this.#agentTools,
      ...(this.#turnId !== undefined ? { turnId: this.#turnId, stepNumber } : {}),
    };
    if ((!this.#begun || this.#stored === undefined) && !this.#plan.hasBudgets) {
      this.#begun = true;
      // Decided locally when the state is known without a round trip; the message rides on the
      // turn's first write.
      if (this.#beginLocally(true) !== undefined) return this.#stepStarted(stepNumber);
      // Not known without a round trip (a session this process has not seen, or a store that
      // keeps no copies): read it, which commits nothing, and decide on what was read. Writing
      // the message here instead would cost a commit (a disk flush on PostgreSQL) that the
      // first tool request makes anyway.
      return (this.#takeAhead() ?? this.#manager.getStateManager().getState(this.#sessionId)).then((read) => {
        this.#beginOn(read);
        return this.#stepStarted(stepNumber);
      });
    }
    if (!this.#begun || this.#stored === undefined) {
      this.#begun = true;
      const buffered = this.#buffer.length;
      return then(this.#write([this.#userMessage(), started]), ({ state, decisions }) => {
        throwIfRefused(decisions[buffered], this.#sessionId);
        return this.#offered({ decision: decisions.at(-1) as StepDecision, state }, stepNumber);
      });
    }
    if (this.#plan.hasBudgets) {
      // With token budgets every step is decided on the store's state, usage written first, so
      // concurrent turns see each other's spending: together they overspend by at most the one
      // model step each of them has in flight. One more round trip per step, only for budgets.
      return then(this.#write([started]), ({ state, decisions }) =>
        this.#offered({ decision: decisions.at(-1) as StepDecision, state }, stepNumber),
      );
    }
    const context = this.#context();
    const result = transition(this.#plan, this.#local(this.#stored, context), started, context);
    for (const event of result.events) this.observe(event);
    return this.#offered({ decision: result.decision as StepDecision, state: result.state }, stepNumber);
  }

  /**
   * Reports an event decided without the store (a model step decided locally, a call the model
   * loop refused itself): dispatched now, and, when the manager keeps event logs, sent with the
   * next write so the session's log has it in its place. A refusal is always sent: the session
   * counts its call as decided.
   */
  observe(event: OrchestrationEvent): void {
    this.#manager.emit(event);
    const turnId = this.#turnId;
    // A refusal is written even without an event log: the AI SDK signs the approval request of a
    // call its approval hook denied, and only a session that knows the call was decided refuses
    // it sent back approved. Under a durable engine it is also recorded for the turn's replays.
    if (this.#manager.eventLog > 0 || event.type === 'tool-rejected') {
      this.#buffer.push(turnId === undefined ? { type: 'observed', event } : { type: 'observed', event, turnId });
    }
  }

  /**
   * True when this turn (`turnId`) already decided call `toolCallId` in an earlier run: a replay
   * of it, whose decision and events are recorded (they are not reported again).
   */
  replayed(toolCallId: string): boolean {
    const record = this.state?.replay;
    return (
      this.#turnId !== undefined && record?.turn === this.#turnId && record.calls.some((call) => call.id === toolCallId)
    );
  }

  /** Reports a step decision as a `tools-offered` event, for telemetry and timelines. */
  #offered(step: TurnStep, stepNumber?: number): TurnStep {
    const { activeStep, allowedTools, toolChoice, sequence, shadow, wouldOffer } = step.decision;
    const record = step.state.replay;
    if (
      this.#turnId !== undefined &&
      stepNumber !== undefined &&
      record?.turn === this.#turnId &&
      record.offers[stepNumber]
    ) {
      return step; // a replayed model step: its offer was recorded and reported by the original run
    }
    if (this.#turnId !== undefined && stepNumber !== undefined) {
      // Recorded for replays (a step already recorded keeps its first record).
      this.#buffer.push({ type: 'step-recorded', turnId: this.#turnId, stepNumber, tools: allowedTools, toolChoice });
    }
    // Built before every model step: only when a listener or an event log takes it.
    if (!takesEvents(this.#manager)) return step;
    this.observe({
      type: 'tools-offered',
      sessionId: this.#sessionId,
      step: activeStep,
      tools: allowedTools,
      toolChoice,
      ...(sequence
        ? { sequence: { index: sequence.index, length: sequence.length, expected: sequence.expected } }
        : {}),
      ...(shadow ? { shadow, wouldOffer: wouldOffer ?? allowedTools } : {}),
    });
    return step;
  }

  /**
   * Decides a call and, when it may run, reserves it: one atomic update, carrying whatever
   * the buffer holds. Follow an allowed call with {@link completed} or {@link failed}.
   */
  async request(
    tool: string,
    toolCallId: string,
    offered?: readonly string[],
    call: CallInput = {},
  ): Promise<ToolDecision> {
    return this.#request(tool, toolCallId, offered, call);
  }

  #request(
    tool: string,
    toolCallId: string,
    offered: readonly string[] | undefined,
    call: CallInput,
    hold = false,
  ): ToolDecision | Promise<ToolDecision> {
    if (this.#turnId !== undefined && this.#requested.has(toolCallId)) {
      // Within one run of a turn a call id runs once, whatever its replay record says.
      return { type: 'tool', tool, toolCallId, allowed: false, reason: duplicateCall(toolCallId), allowedTools: [] };
    }
    this.#requested.add(toolCallId);
    const input: TransitionInput = {
      type: 'tool-requested',
      tool,
      toolCallId,
      agentTools: this.#agentTools,
      offered,
      ...call,
      ...(this.#turnId !== undefined ? { turnId: this.#turnId } : {}),
    };
    let held: readonly OrchestrationEvent[] = NO_EVENTS;
    const ask = (waited?: WaitEnd): ToolDecision | Promise<ToolDecision> =>
      then(this.#write([waited === undefined ? input : { ...input, waited }], hold), ({ decisions, events }) => {
        if (hold) held = joinEvents(held, events);
        return decisions.at(-1) as ToolDecision;
      });
    const decided = (decision: ToolDecision): ToolDecision => {
      if (hold) this.#heldEvents.set(toolCallId, held);
      if (decision.allowed && decision.replayed === 'settled') this.#replayedSettled.add(toolCallId);
      else if (decision.allowed) this.#hold(toolCallId);
      return decision;
    };
    const after = (first: ToolDecision): ToolDecision | Promise<ToolDecision> => {
      // Its answer depends on running calls: wait for them (a sibling of the same model step, or
      // another turn's call), then ask again.
      if (first.allowed || first.waitFor === undefined) return decided(first);
      const manager = this.#manager;
      const clock = () => manager.getStateManager().clock();
      return decideWaiting(waitsOf(manager), this.#sessionId, first, ask, manager.waitMs, clock).then(decided);
    };
    // The operator's limits that count across sessions: reserved in their scopes first.
    const holds = scopesOf(this.#manager.policy, tool, this.#owner(), toolCallId);
    if (holds.length > 0) return this.#requestInScopes(holds, input as ScopedRequest, ask, after);
    const first = ask();
    return first instanceof Promise ? first.then(after) : after(first);
  }

  /** {@link #request} of a call the operator's cross-session limits count (see policy-scopes.ts). */
  async #requestInScopes(
    holds: readonly ScopeHold[],
    input: ScopedRequest,
    ask: () => ToolDecision | Promise<ToolDecision>,
    after: (first: ToolDecision) => ToolDecision | Promise<ToolDecision>,
  ): Promise<ToolDecision> {
    const refused = await reserveInScopes(this.#manager, holds, input, this.#ruleContext);
    if (refused !== undefined) {
      // Refused by the operator's limit before its session decided it: the session records it.
      this.observe({
        type: 'tool-rejected',
        sessionId: this.#sessionId,
        tool: input.tool,
        toolCallId: input.toolCallId,
        step: this.state?.activeStep,
        allowedTools: refused.allowedTools,
        reason: refused.reason,
      });
      return refused;
    }
    let decision: ToolDecision;
    try {
      decision = await after(await ask());
    } catch (error) {
      await settleInScopes(this.#manager, holds, 'tool-failed').catch((cause: unknown) => this.#onError(cause));
      throw error;
    }
    if (decision.allowed && decision.replayed === undefined) this.#scoped.set(input.toolCallId, holds);
    else await settleInScopes(this.#manager, holds, 'tool-failed').catch((error: unknown) => this.#onError(error));
    return decision;
  }

  /** Who this turn's calls are for, for the operator's cross-session limits. */
  #owner(): CallOwner {
    const principal = this.#ruleContext?.principal;
    return {
      sessionId: this.#sessionId,
      principal: typeof principal === 'string' ? principal : undefined,
      agentId: this.#agentId,
    };
  }

  /** Calls this turn reserved in scopes of the operator's cross-session limits, by call id. */
  readonly #scoped = new Map<string, readonly ScopeHold[]>();

  /** Passes a call's end on to the scopes it was reserved in. */
  #settleScoped(toolCallId: string, how: 'tool-completed' | 'tool-failed' | 'tool-abandoned'): void {
    const holds = this.#scoped.get(toolCallId);
    if (holds === undefined) return;
    this.#scoped.delete(toolCallId);
    settleInScopes(this.#manager, holds, how).catch((error: unknown) => this.#onError(error));
  }

  /**
   * Waits until one of the running calls `ids` may have ended (or the manager's `waitMs` passed),
   * then reads the session again: for a decision made on the turn's own copy of the session (an
   * approval shown to a person) whose answer depended on them. Resolves to false when the wait
   * passed its bound or too much waits on the session.
   */
  async waitFor(ids: readonly string[]): Promise<boolean> {
    const manager = this.#manager;
    const states = manager.getStateManager();
    const now = states.clock();
    const ended = await waitsOf(manager).wait(this.#sessionId, ids, now + manager.waitMs, now);
    if (ended.outcome !== 'changed') return false;
    if (this.#buffer.length > 0) await this.flush();
    const read = await states.getState(this.#sessionId);
    if (read !== null && (this.#stored === undefined || read.version > this.#stored.version)) this.#stored = read;
    return true;
  }

  /** Starts the read of {@link readAhead} when the first model step would make it. */
  #readAhead(): void {
    if (this.#begun || this.#stored !== undefined || this.#fresh || this.#plan.hasBudgets || this.#ahead) return;
    const states = this.#manager.getStateManager();
    // What #beginLocally would know without a round trip.
    if (states.answering && states.peek(this.#sessionId) !== undefined) return;
    const read = states.getState(this.#sessionId);
    read.catch(() => undefined); // a failure is the first step's to report, if one comes
    this.#ahead = read;
  }

  /** The read started ahead, once (a later read must go to the store again). */
  #takeAhead(): Promise<OrchestrationState | null> | undefined {
    const ahead = this.#ahead;
    this.#ahead = undefined;
    return ahead;
  }

  static {
    // For orchestrate() only (not exported by the package): see stepStartedNow and requestNow.
    stepStartedNow = (turn, stepNumber) => turn.#stepStarted(stepNumber);
    requestNow = (turn, tool, toolCallId, offered, call = {}, hold = false) =>
      turn.#request(tool, toolCallId, offered, call, hold);
    releaseEvents = (turn, toolCallId) => {
      const events = turn.#heldEvents.get(toolCallId);
      if (events === undefined) return;
      turn.#heldEvents.delete(toolCallId);
      for (const event of events) turn.#manager.emit(event);
    };
    endNow = (turn, options = {}) => turn.#end(options);
    readAhead = (turn) => turn.#readAhead();
  }

  /**
   * A person is asked to approve a call (the shell shows the request), by the `approve` rule
   * `rule`, or by the app's own policy when `rule` is undefined: the session keeps it, bound to the
   * call, its input and the session now, with the next write.
   */
  approvalRequested(tool: string, toolCallId: string, argsDigest: string, rule?: string): void {
    this.#buffer.push(
      rule === undefined
        ? { type: 'approval-requested', tool, toolCallId, argsDigest }
        : { type: 'approval-requested', tool, toolCallId, argsDigest, rule },
    );
  }

  /**
   * A person denied the approval of a call (the AI SDK answers the model with the denial, and
   * never runs it): with the next write, the session counts its id as seen, so an approval of the
   * same call sent later is refused, and drops the approval it kept for it.
   */
  approvalDenied(toolCallId: string): void {
    this.#buffer.push({ type: 'approval-denied', toolCallId });
  }

  /**
   * The reserved call completed: committed with the next write. With `outcome`, what it returned
   * (`result`) and its input (`args`), for the template's facts and labels (SPEC section 11).
   */
  completed(toolCallId: string, outcome?: CallOutcome): void {
    if (this.#replayedSettled.has(toolCallId)) return; // a replay of a call that was recorded already
    // The result is kept until the write only when a fact or label may read it.
    const reads = outcome !== undefined && this.#plan.facts.length + this.#plan.labels.length > 0;
    this.#buffer.push(
      reads
        ? { type: 'tool-completed', toolCallId, result: outcome.result, args: outcome.args }
        : { type: 'tool-completed', toolCallId },
    );
    this.#settleScoped(toolCallId, 'tool-completed');
    this.#ended();
  }

  /** The reserved call threw: released with the next write, nothing recorded. */
  failed(toolCallId: string): void {
    if (this.#replayedSettled.has(toolCallId)) return;
    this.#buffer.push({ type: 'tool-failed', toolCallId });
    this.#settleScoped(toolCallId, 'tool-failed');
    this.#ended();
  }

  /**
   * A call's ending waits in the buffer for the next write, unless a request may wait for it:
   * one of this process waits on the session (it is written now), or the session has calls of
   * other turns, whose requests may wait in another process (written now too). Otherwise it is
   * written when a request of this process starts waiting on the session, or with the next write
   * (the lease renewal writes it at the latest).
   */
  #ended(): void {
    const waits = waitsOf(this.#manager);
    const shared = this.#stored?.pending?.some((entry) => !(entry.kind === 'call' && this.#held.has(entry.id)));
    if (waits.has(this.#sessionId) || shared === true) {
      this.flush().catch((error: unknown) => this.#onError(error));
      return;
    }
    this.#flushOnDemand ??= () => {
      if (this.#buffer.length > 0) this.flush().catch((error: unknown) => this.#onError(error));
    };
    if (!this.#holding) {
      this.#holding = true;
      waits.hold(this.#sessionId, this.#flushOnDemand);
    }
  }

  /** The flush {@link #ended} registers: made once per turn. */
  #flushOnDemand: (() => void) | undefined;

  /** True while the flush {@link #ended} registered is registered (until nothing waits to be written). */
  #holding = false;

  /**
   * The reserved call's outcome is unknown (sent on, then cancelled or never answered): released
   * with the next write, nothing recorded, but counted by the limit rules that counted it, since
   * it may have run.
   */
  abandoned(toolCallId: string): void {
    if (this.#replayedSettled.has(toolCallId)) return;
    this.#buffer.push({ type: 'tool-abandoned', toolCallId });
    this.#settleScoped(toolCallId, 'tool-abandoned');
    this.#ended();
  }

  /** A model call's token usage (AI SDK or seed names): added with the next write. */
  usage(usage: TokenUsageInput, stepNumber?: number): void {
    const normalized = normalizeUsage(usage);
    if (normalized.totalTokens === 0 && normalized.promptTokens === 0 && normalized.completionTokens === 0) return;
    // A turn under a durable engine counts each model step once, however often it is replayed.
    const replay = this.#turnId !== undefined && stepNumber !== undefined ? { turnId: this.#turnId, stepNumber } : {};
    this.#buffer.push({ type: 'usage', usage: normalized, ...replay });
  }

  /**
   * Ends the turn: what the buffer holds is written together with a `turn-ended` input, so its
   * `sequence-incomplete` costs no round trip of its own; with nothing buffered it is decided
   * on the last stored state without one. Resolves to the events of that last change (none
   * when the turn never reached the store).
   */
  async end(options: { awaitingApproval?: boolean } = {}): Promise<readonly OrchestrationEvent[]> {
    return this.#end(options);
  }

  #end(options: {
    awaitingApproval?: boolean;
  }): readonly OrchestrationEvent[] | Promise<readonly OrchestrationEvent[]> {
    const ended: TransitionInput = { type: 'turn-ended', awaitingApproval: options.awaitingApproval };
    // A session that keeps an event log is written at the end of every turn, so the log says
    // where the turn left it; that costs a round trip only when nothing else was buffered.
    const logged = this.#manager.eventLog > 0 && this.#stored !== undefined;
    if (this.#buffer.length > 0 || logged) return then(this.#write([ended]), (applied) => applied.events);
    if (this.#stored === undefined) return [];
    const result = transition(this.#plan, this.#stored, ended, this.#context());
    for (const event of result.events) this.#manager.emit(event);
    return result.events;
  }

  /** True when inputs wait to be written. */
  get dirty(): boolean {
    return this.#buffer.length > 0;
  }

  /** Writes what the buffer holds (nothing when it is empty); resolves to the stored state. */
  async flush(): Promise<OrchestrationState | undefined> {
    if (this.#buffer.length === 0) return this.#stored;
    return (await this.#write([])).state;
  }

  /** Writes the buffer and `inputs` in one update: without a promise when the store is synchronous. */
  #write(inputs: readonly TransitionInput[], hold = false): AppliedInputs | Promise<AppliedInputs> {
    const buffered = this.#buffer;
    this.#buffer = [];
    const batch = buffered.length === 0 ? inputs : [...buffered, ...inputs];
    // Nothing was written when it fails: the buffered inputs wait for the next write, and call
    // endings among them are tried again on their own when the store was only down.
    const keep = (error: unknown): never => {
      this.#buffer = [...buffered, ...this.#buffer];
      this.#retryEndings(error);
      throw error;
    };
    // What the turn already applied of the buffer, for the store to start from (see #memo).
    const memo = this.#memo;
    const prefix =
      memo?.reusable && memo.buffer === buffered && memo.count > 0 && memo.base === this.#stored ? memo : undefined;
    let applied: AppliedInputs | Promise<AppliedInputs>;
    try {
      applied = applyNow(
        this.#manager,
        this.#plan,
        messageOf(this.#messages),
        this.#sessionId,
        batch,
        this.#ruleContext,
        prefix,
        hold,
        // After the turn's first write the session exists: if it is gone, it was deleted, and
        // stays so (a write would bring it back half-written, without its agent or history).
        this.#wrote,
      );
    } catch (error) {
      return keep(error);
    }
    if (!(applied instanceof Promise)) return this.#written(batch, applied);
    this.#writing++;
    return applied.then(
      (result) => {
        this.#writing--;
        return this.#written(batch, result);
      },
      (error: unknown) => {
        this.#writing--;
        return keep(error);
      },
    );
  }

  /**
   * After a write failed with `error`: when the store was only down (or busy) and the buffer holds
   * call endings, tries writing them again after a pause that grows from {@link FIRST_RETRY_MS}
   * to {@link LAST_RETRY_MS}. Their reservations meanwhile hold the session's later calls and
   * messages back, for as long as the lease, if nothing else of the turn writes. A failed retry
   * goes to `onError` and schedules the next; a successful write of the turn stops them.
   */
  #retryEndings(error: unknown): void {
    if (this.#retry !== undefined || !this.#holdsEndings()) return;
    // A deleted session, a closed store: trying again cannot help.
    if (!StoreUnavailableError.isInstance(error) && !StoreConflictError.isInstance(error)) return;
    const pause = this.#retryMs;
    this.#retryMs = Math.min(LAST_RETRY_MS, pause * 2);
    // Between half the pause and all of it, so turns that failed together do not all try at
    // the same instant when the store comes back.
    this.#retry = setTimeout(() => this.#retryNow(), pause / 2 + (Math.random() * pause) / 2);
    // Never keeps a process alive that has nothing else to do: the lease bounds what is lost.
    this.#retry.unref?.();
  }

  #retryNow(): void {
    this.#retry = undefined;
    if (!this.#holdsEndings()) return;
    if (this.#writing > 0) {
      // A write under way fails (and schedules the retry) or stores what it carried; one that
      // started before the ending was buffered leaves it behind, so look again then.
      this.#retry = setTimeout(() => this.#retryNow(), this.#retryMs);
      this.#retry.unref?.();
      return;
    }
    this.flush().catch((error: unknown) => this.#onError(error));
  }

  /** True when the buffer holds a completion, failure or abandon of a call. */
  #holdsEndings(): boolean {
    return this.#buffer.some(
      (input) => input.type === 'tool-completed' || input.type === 'tool-failed' || input.type === 'tool-abandoned',
    );
  }

  #written(batch: readonly TransitionInput[], applied: AppliedInputs): AppliedInputs {
    this.#wrote = true;
    if (this.#holding && this.#buffer.length === 0) {
      this.#holding = false;
      waitsOf(this.#manager).release(this.#sessionId, this.#flushOnDemand!);
    }
    this.#retryMs = FIRST_RETRY_MS;
    if (this.#retry !== undefined && !this.#holdsEndings()) {
      clearTimeout(this.#retry);
      this.#retry = undefined;
    }
    // Writes of one turn may overlap (a lease renewal while a tool is requested): keep the newest.
    if (this.#stored === undefined || applied.state.version >= this.#stored.version) this.#stored = applied.state;
    this.#settled(batch, applied.events);
    // A user message the store refused (it began locally on a stale copy) stops the turn here:
    // nothing after it in the batch was applied.
    for (let i = 0; i < batch.length; i++) {
      if (batch[i]!.type === 'user-message') throwIfRefused(applied.decisions[i], this.#sessionId);
    }
    return applied;
  }

  /** The written completions, failures and abandons end their calls' renewal; a late one is reported. */
  #settled(batch: readonly TransitionInput[], events: readonly OrchestrationEvent[]): void {
    if (this.#held.size === 0) return;
    for (const input of batch) {
      if (input.type !== 'tool-completed' && input.type !== 'tool-failed' && input.type !== 'tool-abandoned') continue;
      if (!this.#held.delete(input.toolCallId)) continue;
      const late = events.some(
        (event) => event.type === 'tool-released' && event.reason === 'late' && event.toolCallId === input.toolCallId,
      );
      if (late) this.#lost(input.toolCallId);
    }
    if (this.#held.size === 0) this.#stopRenewal();
  }

  #lost(toolCallId: string): void {
    this.#onError(
      new LeaseLostError(
        this.#sessionId,
        toolCallId,
        `Tool call "${toolCallId}" of session "${this.#sessionId}" ran, but its reservation had ended (its lease expired or the session was reset), so it is not recorded in the history.`,
      ),
    );
  }

  /** Keeps the reservation of `toolCallId` alive until its completion or failure is written. */
  #hold(toolCallId: string): void {
    this.#held.add(toolCallId);
    if (this.#renewalRegistered) return;
    this.#renewal ??= () => {
      this.#renewing ??= this.#renew().finally(() => {
        this.#renewing = undefined;
      });
    };
    this.#renewalRegistered = true;
    renewalsOf(this.#manager).add(this.#renewal);
  }

  /**
   * One renewal: what the buffer holds is written first (a completion that waits for the next
   * write ends its call's renewal that way), then the calls still running renew their leases.
   */
  async #renew(): Promise<void> {
    try {
      if (this.#buffer.length > 0) await this.flush();
      const running = [...this.#held].filter(
        (id) => !this.#buffer.some((input) => 'toolCallId' in input && input.toolCallId === id),
      );
      if (running.length === 0) return;
      const scoped = running.flatMap((id) => this.#scoped.get(id) ?? []);
      if (scoped.length > 0) await settleInScopes(this.#manager, scoped, 'lease-renewed');
      const lost = await this.#manager.renewLease(this.#plan, this.#sessionId, running);
      for (const id of lost) {
        if (this.#held.delete(id)) this.#lost(id);
      }
      if (this.#held.size === 0) this.#stopRenewal();
    } catch (error) {
      // The store failed: the next renewal tries again (the lease is four renewals long).
      this.#onError(error);
    }
  }

  #stopRenewal(): void {
    if (!this.#renewalRegistered) return;
    this.#renewalRegistered = false;
    renewalsOf(this.#manager).delete(this.#renewal!);
  }

  #userMessage(): TransitionInput {
    return this.#agentId === undefined ? USER_MESSAGE : { type: 'user-message', agentId: this.#agentId };
  }

  #context() {
    return this.#manager.transitionContext(messageOf(this.#messages), this.#ruleContext);
  }
}

/**
 * First pause before a call ending whose write failed in an outage is tried again: short, as a
 * store that restarts (or a connection that is re-established) answers again within a few tens
 * of milliseconds to seconds.
 */
const FIRST_RETRY_MS = 25;
/**
 * Longest pause between two tries: once the store answers again, the ending is written within
 * about this long, far within the lease, while an outage costs the store one failed write a
 * second per turn that holds endings (and `onError` one report).
 */
const LAST_RETRY_MS = 1_000;

const USER_MESSAGE: TransitionInput = Object.freeze({ type: 'user-message' });
const NO_DECISIONS: readonly (TransitionDecision | undefined)[] = Object.freeze([]);

/**
 * The lease renewals of one manager's turns, run by one timer: every quarter of the lease, each
 * turn that holds calls renews them, so a process whose event loop stalls for up to three
 * quarters of a lease keeps its calls. A call reserved between two ticks is renewed at the next
 * one, at most a quarter of the lease later. One timer for all turns, rather than one per turn,
 * because most calls end before the first renewal: starting and clearing a timer per call cost
 * more than the rest of the call's bookkeeping. The timer stops at the first tick that finds no
 * turn holding calls, and never keeps the process alive (the running tool does).
 */
class LeaseRenewals {
  readonly #renewals = new Set<() => void>();
  readonly #every: number;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(leaseMs: number) {
    this.#every = Math.max(1, Math.floor(leaseMs / 4));
  }

  add(renewal: () => void): void {
    this.#renewals.add(renewal);
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => this.#tick(), this.#every);
    this.#timer.unref?.();
  }

  delete(renewal: () => void): void {
    this.#renewals.delete(renewal);
  }

  #tick(): void {
    if (this.#renewals.size === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
      return;
    }
    for (const renewal of this.#renewals) renewal();
  }
}

const leaseRenewals = new WeakMap<OrchestrationManager, LeaseRenewals>();

function renewalsOf(manager: OrchestrationManager): LeaseRenewals {
  let renewals = leaseRenewals.get(manager);
  if (renewals === undefined) {
    renewals = new LeaseRenewals(manager.leaseMs ?? DEFAULT_LEASE_MS);
    leaseRenewals.set(manager, renewals);
  }
  return renewals;
}

/**
 * Longest tool call id a session keeps as it is; a longer one is kept as a digest (see
 * {@link callIdKey}). Providers' ids are a few dozen characters (`call_` or `toolu_` and 24).
 */
export const MAX_CALL_ID_LENGTH = 64;

/**
 * A tool call id as a session keeps it: the id itself, or for one longer than
 * {@link MAX_CALL_ID_LENGTH}, `sha256:` and the base64url of its SHA-256 (50 characters). The
 * model (or an MCP client) chooses call ids, and the session keeps its latest 256 in every write,
 * in its pending log and in its events: one megabyte id would grow every later write of the
 * session by as much. The digest still tells ids apart, so a repeated call is still refused.
 * Every shell passes ids through it before they reach the turn, the same way each time.
 */
export function callIdKey(id: string): string {
  return id.length <= MAX_CALL_ID_LENGTH ? id : `sha256:${createHash('sha256').update(id).digest('base64url')}`;
}
