/**
 * `orchestrate()`: orchestration for one turn of an AI SDK 7 tool loop. It returns what to
 * spread into `streamText`, `generateText` or `ToolLoopAgent`, enforcing SPEC section 7 through
 * the SDK's own hooks:
 *
 * - `prepareStep` offers exactly the allowed tools before every model step (and forces the next
 *   tool of a `requireSequence` step), and tells the model where it stands;
 * - `toolApproval` decides every call before it runs: a call orchestration refuses is denied as
 *   a result with the reason the model reads (never shown to a person as an approval prompt),
 *   and only calls it allows go on to the app's own approval (`needsApproval`, `toolApproval`);
 * - every tool's `execute` decides again and reserves the call in one atomic store update (the
 *   authority, and the fail-closed backstop when the hooks above were not wired);
 * - `onStepEnd`/`onEnd` add token usage and write what the turn holds; `onStart` checks that the
 *   call really runs the guarded tools;
 * - once a token budget is spent, `prepareStep` gives the step a stand-in model that says so
 *   (`budgetSpentModel`): no further model call is made for the session.
 *
 * The app's own `prepareStep`, `toolApproval`, `onStepEnd`, `onEnd`, `activeTools`, `toolChoice`
 * and `instructions` go into `orchestrate()`'s options, and both apply, Baton's restrictions
 * winning. What the AI SDK gets wrong silently when the spread is not last (unguarded tools, a
 * replaced `prepareStep`, lost token usage) is detected and reported as an
 * {@link OrchestrationWiringError}.
 */
import type {
  ActiveTools,
  FlexibleSchema,
  GenerateTextEndEvent,
  Instructions,
  ModelMessage,
  PrepareStepFunction,
  PrepareStepResult,
  Schema,
  StepResult,
  ToolApprovalConfiguration,
  ToolApprovalStatus,
  ToolChoice,
  ToolExecutionOptions,
  ToolSet,
  TypedToolCall,
} from 'ai';
import { asSchema, NoSuchToolError } from 'ai';
import type { OrchestrationSource } from '../core/compile.js';
import type { StepView } from '../core/engine.js';
import { BatonError, InvalidArgumentError } from '../core/errors.js';
import type { OrchestrationEvent, ToolDenial } from '../core/events.js';
import type { ChatMessage } from '../core/messages.js';
import type { AIOrchestrationState, OrchestrationState } from '../core/state.js';
import { toAIState } from '../core/state.js';
import type { ToolAnnotations } from '../core/tool-annotations.js';
import {
  type BudgetStatus,
  decideToolCall,
  type StepDecision,
  type ToolDecision,
  type TransitionInput,
  transitionAll,
  type WaitEnd,
} from '../core/transition.js';
import type { OrchestrationManager } from '../orchestration/orchestration-manager.js';
import { messageOf } from '../orchestration/orchestration-manager.js';
import { rejectionMessage } from '../orchestration/rejection-message.js';
import {
  type CallInput,
  callIdKey,
  endNow,
  readAhead,
  releaseEvents,
  requestNow,
  stepStartedNow,
  Turn,
} from '../orchestration/turn.js';
import { budgetSpentModel } from './budget-spent-model.js';
import { assertOrchestrateOptions } from './check-orchestrate-options.js';
import { inputDigest } from './input-digest.js';

/** The AI SDK's runtime context type (`Context` of `@ai-sdk/provider-utils`). */
export type RuntimeContext = Record<string, unknown>;

/** What the orchestration looks like before one model step. */
export interface StepInfo {
  /** The AI SDK's step number (0 for the first model call of the turn). */
  readonly stepNumber: number;
  readonly activeStep: string | undefined;
  readonly stepDescription: string | undefined;
  readonly sequence: StepView['sequence'];
  /** The tools offered to the model for this step. */
  readonly allowedTools: readonly string[];
  /** `required` when the model must call one of `allowedTools` (a `requireSequence` step). */
  readonly toolChoice: 'auto' | 'none' | 'required';
  readonly state: AIOrchestrationState;
  /** Shadow mode: nothing is enforced; `wouldOffer` is what enforcement would have offered. */
  readonly shadow: boolean;
  readonly wouldOffer?: readonly string[];
  /** A spent token budget: no tool is offered, and the model is told to answer. */
  readonly budget?: BudgetStatus;
}

/** The `sequence-incomplete` event: the turn ended with the active step's sequence unfinished. */
export type SequenceIncomplete = Extract<OrchestrationEvent, { type: 'sequence-incomplete' }>;

/** The arguments the AI SDK passes to a generic `toolApproval` function (`GenericToolApprovalFunction`). */
export interface ToolApprovalArguments<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext> {
  toolCall: TypedToolCall<TOOLS>;
  tools: TOOLS | undefined;
  toolsContext: Parameters<PrepareStepFunction<TOOLS, RUNTIME_CONTEXT>>[0]['toolsContext'];
  runtimeContext: RUNTIME_CONTEXT;
  messages: ModelMessage[];
}

/** What the AI SDK's start event (`onStart`) carries that orchestration reads. */
export interface CallStart {
  readonly callId: string;
  readonly tools: ToolSet | undefined;
  readonly activeTools?: readonly string[] | undefined;
  readonly toolChoice?: ToolChoice<ToolSet> | undefined;
}

