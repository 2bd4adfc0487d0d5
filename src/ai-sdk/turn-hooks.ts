/**
 * What the hooks of one orchestrated turn share: the `Turn` (the one door to the store), what the
 * latest model step offered, the step's projection for approvals, the reservations the approval
 * hook started early, the writes in flight, and how failures and wiring mistakes are reported.
 * Each hook lives in a file of its own (`prepare-step.ts`, `tool-approval.ts`, `guard-tools.ts`,
 * `step-end.ts`) and reads and writes this object; `orchestrate()` builds it and joins them.
 */
import type { Instructions, ModelMessage, StepResult, ToolChoice, ToolSet } from 'ai';
import { NoSuchToolError } from 'ai';
import type { OrchestrationPlan } from '../core/compile.js';
import { noSuchTool, notOffered } from '../core/denials.js';
import type { OrchestrationEvent, ToolDenial } from '../core/events.js';
import type { ChatMessage } from '../core/messages.js';
import {
  decideToolCall,
  type ToolDecision,
  type TransitionContext,
  type TransitionInput,
  type WaitEnd,
} from '../core/transition.js';
import type { OrchestrationManager } from '../orchestration/orchestration-manager.js';
import { messageOf } from '../orchestration/orchestration-manager.js';
import { type CallInput, callIdKey, endNow, releaseEvents, requestNow, Turn } from '../orchestration/turn.js';
import { deniedCalls } from './approval-history.js';
import { inputDigest } from './input-digest.js';
import type { OrchestrateOptions, RuntimeContext, SequenceIncomplete, StepInfo } from './orchestrate-types.js';
import { OrchestrationWiringError, SPREAD_LAST, type WiringProblem } from './orchestration-errors.js';
import { StepProjection } from './step-projection.js';

/** A reservation the approval hook started for `execute` to take, and its decision once known. */
export interface EarlyReservation {
  readonly request: ToolDecision | Promise<ToolDecision>;
  decision?: ToolDecision;
}

/** A call request that says nothing of its input (no rules, no durable engine). */
const NO_CALL_INPUT: CallInput = Object.freeze({});

/**
 * Longest name of a tool the agent does not have that events keep whole. Providers limit tool
 * names to 64 or 128 characters, but a self-hosted model can emit any name, and the session's
 * event log keeps each of its latest events.
 */
const MAX_UNKNOWN_TOOL_NAME_LENGTH = 128;

/**
 * A tool name the agent does not have, as the refusal's event and reason keep it: whole up to
 * {@link MAX_UNKNOWN_TOOL_NAME_LENGTH} characters, else its beginning, an ellipsis and its
 * length, which still tell a person what the model asked for.
 */
export function keptToolName(name: string): string {
  if (name.length <= MAX_UNKNOWN_TOOL_NAME_LENGTH) return name;
  let end = MAX_UNKNOWN_TOOL_NAME_LENGTH - 32;
  // Not between the halves of a surrogate pair: a lone half is no text.
  const code = name.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end--;
  return `${name.slice(0, end)}… (${name.length} characters)`;
}

