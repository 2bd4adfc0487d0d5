/**
 * `CoreLLM` and `createLLM()`: one model behind one interface, whichever provider serves
 * it (AgentDock's CoreLLM role). The template's `llm` block (or its `llm.<provider>` node)
 * picks the model; environment variables and CLI flags override it.
 */
import { generateText, type LanguageModel, streamText, type ToolSet } from 'ai';
import { BatonError, InvalidArgumentError } from '../core/errors.js';
import { loadOptionalDependency } from '../stores/optional-dependency.js';
import { createOfflineModel } from './offline-model.js';
import type { RuntimeContext } from './orchestrate.js';

/**
 * The options of an AI SDK call without `model`, member by member: the options are a union
 * (`prompt` or `messages`), which a plain `Omit` would flatten.
 */
export type WithoutModel<OPTIONS> = OPTIONS extends unknown ? Omit<OPTIONS, 'model'> : never;

/** The options of `streamText` for a tool set. */
export type StreamTextOptions<
  TOOLS extends ToolSet,
  RUNTIME_CONTEXT extends RuntimeContext = RuntimeContext,
> = Parameters<typeof streamText<TOOLS, RUNTIME_CONTEXT>>[0];

/** The options of `generateText` for a tool set. */
export type GenerateTextOptions<
  TOOLS extends ToolSet,
  RUNTIME_CONTEXT extends RuntimeContext = RuntimeContext,
> = Parameters<typeof generateText<TOOLS, RUNTIME_CONTEXT>>[0];

/** Providers `createLLM` knows. */
export const LLM_PROVIDERS = ['openai', 'anthropic', 'openai-compatible', 'offline'] as const;

/** One of {@link LLM_PROVIDERS}. */
export type LLMProvider = (typeof LLM_PROVIDERS)[number];

/** What picks a model. */
export interface LLMOptions {
  provider: LLMProvider | string;
  /** Model id (default: a sensible one per provider). */
  model?: string;
  /** API key; default from the provider's environment variable. */
  apiKey?: string;
  /** Base URL (required for `openai-compatible`: Ollama, LM Studio, vLLM, llama.cpp server). */
  baseURL?: string;
  /** Environment to read keys from (default `process.env`). */
  env?: Readonly<Record<string, string | undefined>>;
}

/** A provider's API key was needed and not found. */
export class MissingApiKeyError extends BatonError {
  /** The environment variable to set. */
  readonly variable: string;

  constructor(provider: string, variable: string) {
    super(
      'missing-api-key',
      `No API key for provider "${provider}": set ${variable} (or pass apiKey), or use --model offline, which needs no key.`,
    );
    this.name = 'MissingApiKeyError';
    this.variable = variable;
  }

  /** True for a {@link MissingApiKeyError} from any copy of the package (not for other Baton errors). */
  static override isInstance(error: unknown): error is MissingApiKeyError {
    return BatonError.isInstance(error) && error.code === 'missing-api-key';
  }
}

const DEFAULT_MODELS: Record<LLMProvider, string> = {
  openai: 'gpt-4o-mini',
  anthropic: 'claude-sonnet-4-20250514',
  'openai-compatible': 'llama3.1',
  offline: 'offline',
};

const KEY_VARIABLES: Partial<Record<LLMProvider, string>> = {
  openai: 'OPENAI_API_KEY',
  anthropic: 'ANTHROPIC_API_KEY',
};

/** A language model and the provider it came from, with the AI SDK's calls bound to it. */
export class CoreLLM {
  readonly provider: string;
  readonly modelId: string;
  /** The AI SDK model, to pass to `streamText`, `generateText` or `ToolLoopAgent`. */
  readonly model: LanguageModel;

  constructor(model: LanguageModel, info: { provider: string; modelId: string }) {
    this.model = model;
    this.provider = info.provider;
    this.modelId = info.modelId;
  }

  /** `streamText` with this model; the tool set's type flows through to the result. */
  streamText<TOOLS extends ToolSet = ToolSet, RUNTIME_CONTEXT extends RuntimeContext = RuntimeContext>(
    options: WithoutModel<StreamTextOptions<TOOLS, RUNTIME_CONTEXT>>,
  ): ReturnType<typeof streamText<TOOLS, RUNTIME_CONTEXT>> {
    // Only `model` is added; TypeScript cannot follow an Omit through the options' generic union.
    return streamText<TOOLS, RUNTIME_CONTEXT>({ ...options, model: this.model } as StreamTextOptions<
      TOOLS,
      RUNTIME_CONTEXT
    >);
  }

  /** `generateText` with this model; the tool set's type flows through to the result. */
  generateText<TOOLS extends ToolSet = ToolSet, RUNTIME_CONTEXT extends RuntimeContext = RuntimeContext>(
    options: WithoutModel<GenerateTextOptions<TOOLS, RUNTIME_CONTEXT>>,
  ): ReturnType<typeof generateText<TOOLS, RUNTIME_CONTEXT>> {
    return generateText<TOOLS, RUNTIME_CONTEXT>({ ...options, model: this.model } as GenerateTextOptions<
      TOOLS,
      RUNTIME_CONTEXT
    >);
  }
}