/** Options of {@link orchestrate}. */
export interface OrchestrateOptions<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext = RuntimeContext> {
  manager: OrchestrationManager;
  /** The template, or its `orchestration` block (the same object every turn, so its plan is reused). */
  config: OrchestrationSource;
  sessionId: string;
  /** Every tool of the agent; the ones not allowed are hidden and refused. */
  tools: TOOLS;
  /**
   * What the tools declare (MCP annotations), by tool name, so that annotation selectors
   * (`@readOnly`, `!@destructive`) in the template judge them: `mcpTools()` of
   * `baton-agents/mcp` returns it beside the tools. A tool it does not know counts as declaring
   * nothing (the MCP defaults). Pass the same map every turn, so the plan is reused.
   */
  toolAnnotations?: ReadonlyMap<string, ToolAnnotations>;
  /**
   * The conversation, for message conditions. Default: the messages of the AI SDK call (its
   * `initialMessages`).
   */
  messages?: readonly ChatMessage[] | readonly ModelMessage[];
  /**
   * The agent the turn runs for: a new session becomes its own, and a session of another agent
   * refuses the turn (`SessionRefusedError`, code `session-of-another-agent`).
   */
  agentId?: string;
  /**
   * The session as you already stored it with this turn's user message (`Turn.begin()`, as a
   * server does to answer a refused session with an HTTP status before it streams): the first
   * model step is decided on it, without another store round trip.
   */
  sessionState?: OrchestrationState;
  /**
   * You made up `sessionId` for this turn (a new chat): the turn starts from an empty session
   * instead of reading it from the store, one round trip fewer on Redis or PostgreSQL (a research
   * turn of 3 tools: 4 instead of 5). Only a hint: if the store does hold the session, a call runs
   * only if the stored session allows it (each call is decided on the store's state), but the
   * first model step is offered the tools of a new session. No effect with `sessionState`.
   */
  newSession?: boolean;
  /**
   * What rules on calls may read as `context` in their conditions (e.g. `{ user: { role: 'admin' } }`):
   * facts of the caller the model cannot change. Read once per object: pass a new object when
   * the facts change, rather than changing this one.
   */
  context?: Readonly<Record<string, unknown>>;
  /**
   * For a turn run by a durable-execution engine (DBOS, Temporal, Restate, the Workflow SDK): an
   * id of the turn that stays the same when the engine replays it (e.g. `DBOS.workflowID`). Its
   * decisions are recorded in the session, and a replay gets every one back as the original run
   * saw it: the tools offered at each model step, each call allowed or refused. A call the
   * original run allowed and completed (or that failed) is passed to its tool again, for the
   * engine to answer from its record, and is not recorded twice: make each tool's `execute` a
   * step of the engine (e.g. `DBOS.runStep`) so its body never runs twice. Without `turnId`, a
   * repeated call id is refused.
   */
  turnId?: string;
  /** Called before every model step with the step's orchestration (for UIs and logs). */
  onStep?: (info: StepInfo) => void | PromiseLike<void>;
  /**
   * Receives failures that the AI SDK would otherwise swallow (a state write, an `onStep`
   * callback that threw, a wiring mistake). Default: `console.error`. They are also kept, and
   * {@link Orchestration.settled} rejects with the first one.
   */
  onError?: (error: unknown) => void;
  /** Your instructions: the orchestration's block is appended (default: the call's `instructions`). */
  instructions?: Instructions;
  /** Your narrowing of the tools: offered are the tools both you and the orchestration allow. */
  activeTools?: ActiveTools<TOOLS>;
  /**
   * Your tool choice, kept where the orchestration allows it: a forced tool that is not allowed
   * now falls back to `auto`, and a required sequence forces its next tool whatever this says.
   */
  toolChoice?: ToolChoice<TOOLS>;
  /**
   * Your `prepareStep`, run after the orchestration's own each step. Its result applies, except
   * that `activeTools` can only narrow what is allowed, `toolChoice` is combined as above and
   * the orchestration's block is appended to its `instructions`.
   */
  prepareStep?: PrepareStepFunction<TOOLS, RUNTIME_CONTEXT>;
  /**
   * Your approval policy (a generic function or per-tool statuses), asked only for calls the
   * orchestration allows. Tools' own `needsApproval` is honoured as the AI SDK would.
   */
  toolApproval?: ToolApprovalConfiguration<TOOLS, RUNTIME_CONTEXT>;
  /** Your `onStepEnd`, called after the orchestration has recorded the step. */
  onStepEnd?: (step: StepResult<TOOLS, RUNTIME_CONTEXT>) => void | PromiseLike<void>;
  /** Your `onEnd`, called after the turn's writes are stored. */
  onEnd?: (event: GenerateTextEndEvent<TOOLS, RUNTIME_CONTEXT>) => void | PromiseLike<void>;
}

/** What {@link orchestrate} returns: spread it into the AI SDK call, last. */
export interface Orchestration<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext = RuntimeContext> {
  /** The agent's tools, each guarded by the orchestration. */
  readonly tools: TOOLS;
  readonly prepareStep: PrepareStepFunction<TOOLS, RUNTIME_CONTEXT>;
  /** Decides every call before it runs; see the module comment. */
  readonly toolApproval: (options: ToolApprovalArguments<TOOLS, RUNTIME_CONTEXT>) => Promise<ToolApprovalStatus>;
  /** Checks that the call runs the guarded tools, and reads its `activeTools` and `toolChoice`. */
  readonly onStart: (event: CallStart) => Promise<void>;
  readonly onStepEnd: (step: StepResult<TOOLS, RUNTIME_CONTEXT>) => Promise<void>;
  /**
   * Writes what the turn still holds (the last tool's completion, the last step's usage) and
   * ends the turn. Spread it as the AI SDK's `onEnd`, or call {@link settled} after the stream.
   */
  readonly onEnd: (event?: GenerateTextEndEvent<TOOLS, RUNTIME_CONTEXT>) => Promise<void>;
  /** The orchestration of the latest model step, once one has started. */
  lastStep(): StepInfo | undefined;
  /** Once the turn has ended: its `sequence-incomplete` event, if the sequence was left unfinished. */
  sequenceIncomplete(): SequenceIncomplete | undefined;
  /**
   * The session as this turn last stored it (after {@link settled}: its final state), so callers
   * need no store read for it; undefined before the first model step.
   */
  sessionState(): OrchestrationState | undefined;
  /**
   * Ends the turn if the AI SDK did not (an error, an abort) and resolves when every state write
   * has finished; rejects with the first failure (a state write, a wiring mistake).
   */
  settled(): Promise<void>;
}

/** Thrown inside a guarded tool's `execute` when the call is refused; the model sees its message. */
export class ToolRejectedError extends BatonError {
  /** The tool that was refused. */
  readonly tool: string;
  /** Why it was refused. */
  readonly reason: ToolDenial;
  /** The tools the model may call instead. */
  readonly allowedTools: readonly string[];

  constructor(tool: string, reason: ToolDenial, allowedTools: readonly string[]) {
    super('tool-rejected', rejectionMessage(tool, reason, allowedTools));
    this.name = 'ToolRejectedError';
    this.tool = tool;
    this.reason = reason;
    this.allowedTools = allowedTools;
  }

  /** True for a {@link ToolRejectedError} from any copy of the package. */
  static override isInstance(error: unknown): error is ToolRejectedError {
    return BatonError.isInstance(error) && error.code === 'tool-rejected';
  }
}

/** What was wired wrong: see {@link OrchestrationWiringError}. */
export type WiringProblem = 'tools' | 'prepareStep' | 'toolApproval' | 'onStepEnd';

/**
 * The AI SDK call was not given what `orchestrate()` returned: tools that are not the guarded
 * ones, or a hook of the orchestration replaced by another (an option written after the
 * spread). The message says how to fix it.
 */
export class OrchestrationWiringError extends InvalidArgumentError {
  /** Which part of the orchestration is missing from the call. */
  readonly wiring: WiringProblem;

  constructor(wiring: WiringProblem, message: string) {
    super(wiring, message);
    this.name = 'OrchestrationWiringError';
    this.wiring = wiring;
  }

  /** True for an {@link OrchestrationWiringError} from any copy of the package. */
  static override isInstance(error: unknown): error is OrchestrationWiringError {
    return InvalidArgumentError.isInstance(error) && typeof (error as { wiring?: unknown }).wiring === 'string';
  }
}

