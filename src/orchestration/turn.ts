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
 * A buffered completion is written at the latest when the turn ends. If the process dies
 * first, the reservation's lease ends and the call is released: the record of a call that ran
 * can be lost that way, but a call that was not allowed can never run.
 */
import type { OrchestrationPlan, OrchestrationSource } from '../core/compile.js';
import { normalizeUsage, type TokenUsageInput } from '../core/engine.js';
import type { OrchestrationEvent } from '../core/events.js';
import type { ChatMessage } from '../core/messages.js';
import type { OrchestrationState } from '../core/state.js';
import {
  type StepDecision,
  type ToolDecision,
  type TransitionInput,
  transition,
  transitionAll,
} from '../core/transition.js';
import type { OrchestrationManager } from './orchestration-manager.js';
import { messageOf } from './orchestration-manager.js';

/** Options of {@link Turn}. */
export interface TurnOptions {
  manager: OrchestrationManager;
  /** The template or its `orchestration` block. */
  config: OrchestrationSource;
  sessionId: string;
  /** Every tool of the agent, in order. */
  agentTools: readonly string[];
  /** The conversation; its latest user message drives message conditions. */
  messages?: readonly ChatMessage[] | undefined;
}

/** A model step's orchestration, and the state it was decided on. */
export interface TurnStep {
  readonly decision: StepDecision;
  readonly state: OrchestrationState;
}

/** One turn on one session; see the module comment. */
export class Turn {
  readonly #manager: OrchestrationManager;
  readonly #plan: OrchestrationPlan;
  readonly #sessionId: string;
  readonly #agentTools: readonly string[];
  #messages: readonly ChatMessage[] | undefined;
  #buffer: TransitionInput[] = [];
  #stored: OrchestrationState | undefined;
  #begun = false;

  constructor(options: TurnOptions) {
    this.#manager = options.manager;
    this.#plan = options.manager.plan(options.config);
    this.#sessionId = options.sessionId;
    this.#agentTools = options.agentTools;
    this.#messages = options.messages;
    messageOf(options.messages); // fail now on a bad messages argument, not mid-turn
  }

  /** The conversation, when it is only known once the model loop starts. Ignored once set. */
  useMessages(messages: readonly ChatMessage[]): void {
    this.#messages ??= messages;
  }

  /** The plan the turn runs on. */
  get plan(): OrchestrationPlan {
    return this.#plan;
  }

  /** The last stored state with the buffered inputs applied (undefined before the first step). */
  get state(): OrchestrationState | undefined {
    if (this.#stored === undefined || this.#buffer.length === 0) return this.#stored;
    return transitionAll(this.#plan, this.#stored, this.#buffer, this.#context()).state;
  }

  /**
   * Begins the turn before its first model step (an approved call resumed from the history
   * runs first): writes the user message, decides no step. Resolves to the stored state.
   */
  async begin(): Promise<OrchestrationState> {
    if (this.#begun && this.#stored !== undefined) return this.state ?? this.#stored;
    this.#begun = true;
    return (await this.#write([{ type: 'user-message' }])).state;
  }

  /** Where the session stands for the next model step, and what to offer. */
  async stepStarted(): Promise<TurnStep> {
    const started: TransitionInput = { type: 'step-started', agentTools: this.#agentTools };
    if (!this.#begun || this.#stored === undefined) {
      this.#begun = true;
      const { state, decisions } = await this.#write([{ type: 'user-message' }, started]);
      return this.#offered({ decision: decisions.at(-1) as StepDecision, state });
    }
    if (this.#plan.hasBudgets) {
      // With token budgets every step is decided on the store's state, usage written first, so
      // concurrent turns see each other's spending: together they overspend by at most the one
      // model step each of them has in flight. One more round trip per step, only for budgets.
      const { state, decisions } = await this.#write([started]);
      return this.#offered({ decision: decisions.at(-1) as StepDecision, state });
    }
    const context = this.#context();
    const local =
      this.#buffer.length === 0 ? this.#stored : transitionAll(this.#plan, this.#stored, this.#buffer, context).state;
    const result = transition(this.#plan, local, started, context);
    for (const event of result.events) this.observe(event);
    return this.#offered({ decision: result.decision as StepDecision, state: result.state });
  }

  /**
   * Reports an event decided without the store (a model step decided locally, a call the model
   * loop refused itself): dispatched now, and, when the manager keeps event logs, sent with the
   * next write so the session's log has it in its place.
   */
  observe(event: OrchestrationEvent): void {
    this.#manager.emit(event);
    if (this.#manager.eventLog > 0) this.#buffer.push({ type: 'observed', event });
  }

  /** Reports a step decision as a `tools-offered` event, for telemetry and timelines. */
  #offered(step: TurnStep): TurnStep {
    const { activeStep, allowedTools, toolChoice, sequence, shadow, wouldOffer } = step.decision;
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
  async request(tool: string, toolCallId: string, offered?: readonly string[]): Promise<ToolDecision> {
    const input: TransitionInput = { type: 'tool-requested', tool, toolCallId, agentTools: this.#agentTools, offered };
    const { decisions } = await this.#write([input]);
    return decisions.at(-1) as ToolDecision;
  }

  /** The reserved call completed: committed with the next write. */
  completed(toolCallId: string): void {
    this.#buffer.push({ type: 'tool-completed', toolCallId });
  }

  /** The reserved call threw: released with the next write, nothing recorded. */
  failed(toolCallId: string): void {
    this.#buffer.push({ type: 'tool-failed', toolCallId });
  }

  /** A model call's token usage (AI SDK or seed names): added with the next write. */
  usage(usage: TokenUsageInput): void {
    const normalized = normalizeUsage(usage);
    if (normalized.totalTokens === 0 && normalized.promptTokens === 0 && normalized.completionTokens === 0) return;
    this.#buffer.push({ type: 'usage', usage: normalized });
  }

  /**
   * Ends the turn: what the buffer holds is written together with a `turn-ended` input, so its
   * `sequence-incomplete` costs no round trip of its own; with nothing buffered it is decided
   * on the last stored state without one. Resolves to the events of that last change (none
   * when the turn never reached the store).
   */
  async end(options: { awaitingApproval?: boolean } = {}): Promise<readonly OrchestrationEvent[]> {
    const ended: TransitionInput = { type: 'turn-ended', awaitingApproval: options.awaitingApproval };
    // A session that keeps an event log is written at the end of every turn, so the log says
    // where the turn left it; that costs a round trip only when nothing else was buffered.
    const logged = this.#manager.eventLog > 0 && this.#stored !== undefined;
    if (this.#buffer.length > 0 || logged) return (await this.#write([ended])).events;
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

  async #write(inputs: readonly TransitionInput[]) {
    const buffered = this.#buffer;
    this.#buffer = [];
    try {
      const applied = await this.#manager.apply(this.#plan, messageOf(this.#messages), this.#sessionId, [
        ...buffered,
        ...inputs,
      ]);
      this.#stored = applied.state;
      return applied;
    } catch (error) {
      // Nothing was written: keep the buffered inputs for the next write.
      this.#buffer = [...buffered, ...this.#buffer];
      throw error;
    }
  }

  #context() {
    return this.#manager.transitionContext(messageOf(this.#messages));
  }
}
