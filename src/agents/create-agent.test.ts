import { tracingChannel } from 'node:diagnostics_channel';
import { openai } from '@ai-sdk/openai';
import { AI_SDK_TELEMETRY_TRACING_CHANNEL, type ModelMessage, type ToolSet, tool, type UIMessage } from 'ai';
import { describe, expect, expectTypeOf, it, onTestFinished, vi } from 'vitest';
import { z } from 'zod';
import { configErrorOf } from '../../test/helpers/config-errors.js';
import { CoreLLM, MissingApiKeyError } from '../ai-sdk/core-llm.js';
import type { OrchestratedStreamResult } from '../ai-sdk/llm-orchestration-service.js';
import type { StepInfo } from '../ai-sdk/orchestrate.js';
import { InvalidArgumentError } from '../core/errors.js';
import { parseTemplate } from '../core/validate-template.js';
import { loadTemplate } from '../templates/load-template.js';
import { ScriptedModel } from '../testing/scripted-model.js';
import { type Agent, createAgent } from './create-agent.js';

const EXAMPLE = new URL('../../examples/agents/cognitive-reasoner.json', import.meta.url).pathname;

/** A small template with message-triggered modes, so the expected tool order is known exactly. */
const template = parseTemplate({
  id: 'researcher',
  personality: 'You are a patient researcher.',
  llm: { provider: 'openai', model: 'gpt-4o' },
  tools: ['search', 'think', 'reflect', 'critique'],
  orchestration: {
    description: 'Pick the mode that fits the question.',
    steps: [
      {
        name: 'ResearchMode',
        conditions: [{ type: 'message_regex', value: 'research|how many' }],
        sequence: ['search', 'think', 'reflect'],
        availableTools: { allowed: ['search', 'think', 'reflect'] },
      },
      {
        name: 'CritiqueMode',
        conditions: [{ type: 'message_regex', value: 'critique' }],
        sequence: ['critique', 'reflect'],
        availableTools: { allowed: ['critique', 'reflect'] },
      },
      { name: 'Open', isDefault: true },
    ],
  },
});

const RESEARCH = 'Please research how many electric vehicles will be on the road by 2030';
const CRITIQUE = 'Critique the argument that remote work improves productivity';

interface Turn {
  steps: StepInfo[];
  /** Tools whose execution produced a result, in order. */
  executed: string[];
  /** Tools whose call was refused or failed. */
  failed: string[];
  text: string;
}

/** Consumes a turn as a client would, collecting what it shows. */
async function play<TOOLS extends ToolSet>(result: OrchestratedStreamResult<TOOLS>, steps: StepInfo[]): Promise<Turn> {
  const executed: string[] = [];
  const failed: string[] = [];
  let text = '';
  for await (const part of result.stream) {
    if (part.type === 'tool-result') executed.push(part.toolName);
    else if (part.type === 'tool-error') failed.push(part.toolName);
    else if (part.type === 'text-delta') text += part.text;
  }
  return { steps, executed, failed, text };
}

async function ask<TOOLS extends ToolSet>(
  agent: Agent<TOOLS>,
  messages: readonly (UIMessage | ModelMessage)[],
  sessionId = 's',
): Promise<Turn & { result: OrchestratedStreamResult<TOOLS> }> {
  const steps: StepInfo[] = [];
  const result = await agent.handleMessage({ messages, sessionId, onStep: (info) => void steps.push(info) });
  return { ...(await play(result, steps)), result };
}

const progress = (steps: readonly StepInfo[]) =>
  steps.map((s) => `${s.activeStep}:${s.sequence?.index ?? '-'}:${s.allowedTools.join('|')}`);