const SPREAD_LAST =
  'pass your own tools, prepareStep, toolApproval, onStepEnd, onEnd, activeTools and toolChoice to orchestrate() and spread its result last: streamText({ model, messages, ...orchestration })';

/** Orchestrates one turn of an AI SDK tool loop (see the module comment). */
export function orchestrate<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext = RuntimeContext>(
  options: OrchestrateOptions<TOOLS, RUNTIME_CONTEXT>,
): Orchestration<TOOLS, RUNTIME_CONTEXT> {
  assertOrchestrateOptions(options);
  const { manager, sessionId } = options;
  const toolNames = Object.keys(options.tools);
  let conversation: readonly ChatMessage[] | undefined = options.messages;
  const report = options.onError ?? ((error: unknown) => console.error('[baton] orchestration failure:', error));
  const turn = new Turn({
    manager,
    config: options.config,
    toolAnnotations: options.toolAnnotations,
    sessionId,
    agentTools: toolNames,
    messages: conversation,
    agentId: options.agentId,
    state: options.sessionState,
    fresh: options.newSession,
    // A call that lost its reservation is reported, not failed: the turn itself went well.
    onError: report,
    context: options.context,
    turnId: options.turnId,
  });
  // A session this process does not know is read now, while the AI SDK sets up its loop.
  readAhead(turn);
  const plan = turn.plan;
  const failures: unknown[] = [];
  const fail = (error: unknown) => {
    failures.push(error);
    report(error);
  };
  const reported = new Set<string>();
  /**
   * Reports a wiring mistake once. `lossless` ones (enforcement and records intact) only go to
   * onError; the others also make settled() reject.
   */
  const wiringProblem = (wiring: WiringProblem, message: string, lossless = false): OrchestrationWiringError => {
    const error = new OrchestrationWiringError(wiring, message);
    const key = `${wiring}:${lossless}`;
    if (!reported.has(key)) {
      reported.add(key);
      if (lossless) report(error);
      else fail(error);
    }
    return error;
  };
  /** Set when the call runs tools that bypass the guard: everything is refused from then on. */
  let unguarded: OrchestrationWiringError | undefined;

  let offered: readonly string[] = [];
  let last: StepInfo | undefined;
  /** Model steps prepared, and the step numbers whose results were recorded. */
  let prepared = 0;
  const recordedSteps = new Set<number>();
  let onStepEndRan = false;
  /** Proven when a step ended without the orchestration's onStepEnd (its result came another way). */
  let onStepEndMissing = false;
  let onEndRan = false;
  /** What the call itself set (read in onStart), used when the options do not say. */
  let callActiveTools: readonly string[] | undefined;
  let callToolChoice: ToolChoice<ToolSet> | undefined;
  /** Instructions the app's prepareStep returned last: they carry forward, as in the AI SDK. */
  let carriedInstructions: Instructions | undefined;
  /**
   * The session as this step's approvals see it: the state the step was decided on, plus the
   * calls approved so far in the step, as if they completed (they run after every approval).
   */
  let projected: OrchestrationState | undefined;
  /**
   * Calls approved in the step and not yet applied to `projected`: applied only when a later
   * approval of the same step needs them (most steps make one call, and never pay for it).
   */
  let unprojected: TransitionInput[] = [];
  /** Every call projected in this step, for {@link rebase}. */
  let stepCalls: TransitionInput[] = [];
  /**
   * Projects the step's calls again on the turn's latest state: after an approval waited for a
   * running call (another turn's), whose end the turn has read since.
   */
  const rebase = () => {
    const base = turn.state;
    projected = base === undefined ? undefined : transitionAll(plan, base, stepCalls, context()).state;
    unprojected = [];
  };
  /** The state this step's next approval is decided on (see `projected`). */
  const projectedState = (): OrchestrationState | undefined => {
    const base = projected ?? turn.state;
    if (unprojected.length === 0 || base === undefined) return base;
    projected = transitionAll(plan, base, unprojected, context()).state;
    unprojected = [];
    return projected;
  };
  /** Call ids the approval hook has seen: a fresh call that reaches execute without it is a wiring gap. */
  const approvalSeen = new Set<string>();
  /** True when a call of the latest step waits for a person's approval (the turn stops there). */
  let awaitingApproval = false;
  /** Calls of the latest model step the approval hook let through (see `reserveEarly`). */
  let approvedInStep = 0;
  /**
   * Reservations the approval hook started, by call id, with their decision once it came. The
   * first call a model step runs is reserved as soon as it is approved, so the write travels
   * while the AI SDK gets to `execute` (about 60 µs of its own work); `execute` takes it instead
   * of writing. One `execute` never takes (the call was aborted before it ran) is released with
   * the turn's end. `execute` reserves every call under a durable engine (`turnId`), whose
   * replays get back the decisions a dead run wrote, so which ones were written before it died
   * must not move; and on a store that updates without I/O, where there is no wait to hide.
   */
  const reserving = new Map<string, EarlyReservation>();
  const reservesEarly = options.turnId === undefined && !manager.getStateManager().updatesSynchronously;
  let incomplete: SequenceIncomplete | undefined;
  let ending: Promise<void> | undefined;

  // Tool calls of one step are decided one after another, in the order the model emitted them,
  // so each is decided on the state the previous decision left; they run side by side (under a
  // durable engine, one after another: see `execute`).
  let decisions: Promise<unknown> = Promise.resolve();
  const pending = new Set<Promise<unknown>>();
  const track = <T>(promise: Promise<T>): Promise<T> => {
    pending.add(promise);
    promise.then(
      () => pending.delete(promise),
      () => pending.delete(promise),
    );
    return promise;
  };
  const inOrder = <T>(task: () => Promise<T>): Promise<T> => {
    const run = decisions.then(task);
    decisions = run.catch(() => undefined);
    return track(run);
  };
  /** Waits for every tracked write (none is running, usually: then no promise and no tick). */
  const idle = () => Promise.allSettled([...pending]);
  const flush = () =>
    track(turn.flush()).then(
      () => undefined,
      (error: unknown) => fail(error),
    );
  const adoptMessages = (messages: readonly ChatMessage[]) => {
    conversation ??= messages;
    // biome-ignore lint/correctness/useHookAtTopLevel: Turn.useMessages is a method, not a React hook
    turn.useMessages(messages);
  };
  const context = () => manager.transitionContext(messageOf(conversation), options.context);
  /** Begins the turn when a call comes before any model step (an approved call resumed). */
  const begin = async () => {
    if (!turn.started) await turn.begin();
    projected ??= turn.state;
  };
  let denialsNoted = false;
  /**
   * Once per turn, once it has begun: the calls whose approval a person denied in the request's
   * last message (`messages`, the AI SDK's initial messages) are handed to the turn, and go with
   * its first write. The AI SDK answers them itself and never runs them, so Baton would not hear
   * of them otherwise, and the same call approved in a later request of the turn would run.
   */
  const noteDenials = (messages: readonly ModelMessage[]) => {
    if (denialsNoted) return;
    denialsNoted = true;
    const denied = deniedCalls(messages);
    if (denied.length === 0) return;
    for (const id of denied) turn.approvalDenied(callIdKey(id));
    // This request's calls are decided knowing them: a denied id is not approved again here.
    projected = turn.state;
    unprojected = [];
    stepCalls = [];
  };
  /**
   * What a call's request says of its input: its arguments and their digest when rules read
   * them; the digest alone under a durable engine (`turnId`), where a replay gets the original
   * call's decision only for the same input; else nothing (a digest costs a serialization).
   */
  const callInput = (input: unknown, approved: boolean): CallInput =>
    plan.hasRules
      ? { args: input, argsDigest: inputDigest(input), approved }
      : options.turnId !== undefined
        ? { argsDigest: inputDigest(input) }
        : NO_CALL_INPUT;
  const decideLocally = (
    tool: string,
    toolCallId: string,
    offeredNow: readonly string[] | undefined,
    input: unknown,
    approved: boolean,
    waited?: WaitEnd,
  ): ToolDecision => {
    const base = projectedState();
    if (base === undefined) throw new Error('orchestration: no state to decide on'); // begin() ran first
    return decideToolCall(
      plan,
      base,
      {
        tool,
        toolCallId,
        agentTools: toolNames,
        offered: offeredNow,
        ...callInput(input, approved),
        ...(options.turnId !== undefined ? { turnId: options.turnId } : {}),
        ...(waited !== undefined ? { waited } : {}),
      },
      context(),
    );
  };
  /**
   * Reserves the step's first approved call now: the very request `execute` would make, with
   * the same step's offer, input and buffered writes. Later calls of the step are reserved by
   * `execute`, one after another, each on the state the previous one left.
   */
  const reserveEarly = (tool: string, toolCallId: string, input: unknown) => {
    let request: ToolDecision | Promise<ToolDecision>;
    try {
      request = requestNow(
        turn,
        tool,
        toolCallId,
        offered,
        callInput(input, false),
        // Its events wait for `execute`: they belong on the AI SDK's span of the tool call.
        true,
      );
    } catch (error) {
      // `execute` meets the same failure as if it had made the request itself.
      request = Promise.reject(error);
    }
    const early: EarlyReservation = { request };
    reserving.set(toolCallId, early);
    if (request instanceof Promise) {
      // Settled before it leaves `pending`, so the turn's end knows whether to release it.
      request.then(
        (decision) => {
          early.decision = decision;
        },
        () => undefined, // `execute` reports it; a call that never runs has nothing to report
      );
      track(request).catch(() => undefined);
    } else early.decision = request;
  };
  /** Releases what `reserveEarly` reserved for a call `execute` never ran (an aborted call). */
  const releaseUntaken = () => {
    for (const [toolCallId, early] of reserving) {
      releaseEvents(turn, toolCallId);
      if (early.decision?.allowed) turn.failed(toolCallId);
    }
    reserving.clear();
  };
  /**
   * Projects a call the approval hook let through (or sent to a person) as if it ran, for the
   * next call of the step. With its input, so that rules with conditions judge it as they will
   * when it runs (without, every `when` fails closed and nothing counts); `askedBy`: the rule
   * that asked a person now, whose approval the projection assumes given; `approved`: a call
   * resumed with an approval the session holds.
   */
  const project = (tool: string, toolCallId: string, input: unknown, approved: boolean, askedBy?: string) => {
    approvedInStep++;
    let calls: TransitionInput[];
    if (plan.hasRules) {
      // Only with rules: nothing else reads the input, and its digest costs a serialization.
      const argsDigest = inputDigest(input);
      const requested: TransitionInput = {
        type: 'tool-requested',
        tool,
        toolCallId,
        agentTools: toolNames,
        args: input,
        argsDigest,
        approved: approved || askedBy !== undefined,
      };
      calls =
        askedBy === undefined
          ? [requested, { type: 'tool-completed', toolCallId }]
          : [
              { type: 'approval-requested', tool, toolCallId, argsDigest, rule: askedBy },
              requested,
              { type: 'tool-completed', toolCallId },
            ];
    } else {
      calls = [
        { type: 'tool-requested', tool, toolCallId, agentTools: toolNames },
        { type: 'tool-completed', toolCallId },
      ];
    }
    stepCalls.push(...calls);
    // Deferred only on a fixed base (a prepared step's state): `turn.state` moves as calls run.
    if (projected !== undefined) unprojected.push(...calls);
    else if (turn.state !== undefined) projected = transitionAll(plan, turn.state, calls, context()).state;
  };
  const rejected = (tool: string, toolCallId: string, decision: Extract<ToolDecision, { allowed: false }>) => {
    turn.observe({
      type: 'tool-rejected',
      sessionId,
      tool,
      toolCallId,
      step: projectedState()?.activeStep,
      allowedTools: decision.allowedTools,
      reason: decision.reason,
    });
  };
  /** Records a finished model step once, whichever hook sees it first. */
  const recordStep = (step: StepResult<TOOLS, RUNTIME_CONTEXT>) => {
    if (recordedSteps.has(step.stepNumber)) return;
    recordedSteps.add(step.stepNumber);
    // Calls the SDK refused before any hook (not active, unknown) never reached the guard;
    // report them as rejections all the same.
    for (const call of step.toolCalls) {
      if (!call.invalid || !NoSuchToolError.isInstance(call.error)) continue;
      const toolCallId = callIdKey(call.toolCallId);
      if (turn.replayed(toolCallId)) continue; // reported by the run this one replays
      const known = toolNames.includes(call.toolName);
      // The model chose the name: one the agent does not have is kept cut short.
      const tool = known ? call.toolName : keptToolName(call.toolName);
      const reason: ToolDenial = known
        ? { code: 'not-offered', offered, message: `"${tool}" was not offered for this model step` }
        : { code: 'no-such-tool', message: `"${tool}" is not one of the agent's tools` };
      turn.observe({
        type: 'tool-rejected',
        sessionId,
        tool,
        toolCallId,
        step: last?.activeStep,
        allowedTools: offered,
        reason,
      });
    }
    turn.usage(step.usage, step.stepNumber);
  };
  /** Ends the turn once: the buffered writes and `turn-ended` go in one store update. */
  const end = (): Promise<void> => {
    if (ending !== undefined) return ending;
    const finish = (): void | Promise<void> => {
      releaseUntaken();
      const events = endNow(turn, { awaitingApproval });
      if (events instanceof Promise) return events.then(noteEnd);
      noteEnd(events);
    };
    // After the writes under way; at once (on a synchronous store, without a promise hop) when
    // there are none, as at the end of most turns.
    const others = [...pending];
    let run: Promise<void>;
    if (others.length > 0) run = Promise.allSettled(others).then(finish);
    else {
      try {
        run = Promise.resolve(finish());
      } catch (error) {
        run = Promise.reject(error);
      }
    }
    ending = track(run).catch(fail);
    return ending;
  };
  const noteEnd = (events: readonly OrchestrationEvent[]) => {
    incomplete = events.find((event): event is SequenceIncomplete => event.type === 'sequence-incomplete');
  };

  const guardedTools = new WeakSet<object>();
  const guarded: ToolSet = {};
  for (const [name, original] of Object.entries(options.tools)) {
    const execute = original.execute;
    if (typeof execute !== 'function') {
      guarded[name] = original; // a client-side tool: the loop stops at it, nothing runs here
      continue;
    }
    const tool = {
      ...original,
      // A schema given as a function (the AI SDK's lazySchema) is left alone: it is the app's to memoize.
      ...(typeof original.inputSchema === 'object' && original.inputSchema !== null
        ? { inputSchema: convertedSchema(original.inputSchema) }
        : {}),
      execute: (input: unknown, execution: ToolExecutionOptions<unknown>) => {
        // Decided one after another, in the order the model emitted the calls (each on the state
        // the previous decision left, a call that depends on a running sibling waiting for it);
        // run side by side, as the AI SDK runs them.
        const decided = inOrder(async (): Promise<ToolDecision> => {
          // The session keeps (and the turn is told) the id's key: the model chose the id.
          const toolCallId = callIdKey(execution.toolCallId);
          if (unguarded) throw unguarded;
          const resumed = isResumedCall(execution.messages, execution.toolCallId, prepared);
          if (!resumed && !approvalSeen.has(toolCallId)) {
            // Enforcement holds (decided below), but approval prompts may have been raised for
            // calls orchestration refuses.
            wiringProblem(
              'toolApproval',
              `the call's toolApproval is not the orchestration's, so a person may be asked to approve calls it would refuse; pass yours as orchestrate({ toolApproval }) and ${SPREAD_LAST}`,
              true,
            );
          }
          let decision: ToolDecision;
          try {
            if (!turn.started) {
              adoptMessages(execution.messages);
              await turn.begin();
            }
            // A resumed call the approval hook did not see (a replaced toolApproval).
            if (resumed) noteDenials(execution.messages);
            // Decided and reserved in one atomic update: a concurrent turn sees the reservation.
            // An approved call resumed from the history was offered by an earlier request: what
            // counts is whether it is allowed now.
            // On a synchronous store, without a promise. The step's first call was reserved
            // when it was approved (`reserveEarly`).
            const early = reserving.get(toolCallId);
            reserving.delete(toolCallId);
            const requested =
              early?.request ??
              requestNow(
                turn,
                name,
                toolCallId,
                resumed ? undefined : offered,
                // A resumed call ran through the AI SDK's approval: an approve rule checks that
                // Baton asked for it, for this input, in this state.
                callInput(input, resumed),
              );
            try {
              decision = requested instanceof Promise ? await requested : requested;
            } finally {
              // An early reservation's events, here in the context that runs the call.
              if (early !== undefined) releaseEvents(turn, toolCallId);
            }
          } catch (error) {
            fail(error);
            throw error; // not run: the model is told it failed, which is true
          }
          return decision;
        });
        const ran = decided.then(async (decision) => {
          const toolCallId = decision.toolCallId;
          if (!decision.allowed) throw new ToolRejectedError(name, decision.reason, decision.allowedTools);
          let output: unknown;
          try {
            output = await execute.call(original, input as never, execution as never);
          } catch (error) {
            // A tool that throws is not recorded: its reservation is released. One that threw
            // because its call was aborted (a client that left, a timeout) may have done its work
            // before it stopped: limit rules count it, or aborting each call once it started
            // would get a client past them.
            if (execution.abortSignal?.aborted === true) turn.abandoned(toolCallId);
            else turn.failed(toolCallId);
            throw error;
          }
          // Buffered: written with the next update. A store failure then is reported
          // (onError, settled()) and never turns this result into an error for the model.
          turn.completed(toolCallId);
          return output;
        });
        // Under a durable engine the next call is decided once this one ran: a crash leaves one
        // call of the step in flight at most, and which calls the dead run decided cannot move.
        if (options.turnId !== undefined) decisions = ran.catch(() => undefined);
        return track(ran);
      },
    };
    guardedTools.add(tool);
    guarded[name] = tool;
  }

  const onStart = async (event: CallStart) => {
    callActiveTools = event.activeTools;
    callToolChoice = event.toolChoice;
    const bypassing = Object.entries(event.tools ?? {})
      .filter(([, tool]) => typeof tool.execute === 'function' && !guardedTools.has(tool))
      .map(([name]) => name);
    if (bypassing.length > 0) unguarded = unguardedError(bypassing);
  };
  const unguardedError = (names: readonly string[]) =>
    wiringProblem(
      'tools',
      `the call runs tools that orchestrate() did not guard (${names.map((n) => `"${n}"`).join(', ')}), so nothing would stop a tool that is not allowed; ${SPREAD_LAST}. Every call is refused until this is fixed`,
    );

  const toolApproval = async (args: ToolApprovalArguments<TOOLS, RUNTIME_CONTEXT>): Promise<ToolApprovalStatus> => {
    const { toolCall, messages } = args;
    // The model chose both: what the session keeps of them is bounded (see keptToolName and
    // callIdKey). The AI SDK asks only about calls of its tools, so the name is cut only when
    // the call runs tools that are not the orchestration's.
    const name = toolNames.includes(toolCall.toolName) ? toolCall.toolName : keptToolName(toolCall.toolName);
    const id = callIdKey(toolCall.toolCallId);
    approvalSeen.add(id);
    const tool = args.tools?.[toolCall.toolName];
    if (!unguarded && typeof tool?.execute === 'function' && !guardedTools.has(tool))
      unguarded = unguardedError([name]);
    if (unguarded) return { type: 'denied', reason: unguarded.message };
    // An approved call resumed from the history runs before the first model step; a fresh
    // call comes from a step this orchestration prepared.
    const resumed = isResumedCall(messages, toolCall.toolCallId, prepared);
    let decision: ToolDecision;
    try {
      if (resumed) {
        adoptMessages(messages);
        await begin();
        noteDenials(messages);
      } else if (prepared === 0) {
        const error = wiringProblem(
          'prepareStep',
          `the call's prepareStep is not the orchestration's, so the model is offered tools orchestration has not allowed; pass yours as orchestrate({ prepareStep }) and ${SPREAD_LAST}`,
        );
        return { type: 'denied', reason: error.message };
      }
      const offeredNow = resumed ? undefined : offered;
      decision = decideLocally(name, id, offeredNow, toolCall.input, resumed);
      // Its answer depends on a call still running in the session (another turn's): wait for it,
      // then decide on the session as it stands then.
      while (!decision.allowed && decision.waitFor !== undefined) {
        const started = Date.now();
        if (await turn.waitFor(decision.waitFor)) {
          rebase();
          decision = decideLocally(name, id, offeredNow, toolCall.input, resumed);
        } else {
          const waited: WaitEnd = { cause: 'wait-bound', waitedMs: Date.now() - started };
          decision = decideLocally(name, id, offeredNow, toolCall.input, resumed, waited);
        }
      }
    } catch (error) {
      // Fail closed, as the AI SDK's policy packages do: no decision, no run.
      fail(error);
      return { type: 'denied', reason: 'orchestration could not decide on this call; try again later' };
    }
    if (!decision.allowed && decision.reason.code === 'approval-required' && !resumed) {
      // An approve rule: a person is asked, through the AI SDK's own approval flow. The session
      // keeps what was asked, so the answer counts only for this call, input and state.
      const digest = inputDigest(toolCall.input);
      // A replay (turnId) of a call whose approval was asked already: asked and reported once.
      const asked =
        options.turnId !== undefined &&
        turn.state?.approvals?.some((approval) => approval.id === id && approval.digest === digest) === true;
      if (!asked) turn.approvalRequested(name, id, digest, decision.reason.rule);
      project(name, id, toolCall.input, false, decision.reason.rule);
      awaitingApproval = true;
      // The rule's reason goes to the person asked (the UI's `approval.requestReason`).
      return { type: 'user-approval', reason: decision.reason.message };
    }
    if (!decision.allowed) {
      // A replayed refusal was reported (and recorded) by the run this one replays.
      if (decision.replayed === undefined) rejected(name, id, decision);
      return { type: 'denied', reason: rejectionMessage(name, decision.reason, decision.allowedTools) };
    }
    const appStatus = appApproval(options.toolApproval, args);
    // Most calls need no approval of the app's: decided without another promise.
    const status = normalizeApprovalStatus(isPromiseLike(appStatus) ? await appStatus : appStatus);
    if (status.type === 'denied') return status;
    // The next call of the step is decided as if this one ran (it runs before the next
    // approval's call, or waits for a person who approves it): a person is never asked to
    // approve a call that could only run if an earlier one of the step were refused.
    const first = approvedInStep === 0;
    project(name, id, toolCall.input, resumed);
    if (status.type === 'user-approval') {
      if (!resumed) {
        awaitingApproval = true;
        // Kept as a rule's request is: an approval counts only for a call the session asked about.
        turn.approvalRequested(name, id, inputDigest(toolCall.input));
      }
    } else if (
      first &&
      !resumed &&
      reservesEarly &&
      ending === undefined &&
      // Only a call the AI SDK will run through a guarded execute: not a client-side tool
      // (no execute) nor one the provider ran itself.
      tool !== undefined &&
      guardedTools.has(tool) &&
      toolCall.providerExecuted !== true
    ) {
      // Not once the turn is ending: its end releases what execute did not take.
      reserveEarly(name, id, toolCall.input);
    }
    return status;
  };

  const prepareStep: PrepareStepFunction<TOOLS, RUNTIME_CONTEXT> = async (step) => {
    if (unguarded) throw unguarded; // fail closed: the AI SDK call ends with this error
    if (pending.size > 0) await idle();
    // Under a durable engine the model call that follows is checkpointed: store the previous
    // step's decisions (refusals, completions, usage) first, so a replay never finds a model
    // answer whose premises Baton did not record.
    if (options.turnId !== undefined && turn.dirty) await flush();
    prepared++;
    awaitingApproval = false;
    approvedInStep = 0;
    // Steps whose onStepEnd never came (the app replaced it): their usage still counts.
    let missed = false;
    for (const s of step.steps) {
      if (recordedSteps.has(s.stepNumber)) continue;
      recordStep(s);
      missed = true;
    }
    if (missed && !onStepEndRan) noteMissingOnStepEnd();
    adoptMessages(step.initialMessages);
    // Decided locally or on a synchronous store: no promise hop.
    const started = stepStartedNow(turn, step.stepNumber);
    const { decision, state } = started instanceof Promise ? await started : started;
    projected = state;
    unprojected = [];
    stepCalls = [];
    // The turn's first model step: the request's history is known, and the turn has begun.
    if (!denialsNoted) noteDenials(step.initialMessages);
    const activeStep = plan.step(decision.activeStep);
    const app: PrepareStepResult<TOOLS, RUNTIME_CONTEXT> | undefined =
      options.prepareStep === undefined ? undefined : await options.prepareStep(step);
    const narrowing = app?.activeTools ?? options.activeTools ?? callActiveTools;
    const offeredNow = narrowing
      ? decision.allowedTools.filter((tool) => narrowing.includes(tool))
      : decision.allowedTools;
    const choice = combineToolChoice(
      decision.toolChoice,
      app?.toolChoice ?? options.toolChoice ?? (callToolChoice as ToolChoice<TOOLS> | undefined),
      offeredNow,
    );
    offered = offeredNow;
    const info: { -readonly [K in keyof StepInfo]: StepInfo[K] } = {
      stepNumber: step.stepNumber,
      activeStep: decision.activeStep,
      stepDescription: activeStep?.description,
      sequence: decision.sequence,
      allowedTools: offeredNow,
      toolChoice: offeredNow.length === 0 ? 'none' : decision.toolChoice,
      state: toAIState(state),
      shadow: decision.shadow,
    };
    // Assigned, not spread: this runs before every model step.
    if (decision.wouldOffer !== undefined) info.wouldOffer = decision.wouldOffer;
    if (decision.budget !== undefined) info.budget = decision.budget;
    last = info;
    if (options.onStep) {
      try {
        await options.onStep(last);
      } catch (error) {
        fail(error);
      }
    }
    // `system` is the AI SDK's deprecated name for `instructions`.
    const appInstructions = app?.instructions ?? app?.system;
    if (appInstructions !== undefined) carriedInstructions = appInstructions;
    const base = carriedInstructions ?? options.instructions ?? step.initialInstructions;
    // With no steps there is nothing to tell the model: leave the instructions alone.
    // No steps: nothing to say. Shadow mode: the model must behave as it would without the
    // template, or the rollout would change what it observes.
    const instructions =
      plan.steps.length === 0 || last.shadow
        ? base
        : withOrchestration(base, orchestrationBlock(decision, last, activeStep?.instructions));
    let result: PrepareStepResult<TOOLS, RUNTIME_CONTEXT>;
    const activeTools = offeredNow.filter((tool): tool is keyof TOOLS & string => Object.hasOwn(guarded, tool));
    if (app === undefined) {
      result = { activeTools, toolChoice: choice };
    } else {
      const { system: _system, ...rest } = app;
      result = { ...rest, activeTools, toolChoice: choice };
    }
    if (instructions !== undefined) result.instructions = instructions;
    // A spent budget: no further model call for the session, whatever the app's prepareStep chose.
    if (decision.budget !== undefined && !decision.shadow) result.model = budgetSpentModel(decision.budget);
    return result;
  };
  const noteMissingOnStepEnd = () => {
    onStepEndMissing = true;
    wiringProblem(
      'onStepEnd',
      `the call's onStepEnd is not the orchestration's, so token usage and writes wait for the next step or the end of the turn (the last step's usage is lost if onEnd is replaced too); pass yours as orchestrate({ onStepEnd }) and ${SPREAD_LAST}`,
      true,
    );
  };

  const onStepEnd = async (step: StepResult<TOOLS, RUNTIME_CONTEXT>) => {
    onStepEndRan = true;
    recordStep(step);
    if (pending.size > 0) await idle();
    // A step without tool calls ends the turn: write what waits, with the turn's end. Otherwise
    // it rides on the next step's first tool request (or on onEnd / settled()).
    if (step.toolCalls.length === 0) {
      const ended = end();
      // The app's onStepEnd sees the end stored. Without one, the write travels while the AI
      // SDK wraps up the call (about 100 µs of its own work before onEnd); onEnd waits for it,
      // and the AI SDK ends the response only after onEnd, so nobody sees the turn over before.
      if (options.onStepEnd !== undefined) await ended;
    }
    if (options.onStepEnd !== undefined) await options.onStepEnd(step);
  };

  const onEnd = async (event?: GenerateTextEndEvent<TOOLS, RUNTIME_CONTEXT>) => {
    onEndRan = true;
    if (event) {
      const missed = event.steps.filter((s) => !recordedSteps.has(s.stepNumber));
      for (const s of missed) recordStep(s);
      if (missed.length > 0 && !onStepEndRan) noteMissingOnStepEnd();
    }
    await end();
    if (turn.dirty) await flush();
    if (event && options.onEnd !== undefined) await options.onEnd(event);
  };

  return {
    // Each tool is the app's own with `execute` wrapped: the same tool types.
    tools: guarded as TOOLS,
    prepareStep,
    toolApproval,
    onStart,
    onStepEnd,
    onEnd,
    lastStep: () => last,
    sequenceIncomplete: () => incomplete,
    sessionState: () => turn.state,
    async settled() {
      if (pending.size > 0) await idle();
      await end();
      if (turn.dirty) await flush();
      // Without the orchestration's onStepEnd, the last step's usage only comes with its onEnd.
      if (onStepEndMissing && !onEndRan) {
        wiringProblem(
          'onStepEnd',
          `neither the call's onStepEnd nor its onEnd is the orchestration's, so the last model step's token usage was not recorded; pass yours as orchestrate({ onStepEnd, onEnd }) and ${SPREAD_LAST}`,
        );
      }
      if (failures.length > 0) throw failures[0];
    },
  };
}

