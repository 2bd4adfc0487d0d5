/**
 * The seed's `OrchestrationManager`: the entry point of the library. Each method loads the
 * session's state, runs the pure engine and stores the result in one atomic update.
 */

import {
  type CompileOptions,
  compileOrchestration,
  type OrchestrationPlan,
  type OrchestrationSource,
} from '../core/compile.js';
import type { ConditionRegistry, MessageInfo } from '../core/conditions.js';
import { activeStepOf, type StepView } from '../core/engine.js';
import { InvalidArgumentError, SessionRefusedError } from '../core/errors.js';
import { joinEvents, NO_EVENTS, type OrchestrationEvent } from '../core/events.js';
import { type ChatMessage, latestUserMessage } from '../core/messages.js';
import { optionIssues, optionNames, throwOnErrors } from '../core/option-issues.js';
import { type CompiledPolicy, isCompiledPolicy, parsePolicy } from '../core/policy.js';
import type { OrchestrationStep, Policy } from '../core/schema.js';
import { appendToLog, type LoggedEvent, type LogItem, MAX_LOG_CAPACITY } from '../core/session-log.js';
import {
  type AIOrchestrationState,
  createState,
  isSameNewSession,
  type OrchestrationState,
  type TokenUsage,
} from '../core/state.js';
import { describeType } from '../core/state-check.js';
import type { TokenUsageInput } from '../core/token-usage.js';
import type { ToolAnnotations } from '../core/tool-annotations.js';
import {
  type Explanation,
  explain,
  isRefusedMessage,
  type RecordDecision,
  type StepDecision,
  type ToolDecision,
  type TransitionContext,
  type TransitionDecision,
  type TransitionInput,
  transition,
  transitionAll,
  type WaitEnd,
} from '../core/transition.js';
import { CallWaits, DEFAULT_WAIT_MS, decideWaiting } from './call-waits.js';
import { reserveInScopes, type ScopeHold, scopesOf, settleInScopes } from './policy-scopes.js';
import {
  assertToolName,
  OrchestrationStateManager,
  type OrchestrationStateManagerOptions,
  type StatePatch,
} from './state-manager.js';

/** Receives every engine event (`step-changed`, `sequence-advanced`, …). */
export type EventListener = (event: OrchestrationEvent) => void;

/**
 * The option names {@link createOrchestrationManager} takes, to refuse others with a did-you-mean
 * (their values are checked where they are used).
 */
const MANAGER_OPTIONS = optionNames<OrchestrationManagerOptions>({
  onEvent: true,
  onError: true,
  conditions: true,
  stateManager: true,
  leaseMs: true,
  waitMs: true,
  policy: true,
  eventLog: true,
  store: true,
  historyLimit: true,
  ttl: true,
  maxSessions: true,
  clock: true,
});

/** Options of {@link createOrchestrationManager}. */
export interface OrchestrationManagerOptions extends OrchestrationStateManagerOptions {
  /** Called with every event. An exception it throws is reported to `onError`, never lost. */
  onEvent?: EventListener;
  /** Receives errors thrown by event listeners (default: `console.error`). */
  onError?: (error: unknown, event: OrchestrationEvent) => void;
  /** Condition types for configs compiled by this manager (default: built-ins plus registered). */
  conditions?: ConditionRegistry;
  /** Use an existing state manager instead of creating one (its store and limits win). */
  stateManager?: OrchestrationStateManager;
  /**
   * How long a reserved tool call keeps its place without being renewed (default 15,000 ms). The
   * process running a call renews it every quarter of the lease (a `Turn` does so by itself), so
   * this bounds how long a process that died mid-call blocks the call's session, not how long a
   * tool may run. Keep `waitMs` above it.
   */
  leaseMs?: number;
  /**
   * How long a tool call whose answer depends on calls still running in its session (another
   * turn's, or an earlier call of the same model step) waits for them before it is refused as
   * `pending` (default 30,000 ms). A call that nothing running can change never waits.
   */
  waitMs?: number;
  /**
   * The operator's policy (SPEC section 11): rules judged before every template's, in every
   * session, that no template can loosen, whose limits may count across sessions (`scope`:
   * `principal`, `agent`, `global`). Its JSON (checked now: a bad policy fails here, with every
   * issue) or what `parsePolicy` returned.
   */
  policy?: Policy | CompiledPolicy;
  /**
   * Keep each session's latest `eventLog` decisions (events, each with the session's state right
   * after it), for timelines such as the inspector's (default 0: keep none; at most 1,000). The
   * store appends a write's entries beside the state in the same atomic write (stores without
   * `readLog` keep none); it costs a turn 1.25-1.7x on the built-in stores (docs/benchmarks.md).
   */
  eventLog?: number;
}

/** What {@link OrchestrationManager.apply} resolves to. */
export interface AppliedInputs {
  /** The state now stored. */
  readonly state: OrchestrationState;
  readonly events: readonly OrchestrationEvent[];
  /** One slot per input: the decision of `step-started` and `tool-requested` inputs. */
  readonly decisions: readonly (TransitionDecision | undefined)[];
  /** True when the inputs changed the session (and so were written). */
  readonly changed: boolean;
}

