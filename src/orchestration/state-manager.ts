/**
 * The seed's `OrchestrationStateManager`: reads and changes one session's state through a
 * {@link SessionStore}, every change one atomic `update`.
 */
import { appendBounded, changeStep } from '../core/engine.js';
import { InvalidArgumentError, SessionDeletedError } from '../core/errors.js';
import { keptByReset } from '../core/facts.js';
import { appendToLog, keepLogEntries } from '../core/session-log.js';
import {
  type AIOrchestrationState,
  createState,
  DEFAULT_HISTORY_LIMIT,
  DEFAULT_SESSION_TTL_MS,
  type OrchestrationState,
  type TokenUsage,
  toAIState,
} from '../core/state.js';
import { assertSessionId, describeType } from '../core/state-check.js';
import { addTokenUsage, normalizeUsage, type TokenUsageInput } from '../core/token-usage.js';
import { countsKeptByReset } from '../core/transition.js';
import { type EngineUpdate, ownedMemoryStore } from '../stores/memory.js';
import { resolveStore, type StoreSpec } from '../stores/resolve-store.js';
import type { SessionStore } from '../stores/types.js';

/** Options of {@link OrchestrationStateManager}. */
export interface OrchestrationStateManagerOptions {
  /** Where states live: a store or a store URL (default: a new memory store). */
  store?: StoreSpec;
  /** Bound of `recentlyUsedTools` unless a config sets `historyLimit` (default 50). */
  historyLimit?: number;
  /** Sliding TTL of new sessions in milliseconds (default 24 h; 0 never expires). */
  ttl?: number;
  /** Evict least recently used sessions beyond this many (memory store created here only). */
  maxSessions?: number;
  /** The clock, in milliseconds since the epoch (default `Date.now`). */
  clock?: () => number;
}

/** The fields of a state that {@link OrchestrationStateManager.updateState} may change. */
export type StatePatch = Partial<
  Pick<OrchestrationState, 'activeStep' | 'recentlyUsedTools' | 'sequenceIndex' | 'cumulativeTokenUsage' | 'ttl'>
>;

const PATCHABLE = new Set(['activeStep', 'recentlyUsedTools', 'sequenceIndex', 'cumulativeTokenUsage', 'ttl']);

/** Keeps per-session orchestration state in a store (AgentDock's `OrchestrationStateManager`). */
export class OrchestrationStateManager {
  /** Bound of `recentlyUsedTools` used when a config sets none. */
  readonly historyLimit: number;
  /** Sliding TTL of new sessions in milliseconds. */
  readonly ttl: number;
  /** The clock. */
  readonly clock: () => number;
  #store: SessionStore | undefined;
  /** The unvalidated write of the memory store created here, on the default clock. */
  #engineUpdate: EngineUpdate | undefined;
  /** True when `#store` is the memory store created here on `clock`. */
  readonly #ownClockStore: boolean;
  readonly #storeReady: Promise<SessionStore>;