describe('createAgent with the offline model', () => {
  it('answers a plain message, following the sequence of the step the message selects', async () => {
    const agent = createAgent(template, { model: 'offline' });
    expect([agent.id, agent.llm.provider, Object.keys(agent.tools)]).toEqual([
      'researcher',
      'offline',
      ['search', 'think', 'reflect', 'critique'],
    ]);
    const turn = await ask(agent, [{ role: 'user', content: RESEARCH }]);
    expect(progress(turn.steps)).toEqual([
      'ResearchMode:0:search',
      'ResearchMode:1:think',
      'ResearchMode:2:reflect',
      'ResearchMode:3:search|think|reflect',
    ]);
    expect(turn.executed).toEqual(['search', 'think', 'reflect']);
    expect(turn.failed).toEqual([]);
    expect(turn.text).toContain('`search`, then `think`, then `reflect`');
    expect(turn.text).toBe(await turn.result.text);

    const state = await turn.result.finalOrchestrationState;
    expect(state).toMatchObject({ activeStep: 'ResearchMode', sequenceIndex: 3 });
    expect(state?.recentlyUsedTools).toEqual(['search', 'think', 'reflect']);
    const usage = await turn.result.usage;
    expect(state?.cumulativeTokenUsage).toEqual({
      promptTokens: usage.inputTokens,
      completionTokens: usage.outputTokens,
      totalTokens: usage.totalTokens,
    });
    expect(usage.totalTokens).toBeGreaterThan(0);
  });

  it('answers AI SDK UI messages (parts), reading the message conditions from their parts', async () => {
    const agent = createAgent(template, { model: 'offline' });
    const first: UIMessage = { id: 'u1', role: 'user', parts: [{ type: 'text', text: RESEARCH }] };
    const turn1 = await ask(agent, [first], 'ui');
    expect(turn1.executed).toEqual(['search', 'think', 'reflect']);
    expect(turn1.steps[0]?.activeStep).toBe('ResearchMode');

    // The next turn, as useChat sends it: the whole conversation, the answer included.
    const conversation: UIMessage[] = [
      first,
      { id: 'a1', role: 'assistant', parts: [{ type: 'text', text: turn1.text }] },
      { id: 'u2', role: 'user', parts: [{ type: 'text', text: CRITIQUE }] },
    ];
    const turn2 = await ask(agent, conversation, 'ui');
    expect(progress(turn2.steps)).toEqual([
      'CritiqueMode:0:critique',
      'CritiqueMode:1:reflect',
      'CritiqueMode:2:reflect|critique', // in the order of the agent's tools
    ]);
    expect(turn2.executed).toEqual(['critique', 'reflect']);
    expect(turn2.text).toContain('## Critique the argument');
    const state = await turn2.result.finalOrchestrationState;
    expect(state?.recentlyUsedTools).toEqual(['search', 'think', 'reflect', 'critique', 'reflect']);
  });

  it('runs the example cognitive-reasoner template, never executing a tool that was not offered', async () => {
    const example = await loadTemplate(EXAMPLE);
    const agent = createAgent(example, { model: 'offline' });
    for (const [index, messages] of [
      [{ role: 'user' as const, content: 'How many electric vehicles will be on the road by 2030?' }],
      [
        {
          id: 'u1',
          role: 'user' as const,
          parts: [{ type: 'text' as const, text: 'How many electric vehicles will be on the road by 2030?' }],
        },
      ],
    ].entries()) {
      const steps: StepInfo[] = [];
      const offeredAtCall = new Map<string, readonly string[]>();
      const result = await agent.handleMessage({
        messages,
        sessionId: `example-${index}`,
        onStep: (info) => void steps.push(info),
      });
      for await (const part of result.stream) {
        if (part.type === 'tool-call') offeredAtCall.set(part.toolCallId, steps.at(-1)?.allowedTools ?? []);
      }
      const calls = (await result.steps).flatMap((s) => s.toolResults.map((r) => [r.toolCallId, r.toolName] as const));
      expect(calls.map(([, name]) => name).slice(0, 3)).toEqual(['search', 'think', 'reflect']);
      for (const [id, name] of calls) expect(offeredAtCall.get(id)).toContain(name);
      expect(await result.text).toContain('search');
      expect((await result.finalOrchestrationState)?.cumulativeTokenUsage.totalTokens).toBeGreaterThan(0);
    }
  });

  it('keeps the personality and the orchestration guide in the instructions', async () => {
    const model = new ScriptedModel([{ text: 'hi' }]);
    const agent = createAgent(template, { model });
    expect([agent.llm.provider, agent.llm.modelId]).toEqual(['scripted', 'scripted']);
    await (
      await agent.handleMessage({ messages: [{ role: 'user', content: 'hello' }], sessionId: 'p' })
    ).consumeStream();
    const system = model.calls[0]?.prompt.find((m) => m.role === 'system')?.content;
    expect(system).toContain('You are a patient researcher.');
    expect(system).toContain('Pick the mode that fits the question.');
    expect(system).toContain('Active step: Open');
  });

  it('refuses a model that skips ahead, whatever the model is', async () => {
    const model = new ScriptedModel([
      { toolCalls: [{ toolName: 'reflect', input: { topic: 't', reflection: 'r' } }] },
      { text: 'gave up' },
    ]);
    const agent = createAgent(template, { model: new CoreLLM(model, { provider: 'scripted', modelId: 'm' }) });
    const turn = await ask(agent, [{ role: 'user', content: RESEARCH }]);
    expect(turn.executed).toEqual([]);
    expect(turn.failed).toEqual(['reflect']);
    expect(model.offeredTools()).toEqual([['search'], ['search']]);
    expect((await turn.result.finalOrchestrationState)?.sequenceIndex).toBe(0);
  });

  it('rejects messages that are not an array', async () => {
    const agent = createAgent(template, { model: 'offline' });
    await expect(
      agent.handleMessage({ messages: 'hello' as unknown as ModelMessage[], sessionId: 's' }),
    ).rejects.toThrow(InvalidArgumentError);
  });

  it('advances the sequence in a second conversation on the same session', async () => {
    const agent = createAgent(template, { model: 'offline' });
    await ask(agent, [{ role: 'user', content: RESEARCH }], 'again');
    const turn = await ask(agent, [{ role: 'user', content: CRITIQUE }], 'again');
    expect(turn.executed).toEqual(['critique', 'reflect']);
    expect((await turn.result.finalOrchestrationState)?.recentlyUsedTools).toEqual([
      'search',
      'think',
      'reflect',
      'critique',
      'reflect',
    ]);
  });

  // Regression: the offline model's call ids once repeated for the same question asked again,
  // and the session dropped the calls as replays.
  it('records the tools of the same question asked again as a new message in a new conversation', async () => {
    const agent = createAgent(template, { model: 'offline' });
    const message = (id: string): UIMessage => ({ id, role: 'user', parts: [{ type: 'text', text: RESEARCH }] });
    await ask(agent, [message('first')], 'same');
    const turn = await ask(agent, [message('second')], 'same');
    expect(turn.executed).toEqual(['search', 'think', 'reflect']);
    expect((await turn.result.finalOrchestrationState)?.recentlyUsedTools).toHaveLength(6);
  });
});

