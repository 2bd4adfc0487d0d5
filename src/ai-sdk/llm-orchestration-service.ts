/**
 * The seed's `LLMOrchestrationService`: wraps a model's `streamText` with orchestration,
 * token accounting and tool tracking for one session (seed 004).
 */
import {
  type ActiveTools,
  isStepCount,
  type LanguageModelCallOptions,
  type ModelMessage,
  type PrepareStepFunction,
  type RequestOptions,
  type StepResult,
  type StreamTextOnChunkCallback,
  streamText,
  type TelemetryOptions,
  type ToolApprovalConfiguration,
  type ToolCallRepairFunction,
  type ToolChoice,
  type ToolSet,
} from 'ai';
import type { OrchestrationSource } from '../core/compile.js';
import type { ChatMessage } from '../core/messages.js';
import { type AIOrchestrationState, type OrchestrationState, toAIState } from '../core/state.js';
import type { OrchestrationManager } from '../orchestration/orchestration-manager.js';
import type { CoreLLM } from './core-llm.js';
import { type Orchestration, orchestrate, type RuntimeContext, type StepInfo } from './orchestrate.js';

/** The plan of a turn without orchestration: no steps, every tool allowed. */
const NO_ORCHESTRATION = Object.freeze({ steps: [] });

/** Options of {@link LLMOrchestrationService.streamWithOrchestration}. */
export interface StreamWithOrchestrationOptions<TOOLS extends ToolSet = ToolSet> {
  messages: ModelMessage[];
  tools?: TOOLS;
  /** The system prompt (the AI SDK 7 name is `instructions`; both are accepted). */
  system?: string;
  instructions?: string;
  /** Upper bound on model steps in this turn (default 10). */
  maxSteps?: number;
  temperature?: number;
  maxOutputTokens?: number;
  /** The template or its `orchestration` block: when given, tools are enforced step by step. */
  orchestration?: OrchestrationSource;
  /** The conversation for message conditions, when it differs from `messages` (e.g. UI messages). */
  conversation?: readonly ChatMessage[];
  /** Called before every model step with the step's orchestration. */
  onStep?: (info: StepInfo) => void | PromiseLike<void>;
  /** Seed name of the AI SDK's `onStepEnd`. Errors it throws are reported, never break the stream. */
  onStepFinish?: (step: StepResult<TOOLS>) => void | PromiseLike<void>;
  /** Seed name of the AI SDK's `onEnd`. Errors it throws are reported, never break the stream. */
  onFinish?: (event: { text: string; steps: readonly StepResult<TOOLS>[] }) => void | PromiseLike<void>;
  /** Receives errors of user callbacks and of state writes (default `console.error`). */
  onCallbackError?: (error: unknown, callback: string) => void;
  abortSignal?: AbortSignal;
  /**
   * The session's state as the caller already read it (a server that just claimed the session):
   * becomes `orchestrationState` without another store read.
   */
  initialState?: AIOrchestrationState | null;
  /** The agent the turn runs for (see `orchestrate({ agentId })`). */
  agentId?: string;
  /**
   * The session as the caller already stored it with this turn's user message (see
   * `orchestrate({ sessionState })`): the first model step needs no store round trip.
   */
  sessionState?: OrchestrationState;
  /**
   * The AI SDK's `experimental_toolApprovalSecret`: signs the approval requests of this turn and
   * verifies the approvals its messages grant (see `toolApprovalSecret()`).
   */
  toolApprovalSecret?: string | Uint8Array;
  /**
   * More `streamText` options: call settings (`topP`, `seed`, ...), request options and these
   * hooks, which are composed with the orchestration's (see `orchestrate()`), not replaced.
   */
  extra?: StreamExtraOptions<TOOLS>;
}

/** `streamText` options {@link StreamWithOrchestrationOptions.extra} passes on. */
export type StreamExtraOptions<TOOLS extends ToolSet = ToolSet> = LanguageModelCallOptions &
  Omit<RequestOptions<TOOLS>, 'abortSignal'> & {
    prepareStep?: PrepareStepFunction<TOOLS>;
    toolApproval?: ToolApprovalConfiguration<TOOLS, RuntimeContext>;
    activeTools?: ActiveTools<TOOLS>;
    toolChoice?: ToolChoice<TOOLS>;
    toolCallConcurrency?: number;
    repairToolCall?: ToolCallRepairFunction<TOOLS>;
    onChunk?: StreamTextOnChunkCallback<TOOLS>;
    /** The AI SDK's telemetry settings of the call (what its spans record, which integrations). */
    telemetry?: TelemetryOptions;
  };

/** The stream result with the orchestration attached. */
export type OrchestratedStreamResult<TOOLS extends ToolSet = ToolSet> = ReturnType<typeof streamText<TOOLS>> & {
  /** The session's orchestration state when the turn started. */
  orchestrationState: AIOrchestrationState | null;
  /** The state after the turn, once every write has finished (null when it cannot be read). */
  finalOrchestrationState: Promise<AIOrchestrationState | null>;
  /** The turn's orchestration (last step info, `sequenceIncomplete()`, `settled()`). */
  orchestration: Orchestration<TOOLS>;
};

