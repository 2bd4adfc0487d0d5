/**
 * `createAgent()`: a running agent from a template (AgentDock's `AgentNode` role): its tools
 * resolved by name, its model picked from the template, and every turn orchestrated.
 */
import {
  convertToModelMessages,
  isStepCount,
  type LanguageModel,
  type ModelMessage,
  type ToolSet,
  type UIMessage,
} from 'ai';
import { CoreLLM, createLLM, type LLMOptions, parseModelSpec, templateLLMOptions } from '../ai-sdk/core-llm.js';
import {
  LLMOrchestrationService,
  type OrchestratedStreamResult,
  type StreamWithOrchestrationOptions,
} from '../ai-sdk/llm-orchestration-service.js';
import type { StepInfo } from '../ai-sdk/orchestrate.js';
import { createOrchestratedAgent, type OrchestratedAgent } from '../ai-sdk/orchestrated-agent.js';
import { InvalidArgumentError } from '../core/errors.js';
import type { ChatMessage } from '../core/messages.js';
import type { AgentTemplate } from '../core/schema.js';
import {
  createOrchestrationManager,
  type OrchestrationManager,
  type OrchestrationManagerOptions,
} from '../orchestration/orchestration-manager.js';
import type { StoreSpec } from '../stores/resolve-store.js';
import { resolveTools } from './tools/index.js';

/** Options of {@link createAgent}. */
export interface CreateAgentOptions<TOOLS extends ToolSet = ToolSet> {
  /**
   * Tool implementations by name; they win over the built-in tools of the same name. Their
   * type is the agent's tool set type (built-in tools the template names are added at run time).
   */
  tools?: TOOLS;
  /** The manager to share (e.g. one per server); else one is created with `store`. */
  manager?: OrchestrationManager;
  /** Where a created manager keeps state (default: memory). */
  store?: StoreSpec;
  /** Options for a created manager (ignored when `manager` is given). */
  managerOptions?: Omit<OrchestrationManagerOptions, 'store'>;
  /**
   * The model: an AI SDK model, a {@link CoreLLM}, a spec such as `offline` or
   * `openai:gpt-4o`, or provider options. Default: the template's `llm`.
   */
  model?: LanguageModel | CoreLLM | string | LLMOptions;
  /** Environment for API keys (default `process.env`). */
  env?: Readonly<Record<string, string | undefined>>;
}

/** Callbacks of one message's stream. */
export type HandleMessageStreamOptions<TOOLS extends ToolSet = ToolSet> = Pick<
  StreamWithOrchestrationOptions<TOOLS>,
  'onStepFinish' | 'onFinish' | 'onCallbackError' | 'initialState'
>;

/** One message to an agent. */
export interface HandleMessageOptions<TOOLS extends ToolSet = ToolSet> {
  /** The conversation: AI SDK UI messages (with `parts`) or model messages (with `content`). */
  messages: readonly (UIMessage | ModelMessage)[];
  sessionId: string;
  /** Called before every model step with the active step, sequence progress and allowed tools. */
  onStep?: (info: StepInfo) => void | PromiseLike<void>;
  abortSignal?: AbortSignal;
  /**
   * The manager for this message only, instead of the agent's (e.g. one seeded from a signed
   * state token in a stateless server).
   */
  manager?: OrchestrationManager;
  /** Callbacks of the stream (errors they throw, and failed state writes, go to `onCallbackError`). */
  stream?: HandleMessageStreamOptions<TOOLS>;
}

/** A running agent. */
export interface Agent<TOOLS extends ToolSet = ToolSet> {
  readonly id: string;
  readonly template: AgentTemplate;
  readonly manager: OrchestrationManager;
  readonly llm: CoreLLM;
  /** The agent's tools, by name. */
  readonly tools: TOOLS;
  /**
   * The AI SDK agent, built once for every session: `toolLoopAgent.stream({ messages, options:
   * { sessionId } })`, or hand it to the AI SDK's agent helpers.
   */
  readonly toolLoopAgent: OrchestratedAgent<ToolSet>;
  /** Streams the answer to the latest message, orchestrated. */
  handleMessage(options: HandleMessageOptions<TOOLS>): Promise<OrchestratedStreamResult<TOOLS>>;
}