describe('createAgent configuration errors', () => {
  it('names the tools that have no implementation, and accepts them through options.tools', () => {
    const needsMore = parseTemplate({ id: 'x', tools: ['search', 'telepathy', 'teleport'] });
    let caught: unknown;
    try {
      createAgent(needsMore, { model: 'offline' });
    } catch (error) {
      caught = error;
    }
    expect(InvalidArgumentError.isInstance(caught)).toBe(true);
    expect((caught as Error).message).toContain(
      'agent "x" names tools that have no implementation: telepathy, teleport',
    );
    expect((caught as Error).message).toContain('options.tools');

    const stub = tool({ description: 'stub', inputSchema: z.object({}), execute: async () => 'ok' });
    const agent = createAgent(needsMore, { model: 'offline', tools: { telepathy: stub, teleport: stub } });
    expect(Object.keys(agent.tools)).toEqual(['search', 'telepathy', 'teleport']);
  });

  it('lets options.tools replace a built-in tool', async () => {
    const calls: unknown[] = [];
    const search = tool({
      description: 'my search',
      inputSchema: z.object({ query: z.string() }),
      execute: async ({ query }) => {
        calls.push(query);
        return { results: [] };
      },
    });
    const agent = createAgent(template, { model: 'offline', tools: { search } });
    const turn = await ask(agent, [{ role: 'user', content: RESEARCH }]);
    expect(turn.executed[0]).toBe('search');
    expect(calls).toEqual([RESEARCH]);
  });

  it("throws MissingApiKeyError for the template's model when its key is missing", async () => {
    const example = await loadTemplate(EXAMPLE);
    expect(() => createAgent(example, { env: {} })).toThrow(MissingApiKeyError);
    expect(() => createAgent(example, { env: {} })).toThrow(/ANTHROPIC_API_KEY.*--model offline/);
    expect(() => createAgent(template, { env: {} })).toThrow(/OPENAI_API_KEY/);
    // With the key, the template's model is used as is.
    const agent = createAgent(example, { env: { ANTHROPIC_API_KEY: 'sk-ant-test' } });
    expect([agent.llm.provider, agent.llm.modelId]).toEqual(['anthropic', 'claude-sonnet-4-20250514']);
  });

  it('throws MissingApiKeyError for a model spec without its key', () => {
    expect(() => createAgent(template, { model: 'anthropic:claude-x', env: {} })).toThrow(/ANTHROPIC_API_KEY/);
  });

  it('refuses a model it could not call when the agent is created, as createApp does', () => {
    // `model: 42` and `model: openai` (the provider, not openai('gpt-4o')) used to be accepted,
    // and fail only when the first message called the model.
    const number = configErrorOf(() => createAgent(template, { model: 42 as never }));
    expect(number.message).toContain(`Invalid agent "${template.id}"`);
    expect(number.issues.map((issue) => issue.path)).toEqual(['options.model']);
    expect(number.issues[0]!.message).toMatch(/^expected a model spec \("offline", "openai:gpt-4o"\).*, got number$/);

    const provider = configErrorOf(() => createAgent(template, { model: openai as never }));
    expect(provider.issues.map((issue) => issue.path)).toEqual(['options.model']);
    expect(provider.issues[0]!.message).toMatch(/this is a provider: call it with a model id \(openai\("gpt-4o"\)\)/);

    const noModel = configErrorOf(() => createAgent(template, { model: { modelId: 'gpt-4o' } as never }));
    expect(noModel.issues[0]!.message).toMatch(/got an object with neither doStream nor provider$/);

    // A spec, an AI SDK model, a CoreLLM and { provider, model } still pass.
    expect(createAgent(template, { model: 'offline' }).llm.provider).toBe('offline');
    expect(createAgent(template, { model: openai('gpt-4o') }).llm.modelId).toBe('gpt-4o');
    const llm = createAgent(template, { model: 'offline' }).llm;
    expect(createAgent(template, { model: llm }).llm).toBe(llm);
    expect(
      createAgent(template, { model: { provider: 'openai', model: 'gpt-4o' }, env: { OPENAI_API_KEY: 'k' } }).llm
        .modelId,
    ).toBe('gpt-4o');
  });

  it('refuses an option it does not know, with a did-you-mean', () => {
    const error = configErrorOf(() => createAgent(template, { model: 'offline', tool: {} } as never));
    expect(error.issues).toEqual([
      expect.objectContaining({
        path: 'options.tool',
        message: 'unknown option "tool"',
        hint: 'did you mean "tools"?',
      }),
    ]);
  });

  it('asks for a model when neither the template nor the options name one', () => {
    const bare = parseTemplate({ id: 'bare', tools: ['think'] });
    expect(() => createAgent(bare)).toThrow(/agent "bare" names no model; pass options.model/);
  });
});