/**
 * Creates a {@link CoreLLM}. Throws {@link MissingApiKeyError} when a needed key is missing, and
 * `MissingDependencyError` when the provider's package (`@ai-sdk/openai`, ...) is not installed.
 */
export function createLLM(options: LLMOptions): CoreLLM {
  const env = options.env ?? process.env;
  const provider = options.provider as LLMProvider;
  if (!LLM_PROVIDERS.includes(provider)) {
    throw new InvalidArgumentError(
      'provider',
      `"${options.provider}" is not supported; use one of ${LLM_PROVIDERS.join(', ')} (local servers such as Ollama work through openai-compatible)`,
    );
  }
  const modelId = options.model || DEFAULT_MODELS[provider];
  const keyVariable = KEY_VARIABLES[provider];
  const apiKey = options.apiKey ?? (keyVariable ? env[keyVariable] : undefined);
  switch (provider) {
    case 'offline':
      return new CoreLLM(createOfflineModel(), { provider, modelId: 'offline' });
    case 'openai': {
      const { createOpenAI } = loadProvider<typeof import('@ai-sdk/openai')>('@ai-sdk/openai', provider);
      if (!apiKey) throw new MissingApiKeyError(provider, keyVariable!);
      const openai = createOpenAI({ apiKey, ...(options.baseURL ? { baseURL: options.baseURL } : {}) });
      return new CoreLLM(openai(modelId), { provider, modelId });
    }
    case 'anthropic': {
      const { createAnthropic } = loadProvider<typeof import('@ai-sdk/anthropic')>('@ai-sdk/anthropic', provider);
      if (!apiKey) throw new MissingApiKeyError(provider, keyVariable!);
      const anthropic = createAnthropic({ apiKey, ...(options.baseURL ? { baseURL: options.baseURL } : {}) });
      return new CoreLLM(anthropic(modelId), { provider, modelId });
    }
    case 'openai-compatible': {
      const { createOpenAICompatible } = loadProvider<typeof import('@ai-sdk/openai-compatible')>(
        '@ai-sdk/openai-compatible',
        provider,
      );
      const baseURL = options.baseURL ?? env.OPENAI_COMPATIBLE_BASE_URL;
      if (!baseURL) {
        throw new InvalidArgumentError(
          'baseURL',
          'the openai-compatible provider needs a base URL (e.g. http://127.0.0.1:11434/v1 for Ollama): pass baseURL or set OPENAI_COMPATIBLE_BASE_URL',
        );
      }
      const local = createOpenAICompatible({
        name: 'openai-compatible',
        baseURL,
        includeUsage: true,
        ...((options.apiKey ?? env.OPENAI_COMPATIBLE_API_KEY)
          ? { apiKey: options.apiKey ?? env.OPENAI_COMPATIBLE_API_KEY }
          : {}),
      });
      return new CoreLLM(local(modelId), { provider, modelId });
    }
  }
}

/**
 * A provider SDK: an optional peer dependency, so an app installs only the providers it uses
 * (and the offline model needs none). Loaded when the model is created, where a missing one is
 * reported with its install command.
 */
function loadProvider<Module>(packageName: string, provider: LLMProvider): Module {
  return loadOptionalDependency<Module>(packageName, `The ${provider} provider`);
}

/**
 * Parses a model spec such as `offline`, `openai:gpt-4o`, `anthropic:claude-sonnet-4-20250514` or
 * `openai-compatible:llama3.1@http://127.0.0.1:11434/v1`.
 */
export function parseModelSpec(spec: string): Pick<LLMOptions, 'provider' | 'model' | 'baseURL'> {
  const trimmed = spec.trim();
  if (trimmed === '')
    throw new InvalidArgumentError('model', 'the model spec is empty; use e.g. offline or openai:gpt-4o');
  const colon = trimmed.indexOf(':');
  if (colon < 0) return { provider: trimmed };
  const provider = trimmed.slice(0, colon);
  const rest = trimmed.slice(colon + 1);
  const at = rest.indexOf('@');
  const model = at < 0 ? rest : rest.slice(0, at);
  const baseURL = at < 0 ? '' : rest.slice(at + 1);
  // An empty part (`openai:`, `openai-compatible:@http://…`) means "the default", not a model named "".
  return { provider, ...(model ? { model } : {}), ...(baseURL ? { baseURL } : {}) };
}

/**
 * The model a template asks for: its `llm` block, else its first `llm.<provider>` node with
 * that node's configuration (AgentDock). Undefined when the template names none.
 */
export function templateLLMOptions(template: {
  llm?: { provider: string; model?: string | undefined } | undefined;
  nodes?: readonly string[] | undefined;
  nodeConfigurations?: Readonly<Record<string, unknown>> | undefined;
}): Pick<LLMOptions, 'provider' | 'model'> | undefined {
  if (template.llm)
    return template.llm.model
      ? { provider: template.llm.provider, model: template.llm.model }
      : { provider: template.llm.provider };
  const node = template.nodes?.find((n) => n.startsWith('llm.'));
  if (!node) return undefined;
  const settings = template.nodeConfigurations?.[node] as { model?: unknown } | undefined;
  const provider = node.slice('llm.'.length);
  return typeof settings?.model === 'string' ? { provider, model: settings.model } : { provider };
}