/** Bridges a `CoreLLM` and an `OrchestrationManager` for one session (AgentDock's service). */
export class LLMOrchestrationService {
  readonly #llm: CoreLLM;
  readonly #manager: OrchestrationManager;
  readonly #sessionId: string;

  constructor(llm: CoreLLM, orchestrationManager: OrchestrationManager, sessionId: string) {
    this.#llm = llm;
    this.#manager = orchestrationManager;
    this.#sessionId = sessionId;
  }

  /** Streams one turn with orchestration; see {@link StreamWithOrchestrationOptions}. */
  async streamWithOrchestration<TOOLS extends ToolSet = ToolSet>(
    options: StreamWithOrchestrationOptions<TOOLS>,
  ): Promise<OrchestratedStreamResult<TOOLS>> {
    const manager = this.#manager;
    const sessionId = this.#sessionId;
    const reportError =
      options.onCallbackError ??
      ((error: unknown, callback: string) => console.error(`[baton] ${callback} failed:`, error));
    const guard = async (name: string, fn: () => void | PromiseLike<void>) => {
      try {
        await fn();
      } catch (error) {
        reportError(error, name);
      }
    };
    const { prepareStep, toolApproval, activeTools, toolChoice, ...extra } = options.extra ?? {};
    // Without a config every tool is allowed, but tool use and token usage still go through
    // the one transition (an empty plan), so call ids stay idempotent and records atomic.
    const orchestration = orchestrate<TOOLS>({
      manager,
      config: options.orchestration ?? NO_ORCHESTRATION,
      sessionId,
      tools: options.tools ?? ({} as TOOLS),
      ...(options.conversation ? { messages: options.conversation } : {}),
      ...(options.agentId !== undefined ? { agentId: options.agentId } : {}),
      ...(options.sessionState ? { sessionState: options.sessionState } : {}),
      ...(options.onStep ? { onStep: options.onStep } : {}),
      ...(prepareStep ? { prepareStep } : {}),
      ...(toolApproval ? { toolApproval } : {}),
      ...(activeTools ? { activeTools } : {}),
      ...(toolChoice ? { toolChoice } : {}),
      ...(options.onStepFinish
        ? { onStepEnd: (step) => guard('onStepFinish', () => options.onStepFinish!(step)) }
        : {}),
      onError: (error) => reportError(error, 'orchestration'),
    });
    const startState =
      options.initialState !== undefined
        ? options.initialState
        : options.sessionState !== undefined
          ? toAIState(options.sessionState)
          : await manager.getState(sessionId);
    let resolveFinal: (state: AIOrchestrationState | null) => void = () => undefined;
    const finalOrchestrationState = new Promise<AIOrchestrationState | null>((resolve) => {
      resolveFinal = resolve;
    });
    // Whatever ends the turn (its end, an error, an abort) settles it first: the writes of the
    // tools that ran still count.
    const finish = async () => {
      await orchestration.settled().catch(() => undefined); // failures were reported to onError
      // The turn holds the state it last wrote: no store read for it (a read only when the
      // turn never reached a model step).
      const held = orchestration.sessionState();
      resolveFinal(held !== undefined ? toAIState(held) : await manager.getState(sessionId).catch(() => null));
    };

    const instructions = options.instructions ?? options.system;
    const result = streamText<TOOLS>({
      ...extra,
      model: this.#llm.model,
      messages: options.messages,
      ...(instructions !== undefined ? { instructions } : {}),
      ...(options.temperature !== undefined ? { temperature: options.temperature } : {}),
      ...(options.maxOutputTokens !== undefined ? { maxOutputTokens: options.maxOutputTokens } : {}),
      ...(options.abortSignal ? { abortSignal: options.abortSignal } : {}),
      ...(options.toolApprovalSecret !== undefined
        ? { experimental_toolApprovalSecret: options.toolApprovalSecret }
        : {}),
      stopWhen: isStepCount(options.maxSteps ?? 10),
      tools: orchestration.tools,
      prepareStep: orchestration.prepareStep,
      toolApproval: orchestration.toolApproval,
      onStart: orchestration.onStart,
      onStepEnd: orchestration.onStepEnd,
      onEnd: async (event) => {
        await orchestration.onEnd(event);
        if (options.onFinish) await guard('onFinish', () => options.onFinish!(event));
        await finish();
      },
      onError: ({ error }) => {
        reportError(error, 'stream');
        void finish();
      },
      // An aborted turn calls neither onEnd nor onError: without this the final state would
      // never resolve.
      onAbort: finish,
    });
    return Object.assign(result, { orchestrationState: startState, finalOrchestrationState, orchestration });
  }
}