/** Creates an {@link Agent} from a validated template; its `ToolLoopAgent` is built here, once. */
export function createAgent<TOOLS extends ToolSet = ToolSet>(
  template: AgentTemplate,
  options: CreateAgentOptions<TOOLS> = {},
): Agent<TOOLS> {
  const resolved = resolveTools(template.tools, options.tools);
  if (resolved.missing.length > 0) {
    throw new InvalidArgumentError(
      'tools',
      `agent "${template.id}" names tools that have no implementation: ${resolved.missing.join(', ')}; pass them in options.tools`,
    );
  }
  // The app's tools typed as it passed them; the built-ins the template names come with them.
  const tools = resolved.tools as TOOLS;
  const llm = resolveModel(template, options);
  const manager =
    options.manager ??
    createOrchestrationManager({ ...options.managerOptions, ...(options.store ? { store: options.store } : {}) });
  const personality = Array.isArray(template.personality) ? template.personality.join('\n') : template.personality;
  const description = template.orchestration?.description;
  const guide = Array.isArray(description) ? description.join('\n') : description;
  const instructions = [personality, guide].filter(Boolean).join('\n\n') || undefined;
  const maxSteps = template.options?.maxSteps ?? 10;
  // Built once, for every session: a call names its session in `options.sessionId`. It is typed
  // on the tool set as resolved: the AI SDK types an agent's settings with a conditional type of
  // its tool set (whether the tools need a toolsContext) that TypeScript cannot resolve for a
  // generic one, so only a concrete tool set can build it without a cast.
  const toolLoopAgent = createOrchestratedAgent({
    id: template.id,
    model: llm.model,
    tools: resolved.tools,
    manager,
    config: template,
    stopWhen: isStepCount(maxSteps),
    ...(instructions ? { instructions } : {}),
  });

  return {
    id: template.id,
    template,
    manager,
    llm,
    tools,
    toolLoopAgent,
    async handleMessage({
      messages,
      sessionId,
      onStep,
      abortSignal,
      stream,
      manager: turnManager,
    }: HandleMessageOptions<TOOLS>): Promise<OrchestratedStreamResult<TOOLS>> {
      if (!Array.isArray(messages)) {
        throw new InvalidArgumentError('messages', 'expected an array of messages');
      }
      const modelMessages = await toModelMessages(messages, tools);
      // The same orchestration as toolLoopAgent's calls (orchestrate(), settled at the end), on
      // streamText typed with the app's tool set, so results keep the literal tool names.
      const service = new LLMOrchestrationService(llm, turnManager ?? manager, sessionId);
      return service.streamWithOrchestration<TOOLS>({
        maxSteps,
        ...stream,
        messages: modelMessages,
        tools,
        orchestration: template,
        conversation: messages as readonly ChatMessage[],
        ...(instructions ? { instructions } : {}),
        ...(onStep ? { onStep } : {}),
        ...(abortSignal ? { abortSignal } : {}),
      });
    },
  };
}

function resolveModel(template: AgentTemplate, options: CreateAgentOptions<ToolSet>): CoreLLM {
  const env = options.env ?? process.env;
  const model = options.model;
  if (model instanceof CoreLLM) return model;
  if (typeof model === 'string') return createLLM({ ...parseModelSpec(model), env });
  if (
    model !== undefined &&
    typeof model === 'object' &&
    'provider' in model &&
    typeof model.provider === 'string' &&
    !('specificationVersion' in model)
  ) {
    return createLLM({ ...(model as LLMOptions), env });
  }
  if (model !== undefined) {
    const m = model as Exclude<LanguageModel, string> & { provider?: string; modelId?: string };
    return new CoreLLM(model as LanguageModel, { provider: m.provider ?? 'custom', modelId: m.modelId ?? 'custom' });
  }
  const fromTemplate = templateLLMOptions(template);
  if (!fromTemplate) {
    throw new InvalidArgumentError(
      'model',
      `agent "${template.id}" names no model; pass options.model (e.g. "offline")`,
    );
  }
  return createLLM({ ...fromTemplate, env });
}

async function toModelMessages(
  messages: readonly (UIMessage | ModelMessage)[],
  tools: ToolSet,
): Promise<ModelMessage[]> {
  const isUI = messages.some((m) => 'parts' in m && Array.isArray((m as UIMessage).parts));
  if (!isUI) return messages as ModelMessage[];
  return convertToModelMessages(messages as UIMessage[], { tools });
}