const NO_CALLS: readonly string[] = [];

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
function keptToolName(name: string): string {
  if (name.length <= MAX_UNKNOWN_TOOL_NAME_LENGTH) return name;
  let end = MAX_UNKNOWN_TOOL_NAME_LENGTH - 32;
  // Not between the halves of a surrogate pair: a lone half is no text.
  const code = name.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end--;
  return `${name.slice(0, end)}… (${name.length} characters)`;
}

/** A call request that says nothing of its input (no rules, no durable engine). */
const NO_CALL_INPUT: CallInput = Object.freeze({});

/**
 * Tools' input schemas, each converted once, by the app's schema object. The AI SDK converts a
 * zod (or other standard) schema to JSON Schema again for every tool it offers at every model
 * step (`asSchema` makes a new converter each time), which costs more per step than deciding
 * the step; a converted `Schema` it reuses, and that one keeps its JSON Schema once made. Guarded
 * tools carry the converted schema: the same JSON Schema and the same validation, converted once
 * for every turn of the process.
 */
const convertedSchemas = new WeakMap<object, Schema<unknown>>();

function convertedSchema(schema: FlexibleSchema<unknown> & object): Schema<unknown> {
  let converted = convertedSchemas.get(schema);
  if (converted === undefined) {
    converted = asSchema(schema);
    convertedSchemas.set(schema, converted);
  }
  return converted;
}

