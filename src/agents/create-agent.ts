/**
 * `createAgent()`: a running agent from a template (AgentDock's `AgentNode` role): its tools
 * resolved by name, its model picked from the template, and every turn orchestrated.
 *
 * One path: the template becomes one AI SDK `ToolLoopAgent` (`createOrchestratedAgent()`), built
 * here once, and `handleMessage` is a call of it (`agent.stream({ messages, options })`), so the
 * server, `baton chat` and an app calling `agent.toolLoopAgent` run the very same agent.
 */
import {
  AI_SDK_TELEMETRY_TRACING_CHANNEL,
  convertToModelMessages,
  isStepCount,
  type LanguageModel,
  type ModelMessage,
  NoOutputGeneratedError,
  type StepResult,
  type ToolSet,
  type UIMessage,
} from 'ai';
import { z } from 'zod/v4';
import { modelOptionSchema } from '../ai-sdk/check-orchestrate-options.js';
import { CoreLLM, createLLM, type LLMOptions, parseModelSpec, templateLLMOptions } from '../ai-sdk/core-llm.js';
import type { OrchestratedStreamResult, StreamWithOrchestrationOptions } from '../ai-sdk/llm-orchestration-service.js';
import type { StepInfo } from '../ai-sdk/orchestrate.js';
import { createOrchestratedAgent, type OrchestratedAgent } from '../ai-sdk/orchestrated-agent.js';
import { InvalidArgumentError } from '../core/errors.js';
import type { ChatMessage } from '../core/messages.js';
import {
  managerSchema,
  objectSchema,
  optionIssues,
  storeSchema,
  throwOnErrors,
  toolsSchema,
} from '../core/option-issues.js';
import type { AgentTemplate } from '../core/schema.js';
import { toAIState } from '../core/state.js';
import type { TemplateIssue } from '../core/template-issues.js';
import { validateTemplate } from '../core/validate-template.js';
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
  /** What the agent's model calls record in the AI SDK's telemetry (see {@link AgentTelemetryOptions}). */
  telemetry?: AgentTelemetryOptions;
}

/**
 * What an agent's model calls record when an AI SDK telemetry integration is registered
 * (`registerTelemetry(new OpenTelemetry())` from `@ai-sdk/otel`). Their spans name the agent
 * (`gen_ai.agent.name`, from the template's id) and carry the model, token usage and timings.
 */
export interface AgentTelemetryOptions {
  /**
   * Also record the content: the messages (what users typed), the instructions, the tool
   * definitions, and every tool call's input and output. Default false: these hold personal
   * data and secrets users paste, which a trace backend keeps, indexes and shows to whoever may
   * read traces.
   */
  recordContent?: boolean;
}

/** One schema per option: a new option of `CreateAgentOptions` does not compile until it is checked here. */
const createAgentOptionSchemas: { [K in keyof Required<CreateAgentOptions>]: z.ZodType } = {
  tools: toolsSchema,
  manager: managerSchema,
  store: storeSchema,
  managerOptions: objectSchema('expected the options of createOrchestrationManager'),
  // An AI SDK model, a CoreLLM, a spec or provider options; anything else is refused with
  // createApp's words (a number, or a provider such as `openai` itself, would fail only when the
  // first message calls the model). A spec is resolved (and explained) below.
  model: modelOptionSchema,
  // Not z.record: process.env is not a plain object.
  env: objectSchema('expected an environment such as process.env'),
  telemetry: z.strictObject({ recordContent: z.boolean().optional() }),
};
const createAgentOptionsSchema = z.strictObject(
  Object.fromEntries(Object.entries(createAgentOptionSchemas).map(([key, schema]) => [key, schema.optional()])),
);

