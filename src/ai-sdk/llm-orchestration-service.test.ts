import { type ModelMessage, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { OrchestrationConfig } from '../core/schema.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import { type Script, ScriptedModel } from '../testing/scripted-model.js';
import { CoreLLM } from './core-llm.js';
import { LLMOrchestrationService } from './llm-orchestration-service.js';

const config: OrchestrationConfig = {
  steps: [
    {
      name: 'Research',
      conditions: [{ type: 'message_contains', value: 'research' }],
      availableTools: { allowed: ['search', 'think', 'reflect'] },
      sequence: ['search', 'think', 'reflect'],
    },
    { name: 'Default', isDefault: true },
  ],
};

function makeTools() {
  const executed: string[] = [];
  const make = (name: string) =>
    tool({
      description: name,
      inputSchema: z.object({ q: z.string().optional() }),
      execute: async (): Promise<string> => {
        executed.push(name);
        return `${name}-ok`;
      },
    });
  return { executed, tools: { search: make('search'), think: make('think'), reflect: make('reflect') } };
}

const messages: ModelMessage[] = [{ role: 'user', content: 'Please research EV adoption' }];
const call = (toolName: string) => ({ toolName, input: {} });
const FINAL_TEXT = 'EV adoption is growing fast in every market we looked at.';

function setup(script: Script) {
  const model = new ScriptedModel(script);
  const llm = new CoreLLM(model, { provider: model.provider, modelId: model.modelId });
  const manager = createOrchestrationManager();
  const service = new LLMOrchestrationService(llm, manager, 'session-1');
  const errors: { error: unknown; callback: string }[] = [];
  const onCallbackError = (error: unknown, callback: string) => {
    errors.push({ error, callback });
  };
  return { model, manager, service, errors, onCallbackError, ...makeTools() };
}

/** Collects the text deltas of a stream as they arrive, so a test sees what a client would see. */
async function streamedText(stream: AsyncIterable<{ type: string; text?: string }>): Promise<string> {
  let text = '';
  for await (const part of stream) if (part.type === 'text-delta') text += part.text ?? '';
  return text;
}

describe('LLMOrchestrationService.streamWithOrchestration', () => {
  it('streams a seed-shaped call, enforcing the sequence and attaching the orchestration state', async () => {
    const { model, service, executed, tools, onCallbackError, errors } = setup([
      { toolCalls: [call('reflect')], inputTokens: 11, outputTokens: 1 }, // out of order: refused
      { toolCalls: [call('search')], inputTokens: 12, outputTokens: 2 },
      { toolCalls: [call('think')], inputTokens: 13, outputTokens: 3 },
      { toolCalls: [call('reflect')], inputTokens: 14, outputTokens: 4 },
      { text: FINAL_TEXT, inputTokens: 15, outputTokens: 5 },
    ]);
    const stepsSeen: number[] = [];
    let finished: { text: string; steps: number } | undefined;
    const result = await service.streamWithOrchestration({
      messages,
      tools,
      system: 'You are a careful researcher.',
      maxSteps: 8,
      temperature: 0.2,
      orchestration: config,
      onStepFinish: (step) => {
        stepsSeen.push(step.stepNumber);
      },
      onFinish: (event) => {
        finished = { text: event.text, steps: event.steps.length };
      },
      onCallbackError,
    });
    // The session did not exist before this turn.
    expect(result.orchestrationState).toBeNull();

    expect(await streamedText(result.stream)).toBe(FINAL_TEXT);
    // Once the sequence is complete, the step's allowed tools are offered again.
    expect(model.offeredTools()).toEqual([
      ['search'],
      ['search'],
      ['think'],
      ['reflect'],
      ['search', 'think', 'reflect'],
    ]);
    expect(executed).toEqual(['search', 'think', 'reflect']);
    expect(stepsSeen).toEqual([0, 1, 2, 3, 4]);
    expect(finished).toEqual({ text: FINAL_TEXT, steps: 5 });
    expect(errors).toEqual([]);

    // The seed's options reached the model: system prompt (plus the orchestration block) and temperature.
    const system = model.calls[0]?.prompt.find((m) => m.role === 'system');
    expect(system?.content).toContain('You are a careful researcher.');
    expect(system?.content).toContain('Next required tool: search');
    expect(model.calls.every((c) => c.temperature === 0.2)).toBe(true);

    expect(await result.finalOrchestrationState).toEqual({
      sessionId: 'session-1',
      activeStep: 'Research',
      recentlyUsedTools: ['search', 'think', 'reflect'],
      sequenceIndex: 3,
      cumulativeTokenUsage: { promptTokens: 65, completionTokens: 15, totalTokens: 80 },
    });
    expect(result.orchestration?.lastStep()).toMatchObject({
      stepNumber: 4,
      activeStep: 'Research',
      sequence: { index: 3, completed: true },
    });
  });

  it('starts from the stored state of an existing session', async () => {
    const { service, manager, tools } = setup([{ text: 'ok' }]);
    await manager.updateState('session-1', { activeStep: 'Research', sequenceIndex: 1 });
    const result = await service.streamWithOrchestration({ messages, tools, orchestration: config });
    expect(result.orchestrationState).toMatchObject({ activeStep: 'Research', sequenceIndex: 1 });
    await result.consumeStream();
    expect(await result.finalOrchestrationState).toMatchObject({ sequenceIndex: 1 });
  });

  it('stops after maxSteps model steps', async () => {
    const { model, service, tools } = setup(() => ({ toolCalls: [call('search')] }));
    const result = await service.streamWithOrchestration({ messages, tools, maxSteps: 2, orchestration: config });
    await result.consumeStream();
    expect(model.calls).toHaveLength(2);
    expect((await result.steps).length).toBe(2);
  });

  it('reports an error thrown by onStepFinish to onCallbackError, and the text still arrives in full', async () => {
    const { service, tools, onCallbackError, errors } = setup([{ toolCalls: [call('search')] }, { text: FINAL_TEXT }]);
    const boom = new Error('onStepFinish broke');
    let finishedText: string | undefined;
    const result = await service.streamWithOrchestration({
      messages,
      tools,
      orchestration: config,
      onStepFinish: () => {
        throw boom;
      },
      onFinish: ({ text }) => {
        finishedText = text;
      },
      onCallbackError,
    });
    expect(await streamedText(result.stream)).toBe(FINAL_TEXT);
    expect(errors).toEqual([
      { error: boom, callback: 'onStepFinish' },
      { error: boom, callback: 'onStepFinish' },
    ]);
    // The turn went on after the failing callback: the tool ran and onFinish saw the answer.
    expect(finishedText).toBe(FINAL_TEXT);
    expect(await result.finalOrchestrationState).toMatchObject({ recentlyUsedTools: ['search'], sequenceIndex: 1 });
  });

  it('reports an async rejection of onFinish, and still resolves the final state', async () => {
    const { service, tools, onCallbackError, errors } = setup([{ toolCalls: [call('search')] }, { text: FINAL_TEXT }]);
    const boom = new Error('onFinish broke');
    const result = await service.streamWithOrchestration({
      messages,
      tools,
      orchestration: config,
      onFinish: async () => {
        await Promise.resolve();
        throw boom;
      },
      onCallbackError,
    });
    expect(await streamedText(result.stream)).toBe(FINAL_TEXT);
    expect(await result.text).toBe(FINAL_TEXT);
    expect(errors).toEqual([{ error: boom, callback: 'onFinish' }]);
    expect(await result.finalOrchestrationState).toMatchObject({ sequenceIndex: 1 });
  });

  it('reports a model failure as a stream error, and still settles the turn and resolves the final state', async () => {
    const { service, tools, onCallbackError, errors } = setup(() => {
      throw new Error('model is down');
    });
    const result = await service.streamWithOrchestration({ messages, tools, orchestration: config, onCallbackError });
    await result.consumeStream();
    expect(errors.map((e) => [e.callback, (e.error as Error).message])).toEqual([['stream', 'model is down']]);
    // The turn began (its user message was handled) before the model failed: that state is what stands.
    expect(await result.finalOrchestrationState).toMatchObject({ activeStep: 'Research', sequenceIndex: 0 });
  });

  it('resolves the final state when the turn is aborted', async () => {
    const controller = new AbortController();
    const { service, onCallbackError } = setup([{ toolCalls: [call('search')] }, { toolCalls: [call('think')] }]);
    const search = tool({
      description: 'search',
      inputSchema: z.object({ q: z.string().optional() }),
      execute: async (): Promise<string> => {
        controller.abort(); // the user gives up while the first tool runs
        return 'search-ok';
      },
    });
    const result = await service.streamWithOrchestration({
      messages,
      tools: { search, think: makeTools().tools.think, reflect: makeTools().tools.reflect },
      orchestration: config,
      abortSignal: controller.signal,
      onCallbackError,
    });
    const types: string[] = [];
    for await (const part of result.stream) types.push(part.type);
    expect(types).toContain('abort');
    const final = await Promise.race([
      result.finalOrchestrationState,
      new Promise<'pending'>((resolve) => setTimeout(() => resolve('pending'), 2_000)),
    ]);
    expect(final).not.toBe('pending');
    expect(final).toMatchObject({ sessionId: 'session-1', activeStep: 'Research' });
  });

  it('without an orchestration config, offers every tool and still records tool use and token usage', async () => {
    const { model, service, executed, tools, errors, onCallbackError } = setup([
      { toolCalls: [call('reflect')], inputTokens: 20, outputTokens: 2 },
      { toolCalls: [call('search'), call('think')], inputTokens: 30, outputTokens: 3 },
      { text: FINAL_TEXT, inputTokens: 40, outputTokens: 4 },
    ]);
    const result = await service.streamWithOrchestration({ messages, tools, onCallbackError });
    // No steps: nothing to enforce, but tool use goes through the same transition.
    expect(result.orchestration.lastStep()).toBeUndefined();
    expect(await streamedText(result.stream)).toBe(FINAL_TEXT);
    expect(result.orchestration.lastStep()?.activeStep).toBeUndefined();
    expect(model.offeredTools()[0]?.sort()).toEqual(['reflect', 'search', 'think']);
    expect(executed.sort()).toEqual(['reflect', 'search', 'think']);
    const final = await result.finalOrchestrationState;
    expect(final?.recentlyUsedTools.slice().sort()).toEqual(['reflect', 'search', 'think']);
    expect(final?.recentlyUsedTools[0]).toBe('reflect');
    expect(final?.cumulativeTokenUsage).toEqual({ promptTokens: 90, completionTokens: 9, totalTokens: 99 });
    expect(errors).toEqual([]);
  });
});