  constructor(options: OrchestrationStateManagerOptions = {}) {
    this.historyLimit = positiveInteger(options.historyLimit, 'historyLimit', DEFAULT_HISTORY_LIMIT);
    this.ttl = options.ttl === 0 ? 0 : positiveInteger(options.ttl, 'ttl', DEFAULT_SESSION_TTL_MS);
    this.clock = options.clock ?? Date.now;
    const spec = options.store;
    this.#ownClockStore = spec === undefined;
    if (spec === undefined) {
      // The default store expires sessions on the manager's clock, so an injected clock
      // governs TTLs too.
      const own = ownedMemoryStore({
        now: this.clock,
        ...(options.maxSessions === undefined ? {} : { maxSessions: options.maxSessions }),
      });
      this.#store = own.store;
      // On the default clock, the transition's results are well formed by construction (an
      // injected clock's times are checked with every write, as a store's are).
      if (this.clock === Date.now) this.#engineUpdate = own.engineUpdate;
      this.#storeReady = Promise.resolve(this.#store);
    } else if (typeof spec === 'object') {
      this.#store = spec;
      this.#storeReady = Promise.resolve(this.#store);
    } else {
      this.#storeReady = resolveStore(
        spec,
        options.maxSessions === undefined ? {} : { maxSessions: options.maxSessions },
      );
      this.#storeReady.then(
        (store) => {
          this.#store = store;
        },
        () => undefined, // surfaced by the first call that awaits it
      );
    }
  }

  /** The store, once it is open. */
  store(): Promise<SessionStore> {
    return this.#store ? Promise.resolve(this.#store) : this.#storeReady;
  }

  /**
   * Atomically applies `fn` to the session's state (created if missing) and resolves to the
   * stored result. `fn` must be pure: optimistic stores may call it more than once.
   * Returning the state unchanged writes nothing (but creates a missing session). `at` is the
   * time of the change (default: the clock now), for a caller that has already read the clock.
   * With `existing`, a missing session is not created: the update throws a
   * {@link SessionDeletedError} (a turn's writes after its first: the session was deleted since).
   */
  async modify(
    sessionId: string,
    fn: (state: OrchestrationState) => OrchestrationState,
    at?: number,
    existing = false,
  ): Promise<OrchestrationState> {
    assertSessionId(sessionId);
    const store = this.#store ?? (await this.#storeReady);
    const now = at ?? this.clock();
    const stored = await this.#tracked(
      store.update(sessionId, (current) => this.#step(sessionId, current, now, fn, false, existing)),
    );
    // update() resolves to undefined only when fn returned undefined: for a missing session with
    // `existing`, as the store last found it (an optimistic store may first ask on a guess).
    if (stored === undefined) throw new SessionDeletedError(sessionId);
    return stored;
  }

  /**
   * {@link modify} without a promise, when the store can update synchronously (the memory
   * store); undefined when it cannot, and the caller must use `modify`.
   */
  modifySync(
    sessionId: string,
    fn: (state: OrchestrationState) => OrchestrationState,
    at?: number,
    /**
     * `fn` returns, when it changes the state, a new object that nothing else holds (the
     * transition's own result): it is stamped in place instead of copied once more.
     */
    owned = false,
    /** As in {@link modify}: a missing session is not created, the update throws instead. */
    existing = false,
  ): OrchestrationState | undefined {
    const store = this.#store;
    if (store?.updateSync === undefined) return undefined;
    assertSessionId(sessionId);
    const now = at ?? this.clock();
    // The memory store this manager created runs on its clock: it gets the time just read.
    const time = this.#ownClockStore ? now : undefined;
    // An updater that reaches this manager again (a listener, a custom condition) gets a closure
    // of its own: the reused step below holds the outer call's arguments until it returns.
    if (this.#syncFn !== undefined) return this.#nestedSync(store, sessionId, fn, now, time, owned, existing);
    // One updater for every synchronous modify instead of a closure per call (the seed API's hot
    // path runs this twice per turn); its arguments are this call's for the call's duration.
    this.#syncId = sessionId;
    this.#syncNow = now;
    this.#syncFn = fn;
    this.#syncOwned = owned;
    this.#syncExisting = existing;
    try {
      // The transition's own result (`owned`) on the store created here: already well formed.
      const stored =
        owned && this.#engineUpdate !== undefined
          ? this.#engineUpdate(sessionId, this.#syncStep, now)
          : store.updateSync(sessionId, this.#syncStep, time);
      this.#answering = true;
      // Undefined from the store: the session is missing and `existing` created nothing.
      if (stored === undefined) throw new SessionDeletedError(sessionId);
      return stored;
    } catch (error) {
      this.#answering = false;
      throw error;
    } finally {
      this.#syncFn = undefined;
    }
  }

  /**
   * {@link modifySync} called from inside another (its own closure). Apart, because a closure in
   * modifySync itself would cost every call a context allocation, taken or not.
   */
  #nestedSync(
    store: SessionStore,
    sessionId: string,
    fn: (state: OrchestrationState) => OrchestrationState,
    now: number,
    time: number | undefined,
    owned: boolean,
    existing: boolean,
  ): OrchestrationState | undefined {
    const stored = store.updateSync!(
      sessionId,
      (current) => this.#step(sessionId, current, now, fn, owned, existing),
      time,
    );
    if (stored === undefined) throw new SessionDeletedError(sessionId);
    return stored;
  }

  #syncId = '';
  #syncNow = 0;
  #syncFn: ((state: OrchestrationState) => OrchestrationState) | undefined;
  #syncOwned = false;
  #syncExisting = false;
  readonly #syncStep = (current: OrchestrationState | undefined): OrchestrationState | undefined =>
    this.#step(this.#syncId, current, this.#syncNow, this.#syncFn!, this.#syncOwned, this.#syncExisting);

  #step(
    sessionId: string,
    current: OrchestrationState | undefined,
    now: number,
    fn: (state: OrchestrationState) => OrchestrationState,
    owned = false,
    existing = false,
  ): OrchestrationState | undefined {
    // Not created: the caller throws SessionDeletedError if the store, having looked, agrees.
    if (current === undefined && existing) return undefined;
    const base = current ?? createState(sessionId, now, this.ttl);
    const next = fn(base);
    if (next === base) return base;
    // Stamped with the version the store will give it, in the one copy this makes: a store
    // that finds its version already set keeps the object instead of copying it again.
    const version = base.version + 1;
    if (next.lastAccessed === now && next.version === version) return next;
    if (owned) {
      next.lastAccessed = now;
      next.version = version;
      return next;
    }
    return keepLogEntries(next, { ...next, lastAccessed: now, version });
  }

  /**
   * The session's state as the store last saw it, without I/O (`SessionStore.peek`), null when
   * the store knows there is none, or undefined when it cannot say: it may be stale, so it is
   * only a starting point for what a turn offers.
   */
  peek(sessionId: string): OrchestrationState | null | undefined {
    return this.#store?.peek?.(sessionId);
  }

  /** True when the store updates without I/O (the memory store): nothing waits on a round trip. */
  get updatesSynchronously(): boolean {
    return this.#store?.updateSync !== undefined;
  }

  /**
   * True when the store's latest operation from this manager succeeded. A turn begins without
   * a round trip only then: a store that is down is found before a model is called.
   */
  get answering(): boolean {
    return this.#answering;
  }

  #answering = false;

  async #tracked<T>(operation: Promise<T>): Promise<T> {
    try {
      const result = await operation;
      this.#answering = true;
      return result;
    } catch (error) {
      this.#answering = false;
      throw error;
    }
  }

  /** The session's full state, or null when it does not exist. */
  async getState(sessionId: string): Promise<OrchestrationState | null> {
    assertSessionId(sessionId);
    const store = this.#store ?? (await this.#storeReady);
    return (await this.#tracked(store.get(sessionId))) ?? null;
  }

  /** The session's state, created empty if it does not exist. */
  async getOrCreateState(sessionId: string): Promise<OrchestrationState> {
    return this.modify(sessionId, (state) => state);
  }

  /**
   * Merges `patch` into the session's state (creating the session if needed). Only
   * `activeStep`, `recentlyUsedTools`, `sequenceIndex`, `cumulativeTokenUsage` and `ttl`
   * can be changed; anything else is an {@link InvalidArgumentError}.
   */
  async updateState(sessionId: string, patch: StatePatch): Promise<OrchestrationState> {
    checkPatch(patch);
    return await this.modify(sessionId, (state) => {
      const next: OrchestrationState = { ...state, ...structuredClone(patch) };
      if ('activeStep' in patch && patch.activeStep === undefined) delete next.activeStep;
      if (next.recentlyUsedTools.length > this.historyLimit) {
        next.recentlyUsedTools = next.recentlyUsedTools.slice(-this.historyLimit);
      }
      return next;
    });
  }

  /** Makes `stepName` the active step (undefined: none); a change restarts the sequence. */
  async setActiveStep(sessionId: string, stepName: string | undefined): Promise<OrchestrationState> {
    if (stepName !== undefined && (typeof stepName !== 'string' || stepName === '')) {
      throw new InvalidArgumentError('stepName', `expected a step name or undefined, got ${describeType(stepName)}`);
    }
    return this.modify(sessionId, (state) => changeStep(state, stepName).state);
  }

  /**
   * Appends `toolName` to the history (oldest first), trimmed to `historyLimit`. Resolves to
   * null, creating nothing, when the session does not exist (as AgentDock does).
   */
  async addUsedTool(
    sessionId: string,
    toolName: string,
    historyLimit = this.historyLimit,
  ): Promise<OrchestrationState | null> {
    assertToolName(toolName);
    return this.#modifyExisting(sessionId, (state) => ({
      ...state,
      recentlyUsedTools: appendBounded(state.recentlyUsedTools, toolName, historyLimit),
    }));
  }

  /**
   * Moves the sequence position forward by one. Resolves to null, creating nothing, when the
   * session does not exist (as AgentDock does).
   */
  async advanceSequence(sessionId: string): Promise<OrchestrationState | null> {
    return this.#modifyExisting(sessionId, (state) => ({ ...state, sequenceIndex: state.sequenceIndex + 1 }));
  }

  /** Like {@link modify}, but a missing session stays missing and resolves to null. */
  update(sessionId: string, fn: (state: OrchestrationState) => OrchestrationState): Promise<OrchestrationState | null> {
    return this.#modifyExisting(sessionId, fn);
  }

  async #modifyExisting(
    sessionId: string,
    fn: (state: OrchestrationState) => OrchestrationState,
  ): Promise<OrchestrationState | null> {
    assertSessionId(sessionId);
    const store = this.#store ?? (await this.#storeReady);
    const now = this.clock();
    const stored = await this.#tracked(
      store.update(sessionId, (current) =>
        current === undefined ? undefined : this.#step(sessionId, current, now, fn),
      ),
    );
    return stored ?? null;
  }

  /** Adds one model call's token usage (AI SDK or seed field names) to the session. */
  async addTokenUsage(sessionId: string, usage: TokenUsageInput): Promise<TokenUsage> {
    const normalized = normalizeUsage(checkUsage(usage));
    const state = await this.modify(sessionId, (s) => addTokenUsage(s, normalized));
    return state.cumulativeTokenUsage;
  }

  /**
   * Clears the session's orchestration progress (active step, history, sequence position);
   * token usage, the counts of limit rules and `createdAt` are kept, because what was spent
   * stays spent. Resolves to null when the session does not exist.
   */
  async resetState(sessionId: string): Promise<OrchestrationState | null> {
    assertSessionId(sessionId);
    return this.#modifyExisting(sessionId, (current) => {
      const fresh = createState(sessionId, current.createdAt, current.ttl);
      // The owner stays: a reset session still belongs to the agent that created it. Call ids
      // stay too, so a reset cannot be used to run a call id twice; running reservations go
      // (their completions arrive late and are not recorded). The event log stays, and says so.
      const reset: OrchestrationState = {
        ...fresh,
        cumulativeTokenUsage: current.cumulativeTokenUsage,
        agentId: current.agentId,
        toolCallIds: current.toolCallIds,
      };
      // The calls limit rules counted stay counted, as tokens stay spent: otherwise anyone who
      // may reset a session (POST /api/sessions/:id/reset) could clear "one payment per
      // session" or "three an hour". Per-step counts start again anyway when a step next
      // becomes active.
      if (current.counts !== undefined) reset.counts = current.counts;
      // Labels only rise within a session: a reset lowers only those whose template says
      // clearOnReset. Facts are progress, and go.
      const { labels } = keptByReset(current);
      if (labels !== undefined) {
        reset.labels = labels;
        const resetLabels = current.resetLabels?.filter((name) => labels.includes(name));
        if (resetLabels !== undefined && resetLabels.length > 0) reset.resetLabels = resetLabels;
      }
      // So do the calls it releases, which may still run or have run (a reset sent while a
      // payment runs must not give its unit back): each keeps its place in the pending log as a
      // count, which the session's next transition folds in with the plan.
      const counted = countsKeptByReset(current.pending, current.lastMessageKey);
      if (counted !== undefined) reset.pending = counted;
      if (current.log === undefined) return reset;
      const marker = { event: { type: 'session-reset' as const }, state: reset };
      return appendToLog({ ...reset, log: current.log }, current.log.capacity, [marker], this.clock(), undefined);
    });
  }

  /** Deletes the session. */
  async cleanupSession(sessionId: string): Promise<void> {
    assertSessionId(sessionId);
    const store = this.#store ?? (await this.#storeReady);
    await store.delete(sessionId);
  }

  /** The AI-facing subset of the session's state, or null when it does not exist. */
  async toAIOrchestrationState(sessionId: string): Promise<AIOrchestrationState | null> {
    const state = await this.getState(sessionId);
    return state ? toAIState(state) : null;
  }

  /** Closes the store. */
  async close(): Promise<void> {
    const store = await this.#storeReady;
    await store.close();
  }
}