describe('createAgent types and its ToolLoopAgent', () => {
  it('keeps the literal tool names of the tools the app passes, in every result', async () => {
    const search = tool({
      description: 'my search',
      inputSchema: z.object({ query: z.string() }),
      execute: async (): Promise<{ results: string[] }> => ({ results: [] }),
    });
    const tools = { search, think: tool({ inputSchema: z.object({}), execute: async (): Promise<string> => 'ok' }) };
    const agent = createAgent(parseTemplate({ id: 'typed', tools: ['search', 'think'] }), { model: 'offline', tools });
    const result = await agent.handleMessage({ messages: [{ role: 'user', content: RESEARCH }], sessionId: 't' });
    const steps = await result.steps;
    const names = steps.flatMap((step) => step.staticToolCalls.map((call) => call.toolName));
    expectTypeOf(names).toEqualTypeOf<('search' | 'think')[]>();
    expect(names[0]).toBe('search');
  });

  it('builds one ToolLoopAgent that serves every session of the template, orchestrated', async () => {
    const agent = createAgent(template, { model: 'offline' });
    const [a, b] = await Promise.all(
      ['a', 'b'].map((sessionId) =>
        agent.toolLoopAgent.generate({ prompt: sessionId === 'a' ? RESEARCH : CRITIQUE, options: { sessionId } }),
      ),
    );
    expect(a?.steps.flatMap((s) => s.toolResults.map((r) => r.toolName))).toEqual(['search', 'think', 'reflect']);
    expect(b?.steps.flatMap((s) => s.toolResults.map((r) => r.toolName))).toEqual(['critique', 'reflect']);
    for (const [sessionId, result] of [
      ['a', a],
      ['b', b],
    ] as const) {
      const state = await agent.manager.getState(sessionId);
      expect(state?.cumulativeTokenUsage.totalTokens).toBe(result?.usage.totalTokens);
      expect(state?.cumulativeTokenUsage.totalTokens).toBeGreaterThan(0);
    }
    expect((await agent.manager.getState('a'))?.activeStep).toBe('ResearchMode');
    expect((await agent.manager.getState('b'))?.activeStep).toBe('CritiqueMode');
  });

  it('runs handleMessage on that ToolLoopAgent: the model is called as the AI SDK agent calls it', async () => {
    const model = new ScriptedModel([{ toolCalls: [{ toolName: 'search', input: { query: 'ev' } }] }, { text: 'ok' }]);
    const agent = createAgent(template, { model });
    const turn = await ask(agent, [{ role: 'user', content: RESEARCH }]);
    expect(turn.executed).toEqual(['search']);
    // ToolLoopAgent tags every model call it makes; a bare streamText call has no such tag.
    for (const call of model.calls) expect(call.headers?.['user-agent']).toContain('ai-sdk-agent/tool-loop');
    expect((await turn.result.finalOrchestrationState)?.recentlyUsedTools).toEqual(['search']);
  });

  it('ends a turn whose model fails before any step ended: the stream says so and the final state resolves', async () => {
    const model = new ScriptedModel(() => {
      throw new Error('the provider is down');
    });
    const errors: string[] = [];
    const consoleError = vi.spyOn(console, 'error').mockImplementation(() => undefined);
    onTestFinished(() => consoleError.mockRestore());
    const agent = createAgent(template, { model });
    const result = await agent.handleMessage({
      messages: [{ role: 'user', content: RESEARCH }],
      sessionId: 'down',
      stream: { onCallbackError: (_error, callback) => void errors.push(callback) },
    });
    const parts: string[] = [];
    for await (const part of result.stream) parts.push(part.type);
    expect(parts).toContain('error');
    // No onEnd comes for such a turn; the final state must not wait for one.
    const final = await Promise.race([
      result.finalOrchestrationState,
      new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 2000)),
    ]);
    expect(final).not.toBe('hung');
    expect(final).toMatchObject({ activeStep: 'ResearchMode', recentlyUsedTools: [] });
    // Reported once, to the caller (the AI SDK would also print it to the console).
    expect(errors).toEqual(['stream']);
    expect(consoleError).not.toHaveBeenCalled();
  });

  it('ends an aborted turn: the final state resolves with what the turn stored', async () => {
    const controller = new AbortController();
    const model = new ScriptedModel(({ index }) => {
      if (index === 1) controller.abort(new Error('the client left'));
      return { toolCalls: [{ toolName: index === 0 ? 'search' : 'think', input: { query: 'ev', thought: 'x' } }] };
    });
    const agent = createAgent(template, { model });
    const result = await agent.handleMessage({
      messages: [{ role: 'user', content: RESEARCH }],
      sessionId: 'abort',
      abortSignal: controller.signal,
    });
    for await (const _part of result.stream) {
      // consumed as a client would, until the abort ends it
    }
    const final = await result.finalOrchestrationState;
    expect(final?.recentlyUsedTools).toEqual(['search']);
  });

  it("reports an app callback that throws to onCallbackError, and the turn's text still arrives", async () => {
    const errors: string[] = [];
    const agent = createAgent(template, { model: 'offline' });
    const result = await agent.handleMessage({
      messages: [{ role: 'user', content: RESEARCH }],
      sessionId: 'callbacks',
      stream: {
        onCallbackError: (_error, callback) => void errors.push(callback),
        onStepFinish: () => {
          throw new Error('app bug');
        },
        onFinish: () => {
          throw new Error('app bug');
        },
      },
    });
    const turn = await play(result, []);
    expect(turn.executed).toEqual(['search', 'think', 'reflect']);
    expect(turn.text.length).toBeGreaterThan(0);
    expect(errors).toContain('onFinish');
    expect(errors.filter((name) => name === 'onStepFinish')).toHaveLength(4);
  });
});