/**
 * True when the call is one the AI SDK resumes from the request's history: a call a person
 * approved, which it runs before the first model step. As the AI SDK finds them: the history's
 * last message is a tool message that approves (`tool-approval-response`, `approved: true`) an
 * approval request of the history for this call id. And no model step of this call of the AI
 * SDK was prepared yet: a call after one is the model's, whatever id it carries. So a model that
 * repeats the id of a call in the history (one a person denied, or never answered) gets it
 * decided as a new call, with its approval asked again, even in an app that replaced the
 * orchestration's `prepareStep`; and the history is scanned only when it ends in approvals.
 */
function isResumedCall(messages: readonly ModelMessage[], toolCallId: string, preparedSteps: number): boolean {
  return preparedSteps === 0 && answeredCalls(messages, true).includes(toolCallId);
}

/**
 * The call ids whose approval request (in the history's assistant messages) the history's last
 * message answers with `approved`, where the AI SDK collects the answers it acts on before the
 * first model step. The rest of the history is scanned only when the last message holds such an
 * answer.
 */
function answeredCalls(messages: readonly ModelMessage[], approved: boolean): readonly string[] {
  const last = messages.at(-1);
  if (last?.role !== 'tool') return NO_CALLS;
  const answers = new Set<string>();
  for (const part of last.content)
    if (part.type === 'tool-approval-response' && part.approved === approved) answers.add(part.approvalId);
  if (answers.size === 0) return NO_CALLS;
  const calls = new Set<string>();
  for (const message of messages) {
    if (message.role !== 'assistant' || typeof message.content === 'string') continue;
    for (const part of message.content) {
      if (part.type === 'tool-approval-request' && answers.has(part.approvalId)) calls.add(part.toolCallId);
    }
  }
  return [...calls];
}

