import { describe, expect, it } from 'vitest';
import { agentdockSample } from '../../test/helpers/agentdock.js';
import { BatonError, InvalidArgumentError } from '../core/errors.js';
import { loadTemplate } from '../templates/load-template.js';
import {
  type CoreLLM,
  createLLM,
  LLM_PROVIDERS,
  MissingApiKeyError,
  parseModelSpec,
  templateLLMOptions,
} from './core-llm.js';

/** The provider id the AI SDK model reports (a string model id has none). */
const providerOf = (llm: CoreLLM) => (typeof llm.model === 'string' ? llm.model : llm.model.provider);
const modelIdOf = (llm: CoreLLM) => (typeof llm.model === 'string' ? llm.model : llm.model.modelId);

describe('createLLM', () => {
  it('resolves every provider to a model of that provider, without touching the network', () => {
    const env = { OPENAI_API_KEY: 'sk-test', ANTHROPIC_API_KEY: 'sk-ant-test' };
    const openai = createLLM({ provider: 'openai', model: 'gpt-4o', env });
    expect([openai.provider, openai.modelId]).toEqual(['openai', 'gpt-4o']);
    expect(providerOf(openai)).toMatch(/^openai\./);
    expect(modelIdOf(openai)).toBe('gpt-4o');

    const anthropic = createLLM({ provider: 'anthropic', model: 'claude-sonnet-4-20250514', env });
    expect([anthropic.provider, anthropic.modelId]).toEqual(['anthropic', 'claude-sonnet-4-20250514']);
    expect(providerOf(anthropic)).toMatch(/^anthropic\./);

    const local = createLLM({ provider: 'openai-compatible', model: 'llama3.1', baseURL: 'http://127.0.0.1:1/v1' });
    expect([local.provider, local.modelId]).toEqual(['openai-compatible', 'llama3.1']);
    expect(providerOf(local)).toBe('openai-compatible.chat');

    const offline = createLLM({ provider: 'offline', env: {} });
    expect([offline.provider, offline.modelId, providerOf(offline)]).toEqual(['offline', 'offline', 'baton-offline']);
  });

  it('picks a default model per provider when none is given', () => {
    const env = { OPENAI_API_KEY: 'k', ANTHROPIC_API_KEY: 'k', OPENAI_COMPATIBLE_BASE_URL: 'http://127.0.0.1:1/v1' };
    for (const provider of LLM_PROVIDERS) {
      const llm = createLLM({ provider, env });
      expect(llm.modelId, provider).not.toBe('');
      expect(modelIdOf(llm), provider).toBe(llm.modelId);
    }
  });

  it('prefers an explicit apiKey over the environment', () => {
    expect(createLLM({ provider: 'openai', apiKey: 'sk-explicit', env: {} }).provider).toBe('openai');
    expect(createLLM({ provider: 'anthropic', apiKey: 'sk-explicit', env: {} }).provider).toBe('anthropic');
  });

  it.each([
    ['openai', 'OPENAI_API_KEY'],
    ['anthropic', 'ANTHROPIC_API_KEY'],
  ])('throws MissingApiKeyError for %s naming %s and pointing to --model offline', (provider, variable) => {
    let caught: unknown;
    try {
      createLLM({ provider, env: {} });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(MissingApiKeyError);
    const error = caught as MissingApiKeyError;
    expect(error.code).toBe('missing-api-key');
    expect(error.variable).toBe(variable);
    expect(BatonError.isInstance(error)).toBe(true);
    expect(error.message).toContain(variable);
    expect(error.message).toContain(provider);
    expect(error.message).toContain('--model offline');
    expect(error.message).toMatch(/no key/);
  });

  it('MissingApiKeyError.isInstance is true for it only, not for every Baton error', () => {
    expect(MissingApiKeyError.isInstance(new MissingApiKeyError('openai', 'OPENAI_API_KEY'))).toBe(true);
    expect(MissingApiKeyError.isInstance(new InvalidArgumentError('provider', 'bad'))).toBe(false);
    expect(MissingApiKeyError.isInstance(new Error('x'))).toBe(false);
  });

  it('treats an empty key in the environment as missing', () => {
    expect(() => createLLM({ provider: 'openai', env: { OPENAI_API_KEY: '' } })).toThrow(MissingApiKeyError);
  });

  it('does not read process.env when an env is injected', () => {
    const saved = process.env.OPENAI_API_KEY;
    process.env.OPENAI_API_KEY = 'sk-from-process';
    try {
      expect(() => createLLM({ provider: 'openai', env: {} })).toThrow(MissingApiKeyError);
    } finally {
      if (saved === undefined) delete process.env.OPENAI_API_KEY;
      else process.env.OPENAI_API_KEY = saved;
    }
  });

  it('rejects an unknown provider, listing the supported ones and the way to local servers', () => {
    let caught: unknown;
    try {
      createLLM({ provider: 'gemini', env: {} });
    } catch (error) {
      caught = error;
    }
    expect(InvalidArgumentError.isInstance(caught)).toBe(true);
    const message = (caught as Error).message;
    expect(message).toContain('"gemini" is not supported');
    for (const provider of LLM_PROVIDERS) expect(message).toContain(provider);
    expect(message).toContain('openai-compatible');
  });

  it('requires a base URL for openai-compatible, from options or OPENAI_COMPATIBLE_BASE_URL', () => {
    let caught: unknown;
    try {
      createLLM({ provider: 'openai-compatible', model: 'llama3.1', env: {} });
    } catch (error) {
      caught = error;
    }
    expect(InvalidArgumentError.isInstance(caught)).toBe(true);
    expect((caught as InvalidArgumentError).path).toBe('baseURL');
    expect((caught as Error).message).toContain('OPENAI_COMPATIBLE_BASE_URL');
    expect((caught as Error).message).toContain('base URL');

    const fromEnv = createLLM({
      provider: 'openai-compatible',
      model: 'llama3.1',
      env: { OPENAI_COMPATIBLE_BASE_URL: 'http://127.0.0.1:1/v1' },
    });
    expect(fromEnv.modelId).toBe('llama3.1');
  });

  it('binds streamText and generateText to its model', async () => {
    const llm = createLLM({ provider: 'offline', env: {} });
    const generated = await llm.generateText({ prompt: 'Hello there' });
    expect(generated.text).toContain('Hello');
    const streamed = llm.streamText({ prompt: 'Hello there' });
    expect(await streamed.text).toBe(generated.text);
  });
});

describe('parseModelSpec', () => {
  it.each([
    ['offline', { provider: 'offline' }],
    ['openai:gpt-4o', { provider: 'openai', model: 'gpt-4o' }],
    ['anthropic:claude-sonnet-4-20250514', { provider: 'anthropic', model: 'claude-sonnet-4-20250514' }],
    [
      'openai-compatible:llama3.1@http://127.0.0.1:11434/v1',
      { provider: 'openai-compatible', model: 'llama3.1', baseURL: 'http://127.0.0.1:11434/v1' },
    ],
    // Ollama tags contain a colon; only the first colon separates the provider.
    [
      'openai-compatible:llama3.1:8b@http://localhost:8080/v1',
      { provider: 'openai-compatible', model: 'llama3.1:8b', baseURL: 'http://localhost:8080/v1' },
    ],
    ['  openai:gpt-4o  ', { provider: 'openai', model: 'gpt-4o' }],
  ])('parses %j', (spec, expected) => {
    expect(parseModelSpec(spec)).toEqual(expected);
  });

  it('rejects an empty spec with an example of a valid one', () => {
    expect(() => parseModelSpec('   ')).toThrow(/empty; use e\.g\. offline or openai:gpt-4o/);
  });

  it('leaves the model to the provider default when the spec names none (openai:)', () => {
    const spec = parseModelSpec('openai:');
    expect(spec.model).toBeUndefined();
    expect(createLLM({ ...spec, env: { OPENAI_API_KEY: 'k' } }).modelId).toBe('gpt-4o-mini');
    expect(parseModelSpec('openai-compatible:@http://127.0.0.1:1/v1')).toEqual({
      provider: 'openai-compatible',
      baseURL: 'http://127.0.0.1:1/v1',
    });
    expect(createLLM({ provider: 'openai', model: '', env: { OPENAI_API_KEY: 'k' } }).modelId).toBe('gpt-4o-mini');
  });

  it('feeds createLLM directly', () => {
    const llm = createLLM({ ...parseModelSpec('openai-compatible:qwen2.5@http://127.0.0.1:1/v1'), env: {} });
    expect([llm.provider, llm.modelId]).toEqual(['openai-compatible', 'qwen2.5']);
  });
});

describe('templateLLMOptions', () => {
  it('reads the llm block, with or without a model', () => {
    expect(templateLLMOptions({ llm: { provider: 'openai', model: 'gpt-4o' } })).toEqual({
      provider: 'openai',
      model: 'gpt-4o',
    });
    expect(templateLLMOptions({ llm: { provider: 'anthropic' } })).toEqual({ provider: 'anthropic' });
  });

  it('prefers the llm block over llm.* nodes', () => {
    expect(
      templateLLMOptions({
        llm: { provider: 'openai', model: 'gpt-4o' },
        nodes: ['llm.anthropic', 'search'],
        nodeConfigurations: { 'llm.anthropic': { model: 'claude-x' } },
      }),
    ).toEqual({ provider: 'openai', model: 'gpt-4o' });
  });

  it("reads AgentDock's nodes and nodeConfigurations (cognitive-reasoner fixture)", async () => {
    const template = await loadTemplate(agentdockSample('cognitive-reasoner'));
    expect(templateLLMOptions(template)).toEqual({ provider: 'anthropic', model: 'claude-sonnet-4-20250514' });
    // And that is exactly what createLLM needs, so a missing key names the right variable.
    expect(() => createLLM({ ...templateLLMOptions(template)!, env: {} })).toThrow(/ANTHROPIC_API_KEY/);
  });

  it('takes the provider from the node alone when its configuration has no model', () => {
    expect(templateLLMOptions({ nodes: ['search', 'llm.openai'] })).toEqual({ provider: 'openai' });
    expect(templateLLMOptions({ nodes: ['llm.openai'], nodeConfigurations: { 'llm.openai': { model: 42 } } })).toEqual({
      provider: 'openai',
    });
  });

  it('is undefined when the template names no model', () => {
    expect(templateLLMOptions({})).toBeUndefined();
    expect(templateLLMOptions({ nodes: ['search', 'think'] })).toBeUndefined();
  });

  it('passes providers it does not know on, for createLLM to reject clearly', () => {
    const options = templateLLMOptions({
      nodes: ['llm.gemini'],
      nodeConfigurations: { 'llm.gemini': { model: 'gemini-2.0-flash' } },
    });
    expect(options).toEqual({ provider: 'gemini', model: 'gemini-2.0-flash' });
    expect(() => createLLM({ ...options!, env: {} })).toThrow(/"gemini" is not supported/);
  });
});