/**
 * {@link OrchestrationManager.apply}, resolved without a promise when the store updates
 * synchronously (the memory store); throws what `apply` rejects with. Internal: `Turn` uses it so
 * that a call is decided and reserved with no promise round trip on the memory store.
 */
export let applyNow: (
  manager: OrchestrationManager,
  ...args: [...Parameters<OrchestrationManager['apply']>, prefix?: AppliedPrefix, hold?: boolean, existing?: boolean]
) => AppliedInputs | Promise<AppliedInputs>;

/**
 * The first `count` inputs of a batch, as the caller already applied them to `base`, the last
 * of them with `context`. Internal, for `Turn`: a turn applies what it buffered (completions,
 * usage) to decide its next model step, then writes the same inputs with its next call. When the
 * store's state is still `base` (nothing was written to the session since), the update starts
 * from `state` instead of applying them again: they take effect as of when the turn applied
 * them, which the store could not tell apart from a write made then. Otherwise (another write
 * came between, or the context differs in more than a later time) they are applied again.
 */
export interface AppliedPrefix {
  readonly base: OrchestrationState;
  readonly count: number;
  readonly context: TransitionContext;
  readonly state: OrchestrationState;
  readonly events: readonly OrchestrationEvent[];
  readonly decisions: readonly (TransitionDecision | undefined)[];
}

/**
 * True when `later` is `earlier` at the same or a later time: the same message, limits and rule
 * context. Most are the same object (the manager shares one per millisecond and message).
 */
export function contextFollows(earlier: TransitionContext, later: TransitionContext): boolean {
  return (
    earlier === later ||
    (earlier.now <= later.now &&
      earlier.message === later.message &&
      earlier.ruleContext === later.ruleContext &&
      earlier.historyLimit === later.historyLimit &&
      earlier.leaseMs === later.leaseMs)
  );
}

/**
 * The waits of a manager's sessions. Internal: `Turn` waits there for the running calls a
 * request depends on, and registers the completions it holds unwritten.
 */
export let waitsOf: (manager: OrchestrationManager) => CallWaits;

/**
 * True when something takes the manager's events (a listener, or an event log to write them
 * to). Internal: `Turn` builds an event it reports on its own only when one does.
 */
export let takesEvents: (manager: OrchestrationManager) => boolean;

/** Decides which step is active and which tools are allowed, per session (AgentDock's `OrchestrationManager`). */
export class OrchestrationManager {
  readonly #states: OrchestrationStateManager;
  readonly #listeners = new Set<EventListener>();
  readonly #onError: (error: unknown, event: OrchestrationEvent) => void;
  readonly #compileOptions: CompileOptions;
  /** Lease of a reserved tool call, in milliseconds. */
  readonly leaseMs: number | undefined;
  /** How long a call waits for the running calls its answer depends on, in milliseconds. */
  readonly waitMs: number;
  readonly #waits: CallWaits;
  /** Most entries of each session's event log (0: the manager keeps none). */
  readonly eventLog: number;
  #lastConfig: OrchestrationSource | undefined;
  #lastPlan: OrchestrationPlan | undefined;
  /** The inputs of `processToolUsage` by tool name (read-only, so shared between calls). */
  readonly #usedInputs = new Map<string, readonly TransitionInput[]>();
  /** The inputs of the last `getAllowedTools` turn, reused while the tool list is the same array. */
  #stepInputs: readonly TransitionInput[] = USER_MESSAGE;