/**
 * Most denials of one request handed to the session: a real request answers the approvals of one
 * model step, and a client's tool message naming hundreds would push the session's real call
 * ids out of its bounded list of seen ids (which is what refuses an approval replayed later).
 */
const DENIALS_LIMIT = 16;

/**
 * The call ids whose approval the history's last message denies, where the AI SDK collects
 * approvals (it answers them with `execution-denied`, and never runs them). A call the message
 * both approves and denies counts as denied: the AI SDK acts on a call's first answer, but
 * conflicting answers are no approval, so Baton refuses it. Like {@link isResumedCall}, the
 * history is scanned only when the last message holds a denial.
 */
function deniedCalls(messages: readonly ModelMessage[]): readonly string[] {
  return answeredCalls(messages, false).slice(0, DENIALS_LIMIT);
}

/** A reservation the approval hook started for `execute` to take, and its decision once known. */
interface EarlyReservation {
  readonly request: ToolDecision | Promise<ToolDecision>;
  decision?: ToolDecision;
}

type NormalizedApprovalStatus = Exclude<ToolApprovalStatus, string | undefined>;

function normalizeApprovalStatus(status: ToolApprovalStatus): NormalizedApprovalStatus {
  if (status === undefined) return { type: 'not-applicable' };
  if (typeof status === 'string') return { type: status };
  return status;
}

