/**
 * The seed's `LLMOrchestrationService`: wraps a model's `streamText` with orchestration,
 * token accounting and tool tracking for one session (seed 004).
 */
import { isStepCount, type ModelMessage, type StepResult, type streamText, type ToolSet } from 'ai';
import type { OrchestrationSource } from '../core/compile.js';
import type { ChatMessage } from '../core/messages.js';
import type { AIOrchestrationState } from '../core/state.js';
import type { OrchestrationManager } from '../orchestration/orchestration-manager.js';
import type { CoreLLM } from './core-llm.js';
import { type Orchestration, orchestrate, type StepInfo } from './orchestrate.js';

type StreamTextOptions = Parameters<typeof streamText>[0];

/** The plan of a turn without orchestration: no steps, every tool allowed. */
const NO_ORCHESTRATION = Object.freeze({ steps: [] });
type StreamTextResult = ReturnType<typeof streamText>;

/** Options of {@link LLMOrchestrationService.streamWithOrchestration}. */
export interface StreamWithOrchestrationOptions<TOOLS extends ToolSet> {
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
  /** Any other `streamText` option, passed through. */
  extra?: Partial<StreamTextOptions>;
}

/** The stream result with the orchestration attached. */
export type OrchestratedStreamResult = StreamTextResult & {
  /** The session's orchestration state when the turn started. */
  orchestrationState: AIOrchestrationState | null;
  /** The state after the turn, once every write has finished. */
  finalOrchestrationState: Promise<AIOrchestrationState | null>;
  /** The turn's orchestration (last step info, `settled()`). */
  orchestration: Orchestration<ToolSet>;
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
  async streamWithOrchestration<TOOLS extends ToolSet>(
    options: StreamWithOrchestrationOptions<TOOLS>,
  ): Promise<OrchestratedStreamResult> {
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
    const tools = (options.tools ?? {}) as TOOLS;
    // Without a config every tool is allowed, but tool use and token usage still go through
    // the one transition (an empty plan), so call ids stay idempotent and records atomic.
    const orchestration = orchestrate({
      manager,
      config: options.orchestration ?? NO_ORCHESTRATION,
      sessionId,
      tools,
      ...(options.conversation ? { messages: options.conversation } : {}),
      ...(options.onStep ? { onStep: options.onStep } : {}),
      onError: (error) => reportError(error, 'orchestration'),
    });
    const startState = await manager.getState(sessionId);
    let resolveFinal: (state: AIOrchestrationState | null) => void = () => undefined;
    const finalOrchestrationState = new Promise<AIOrchestrationState | null>((resolve) => {
      resolveFinal = resolve;
    });

    const onStepEnd = async (step: StepResult<TOOLS>) => {
      await orchestration.onStepEnd(step);
      if (options.onStepFinish) await guard('onStepFinish', () => options.onStepFinish!(step));
    };
    const onEnd = async (event: { text: string; steps: readonly StepResult<TOOLS>[] }) => {
      await orchestration.settled().catch(() => undefined);
      if (options.onFinish) await guard('onFinish', () => options.onFinish!(event));
      resolveFinal(await manager.getState(sessionId).catch(() => null));
    };

    const instructions = options.instructions ?? options.system;
    const result = this.#llm.streamText({
      ...options.extra,
      messages: options.messages,
      ...(instructions !== undefined ? { instructions } : {}),
      ...(options.temperature !== undefined ? { temperature: options.temperature } : {}),
      ...(options.maxOutputTokens !== undefined ? { maxOutputTokens: options.maxOutputTokens } : {}),
      ...(options.abortSignal ? { abortSignal: options.abortSignal } : {}),
      stopWhen: isStepCount(options.maxSteps ?? 10),
      tools: orchestration.tools,
      prepareStep: orchestration.prepareStep,
      onStepEnd,
      onEnd,
      onError: ({ error }: { error: unknown }) => {
        reportError(error, 'stream');
        resolveFinal(null);
      },
      // An aborted turn calls neither onEnd nor onError: without this the final state would
      // never resolve. The writes of the tools that did run still count.
      onAbort: async () => {
        await orchestration.settled().catch(() => undefined);
        resolveFinal(await manager.getState(sessionId).catch(() => null));
      },
    } as unknown as Omit<StreamTextOptions, 'model'>);
    return Object.assign(result, {
      orchestrationState: startState,
      finalOrchestrationState,
      orchestration: orchestration as unknown as Orchestration<ToolSet>,
    });
  }
}