/** The shared state of one orchestrated turn (see the module comment). */
export class TurnHooks<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext> {
  readonly options: OrchestrateOptions<TOOLS, RUNTIME_CONTEXT>;
  readonly manager: OrchestrationManager;
  readonly toolNames: readonly string[];
  readonly turn: Turn;
  readonly plan: OrchestrationPlan;
  readonly report: (error: unknown) => void;
  /** Failures that make `settled()` reject (the first one). */
  readonly failures: unknown[] = [];
  /** The conversation, for message conditions (the options', else the AI SDK call's). */
  conversation: readonly ChatMessage[] | undefined;
  /** Set when the call runs tools that bypass the guard: everything is refused from then on. */
  unguarded: OrchestrationWiringError | undefined;
  /** What the latest model step offered (after the app's narrowing). */
  offered: readonly string[] = [];
  last: StepInfo | undefined;
  /** Model steps prepared, and the step numbers whose results were recorded. */
  prepared = 0;
  readonly recordedSteps = new Set<number>();
  onStepEndRan = false;
  /** Proven when a step ended without the orchestration's onStepEnd (its result came another way). */
  onStepEndMissing = false;
  onEndRan = false;
  /** What the call itself set (read in onStart), used when the options do not say. */
  callActiveTools: readonly string[] | undefined;
  callToolChoice: ToolChoice<ToolSet> | undefined;
  /** Instructions the app's prepareStep returned last: they carry forward, as in the AI SDK. */
  carriedInstructions: Instructions | undefined;
  /** The session as this step's approvals see it. */
  readonly projection: StepProjection;
  /** Call ids the approval hook has seen: a fresh call that reaches execute without it is a wiring gap. */
  readonly approvalSeen = new Set<string>();
  /** True when a call of the latest step waits for a person's approval (the turn stops there). */
  awaitingApproval = false;
  /** Calls of the latest model step the approval hook let through (see `reserveEarly`). */
  approvedInStep = 0;
  /**
   * Reservations the approval hook started, by call id, with their decision once it came. The
   * first call a model step runs is reserved as soon as it is approved, so the write travels
   * while the AI SDK gets to `execute` (about 60 µs of its own work); `execute` takes it instead
   * of writing. One `execute` never takes (the call was aborted before it ran) is released with
   * the turn's end. `execute` reserves every call under a durable engine (`turnId`), whose
   * replays get back the decisions a dead run wrote, so which ones were written before it died
   * must not move; and on a store that updates without I/O, where there is no wait to hide.
   */
  readonly reserving = new Map<string, EarlyReservation>();
  readonly reservesEarly: boolean;
  /** The guarded tools, by identity: a tool the call runs that is not one of them bypasses Baton. */
  readonly guardedTools = new WeakSet<object>();
  incomplete: SequenceIncomplete | undefined;
  #ending: Promise<void> | undefined;
  /**
   * The step's calls are decided one after another, in the order the model emitted them, so each
   * is decided on the state the previous decision left; they run side by side (under a durable
   * engine one after another: see `guard-tools.ts`).
   */
  decisions: Promise<unknown> = Promise.resolve();
  /** Writes and calls in flight: the turn's end waits for them. */
  readonly pending = new Set<Promise<unknown>>();
  #denialsNoted = false;
  readonly #reported = new Set<string>();

  constructor(options: OrchestrateOptions<TOOLS, RUNTIME_CONTEXT>) {
    this.options = options;
    this.manager = options.manager;
    this.toolNames = Object.keys(options.tools);
    this.conversation = options.messages;
    this.report = options.onError ?? ((error: unknown) => console.error('[baton] orchestration failure:', error));
    this.turn = new Turn({
      manager: options.manager,
      config: options.config,
      toolAnnotations: options.toolAnnotations,
      sessionId: options.sessionId,
      agentTools: this.toolNames,
      messages: this.conversation,
      agentId: options.agentId,
      state: options.sessionState,
      fresh: options.newSession,
      // A call that lost its reservation is reported, not failed: the turn itself went well.
      onError: this.report,
      context: options.context,
      turnId: options.turnId,
    });
    this.plan = this.turn.plan;
    this.projection = new StepProjection(this.plan, () => this.context());
    this.reservesEarly = options.turnId === undefined && !options.manager.getStateManager().updatesSynchronously;
  }

  /** Reports a failure that makes `settled()` reject. */
  fail(error: unknown): void {
    this.failures.push(error);
    this.report(error);
  }

  /**
   * Reports a wiring mistake once. `lossless` ones (enforcement and records intact) only go to
   * onError; the others also make settled() reject.
   */
  wiringProblem(wiring: WiringProblem, message: string, lossless = false): OrchestrationWiringError {
    const error = new OrchestrationWiringError(wiring, message);
    const key = `${wiring}:${lossless}`;
    if (!this.#reported.has(key)) {
      this.#reported.add(key);
      if (lossless) this.report(error);
      else this.fail(error);
    }
    return error;
  }

  /** The wiring error of a call that runs tools orchestrate() did not guard. */
  unguardedError(names: readonly string[]): OrchestrationWiringError {
    return this.wiringProblem(
      'tools',
      `the call runs tools that orchestrate() did not guard (${names.map((n) => `"${n}"`).join(', ')}), so nothing would stop a tool that is not allowed; ${SPREAD_LAST}. Every call is refused until this is fixed`,
    );
  }

  /** Notes that the app replaced the orchestration's onStepEnd (reported once). */
  noteMissingOnStepEnd(): void {
    this.onStepEndMissing = true;
    this.wiringProblem(
      'onStepEnd',
      `the call's onStepEnd is not the orchestration's, so token usage and writes wait for the next step or the end of the turn (the last step's usage is lost if onEnd is replaced too); pass yours as orchestrate({ onStepEnd }) and ${SPREAD_LAST}`,
      true,
    );
  }

  /** Keeps `promise` among the work the turn's end waits for. */
  track<T>(promise: Promise<T>): Promise<T> {
    this.pending.add(promise);
    promise.then(
      () => this.pending.delete(promise),
      () => this.pending.delete(promise),
    );
    return promise;
  }