/** A per-tool approval function of the app, as the AI SDK calls it. */
type ToolApprovalFunction = (
  input: unknown,
  options: { toolCallId: string; messages: ModelMessage[]; toolContext: unknown; runtimeContext: unknown },
) => ToolApprovalStatus | PromiseLike<ToolApprovalStatus>;

/** A tool's own `needsApproval`, as the AI SDK calls it. */
type NeedsApproval =
  | boolean
  | ((
      input: unknown,
      options: { toolCallId: string; messages: ModelMessage[]; context: unknown },
    ) => boolean | PromiseLike<boolean>);

/**
 * The app's approval of a call orchestration allows, resolved as the AI SDK resolves it when
 * no orchestration is involved: the generic function; else the tool's entry of the per-tool
 * configuration; else the tool's `needsApproval`.
 */
function appApproval<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext>(
  configuration: ToolApprovalConfiguration<TOOLS, RUNTIME_CONTEXT> | undefined,
  args: ToolApprovalArguments<TOOLS, RUNTIME_CONTEXT>,
): ToolApprovalStatus | PromiseLike<ToolApprovalStatus> {
  if (typeof configuration === 'function') return configuration(args);
  const { toolCall, messages } = args;
  const name = toolCall.toolName;
  const toolContext: unknown = (args.toolsContext as Record<string, unknown> | undefined)?.[name];
  const entry: unknown =
    configuration !== undefined && Object.hasOwn(configuration, name)
      ? configuration[name as keyof typeof configuration]
      : undefined;
  if (typeof entry === 'function') {
    // The SDK validated the input against this tool's schema before asking.
    return (entry as ToolApprovalFunction)(toolCall.input, {
      toolCallId: toolCall.toolCallId,
      messages,
      toolContext,
      runtimeContext: args.runtimeContext,
    });
  }
  if (entry != null) return entry as ToolApprovalStatus;
  const needsApproval = (args.tools?.[name] as { needsApproval?: NeedsApproval } | undefined)?.needsApproval;
  if (needsApproval == null) return undefined;
  if (typeof needsApproval !== 'function') return needsApproval ? 'user-approval' : undefined;
  return (async () => {
    const needed = await needsApproval(toolCall.input, {
      toolCallId: toolCall.toolCallId,
      messages,
      context: toolContext,
    });
    return needed ? 'user-approval' : undefined;
  })();
}