  constructor(options: OrchestrationManagerOptions = {}) {
    // A misspelt option would otherwise be ignored without a word: `stroe` keeps every session
    // in memory, lost at the next restart.
    throwOnErrors(optionIssues(MANAGER_OPTIONS, options), 'createOrchestrationManager options');
    this.#states = options.stateManager ?? new OrchestrationStateManager(options);
    if (options.leaseMs !== undefined && !(Number.isSafeInteger(options.leaseMs) && options.leaseMs > 0)) {
      throw new InvalidArgumentError('leaseMs', `expected a positive integer, got ${String(options.leaseMs)}`);
    }
    this.leaseMs = options.leaseMs;
    if (options.waitMs !== undefined && !(Number.isSafeInteger(options.waitMs) && options.waitMs >= 0)) {
      throw new InvalidArgumentError('waitMs', `expected a non-negative integer, got ${String(options.waitMs)}`);
    }
    this.waitMs = options.waitMs ?? DEFAULT_WAIT_MS;
    this.#waits = new CallWaits(
      (sessionId) => this.#states.getState(sessionId),
      () => this.#states.clock(),
    );
    const eventLog = options.eventLog ?? 0;
    if (!(Number.isSafeInteger(eventLog) && eventLog >= 0 && eventLog <= MAX_LOG_CAPACITY)) {
      throw new InvalidArgumentError(
        'eventLog',
        `expected an integer from 0 to ${MAX_LOG_CAPACITY} (entries kept per session), got ${String(options.eventLog)}`,
      );
    }
    this.eventLog = eventLog;
    if (options.onEvent) this.#listeners.add(options.onEvent);
    this.#onError =
      options.onError ??
      ((error, event) => console.error(`[baton] an onEvent listener threw on "${event.type}":`, error));
    this.policy =
      options.policy === undefined
        ? undefined
        : isCompiledPolicy(options.policy)
          ? options.policy
          : parsePolicy(options.policy, 'policy');
    this.#compileOptions = {
      ...(options.conditions ? { conditions: options.conditions } : {}),
      ...(this.policy ? { policyRules: this.policy.sessionRules } : {}),
    };
  }

  /** The operator's policy every decision of this manager judges first, if it has one. */
  readonly policy: CompiledPolicy | undefined;

  /**
   * The compiled plan of `config` (cached by object identity, and by the identity of
   * `toolAnnotations`: what MCP tools declare, for annotation selectors such as `@readOnly`).
   * Throws `TemplateConfigError` when invalid.
   */
  plan(
    config: OrchestrationSource | OrchestrationPlan,
    toolAnnotations?: ReadonlyMap<string, ToolAnnotations>,
  ): OrchestrationPlan {
    // Most apps pass one config object on every call: the last plan is kept beside the cache.
    if (config === this.#lastConfig && toolAnnotations === undefined && config !== undefined) return this.#lastPlan!;
    if (typeof config !== 'object' || config === null) {
      throw new InvalidArgumentError(
        'config',
        `expected an orchestration config or template object, got ${describeType(config)}`,
      );
    }
    // A compiled plan (e.g. one compiled with toolAnnotations) is used as it is; under a policy,
    // only one compiled with it (its rules come first), or the policy would be skipped.
    if (isPlan(config)) {
      const first = this.policy?.sessionRules[0];
      if (first !== undefined && config.rules[0] !== first) {
        throw new InvalidArgumentError(
          'config',
          "this manager has an operator's policy, and the compiled plan given was not compiled with it: pass the template instead",
        );
      }
      return config;
    }
    if (toolAnnotations !== undefined)
      return compileOrchestration(config, { ...this.#compileOptions, toolAnnotations });
    const plan = compileOrchestration(config, this.#compileOptions);
    this.#lastConfig = config;
    this.#lastPlan = plan;
    return plan;
  }

  /** Listens to events; returns a function that stops listening. */
  subscribe(listener: EventListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Applies `inputs` to the session (created if missing) as one atomic store update, through
   * the one transition (`src/core/transition.ts`), and dispatches the events. An update
   * that changes nothing writes nothing. Every other method is built on this.
   */
  apply(
    config: OrchestrationSource | OrchestrationPlan,
    message: MessageInfo | undefined,
    sessionId: string,
    inputs: readonly TransitionInput[],
    ruleContext?: Readonly<Record<string, unknown>>,
  ): Promise<AppliedInputs> {
    try {
      return Promise.resolve(this.#applyNow(config, message, sessionId, inputs, ruleContext));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * {@link apply}, answered without a promise when the store updates synchronously (the memory
   * store). Throws what `apply` rejects with.
   */
  #applyNow(
    config: OrchestrationSource | OrchestrationPlan,
    message: MessageInfo | undefined,
    sessionId: string,
    inputs: readonly TransitionInput[],
    ruleContext?: Readonly<Record<string, unknown>>,
    prefix?: AppliedPrefix,
    // The events stay undispatched (the caller emits them later, in another context).
    hold = false,
    // A missing session is not created (a turn's writes after its first): SessionDeletedError.
    existing = false,
  ): AppliedInputs | Promise<AppliedInputs> {
    const plan = isPlan(config) ? config : this.plan(config);
    const context = this.transitionContext(message, ruleContext);
    const run = new PendingApply(this.eventLog);
    run.begin(plan, inputs, context);
    // A prefix that holds a refused message is applied again: the batch ends there (see transitionAll).
    if (prefix !== undefined && contextFollows(prefix.context, context) && !prefix.decisions.some(isRefusedMessage)) {
      run.prefix = prefix;
    }
    // The memory store updates synchronously: no promise round trips on the hot path.
    const sync = this.#states.modifySync(sessionId, run.update, context.now, false, existing);
    if (sync !== undefined) return this.#finish(run, sessionId, sync, hold);
    return this.#states
      .modify(sessionId, run.update, context.now, existing)
      .then((state) => this.#finish(run, sessionId, state, hold));
  }

  static {
    // For Turn only (not exported by the package): see applyNow.
    applyNow = (manager, ...args) => manager.#applyNow(...args);
    takesEvents = (manager) => manager.#listeners.size > 0 || manager.eventLog > 0;
    waitsOf = (manager) => manager.#waits;
  }

  #finish(run: PendingApply, sessionId: string, state: OrchestrationState, hold = false): AppliedInputs {
    // Requests of this process that wait on the session ask again (a call they wait for may have ended).
    if (run.changed) this.#waits.changed(sessionId);
    if (!hold) this.#dispatch(run.events);
    return { state, events: run.events, decisions: run.decisions, changed: run.changed };
  }

  /**
   * {@link apply} for inputs that begin with the turn's `user-message`: rejects with a
   * {@link SessionRefusedError} when the session does not take the message (nothing was written).
   * Not `async`: on the memory store the answer is ready when it returns, and each async layer
   * would add a promise and a microtask hop to every seed-API call.
   */
  #applyTurn(
    config: OrchestrationSource | OrchestrationPlan,
    messages: readonly ChatMessage[] | undefined,
    sessionId: string,
    inputs: readonly TransitionInput[],
  ): Promise<AppliedInputs> {
    let message: MessageInfo | undefined;
    try {
      message = messageOf(messages);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.apply(config, message, sessionId, inputs).then(refuseTurn);
  }

  /**
   * The synchronous path of {@link #applyTurn}: applies the inputs, dispatches the events and
   * returns the decisions when the store answered without I/O (the memory store); undefined when
   * the caller must take the promise path. Throws what {@link #applyTurn} would reject with.
   */
  #turnSync(
    config: OrchestrationSource | OrchestrationPlan,
    messages: readonly ChatMessage[] | undefined,
    sessionId: string,
    inputs: readonly TransitionInput[],
  ): readonly (TransitionDecision | undefined)[] | undefined {
    const plan = this.plan(config);
    const context = this.transitionContext(messageOf(messages));
    // One PendingApply serves every synchronous call: nothing of it outlives the call. A call
    // made from inside the update (a custom condition) finds none idle and makes its own.
    const run = this.#idleRun ?? new PendingApply(this.eventLog);
    this.#idleRun = undefined;
    run.begin(plan, inputs, context);
    // Without an event log the transition's new state is this call's alone (see modifySync).
    const state = this.#states.modifySync(sessionId, run.update, context.now, this.eventLog === 0);
    const { decisions, events, changed } = run;
    run.end();
    this.#idleRun = run;
    if (state === undefined) return undefined;
    if (changed) this.#waits.changed(sessionId);
    this.#dispatch(events);
    if (isRefusedMessage(decisions[0])) throwIfRefused(decisions[0], sessionId);
    return decisions;
  }

  #idleRun: PendingApply | undefined;

  /** The active step after handling the latest user message of `messages` (SPEC section 3). */
  async getActiveStep(
    config: OrchestrationSource,
    messages: readonly ChatMessage[] | undefined,
    sessionId: string,
  ): Promise<OrchestrationStep | undefined> {
    const plan = this.plan(config);
    const { state } = await this.#applyTurn(plan, messages, sessionId, USER_MESSAGE);
    return activeStepOf(plan, state)?.source;
  }

  /** The tools allowed now, in the order of `allToolIds` (SPEC section 4). */
  getAllowedTools(
    config: OrchestrationSource,
    messages: readonly ChatMessage[] | undefined,
    sessionId: string,
    allToolIds: readonly string[],
  ): Promise<string[]> {
    try {
      assertToolList(allToolIds);
      let inputs = this.#stepInputs;
      if ((inputs[1] as { agentTools?: readonly string[] } | undefined)?.agentTools !== allToolIds) {
        inputs = [USER_MESSAGE[0]!, { type: 'step-started', agentTools: allToolIds }];
        this.#stepInputs = inputs;
      }
      // One promise per call on the memory store: the seed API's hot path (see docs/benchmarks.md).
      const decisions = this.#turnSync(config, messages, sessionId, inputs);
      if (decisions !== undefined) return Promise.resolve(allowedOf(decisions));
      return this.#applyTurn(config, messages, sessionId, inputs).then((applied) => allowedOf(applied.decisions));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** Records that `toolName` completed (SPEC section 5), atomically. */
  processToolUsage(
    config: OrchestrationSource,
    messages: readonly ChatMessage[] | undefined,
    sessionId: string,
    toolName: string,
  ): Promise<void> {
    try {
      assertToolName(toolName);
      let inputs = this.#usedInputs.get(toolName);
      if (inputs === undefined) {
        // Not frozen: V8's optimized code reads frozen arrays through a generic call, and the
        // transition reads these on every turn (they never leave the manager).
        inputs = [USER_MESSAGE[0]!, Object.freeze({ type: 'tool-used', tool: toolName } as const)];
        if (this.#usedInputs.size < USED_INPUTS_LIMIT) this.#usedInputs.set(toolName, inputs);
      }
      const decisions = this.#turnSync(config, messages, sessionId, inputs);
      if (decisions !== undefined) {
        checkRecorded(decisions, sessionId, toolName);
        return RESOLVED;
      }
      return this.#recordAsync(config, messages, sessionId, inputs, toolName);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * {@link processToolUsage} on a store that answers asynchronously. Apart, because a closure in
   * processToolUsage itself would cost every call a context allocation, taken or not.
   */
  async #recordAsync(
    config: OrchestrationSource,
    messages: readonly ChatMessage[] | undefined,
    sessionId: string,
    inputs: readonly TransitionInput[],
    toolName: string,
  ): Promise<void> {
    checkRecorded((await this.#applyTurn(config, messages, sessionId, inputs)).decisions, sessionId, toolName);
  }

  /**
   * Like {@link processToolUsage}, resolving to the new state and the events it caused. This
   * records a tool that already ran, outside enforcement; a `toolCallId` already seen by the
   * session changes nothing. Model loops use {@link requestTool} before running a tool instead.
   */
  async recordToolUse(
    config: OrchestrationSource,
    messages: readonly ChatMessage[] | undefined,
    sessionId: string,
    toolName: string,
    options: { toolCallId?: string } = {},
  ): Promise<{ state: OrchestrationState; events: readonly OrchestrationEvent[] }> {
    assertToolName(toolName);
    const applied = await this.#applyTurn(config, messages, sessionId, [
      USER_MESSAGE[0]!,
      { type: 'tool-used', tool: toolName, toolCallId: options.toolCallId },
    ]);
    checkRecorded(applied.decisions, sessionId, toolName);
    return { state: applied.state, events: applied.events };
  }

  /**
   * Decides whether a call may run now (SPEC section 7) and, when it may, reserves it in the
   * same atomic update, so concurrent turns see it. The latest user message of `messages` is
   * handled first, as by every other entry point. Follow it with {@link completeTool} or
   * {@link failTool}, and renew the reservation ({@link renewLease}) while a call runs longer
   * than the lease. A denial emits `tool-rejected` and says why and what is allowed. Rules on
   * calls read the call's input as `args` and `context` as `context` (an `approve` rule refuses
   * here as `approval-required`: approval goes through the AI SDK's flow, see `orchestrate()`).
   */
  async requestTool(
    config: OrchestrationSource,
    messages: readonly ChatMessage[] | undefined,
    sessionId: string,
    call: {
      tool: string;
      toolCallId: string;
      agentTools: readonly string[];
      offered?: readonly string[];
      /** The call's input, for rules on calls. */
      args?: unknown;
      /** What the caller passes for rules on calls (`context` in their conditions). */
      context?: Readonly<Record<string, unknown>>;
    },
  ): Promise<ToolDecision> {
    assertToolName(call.tool);
    assertToolList(call.agentTools);
    assertToolCallId(call.toolCallId);
    const { context, ...request } = call;
    const plan = this.plan(config);
    const message = messageOf(messages);
    const ask = async (waited?: WaitEnd): Promise<ToolDecision> => {
      const input: TransitionInput = { type: 'tool-requested', ...request, ...(waited ? { waited } : {}) };
      const applied = await this.apply(plan, message, sessionId, [USER_MESSAGE[0]!, input], context);
      throwIfRefused(applied.decisions[0], sessionId);
      return applied.decisions[1] as ToolDecision;
    };
    // The operator's limits that count across sessions: reserved in their scopes first.
    const principal = context?.principal;
    const owner = { sessionId, principal: typeof principal === 'string' ? principal : undefined, agentId: undefined };
    const holds = scopesOf(this.policy, call.tool, owner, call.toolCallId);
    if (holds.length > 0) {
      const refused = await reserveInScopes(this, holds, { type: 'tool-requested', ...request }, context);
      if (refused !== undefined) return refused;
    }
    // A call whose answer depends on a running call waits for it (up to `waitMs`), then is decided.
    let decision: ToolDecision;
    try {
      decision = await decideWaiting(this.#waits, sessionId, await ask(), ask, this.waitMs, () => this.#states.clock());
    } catch (error) {
      if (holds.length > 0) await settleInScopes(this, holds, 'tool-failed');
      throw error;
    }
    if (holds.length > 0) {
      if (decision.allowed) this.#scopedCalls.set(scopedKey(sessionId, call.toolCallId), holds);
      else await settleInScopes(this, holds, 'tool-failed');
    }
    return decision;
  }

  /** Calls `requestTool` reserved in scopes of the operator's cross-session limits, by session and call id. */
  readonly #scopedCalls = new Map<string, readonly ScopeHold[]>();

  /** Passes the end of a call `requestTool` reserved on to its scopes. */
  async #settleScoped(sessionId: string, toolCallId: string, how: 'tool-completed' | 'tool-failed'): Promise<void> {
    const key = scopedKey(sessionId, toolCallId);
    const holds = this.#scopedCalls.get(key);
    if (holds === undefined) return;
    this.#scopedCalls.delete(key);
    await settleInScopes(this, holds, how);
  }

  /**
   * Renews the reservations of calls that still run, so that their leases start again from now
   * (one atomic update for all of them). Resolves to the ids of those that no longer hold one:
   * their lease ended (the process stalled longer than the lease) or the session was reset, and
   * their completion will not be recorded. A `Turn` renews its calls by itself.
   */
  async renewLease(
    config: OrchestrationSource | OrchestrationPlan,
    sessionId: string,
    toolCallIds: readonly string[],
  ): Promise<string[]> {
    for (const id of toolCallIds) assertToolCallId(id);
    const inputs = toolCallIds.map((toolCallId): TransitionInput => ({ type: 'lease-renewed', toolCallId }));
    const { decisions } = await this.apply(config, undefined, sessionId, inputs);
    return toolCallIds.filter((_, i) => decisions[i]?.type === 'lease' && !decisions[i].held);
  }

  /**
   * Commits a reserved call that completed (history, sequence, step selection). With `outcome`,
   * what it returned (`result`) and its input (`args`): the template's facts and labels are set
   * from them as it commits (SPEC section 11).
   */
  async completeTool(
    config: OrchestrationSource,
    messages: readonly ChatMessage[] | undefined,
    sessionId: string,
    toolCallId: string,
    outcome: { result?: unknown; args?: unknown } = {},
  ): Promise<OrchestrationState> {
    assertToolCallId(toolCallId);
    const input: TransitionInput = { type: 'tool-completed', toolCallId, result: outcome.result, args: outcome.args };
    const state = (await this.apply(config, messageOf(messages), sessionId, [input])).state;
    await this.#settleScoped(sessionId, toolCallId, 'tool-completed');
    return state;
  }

  /** Releases a reserved call whose tool threw: nothing is recorded. */
  async failTool(config: OrchestrationSource, sessionId: string, toolCallId: string): Promise<OrchestrationState> {
    assertToolCallId(toolCallId);
    const state = (await this.apply(config, undefined, sessionId, [{ type: 'tool-failed', toolCallId }])).state;
    await this.#settleScoped(sessionId, toolCallId, 'tool-failed');
    return state;
  }

  /**
   * Handles the latest user message, runs step selection, and returns where the session
   * stands: its state, the active step, sequence progress and the allowed tools.
   */
  async getStepView(
    config: OrchestrationSource,
    messages: readonly ChatMessage[] | undefined,
    sessionId: string,
    allToolIds: readonly string[],
  ): Promise<StepView & { state: OrchestrationState; running: readonly string[] }> {
    const plan = this.plan(config);
    assertToolList(allToolIds);
    const { state, decisions } = await this.#applyTurn(plan, messages, sessionId, [
      USER_MESSAGE[0]!,
      { type: 'step-started', agentTools: allToolIds },
    ]);
    const decision = decisions[1] as StepDecision;
    return {
      activeStep: plan.step(decision.activeStep),
      sequence: decision.sequence,
      allowedTools: decision.allowedTools,
      running: decision.running,
      state,
    };
  }

  /** Dispatches an event to the listeners (for model loops that detect rejections themselves). */
  emit(event: OrchestrationEvent): void {
    if (this.#listeners.size > 0) this.#dispatch([event]);
  }

  /**
   * For every tool: whether a call of it would be allowed now, or why not, with what a model step
   * would be offered. Reads the state without changing it, and answers as the decisions would
   * (the latest user message of `messages` handled, calls running in other turns counted).
   */
  async explain(
    config: OrchestrationSource | OrchestrationPlan,
    messages: readonly ChatMessage[] | undefined,
    sessionId: string,
    allToolIds: readonly string[],
  ): Promise<Explanation> {
    const plan = this.plan(config);
    assertToolList(allToolIds);
    const stored = await this.#states.getState(sessionId);
    const base = stored ?? createState(sessionId, this.#states.clock(), this.#states.ttl);
    return this.explainState(plan, base, allToolIds, messageOf(messages));
  }

  /**
   * {@link explain} on a state already read (a server's session routes, an event log entry):
   * what a turn bringing `message` (none: the session as it rests) would be told.
   */
  explainState(
    config: OrchestrationSource | OrchestrationPlan,
    state: OrchestrationState,
    agentTools: readonly string[],
    message?: MessageInfo,
  ): Explanation {
    const plan = isPlan(config) ? config : this.plan(config);
    const context = this.transitionContext(message);
    const observed = transition(plan, state, USER_MESSAGE[0]!, context).state;
    return explain(plan, observed, agentTools, context);
  }

  /** The AI-facing state of the session, or null when it does not exist. */
  getState(sessionId: string): Promise<AIOrchestrationState | null> {
    return this.#states.toAIOrchestrationState(sessionId);
  }

  /** Merges `partialState` into the session's state (see {@link OrchestrationStateManager.updateState}). */
  updateState(sessionId: string, partialState: StatePatch): Promise<OrchestrationState> {
    return this.#states.updateState(sessionId, partialState);
  }

  /** Adds one model call's token usage; resolves to the cumulative usage. */
  addTokenUsage(sessionId: string, usage: TokenUsageInput): Promise<TokenUsage> {
    return this.#states.addTokenUsage(sessionId, usage);
  }

  /**
   * What a transition of this manager's sessions needs besides the state: clock, message, limits,
   * and what the caller passes for rules on calls (`context` in their conditions).
   */
  transitionContext(
    message: MessageInfo | undefined,
    ruleContext?: Readonly<Record<string, unknown>>,
  ): TransitionContext {
    const now = this.#states.clock();
    if (ruleContext === undefined) {
      // Contexts are read-only: calls in the same millisecond about the same message share one.
      const last = this.#lastContext;
      if (last !== undefined && last.now === now && last.message === message) return last;
      const context = { now, message, historyLimit: this.#states.historyLimit, leaseMs: this.leaseMs };
      this.#lastContext = context;
      return context;
    }
    return { now, message, historyLimit: this.#states.historyLimit, leaseMs: this.leaseMs, ruleContext };
  }

  #lastContext: TransitionContext | undefined;

  /** Clears the session's progress (active step, history, sequence), keeping token usage. */
  async resetState(sessionId: string): Promise<void> {
    await this.#states.resetState(sessionId);
  }

  /** Deletes the session. */
  removeSession(sessionId: string): Promise<void> {
    return this.#states.cleanupSession(sessionId);
  }

  /** The session's state, created if missing. */
  ensureStateExists(sessionId: string): Promise<OrchestrationState> {
    return this.#states.getOrCreateState(sessionId);
  }

  /** The state manager this manager writes through. */
  getStateManager(): OrchestrationStateManager {
    return this.#states;
  }

  /** Closes the store. */
  close(): Promise<void> {
    return this.#states.close();
  }

  #dispatch(events: readonly OrchestrationEvent[]): void {
    if (events.length === 0 || this.#listeners.size === 0) return;
    for (const event of events) {
      for (const listener of this.#listeners) {
        try {
          listener(event);
        } catch (error) {
          this.#onError(error, event);
        }
      }
    }
  }
}

/** The key of a call in {@link OrchestrationManager}'s scoped calls. */
function scopedKey(sessionId: string, toolCallId: string): string {
  return `${sessionId}\u0000${toolCallId}`;
}

/** Creates an {@link OrchestrationManager}. */
export function createOrchestrationManager(options: OrchestrationManagerOptions = {}): OrchestrationManager {
  return new OrchestrationManager(options);
}

/**
 * One `apply` in flight: the updater the store calls (perhaps more than once, so it only
 * keeps the last run's results) and what that run produced. A class, so the hot path
 * allocates one object and one bound function instead of a closure per field; the manager
 * reuses one for its synchronous calls ({@link begin} to {@link end}).
 */
class PendingApply {
  events: readonly OrchestrationEvent[] = NO_EVENTS;
  decisions: readonly (TransitionDecision | undefined)[] = NO_DECISIONS;
  changed = false;
  plan: OrchestrationPlan | undefined;
  inputs: readonly TransitionInput[] = NO_INPUTS;
  context: TransitionContext | undefined;
  /** What the caller already applied of `inputs`, on the state it expects the store to hold. */
  prefix: AppliedPrefix | undefined;
  readonly update: (current: OrchestrationState) => OrchestrationState;

  constructor(
    /** Capacity of the session's event log (0: none kept). */
    readonly eventLog: number,
  ) {
    this.update = (eventLog > 0 ? this.#updateLogged : this.#update).bind(this);
  }

  /** Starts a run of `inputs`. */
  begin(plan: OrchestrationPlan, inputs: readonly TransitionInput[], context: TransitionContext): void {
    this.plan = plan;
    this.inputs = inputs;
    this.context = context;
    this.prefix = undefined;
    this.events = NO_EVENTS;
    this.decisions = NO_DECISIONS;
    this.changed = false;
  }

  /** Lets go of the run's inputs and results, so an idle object keeps nothing alive. */
  end(): void {
    this.plan = undefined;
    this.inputs = NO_INPUTS;
    this.context = undefined;
    this.prefix = undefined;
    this.events = NO_EVENTS;
    this.decisions = NO_DECISIONS;
  }

  #update(current: OrchestrationState): OrchestrationState {
    const prefix = this.prefix;
    // The store still holds the state the prefix was applied to: only the rest is new. (A store
    // that retries after a conflict calls this again with another state, and applies it all.)
    // A session the turn began as new that the store still does not have counts as the same.
    if (prefix !== undefined && (prefix.base === current || isSameNewSession(prefix.base, current)))
      return this.#updateAfter(prefix, current);
    const result = transitionAll(this.plan!, current, this.inputs, this.context!);
    this.events = result.events;
    this.decisions = result.decisions;
    this.changed = result.state !== current;
    return result.state;
  }

  /** {@link #update} from the result of `prefix`, which was applied to `current`. */
  #updateAfter(prefix: AppliedPrefix, current: OrchestrationState): OrchestrationState {
    const rest = this.inputs.length === prefix.count ? NO_INPUTS : this.inputs.slice(prefix.count);
    const result = transitionAll(this.plan!, prefix.state, rest, this.context!);
    this.events = joinEvents(prefix.events, result.events);
    this.decisions = prefix.decisions.concat(result.decisions);
    this.changed = result.state !== current;
    return result.state;
  }

  /**
   * {@link #update}, also appending every event (and every tool use committed to the history)
   * to the session's event log, each with the state right after the input that caused it.
   */
  #updateLogged(current: OrchestrationState): OrchestrationState {
    const plan = this.plan!;
    const context = this.context!;
    let state = current;
    const events: OrchestrationEvent[] = [];
    const decisions: (TransitionDecision | undefined)[] = [];
    const items: LogItem[] = [];
    for (const input of this.inputs) {
      const before = state;
      const result = transition(plan, state, input, context);
      state = result.state;
      decisions.push(result.decision);
      // A message the session refused ends the batch, as in transitionAll.
      if (isRefusedMessage(result.decision)) break;
      if (input.type === 'observed') items.push({ event: withoutSession(input.event), state });
      if (input.type === 'turn-ended') {
        const approval = input.awaitingApproval === true ? { awaitingApproval: true as const } : {};
        items.push({ event: { type: 'turn-ended', step: state.activeStep, ...approval }, state });
      }
      if (state.recentlyUsedTools !== before.recentlyUsedTools) {
        const ids = committedCalls(before, state);
        for (const tool of appendedTools(before.recentlyUsedTools, state.recentlyUsedTools)) {
          const index = ids.findIndex((call) => call.tool === tool);
          const id = index < 0 ? undefined : ids.splice(index, 1)[0]?.id;
          items.push({
            event: { type: 'tool-recorded', tool, step: state.activeStep, ...(id ? { toolCallId: id } : {}) },
            state,
          });
        }
      }
      for (const event of result.events) {
        events.push(event);
        items.push({ event: withoutSession(event), state });
      }
    }
    if (items.length > 0) state = appendToLog(state, this.eventLog, items, context.now, context.message?.key);
    this.events = events.length === 0 ? NO_EVENTS : events;
    this.decisions = decisions;
    this.changed = state !== current;
    return state;
  }
}

/** The event as the log keeps it: its session is the log's own. */
function withoutSession(event: OrchestrationEvent): LoggedEvent {
  const { sessionId: _session, ...rest } = event;
  return rest as LoggedEvent;
}

/**
 * The tools appended to a history that went from `before` to `after`: it grows at the end and
 * is trimmed at the front (one that shrank, as after a reset, appended nothing).
 */
function appendedTools(before: readonly string[], after: readonly string[]): readonly string[] {
  for (let drop = 0; drop <= before.length; drop++) {
    const kept = before.length - drop;
    if (kept > after.length) continue;
    let same = true;
    for (let i = 0; i < kept && same; i++) same = before[drop + i] === after[i];
    if (same) return after.slice(kept);
  }
  return after;
}

/** The reserved calls of `before` that `after` committed (gone from the pending log, in order). */
function committedCalls(before: OrchestrationState, after: OrchestrationState): { id: string; tool: string }[] {
  if (before.pending === undefined) return [];
  const still = new Set<string>();
  for (const entry of after.pending ?? []) if (entry.kind === 'call') still.add(entry.id);
  const committed: { id: string; tool: string }[] = [];
  for (const entry of before.pending) {
    if (entry.kind === 'call' && !still.has(entry.id)) committed.push({ id: entry.id, tool: entry.tool });
  }
  return committed;
}
const USER_MESSAGE: readonly TransitionInput[] = [{ type: 'user-message' }];
/** Most tool names whose `processToolUsage` inputs are kept (names beyond get new inputs per call). */
const USED_INPUTS_LIMIT = 1_024;
const NO_DECISIONS: readonly (TransitionDecision | undefined)[] = Object.freeze([]);
const NO_INPUTS: readonly TransitionInput[] = Object.freeze([]);
const RESOLVED: Promise<void> = Promise.resolve();

/** The allowed tools of a `getAllowedTools` turn, as a fresh array the caller may change. */
function allowedOf(decisions: readonly (TransitionDecision | undefined)[]): string[] {
  // Spread, not slice(): V8 copies frozen arrays slowly through slice().
  return [...(decisions[1] as StepDecision).allowedTools];
}

/** Throws the refusal of a turn's user message; passes the applied inputs through. */
function refuseTurn(applied: AppliedInputs): AppliedInputs {
  if (isRefusedMessage(applied.decisions[0])) throwIfRefused(applied.decisions[0], applied.state.sessionId);
  return applied;
}

/** Throws when a full session refused to record the tool (`session-busy`). */
function checkRecorded(
  decisions: readonly (TransitionDecision | undefined)[],
  sessionId: string,
  toolName: string,
): void {
  const recorded = decisions[1] as RecordDecision;
  if (!recorded.recorded && recorded.reason.code === 'session-busy') {
    throw new SessionRefusedError(
      'session-busy',
      sessionId,
      `"${toolName}" was not recorded: ${recorded.reason.message}`,
    );
  }
}

/** Throws the refusal of a turn's user message as a {@link SessionRefusedError}. */
export function throwIfRefused(decision: TransitionDecision | undefined, sessionId: string): void {
  if (!isRefusedMessage(decision)) return;
  const { code, message } = decision.reason;
  const text =
    code === 'session-busy'
      ? `Session "${sessionId}" is busy: ${message}.`
      : `${message.charAt(0).toUpperCase()}${message.slice(1)}.`;
  throw new SessionRefusedError(code, sessionId, text);
}

function isPlan(config: OrchestrationSource | OrchestrationPlan): config is OrchestrationPlan {
  return typeof (config as OrchestrationPlan).step === 'function' && 'conditionalSteps' in config;
}

/** The latest user message of `messages`; throws when `messages` is not an array. */
export function messageOf(messages: unknown): MessageInfo | undefined {
  if (messages !== undefined && !Array.isArray(messages)) {
    throw new InvalidArgumentError('messages', `expected an array of messages, got ${describeType(messages)}`);
  }
  return latestUserMessage(messages as readonly ChatMessage[] | undefined);
}

function assertToolCallId(id: unknown): asserts id is string {
  if (typeof id !== 'string' || id === '') {
    throw new InvalidArgumentError('toolCallId', `expected a non-empty tool call id, got ${describeType(id)}`);
  }
}

function assertToolList(tools: unknown): asserts tools is readonly string[] {
  if (!Array.isArray(tools)) {
    throw new InvalidArgumentError('allToolIds', `expected an array of tool names, got ${describeType(tools)}`);
  }
}
