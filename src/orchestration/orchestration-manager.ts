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
import type { ConditionRegistry } from '../core/conditions.js';
import {
  activeStepOf,
  allowedTools,
  authorizeToolCall,
  type Explanation,
  explainTools,
  handleMessage,
  recordToolUse,
  type StepView,
  type TokenUsageInput,
  type ToolCallDecision,
  viewStep,
} from '../core/engine.js';
import { InvalidArgumentError } from '../core/errors.js';
import { NO_EVENTS, type OrchestrationEvent } from '../core/events.js';
import { type ChatMessage, latestUserMessage } from '../core/messages.js';
import type { OrchestrationStep } from '../core/schema.js';
import {
  type AIOrchestrationState,
  createState,
  describeType,
  type OrchestrationState,
  type TokenUsage,
} from '../core/state.js';
import {
  assertToolName,
  OrchestrationStateManager,
  type OrchestrationStateManagerOptions,
  type StatePatch,
} from './state-manager.js';

/** Receives every engine event (`step-changed`, `sequence-advanced`, …). */
export type EventListener = (event: OrchestrationEvent) => void;

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
}

/** Decides which step is active and which tools are allowed, per session (AgentDock's `OrchestrationManager`). */
export class OrchestrationManager {
  readonly #states: OrchestrationStateManager;
  readonly #listeners = new Set<EventListener>();
  readonly #onError: (error: unknown, event: OrchestrationEvent) => void;
  readonly #compileOptions: CompileOptions;

  constructor(options: OrchestrationManagerOptions = {}) {
    this.#states = options.stateManager ?? new OrchestrationStateManager(options);
    if (options.onEvent) this.#listeners.add(options.onEvent);
    this.#onError =
      options.onError ??
      ((error, event) => console.error(`[baton] an onEvent listener threw on "${event.type}":`, error));
    this.#compileOptions = options.conditions ? { conditions: options.conditions } : {};
  }