  /** Runs `task` once the step's earlier decisions are made (see {@link decisions}). */
  inOrder<T>(task: () => Promise<T>): Promise<T> {
    const run = this.decisions.then(task);
    this.decisions = run.catch(() => undefined);
    return this.track(run);
  }

  /** Waits for every tracked write (none is running, usually: then no promise and no tick). */
  idle(): Promise<unknown> {
    return Promise.allSettled([...this.pending]);
  }

  /** Writes what the turn holds; a failure is reported, not thrown. */
  flush(): Promise<void> {
    return this.track(this.turn.flush()).then(
      () => undefined,
      (error: unknown) => this.fail(error),
    );
  }

  /** Takes the AI SDK call's messages as the conversation, when the options gave none. */
  adoptMessages(messages: readonly ChatMessage[]): void {
    this.conversation ??= messages;
    // biome-ignore lint/correctness/useHookAtTopLevel: Turn.useMessages is a method, not a React hook
    this.turn.useMessages(messages);
  }

  /** The transition context of the turn's decisions made here. */
  context(): TransitionContext {
    return this.manager.transitionContext(messageOf(this.conversation), this.options.context);
  }

  /** Begins the turn when a call comes before any model step (an approved call resumed). */
  async begin(): Promise<void> {
    if (!this.turn.started) await this.turn.begin();
    this.projection.begin(this.turn.state);
  }