function isPromiseLike<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as { then?: unknown } | undefined)?.then === 'function';
}

/**
 * The step's tool choice: the orchestration's forced choice wins; the app's choice is kept
 * where the offered tools allow it.
 */
function combineToolChoice<TOOLS extends ToolSet>(
  orchestration: 'auto' | 'none' | 'required',
  app: ToolChoice<TOOLS> | undefined,
  offered: readonly string[],
): ToolChoice<TOOLS> {
  if (offered.length === 0) return 'none';
  const forcesOffered = typeof app === 'object' && offered.includes(app.toolName);
  if (orchestration === 'required') {
    if (forcesOffered) return app;
    const only = offered.length === 1 ? offered[0] : undefined;
    return only === undefined ? 'required' : { type: 'tool', toolName: only as Extract<keyof TOOLS, string> };
  }
  if (app === undefined || typeof app === 'string') return app ?? 'auto';
  return forcesOffered ? app : 'auto';
}

/** The sequence line's path (`a -> b or c`), per sequence of the plan (built once, not per step). */
const sequencePaths = new WeakMap<readonly (readonly string[])[], string>();

function sequencePath(tools: readonly (readonly string[])[]): string {
  let path = sequencePaths.get(tools);
  if (path === undefined) {
    path = tools.map((t) => t.join(' or ')).join(' -> ');
    sequencePaths.set(tools, path);
  }
  return path;
}

/**
 * The block of a step decision the transition shares between turns (see `decideStep`), when the
 * step offers what it decided: it says the same every time, so it is built once.
 */
const sharedBlocks = new WeakMap<StepDecision, string>();

/** What the model needs to know about the active step (`## Orchestration` and its lines). */
function orchestrationBlock(decision: StepDecision, info: StepInfo, stepInstructions: string | undefined): string {
  const shared = Object.isFrozen(decision) && info.allowedTools === decision.allowedTools && info.budget === undefined;
  if (!shared) return buildBlock(info, stepInstructions);
  let block = sharedBlocks.get(decision);
  if (block === undefined) {
    block = buildBlock(info, stepInstructions);
    sharedBlocks.set(decision, block);
  }
  return block;
}

function buildBlock(info: StepInfo, stepInstructions: string | undefined): string {
  // Built by concatenation: this runs before every model step that is not shared.
  let block = '## Orchestration';
  if (info.activeStep !== undefined) {
    block += `\nActive step: ${info.activeStep}${info.stepDescription ? ` (${info.stepDescription})` : ''}`;
    if (stepInstructions) block += `\n${stepInstructions}`;
  }
  const seq = info.sequence;
  if (seq !== undefined) {
    const path = sequencePath(seq.tools);
    block += seq.completed
      ? `\nSequence ${path}: complete.`
      : `\nSequence ${path}: position ${seq.index + 1} of ${seq.length}.`;
    if (seq.expected && !seq.blocked) block += `\nNext required tool: ${seq.expected.join(' or ')}`;
  }
  const budget = info.budget;
  if (budget !== undefined && !info.shadow) {
    const whose = budget.scope === 'session' ? 'this conversation' : `step "${budget.step}"`;
    block += `\nThe token budget of ${whose} is spent (${budget.used} of ${budget.limit} tokens): answer now, briefly, without tools, and say that the budget is spent.`;
  } else {
    block += info.allowedTools.length
      ? `\nAllowed tools now: ${info.allowedTools.join(', ')}`
      : '\nNo tools are available in this step: answer directly.';
  }
  return block;
}

/** The caller's instructions with the orchestration's block appended. */
function withOrchestration(base: Instructions | undefined, block: string): Instructions {
  if (base === undefined) return block;
  if (typeof base === 'string') return `${base}\n\n${block}`;
  // Structured instructions (system messages): append ours as one more system message.
  const list = Array.isArray(base) ? base : [base];
  return [...list, { role: 'system' as const, content: block }];
}