/** Callbacks of one message's stream. */
export type HandleMessageStreamOptions<TOOLS extends ToolSet = ToolSet> = Pick<
  StreamWithOrchestrationOptions<TOOLS>,
  'onStepFinish' | 'onFinish' | 'onCallbackError' | 'initialState' | 'agentId' | 'sessionState'
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
  /**
   * True when the caller reads the result's stream to its end at the pace it is produced (the
   * HTTP server does, into a response that buffers for a slow client). By default the turn is
   * also read in the background, so that it runs to its end, and `finalOrchestrationState`
   * resolves, whether or not its stream is read; that second reader costs every chunk of the
   * turn another branch of the result's stream.
   */
  callerDrains?: boolean;
  /**
   * Signs the approval requests of this turn and verifies the approvals its history grants (the
   * AI SDK's `experimental_toolApprovalSecret`); derive one per session with `toolApprovalSecret()`.
   */
  toolApprovalSecret?: string | Uint8Array;
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

/**
 * The errors of a template an agent is created from (every one, with its path): what
 * `parseTemplate` would refuse, so a template built in code, or loaded without validation, fails
 * when the agent is created rather than on its first message.
 */
export function checkAgentTemplate(template: unknown): TemplateIssue[] {
  const result = validateTemplate(template);
  return result.success ? [] : result.issues.filter((issue) => issue.severity === 'error');
}

/**
 * Creates an {@link Agent} from a template; its `ToolLoopAgent` is built here, once. The
 * template and options are checked first: a `TemplateConfigError` lists every problem.
 */