  /**
   * Once per turn, once it has begun: the calls whose approval a person denied in the request's
   * last message (`messages`, the AI SDK's initial messages) are handed to the turn, and go with
   * its first write. The AI SDK answers them itself and never runs them, so Baton would not hear
   * of them otherwise, and the same call approved in a later request of the turn would run.
   */
  noteDenials(messages: readonly ModelMessage[]): void {
    if (this.#denialsNoted) return;
    this.#denialsNoted = true;
    const denied = deniedCalls(messages);
    if (denied.length === 0) return;
    for (const id of denied) this.turn.approvalDenied(callIdKey(id));
    // This request's calls are decided knowing them: a denied id is not approved again here.
    this.projection.reset(this.turn.state);
  }

  /** True once {@link noteDenials} ran. */
  get denialsNoted(): boolean {
    return this.#denialsNoted;
  }

  /**
   * What a call's request says of its input: its arguments and their digest when rules read
   * them; the digest alone under a durable engine (`turnId`), where a replay gets the original
   * call's decision only for the same input; else nothing (a digest costs a serialization).
   */
  callInput(input: unknown, approved: boolean): CallInput {
    // Rules read the input: the template's (and the operator's, in the plan), or the operator's
    // limits across sessions, judged in their scopes.
    const read = this.plan.hasRules || (this.manager.policy?.scopes.length ?? 0) > 0;
    if (read) return { args: input, argsDigest: inputDigest(input), approved };
    return this.options.turnId !== undefined ? { argsDigest: inputDigest(input) } : NO_CALL_INPUT;
  }

  /** Decides a call on the step's projection, without writing (the approval hook's question). */
  decideLocally(
    tool: string,
    toolCallId: string,
    offeredNow: readonly string[] | undefined,
    input: unknown,
    approved: boolean,
    waited?: WaitEnd,
  ): ToolDecision {
    const base = this.projection.state(this.turn.state);
    if (base === undefined) throw new Error('orchestration: no state to decide on'); // begin() ran first
    const { turnId } = this.options;
    return decideToolCall(
      this.plan,
      base,
      {
        tool,
        toolCallId,
        agentTools: this.toolNames,
        offered: offeredNow,
        ...this.callInput(input, approved),
        ...(turnId !== undefined ? { turnId } : {}),
        ...(waited !== undefined ? { waited } : {}),
      },
      this.context(),
    );
  }

  /**
   * Reserves the step's first approved call now: the very request `execute` would make, with
   * the same step's offer, input and buffered writes. Later calls of the step are reserved by
   * `execute`, in the order the model emitted them.
   */
  reserveEarly(tool: string, toolCallId: string, input: unknown): void {
    let request: ToolDecision | Promise<ToolDecision>;
    try {
      // Its events wait for `execute`: they belong on the AI SDK's span of the tool call.
      request = requestNow(this.turn, tool, toolCallId, this.offered, this.callInput(input, false), true);
    } catch (error) {
      // `execute` meets the same failure as if it had made the request itself.
      request = Promise.reject(error);
    }
    const early: EarlyReservation = { request };
    this.reserving.set(toolCallId, early);
    if (request instanceof Promise) {
      // Settled before it leaves `pending`, so the turn's end knows whether to release it.
      request.then(
        (decision) => {
          early.decision = decision;
        },
        () => undefined, // `execute` reports it; a call that never runs has nothing to report
      );
      this.track(request).catch(() => undefined);
    } else early.decision = request;
  }

  /** Releases what `reserveEarly` reserved for a call `execute` never ran (an aborted call). */
  releaseUntaken(): void {
    for (const [toolCallId, early] of this.reserving) {
      releaseEvents(this.turn, toolCallId);
      if (early.decision?.allowed) this.turn.failed(toolCallId);
    }
    this.reserving.clear();
  }

  /**
   * Projects a call the approval hook let through (or sent to a person) as if it ran, for the
   * next call of the step. With its input, so that rules with conditions judge it as they will
   * when it runs (without, every `when` fails closed and nothing counts); `askedBy`: the rule
   * that asked a person now, whose approval the projection assumes given; `approved`: a call
   * resumed with an approval the session holds.
   */
  project(tool: string, toolCallId: string, input: unknown, approved: boolean, askedBy?: string): void {
    this.approvedInStep++;
    let calls: TransitionInput[];
    if (this.plan.hasRules) {
      // Only with rules: nothing else reads the input, and its digest costs a serialization.
      const argsDigest = inputDigest(input);
      const requested: TransitionInput = {
        type: 'tool-requested',
        tool,
        toolCallId,
        agentTools: this.toolNames,
        args: input,
        argsDigest,
        approved: approved || askedBy !== undefined,
      };
      const completed: TransitionInput = { type: 'tool-completed', toolCallId };
      calls =
        askedBy === undefined
          ? [requested, completed]
          : [{ type: 'approval-requested', tool, toolCallId, argsDigest, rule: askedBy }, requested, completed];
    } else {
      calls = [
        { type: 'tool-requested', tool, toolCallId, agentTools: this.toolNames },
        { type: 'tool-completed', toolCallId },
      ];
    }
    this.projection.project(calls, this.turn.state);
  }

  /** Reports a call the approval hook refused, in the step the projection is in. */
  rejected(tool: string, toolCallId: string, decision: Extract<ToolDecision, { allowed: false }>): void {
    this.turn.observe({
      type: 'tool-rejected',
      sessionId: this.options.sessionId,
      tool,
      toolCallId,
      step: this.projection.state(this.turn.state)?.activeStep,
      allowedTools: decision.allowedTools,
      reason: decision.reason,
    });
  }

  /** Records a finished model step once, whichever hook sees it first. */
  recordStep(step: StepResult<TOOLS, RUNTIME_CONTEXT>): void {
    if (this.recordedSteps.has(step.stepNumber)) return;
    this.recordedSteps.add(step.stepNumber);
    // Calls the SDK refused before any hook (not active, unknown) never reached the guard;
    // report them as rejections all the same.
    for (const call of step.toolCalls) {
      if (!call.invalid || !NoSuchToolError.isInstance(call.error)) continue;
      const toolCallId = callIdKey(call.toolCallId);
      if (this.turn.replayed(toolCallId)) continue; // reported by the run this one replays
      const known = this.toolNames.includes(call.toolName);
      // The model chose the name: one the agent does not have is kept cut short.
      const tool = known ? call.toolName : keptToolName(call.toolName);
      const reason: ToolDenial = known ? notOffered(tool, this.offered) : noSuchTool(tool);
      this.turn.observe({
        type: 'tool-rejected',
        sessionId: this.options.sessionId,
        tool,
        toolCallId,
        step: this.last?.activeStep,
        allowedTools: this.offered,
        reason,
      });
    }
    this.turn.usage(step.usage, step.stepNumber);
  }

  /** Ends the turn once: the buffered writes and `turn-ended` go in one store update. */
  end(): Promise<void> {
    if (this.#ending !== undefined) return this.#ending;
    const finish = (): void | Promise<void> => {
      this.releaseUntaken();
      const events = endNow(this.turn, { awaitingApproval: this.awaitingApproval });
      if (events instanceof Promise) return events.then((ended) => this.#noteEnd(ended));
      this.#noteEnd(events);
    };
    // After the writes under way; at once (on a synchronous store, without a promise hop) when
    // there are none, as at the end of most turns.
    const others = [...this.pending];
    let run: Promise<void>;
    if (others.length > 0) run = Promise.allSettled(others).then(finish);
    else {
      try {
        run = Promise.resolve(finish());
      } catch (error) {
        run = Promise.reject(error);
      }
    }
    this.#ending = this.track(run).catch((error: unknown) => this.fail(error));
    return this.#ending;
  }

  /** True once the turn's end started. */
  get ending(): boolean {
    return this.#ending !== undefined;
  }

  #noteEnd(events: readonly OrchestrationEvent[]): void {
    this.incomplete = events.find((event): event is SequenceIncomplete => event.type === 'sequence-incomplete');
  }
}
