/**
 * End to end over real HTTP: Baton's agents and `orchestrate()` drive `@ai-sdk/openai-compatible`
 * against a local OpenAI-compatible server that streams tool calls as SSE. This is the provider
 * path a user of Ollama, LM Studio, vLLM or llama.cpp takes.
 */
import { generateText, isStepCount, type ModelMessage } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';
import { createAgent } from '../src/agents/create-agent.js';
import { createLLM } from '../src/ai-sdk/core-llm.js';
import type { OrchestratedStreamResult } from '../src/ai-sdk/llm-orchestration-service.js';
import { orchestrate, type StepInfo } from '../src/ai-sdk/orchestrate.js';
import type { OrchestrationEvent } from '../src/core/events.js';
import { parseTemplate } from '../src/core/validate-template.js';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { callFirstOfferedTool, type OpenAIStub, type StubPolicy, startOpenAIStub } from './helpers/openai-stub.js';

const template = parseTemplate({
  id: 'e2e-researcher',
  llm: { provider: 'openai-compatible', model: 'stub-model' },
  tools: ['search', 'think', 'reflect', 'critique'],
  orchestration: {
    steps: [
      {
        name: 'ResearchMode',
        conditions: [{ type: 'message_regex', value: 'research|how many' }],
        sequence: ['search', 'think', 'reflect'],
        availableTools: { allowed: ['search', 'think', 'reflect'] },
        resetSequenceOn: ['new_message'],
      },
      { name: 'Open', isDefault: true },
    ],
  },
});

const QUESTION = 'How many electric vehicles will be on the road by 2030?';

let stub: OpenAIStub | undefined;
afterEach(async () => {
  await stub?.close();
  stub = undefined;
});

async function start(policy?: StubPolicy): Promise<OpenAIStub> {
  stub = await startOpenAIStub(policy ? { policy } : {});
  return stub;
}

/** Reads a turn as a client would. */
async function consume(result: OrchestratedStreamResult) {
  const executed: { id: string; name: string }[] = [];
  const errors: string[] = [];
  let text = '';
  for await (const part of result.stream) {
    if (part.type === 'tool-result') executed.push({ id: part.toolCallId, name: part.toolName });
    else if (part.type === 'tool-error') errors.push(part.toolName);
    else if (part.type === 'text-delta') text += part.text;
    else if (part.type === 'error') throw part.error;
  }
  return { executed, errors, text };
}

const sumUsage = (s: OpenAIStub) =>
  s.usages.reduce(
    (sum, u) => ({
      promptTokens: sum.promptTokens + u.prompt_tokens,
      completionTokens: sum.completionTokens + u.completion_tokens,
      totalTokens: sum.totalTokens + u.total_tokens,
    }),
    { promptTokens: 0, completionTokens: 0, totalTokens: 0 },
  );