/** Creates an {@link OrchestrationStateManager}. */
export function createOrchestrationStateManager(
  options: OrchestrationStateManagerOptions = {},
): OrchestrationStateManager {
  return new OrchestrationStateManager(options);
}

function positiveInteger(value: number | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new InvalidArgumentError(name, `expected a positive integer, got ${String(value)}`);
  }
  return value;
}

/** Throws unless `toolName` is a non-empty string. */
export function assertToolName(toolName: unknown, path = 'toolName'): asserts toolName is string {
  if (typeof toolName !== 'string' || toolName === '') {
    throw new InvalidArgumentError(path, `expected a non-empty tool name, got ${describeType(toolName)}`);
  }
}

function checkPatch(patch: unknown): asserts patch is StatePatch {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) {
    throw new InvalidArgumentError('partialState', `expected an object, got ${describeType(patch)}`);
  }
  const p = patch as Record<string, unknown>;
  for (const key of Object.keys(p)) {
    if (!PATCHABLE.has(key)) {
      throw new InvalidArgumentError(
        `partialState.${key}`,
        `"${key}" cannot be changed (changeable: ${[...PATCHABLE].join(', ')})`,
      );
    }
  }
  if (p.activeStep !== undefined && (typeof p.activeStep !== 'string' || p.activeStep === '')) {
    throw new InvalidArgumentError('partialState.activeStep', 'expected a non-empty string');
  }
  if (
    p.recentlyUsedTools !== undefined &&
    !(Array.isArray(p.recentlyUsedTools) && p.recentlyUsedTools.every((t) => typeof t === 'string' && t !== ''))
  ) {
    throw new InvalidArgumentError('partialState.recentlyUsedTools', 'expected an array of tool names');
  }
  if (p.sequenceIndex !== undefined && !(Number.isSafeInteger(p.sequenceIndex) && (p.sequenceIndex as number) >= 0)) {
    throw new InvalidArgumentError(
      'partialState.sequenceIndex',
      `expected an integer >= 0, got ${String(p.sequenceIndex)}`,
    );
  }
  if (p.ttl !== undefined && !(Number.isSafeInteger(p.ttl) && (p.ttl as number) >= 0)) {
    throw new InvalidArgumentError('partialState.ttl', `expected milliseconds >= 0, got ${String(p.ttl)}`);
  }
  if (p.cumulativeTokenUsage !== undefined) {
    const u = p.cumulativeTokenUsage as Record<string, unknown> | null;
    for (const field of ['promptTokens', 'completionTokens', 'totalTokens']) {
      const v = u?.[field];
      if (!(Number.isSafeInteger(v) && (v as number) >= 0)) {
        throw new InvalidArgumentError(`partialState.cumulativeTokenUsage.${field}`, 'expected an integer >= 0');
      }
    }
  }
}

function checkUsage(usage: unknown): TokenUsageInput {
  if (typeof usage !== 'object' || usage === null) {
    throw new InvalidArgumentError('usage', `expected an object of token counts, got ${describeType(usage)}`);
  }
  const u = usage as Record<string, unknown>;
  for (const field of ['promptTokens', 'completionTokens', 'inputTokens', 'outputTokens', 'totalTokens']) {
    const v = u[field];
    if (v !== undefined && !(Number.isSafeInteger(v) && (v as number) >= 0)) {
      throw new InvalidArgumentError(`usage.${field}`, `expected an integer >= 0, got ${String(v)}`);
    }
  }
  return u as TokenUsageInput;
}
