/**
 * The public types of `orchestrate()`: its options, what it returns, and what it tells the app
 * before each model step.
 */
import type {
  ActiveTools,
  GenerateTextEndEvent,
  Instructions,
  ModelMessage,
  PrepareStepFunction,
  StepResult,
  ToolApprovalConfiguration,
  ToolApprovalStatus,
  ToolChoice,
  ToolSet,
  TypedToolCall,
} from 'ai';
import type { BudgetStatus } from '../core/budget-status.js';
import type { OrchestrationSource } from '../core/compile.js';
import type { StepView } from '../core/engine.js';
import type { OrchestrationEvent } from '../core/events.js';
import type { ChatMessage } from '../core/messages.js';
import type { AIOrchestrationState, FactValue, OrchestrationState } from '../core/state.js';
import type { ToolAnnotations } from '../core/tool-annotations.js';
import type { OrchestrationManager } from '../orchestration/orchestration-manager.js';

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
  /**
   * The facts completed calls' results set (SPEC section 11), by name, as the step starts: a
   * value, or why it is unknown. Absent while the session has none.
   */
  readonly facts?: Readonly<Record<string, FactValue>>;
  /** The labels completed calls' results raised, in the order they rose. Absent while none is. */
  readonly labels?: readonly string[];
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