describe('openai-compatible provider over HTTP', () => {
  it('createAgent: streamed tool calls follow the sequence, usage adds up, the answer arrives', async () => {
    const server = await start();
    const llm = createLLM({ provider: 'openai-compatible', baseURL: server.baseURL, model: 'stub-model', env: {} });
    const agent = createAgent(template, { model: llm });
    const steps: StepInfo[] = [];
    const result = await agent.handleMessage({
      messages: [{ role: 'user', content: QUESTION }],
      sessionId: 'http-1',
      onStep: (info) => void steps.push(info),
    });
    const turn = await consume(result);

    // What the server was offered, request by request: the gate, then the step's tools.
    expect(server.requests.map((r) => r.offeredTools)).toEqual([
      ['search'],
      ['think'],
      ['reflect'],
      ['search', 'think', 'reflect'],
    ]);
    // Exactly the calls the server made were executed, in order, with the server's ids.
    expect(turn.executed.map((c) => c.name)).toEqual(['search', 'think', 'reflect']);
    expect(turn.executed.map((c) => c.id)).toEqual(server.toolCallIds);
    expect(turn.errors).toEqual([]);
    expect(turn.text).toBe('Final answer, from search then think then reflect.');
    expect(steps.map((s) => s.sequence?.index)).toEqual([0, 1, 2, 3]);

    const state = await result.finalOrchestrationState;
    expect(state).toMatchObject({
      activeStep: 'ResearchMode',
      sequenceIndex: 3,
      recentlyUsedTools: ['search', 'think', 'reflect'],
    });
    expect(state?.cumulativeTokenUsage).toEqual(sumUsage(server));
    expect(server.usages).toHaveLength(4);

    // The wire format: streamed, usage requested, the orchestration told to the model.
    const first = server.requests[0]!.body;
    expect(first.model).toBe('stub-model');
    expect(first.stream).toBe(true);
    expect(first.stream_options).toEqual({ include_usage: true });
    const system = first.messages.find((m) => m.role === 'system')?.content;
    expect(system).toContain('Next required tool: search');
    // The tool results went back to the server as tool messages.
    const last = server.requests[3]!.body.messages;
    expect(last.filter((m) => m.role === 'tool').map((m) => m.tool_call_id)).toEqual(server.toolCallIds);
  });

  it('a server that calls a tool it was not offered: the call is refused, the server told, the run goes on', async () => {
    const naive = callFirstOfferedTool(3);
    const server = await start((request, index) =>
      index === 0
        ? { type: 'tool-calls', calls: [{ name: 'reflect', arguments: { topic: 'x', reflection: 'y' } }] }
        : naive(request, index),
    );
    const events: OrchestrationEvent[] = [];
    const manager = createOrchestrationManager({ onEvent: (e) => events.push(e) });
    const llm = createLLM({ provider: 'openai-compatible', baseURL: server.baseURL, model: 'stub-model', env: {} });
    const agent = createAgent(template, { model: llm, manager });
    const result = await agent.handleMessage({ messages: [{ role: 'user', content: QUESTION }], sessionId: 'http-2' });
    const turn = await consume(result);

    expect(turn.errors).toEqual(['reflect']);
    expect(turn.executed.map((c) => c.name)).toEqual(['search', 'think']);
    expect(server.requests.map((r) => r.offeredTools)).toEqual([['search'], ['search'], ['think'], ['reflect']]);
    const refusal = server.requests[1]!.body.messages.find((m) => m.role === 'tool');
    expect(refusal?.content).toMatch(/unavailable tool 'reflect'.*Available tools: search/);
    expect(events.filter((e) => e.type === 'tool-rejected').map((e) => e.type === 'tool-rejected' && e.tool)).toEqual([
      'reflect',
    ]);
    // The refused call cost a model step; its tokens are counted like any other.
    expect((await result.finalOrchestrationState)?.cumulativeTokenUsage).toEqual(sumUsage(server));
  });

  it('a second turn sends the whole conversation and restarts the sequence (resetSequenceOn new_message)', async () => {
    const server = await start();
    const llm = createLLM({ provider: 'openai-compatible', baseURL: server.baseURL, model: 'stub-model', env: {} });
    const agent = createAgent(template, { model: llm });
    const conversation: ModelMessage[] = [{ role: 'user', content: QUESTION }];
    const first = await agent.handleMessage({ messages: conversation, sessionId: 'http-3' });
    await consume(first);
    conversation.push(...(await first.responseMessages), { role: 'user', content: 'Now research it for 2040.' });
    const second = await agent.handleMessage({ messages: conversation, sessionId: 'http-3' });
    const turn = await consume(second);
    expect(turn.executed.map((c) => c.name)).toEqual(['search', 'think', 'reflect']);
    expect(server.requests.slice(4).map((r) => r.offeredTools)).toEqual([
      ['search'],
      ['think'],
      ['reflect'],
      ['search', 'think', 'reflect'],
    ]);
    // The server saw the first turn's tool calls and results in the second turn's prompt.
    expect(server.requests[4]!.body.messages.filter((m) => m.role === 'tool')).toHaveLength(3);
    const state = await second.finalOrchestrationState;
    expect(state?.recentlyUsedTools).toEqual(['search', 'think', 'reflect', 'search', 'think', 'reflect']);
    expect(state?.cumulativeTokenUsage).toEqual(sumUsage(server));
  });

  it('orchestrate() + generateText over the non-streaming endpoint', async () => {
    const server = await start();
    const llm = createLLM({ provider: 'openai-compatible', baseURL: server.baseURL, model: 'stub-model', env: {} });
    const manager = createOrchestrationManager();
    const agent = createAgent(template, { model: llm, manager });
    const messages: ModelMessage[] = [{ role: 'user', content: QUESTION }];
    const orchestration = orchestrate({ manager, config: template, sessionId: 'http-4', tools: agent.tools, messages });
    const result = await generateText({ model: llm.model, messages, stopWhen: isStepCount(8), ...orchestration });
    await orchestration.settled();
    expect(server.requests.every((r) => r.body.stream !== true)).toBe(true);
    expect(server.requests.map((r) => r.offeredTools)).toEqual([
      ['search'],
      ['think'],
      ['reflect'],
      ['search', 'think', 'reflect'],
    ]);
    expect(result.text).toBe('Final answer, from search then think then reflect.');
    expect((await manager.getState('http-4'))?.cumulativeTokenUsage).toEqual(sumUsage(server));
  });
});