  /** The compiled plan of `config` (cached by object identity). Throws `TemplateConfigError` when invalid. */
  plan(config: OrchestrationSource): OrchestrationPlan {
    if (typeof config !== 'object' || config === null) {
      throw new InvalidArgumentError(
        'config',
        `expected an orchestration config or template object, got ${describeType(config)}`,
      );
    }
    return compileOrchestration(config, this.#compileOptions);
  }

  /** Listens to events; returns a function that stops listening. */
  subscribe(listener: EventListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** The active step after handling the latest user message of `messages` (SPEC section 3). */
  getActiveStep(
    config: OrchestrationSource,
    messages: readonly ChatMessage[] | undefined,
    sessionId: string,
  ): Promise<OrchestrationStep | undefined> {
    try {
      const plan = this.plan(config);
      return this.#observe(plan, messages, sessionId, (state) => activeStepOf(plan, state)?.source);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** The tools allowed now, in the order of `allToolIds` (SPEC section 4). */
  getAllowedTools(
    config: OrchestrationSource,
    messages: readonly ChatMessage[] | undefined,
    sessionId: string,
    allToolIds: readonly string[],
  ): Promise<string[]> {
    try {
      const plan = this.plan(config);
      assertToolList(allToolIds);
      return this.#observe(plan, messages, sessionId, (state) => {
        const result = allowedTools(plan, state, allToolIds);
        this.#dispatch(result.events);
        // Spread, not slice(): V8 copies frozen arrays slowly through slice().
        return [...result.tools];
      });
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
    return this.recordToolUse(config, messages, sessionId, toolName).then(noop);
  }

  /** Like {@link processToolUsage}, resolving to the new state and the events it caused. */
  recordToolUse(
    config: OrchestrationSource,
    messages: readonly ChatMessage[] | undefined,
    sessionId: string,
    toolName: string,
    options: { toolCallId?: string } = {},
  ): Promise<{ state: OrchestrationState; events: readonly OrchestrationEvent[] }> {
    try {
      const plan = this.plan(config);
      assertToolName(toolName);
      checkMessages(messages);
      const message = latestUserMessage(messages);
      const historyLimit = this.#states.historyLimit;
      let events: readonly OrchestrationEvent[] = [];
      const apply = (current: OrchestrationState) => {
        const observed = handleMessage(plan, current, message);
        const recorded = recordToolUse(plan, observed.state, {
          tool: toolName,
          message,
          historyLimit,
          toolCallId: options.toolCallId,
        });
        events = observed.events.length === 0 ? recorded.events : [...observed.events, ...recorded.events];
        return recorded.state;
      };
      const finish = (state: OrchestrationState) => {
        this.#dispatch(events);
        return { state, events };
      };
      // The memory store updates synchronously: no promise round trips on the hot path.
      const sync = this.#states.modifySync(sessionId, apply);
      if (sync !== undefined) return Promise.resolve(finish(sync));
      return this.#states.modify(sessionId, apply).then(finish);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /**
   * Decides whether a call of `toolName` may run now (SPEC section 7); a denial emits a
   * `tool-rejected` event and says why and which tools are allowed.
   */
  async authorizeToolCall(
    config: OrchestrationSource,
    messages: readonly ChatMessage[] | undefined,
    sessionId: string,
    toolName: string,
    allToolIds: readonly string[],
  ): Promise<ToolCallDecision> {
    const plan = this.plan(config);
    assertToolName(toolName);
    assertToolList(allToolIds);
    const state = await this.#observe(plan, messages, sessionId, identity);
    const decision = authorizeToolCall(plan, state, toolName, allToolIds);
    if (!decision.allowed) this.#dispatch([decision.event]);
    return decision;
  }

  /**
   * Handles the latest user message, runs step selection, and returns where the session
   * stands: its state, the active step, sequence progress and the allowed tools. This is
   * what a model loop asks before every model step.
   */
  async getStepView(
    config: OrchestrationSource,
    messages: readonly ChatMessage[] | undefined,
    sessionId: string,
    allToolIds: readonly string[],
  ): Promise<StepView & { state: OrchestrationState }> {
    const plan = this.plan(config);
    assertToolList(allToolIds);
    const state = await this.#observe(plan, messages, sessionId, identity);
    const view = viewStep(plan, state, allToolIds);
    if (view.sequence?.blocked) this.#dispatch(allowedTools(plan, state, allToolIds).events);
    return { ...view, state };
  }

  /** Dispatches an event to the listeners (for model loops that detect rejections themselves). */
  emit(event: OrchestrationEvent): void {
    this.#dispatch([event]);
  }

  /** For every tool: allowed now, or why not. Reads the state without changing it. */
  async explain(
    config: OrchestrationSource,
    messages: readonly ChatMessage[] | undefined,
    sessionId: string,
    allToolIds: readonly string[],
  ): Promise<Explanation> {
    const plan = this.plan(config);
    assertToolList(allToolIds);
    const stored = await this.#states.getState(sessionId);
    const base = stored ?? createState(sessionId, this.#states.clock(), this.#states.ttl);
    const observed = handleMessage(plan, base, latestUserMessage(messages)).state;
    return explainTools(plan, observed, allToolIds);
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

  /** Handles the latest user message and runs step selection, storing any change, then maps the state. */
  #observe<T>(
    plan: OrchestrationPlan,
    messages: readonly ChatMessage[] | undefined,
    sessionId: string,
    then: (state: OrchestrationState) => T,
  ): Promise<T> {
    checkMessages(messages);
    const message = latestUserMessage(messages);
    let events: readonly OrchestrationEvent[] = NO_EVENTS;
    const apply = (current: OrchestrationState) => {
      const result = handleMessage(plan, current, message);
      events = result.events;
      return result.state;
    };
    const finish = (state: OrchestrationState) => {
      this.#dispatch(events);
      return then(state);
    };
    const sync = this.#states.modifySync(sessionId, apply);
    if (sync !== undefined) return Promise.resolve(finish(sync));
    return this.#states.modify(sessionId, apply).then(finish);
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

/** Creates an {@link OrchestrationManager}. */
export function createOrchestrationManager(options: OrchestrationManagerOptions = {}): OrchestrationManager {
  return new OrchestrationManager(options);
}

const noop = () => undefined;
const identity = <T>(value: T) => value;

function checkMessages(messages: unknown): void {
  if (messages !== undefined && !Array.isArray(messages)) {
    throw new InvalidArgumentError('messages', `expected an array of messages, got ${describeType(messages)}`);
  }
}

function assertToolList(tools: unknown): asserts tools is readonly string[] {
  if (!Array.isArray(tools)) {
    throw new InvalidArgumentError('allToolIds', `expected an array of tool names, got ${describeType(tools)}`);
  }
}