describe('createAgent and the AI SDK tracing channel', () => {
  it('sends a subscriber of the channel no message text unless recordContent', async () => {
    const secret = 'my card number is 4111 1111 1111 1111';
    const received: unknown[] = [];
    const channel = tracingChannel(AI_SDK_TELEMETRY_TRACING_CHANNEL);
    const subscriber = {
      start: (message: unknown) => received.push(message),
      end: () => undefined,
      asyncStart: () => undefined,
      asyncEnd: () => undefined,
      error: () => undefined,
    };
    channel.subscribe(subscriber);
    onTestFinished(() => {
      channel.unsubscribe(subscriber);
    });
    const seen = async (recordContent: boolean) => {
      received.length = 0;
      const agent = createAgent(await loadTemplate(EXAMPLE), { model: 'offline', telemetry: { recordContent } });
      const messages = [{ id: 'm1', role: 'user' as const, parts: [{ type: 'text' as const, text: secret }] }];
      await (await agent.handleMessage({ messages, sessionId: crypto.randomUUID() })).consumeStream();
      expect(received.length).toBeGreaterThan(0);
      return received.some((message) => textOf(message).includes(secret));
    };
    expect(await seen(false)).toBe(false);
    expect(await seen(true)).toBe(true);
  });
});

/** Every string reachable from `value`, joined (cycles and functions skipped). */
function textOf(value: unknown, seen = new WeakSet<object>()): string {
  if (typeof value === 'string') return value;
  if (typeof value !== 'object' || value === null || seen.has(value)) return '';
  seen.add(value);
  return Object.values(value)
    .map((field) => textOf(field, seen))
    .join('\n');
}