export function createAgent<TOOLS extends ToolSet = ToolSet>(
  template: AgentTemplate,
  options: CreateAgentOptions<TOOLS> = {},
): Agent<TOOLS> {
  throwOnErrors(
    [...checkAgentTemplate(template), ...optionIssues(createAgentOptionsSchema, options, ['options'])],
    `agent "${String((template as { id?: unknown } | null)?.id)}"`,
  );
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
  // The AI SDK records content by default; an agent does only when asked (see AgentTelemetryOptions).
  const recordContent = options.telemetry?.recordContent ?? false;
  const telemetry = { functionId: template.id, recordInputs: recordContent, recordOutputs: recordContent };
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
    telemetry,
    // The AI SDK builds a filtered copy of every telemetry event of a call (recordInputs and
    // recordOutputs false), whether or not anything receives it. A call that starts with no
    // receiver has its telemetry off instead: it records nothing at all (a receiver that
    // subscribes during the call misses it, as it would have missed its start).
    prepareCall: (call) =>
      aiSdkTelemetryListens() ? call : { ...call, telemetry: { ...telemetry, isEnabled: false } },
    ...(instructions ? { instructions } : {}),
    // The AI SDK logs a model loop's error to the console unless told otherwise; a turn of
    // handleMessage reports its own to its caller (onCallbackError), so it is not logged twice.
    onError: ({ error }) => {
      if (!isObject(error) || !reportedToCaller.has(error)) console.error(error);
    },
    // AI SDK settings of every call (e.g. `experimental_toolApprovalSecret`) belong here.
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
      stream = {},
      manager: turnManager,
      toolApprovalSecret,
      callerDrains = false,
    }: HandleMessageOptions<TOOLS>): Promise<OrchestratedStreamResult<TOOLS>> {
      if (!Array.isArray(messages)) {
        throw new InvalidArgumentError('messages', 'expected an array of messages');
      }
      const sessions = turnManager ?? manager;
      const reportError =
        stream.onCallbackError ??
        ((error: unknown, callback: string) => console.error(`[baton] ${callback} failed:`, error));
      // An app's callback that throws is reported, and never breaks the stream.
      const guard = async (name: string, callback: () => void | PromiseLike<void>) => {
        try {
          await callback();
        } catch (error) {
          reportError(error, name);
        }
      };
      const { agentId, sessionState } = stream;
      const orchestrationState =
        stream.initialState !== undefined
          ? stream.initialState
          : sessionState !== undefined
            ? toAIState(sessionState)
            : await sessions.getState(sessionId);
      const modelMessages = await toModelMessages(messages, tools);

      // The turn ends with the call's onEnd, or when aborted. The AI SDK calls no onEnd for a turn
      // in which no step ended, or whose stream ended in a NoOutputGeneratedError (its result's
      // promises reject instead): the transform below sees both, and ends such a turn when the
      // stream of its parts ends. Not by awaiting the result's promises: in the AI SDK, reading
      // one starts a second reader of the whole stream.
      let stepsEnded = 0;
      let noOutput = false;
      let endTurn: () => void = () => undefined;
      const turnEnded = new Promise<void>((resolve) => {
        endTurn = resolve;
      });
      abortSignal?.addEventListener('abort', () => endTurn(), { once: true });
      const { onStepFinish, onFinish } = stream;
      const result = await toolLoopAgent.stream({
        messages: modelMessages,
        options: {
          sessionId,
          ...(turnManager ? { manager: turnManager } : {}),
          conversation: messages as readonly ChatMessage[],
          ...(onStep ? { onStep } : {}),
          ...(toolApprovalSecret !== undefined ? { toolApprovalSecret } : {}),
          ...(agentId !== undefined ? { agentId } : {}),
          ...(sessionState !== undefined ? { sessionState } : {}),
          onError: (error) => reportError(error, 'orchestration'),
        },
        ...(abortSignal ? { abortSignal } : {}),
        // Sees the turn's errors before the agent's onError does (the AI SDK applies transforms first).
        experimental_transform: () =>
          new TransformStream({
            transform(part, controller) {
              if (part.type === 'finish-step') stepsEnded++;
              if (part.type === 'error') {
                if (NoOutputGeneratedError.isInstance(part.error)) noOutput = true;
                if (isObject(part.error)) reportedToCaller.add(part.error);
                reportError(part.error, 'stream');
              }
              controller.enqueue(part);
            },
            flush() {
              if (stepsEnded === 0 || noOutput) endTurn();
            },
          }),
        ...(onStepFinish
          ? { onStepEnd: (step) => guard('onStepFinish', () => onStepFinish(step as StepResult<TOOLS>)) }
          : {}),
        onEnd: async (event) => {
          if (onFinish) {
            await guard('onFinish', () =>
              onFinish({ text: event.text, steps: event.steps as unknown as readonly StepResult<TOOLS>[] }),
            );
          }
          endTurn();
        },
      });
      if (!callerDrains) void result.consumeStream();
      const { orchestration } = result;
      const finalOrchestrationState = turnEnded.then(async () => {
        await orchestration.settled().catch(() => undefined); // failures went to onCallbackError
        // The turn holds the state it last wrote: no store read for it (a read only when the
        // turn never reached a model step).
        const held = orchestration.sessionState();
        return held !== undefined ? toAIState(held) : await sessions.getState(sessionId).catch(() => null);
      });
      // The agent is built on the resolved tool set (see above); its calls run exactly the app's
      // tools, so the result is the app's tool set's.
      return Object.assign(result, {
        orchestrationState,
        finalOrchestrationState,
      }) as unknown as OrchestratedStreamResult<TOOLS>;
    },
  };
}

const diagnosticsChannel = (
  globalThis.process as { getBuiltinModule?: (id: string) => typeof import('node:diagnostics_channel') } | undefined
)?.getBuiltinModule?.('node:diagnostics_channel');

/**
 * True when something receives the AI SDK's telemetry of a call starting now: an integration
 * registered with `registerTelemetry()`, or a subscriber of its tracing channel (where the
 * runtime cannot tell, assume one).
 */
function aiSdkTelemetryListens(): boolean {
  if ((globalThis.AI_SDK_TELEMETRY_INTEGRATIONS?.length ?? 0) > 0) return true;
  const channel = diagnosticsChannel?.tracingChannel?.(AI_SDK_TELEMETRY_TRACING_CHANNEL);
  return channel === undefined || channel.hasSubscribers !== false;
}

/** Errors of a turn that its caller was given, so the agent's onError does not log them again. */
const reportedToCaller = new WeakSet<object>();

function isObject(value: unknown): value is object {
  return (typeof value === 'object' && value !== null) || typeof value === 'function';
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
