import { generateText, isStepCount, type ModelMessage, streamText, ToolChoiceViolationError, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { mockModel } from '../../test/helpers/mock-model.js';
import { StoreUnavailableError } from '../core/errors.js';
import type { OrchestrationEvent } from '../core/events.js';
import type { OrchestrationConfig } from '../core/schema.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import { memoryStore } from '../stores/memory.js';
import type { SessionStore } from '../stores/types.js';
import { OrchestrationWiringError, orchestrate } from './orchestrate.js';

const research: OrchestrationConfig = {
  steps: [
    {
      name: 'Research',
      conditions: [{ type: 'message_contains', value: 'research' }],
      sequence: ['search', 'think', 'reflect'],
      availableTools: { allowed: ['search', 'think', 'reflect', 'summarize'] },
      instructions: 'Search, think, then reflect.',
    },
  ],
};
const required: OrchestrationConfig = { steps: [{ ...research.steps[0]!, requireSequence: true }] };
const user: ModelMessage = { role: 'user', content: 'Please research EV adoption' };

function makeTools() {
  const executed: string[] = [];
  const make = (name: string) =>
    tool({
      description: name,
      inputSchema: z.object({}),
      execute: async (): Promise<string> => {
        executed.push(name);
        return `${name}-ok`;
      },
    });
  return {
    executed,
    tools: { search: make('search'), think: make('think'), reflect: make('reflect'), summarize: make('summarize') },
  };
}

/** A store that counts its round trips and can be taken down. */
function flakyStore(): SessionStore & { down: boolean; updates: number; reads: number } {
  const inner = memoryStore();
  const store = {
    name: 'flaky',
    down: false,
    updates: 0,
    reads: 0,
    get: async (id: string) => {
      store.reads++;
      if (store.down) throw new StoreUnavailableError('flaky', 'connection refused');
      return inner.get(id);
    },
    update: async (id: string, fn: Parameters<SessionStore['update']>[1]) => {
      store.updates++;
      if (store.down) throw new StoreUnavailableError('flaky', 'connection refused');
      return inner.update(id, fn);
    },
    delete: (id: string) => inner.delete(id),
    sweep: () => inner.sweep(),
    close: () => inner.close(),
  };
  return store;
}

function setup(config: OrchestrationConfig = research) {
  const events: OrchestrationEvent[] = [];
  const failures: unknown[] = [];
  const store = flakyStore();
  const manager = createOrchestrationManager({ store, onEvent: (e) => events.push(e) });
  const { tools, executed } = makeTools();
  return { events, failures, store, manager, tools, executed, config };
}

/** Calls the one tool it is offered, else answers. */
const obedient = ({ offered }: { offered: string[] }) =>
  offered.length === 1 ? { calls: [{ tool: offered[0]! }] } : { text: 'Done.' };

describe("composing the app's own hooks with the orchestration", () => {
  it("applies the app's prepareStep, activeTools, toolChoice and instructions, the orchestration's restrictions winning", async () => {
    const { manager, tools, executed, config } = setup();
    const seen: number[] = [];
    const { model, calls } = mockModel(({ offered, toolChoice }) => {
      if (toolChoice?.type === 'tool') return { calls: [{ tool: toolChoice.toolName }] };
      return offered.length === 1 ? { calls: [{ tool: offered[0]! }] } : { text: 'Done.' };
    });
    const orchestration = orchestrate({
      manager,
      config,
      sessionId: 's',
      tools,
      instructions: 'You are terse.',
      // The app never wants reflect offered, and would like summarize forced.
      activeTools: ['search', 'think', 'summarize'],
      toolChoice: { type: 'tool', toolName: 'summarize' },
      prepareStep: ({ stepNumber }) => {
        seen.push(stepNumber);
        return { temperature: 0.25 };
      },
      onStepEnd: (step) => {
        seen.push(100 + step.stepNumber);
      },
    });
    await generateText({ model, messages: [user], stopWhen: isStepCount(5), ...orchestration });
    await orchestration.settled();
    // Baton's sequence decides what is offered; the app's narrowing applies on top.
    expect(calls.map((c) => c.offered)).toEqual([['search'], ['think'], []]);
    // summarize is not allowed during the sequence, so the app's forced choice became auto.
    expect(calls[0]?.toolChoice).toEqual({ type: 'auto' });
    expect(calls.map((c) => c.options.temperature)).toEqual([0.25, 0.25, 0.25]);
    const system = JSON.stringify(calls[0]?.options.prompt[0]);
    expect(system).toContain('You are terse.');
    expect(system).toContain('Search, think, then reflect.');
    expect(seen).toEqual([0, 100, 1, 101, 2, 102]);
    // reflect is never offered: the sequence stops at it.
    expect(executed).toEqual(['search', 'think']);
    expect(orchestration.sequenceIncomplete()).toMatchObject({ index: 2, expected: ['reflect'] });
  });

  it("keeps the app's forced tool once the orchestration allows it", async () => {
    const { manager, tools, config } = setup();
    await manager.processToolUsage(config, [user], 's', 'search');
    await manager.processToolUsage(config, [user], 's', 'think');
    await manager.processToolUsage(config, [user], 's', 'reflect');
    const { model, calls } = mockModel([{ calls: [{ tool: 'summarize' }] }, { text: 'ok' }]);
    const orchestration = orchestrate({
      manager,
      config,
      sessionId: 's',
      tools,
      prepareStep: ({ stepNumber }) =>
        stepNumber === 0 ? { toolChoice: { type: 'tool', toolName: 'summarize' }, activeTools: ['summarize'] } : {},
    });
    await generateText({ model, messages: [user], stopWhen: isStepCount(3), ...orchestration });
    expect(calls[0]).toMatchObject({ offered: ['summarize'], toolChoice: { type: 'tool', toolName: 'summarize' } });
    expect(calls[1]?.offered).toEqual(['search', 'think', 'reflect', 'summarize']);
  });

  it("carries the app's prepareStep instructions forward as the AI SDK does, with the orchestration's block", async () => {
    const { manager, tools, config } = setup();
    const { model, calls } = mockModel(obedient);
    const orchestration = orchestrate({
      manager,
      config,
      sessionId: 's',
      tools,
      // `system`: the AI SDK's deprecated name, set at step 0 only.
      prepareStep: ({ stepNumber }) => (stepNumber === 0 ? { system: 'Legacy voice.' } : undefined),
    });
    await generateText({
      model,
      messages: [user],
      instructions: 'Initial.',
      stopWhen: isStepCount(3),
      ...orchestration,
    });
    const systems = calls.map((c) => JSON.stringify(c.options.prompt[0]));
    for (const system of systems) {
      expect(system).toContain('Legacy voice.');
      expect(system).not.toContain('Initial.');
      expect(system).toContain('## Orchestration');
    }
    expect(systems[1]).toContain('Next required tool: think');
  });

  it('counts every token even when the app puts its own onStepEnd after the spread, and says how to fix it', async () => {
    const { manager, tools, failures, config } = setup();
    const { model } = mockModel([
      { calls: [{ tool: 'search' }], inputTokens: 100, outputTokens: 7 },
      { calls: [{ tool: 'think' }], inputTokens: 150, outputTokens: 9 },
      { text: 'done', inputTokens: 210, outputTokens: 30 },
    ]);
    const orchestration = orchestrate({
      manager,
      config,
      sessionId: 's',
      tools,
      onError: (e) => failures.push(e),
    });
    const mine: number[] = [];
    const result = streamText({
      model,
      messages: [user],
      stopWhen: isStepCount(5),
      ...orchestration,
      onStepEnd: (step) => void mine.push(step.stepNumber),
    });
    await result.consumeStream();
    await orchestration.settled();
    expect(mine).toEqual([0, 1, 2]);
    expect((await manager.getState('s'))?.cumulativeTokenUsage).toEqual({
      promptTokens: 460,
      completionTokens: 46,
      totalTokens: 506,
    });
    expect(failures).toHaveLength(1);
    expect(OrchestrationWiringError.isInstance(failures[0])).toBe(true);
    expect((failures[0] as OrchestrationWiringError).wiring).toBe('onStepEnd');
    expect(String(failures[0])).toMatch(/orchestrate\(\{ onStepEnd \}\)/);
  });

  it('rejects settled() when both onStepEnd and onEnd were replaced, since the last step cannot be counted', async () => {
    const { manager, tools, config } = setup();
    const { model } = mockModel(obedient);
    const orchestration = orchestrate({ manager, config, sessionId: 's', tools, onError: () => undefined });
    await generateText({
      model,
      messages: [user],
      stopWhen: isStepCount(5),
      ...orchestration,
      onStepEnd: () => undefined,
      onEnd: () => undefined,
    });
    await expect(orchestration.settled()).rejects.toSatisfy(
      (error) => OrchestrationWiringError.isInstance(error) && error.wiring === 'onStepEnd',
    );
  });
});

describe('options given to the AI SDK call itself', () => {
  it("reads the call's own activeTools and toolChoice, narrowing what the orchestration allows", async () => {
    const { manager, tools, config } = setup();
    for (const tool of ['search', 'think', 'reflect']) await manager.processToolUsage(config, [user], 's', tool);
    const { model, calls } = mockModel([{ text: 'ok' }]);
    const orchestration = orchestrate({ manager, config, sessionId: 's', tools });
    await generateText({
      model,
      messages: [user],
      activeTools: ['think', 'summarize'],
      toolChoice: 'required',
      ...orchestration,
    }).catch(() => undefined); // the mock ignores the forced choice
    expect(calls[0]).toMatchObject({ offered: ['think', 'summarize'], toolChoice: { type: 'required' } });
  });

  it("refuses every call, and says so, when the call replaced the orchestration's prepareStep", async () => {
    const { manager, tools, executed, failures, config } = setup();
    const { model } = mockModel([{ calls: [{ tool: 'reflect' }] }, { text: 'ok' }]);
    const orchestration = orchestrate({ manager, config, sessionId: 's', tools, onError: (e) => failures.push(e) });
    const result = await generateText({
      model,
      messages: [user],
      stopWhen: isStepCount(3),
      ...orchestration,
      prepareStep: () => ({}), // every tool offered by the SDK
    });
    expect(executed).toEqual([]);
    const denial = result.steps[0]?.content.find((p) => p.type === 'tool-approval-response');
    expect(denial).toMatchObject({ approved: false });
    expect(OrchestrationWiringError.isInstance(failures[0])).toBe(true);
    expect((failures[0] as OrchestrationWiringError).wiring).toBe('prepareStep');
    await expect(orchestration.settled()).rejects.toSatisfy(OrchestrationWiringError.isInstance);
  });
});

describe('a tool set that bypasses the guard', () => {
  it('fails closed with an error that says how to fix it: no raw tool runs', async () => {
    const { manager, tools, executed, failures, config } = setup();
    const raw = makeTools();
    const { model, calls } = mockModel(obedient);
    const orchestration = orchestrate({ manager, config, sessionId: 's', tools, onError: (e) => failures.push(e) });
    const call = generateText({
      model,
      messages: [user],
      stopWhen: isStepCount(5),
      ...orchestration,
      tools: raw.tools,
    });
    await expect(call).rejects.toSatisfy(
      (error) =>
        OrchestrationWiringError.isInstance(error) &&
        error.wiring === 'tools' &&
        /"search", "think", "reflect", "summarize"/.test(error.message) &&
        /spread its result last/.test(error.message),
    );
    expect(calls).toEqual([]); // the model was never called
    expect([...executed, ...raw.executed]).toEqual([]);
    await expect(orchestration.settled()).rejects.toSatisfy(OrchestrationWiringError.isInstance);
  });

  it('still refuses every call when onStart was replaced too', async () => {
    const { manager, tools, config } = setup();
    const raw = makeTools();
    const { model } = mockModel(obedient);
    const orchestration = orchestrate({ manager, config, sessionId: 's', tools, onError: () => undefined });
    const result = await generateText({
      model,
      messages: [user],
      stopWhen: isStepCount(1),
      ...orchestration,
      tools: raw.tools,
      onStart: () => undefined,
    }).catch((error: unknown) => error);
    expect(raw.executed).toEqual([]);
    const content = (result as { content?: { type: string; reason?: string }[] }).content ?? [];
    const denial = content.find((p) => p.type === 'tool-approval-response');
    expect(denial?.reason).toMatch(/did not guard \("search"\)/);
  });
});

describe('required sequences', () => {
  it('forces the expected tool at each step, so a model that would answer early follows the sequence', async () => {
    const { manager, tools, executed, events } = setup(required);
    // This model answers at once unless a tool is forced.
    const { model, calls } = mockModel(({ toolChoice, offered }) =>
      toolChoice?.type === 'tool'
        ? { calls: [{ tool: toolChoice.toolName }] }
        : toolChoice?.type === 'required'
          ? { calls: [{ tool: offered[0]! }] }
          : { text: 'I already know the answer.' },
    );
    const orchestration = orchestrate({ manager, config: required, sessionId: 's', tools });
    const result = await generateText({ model, messages: [user], stopWhen: isStepCount(6), ...orchestration });
    await orchestration.settled();
    expect(calls.map((c) => c.toolChoice)).toEqual([
      { type: 'tool', toolName: 'search' },
      { type: 'tool', toolName: 'think' },
      { type: 'tool', toolName: 'reflect' },
      { type: 'auto' },
    ]);
    expect(executed).toEqual(['search', 'think', 'reflect']);
    expect(result.text).toBe('I already know the answer.');
    expect(events.some((e) => e.type === 'sequence-incomplete')).toBe(false);
  });

  it('reports sequence-incomplete when a model ignores the forced choice, and when a sequence is not required', async () => {
    const forced = setup(required);
    const stubborn = mockModel([{ text: 'No tools for me.' }]);
    const orchestration = orchestrate({
      manager: forced.manager,
      config: required,
      sessionId: 's',
      tools: forced.tools,
    });
    const call = generateText({ model: stubborn.model, messages: [user], ...orchestration });
    await expect(call).rejects.toSatisfy(ToolChoiceViolationError.isInstance);
    await orchestration.settled();
    expect(forced.events.filter((e) => e.type === 'sequence-incomplete')).toEqual([
      {
        type: 'sequence-incomplete',
        sessionId: 's',
        step: 'Research',
        index: 0,
        length: 3,
        expected: ['search'],
        required: true,
        awaitingApproval: false,
      },
    ]);

    const free = setup(research);
    const early = mockModel([{ text: 'Answer without research.' }]);
    const relaxed = orchestrate({ manager: free.manager, config: research, sessionId: 's', tools: free.tools });
    await generateText({ model: early.model, messages: [user], ...relaxed });
    await relaxed.settled();
    expect(early.calls[0]?.toolChoice).toEqual({ type: 'auto' });
    expect(relaxed.sequenceIncomplete()).toMatchObject({ index: 0, required: false });
  });
});

describe('the store', () => {
  it('costs a read and 4 writes for a research turn of 4 model steps and 3 tools on a store that keeps no copy', async () => {
    const { manager, tools, store } = setup();
    const { model } = mockModel(obedient);
    const orchestration = orchestrate({ manager, config: research, sessionId: 's', tools });
    await streamText({ model, messages: [user], stopWhen: isStepCount(6), ...orchestration }).consumeStream();
    await orchestration.settled();
    // The first model step is decided on a read (nothing to commit); the user message rides on
    // the first reservation.
    expect(store.reads).toBe(1);
    expect(store.updates).toBe(4);
    expect((await manager.getState('s'))?.sequenceIndex).toBe(3);
  });

  it('returns the result of a tool that ran to the model when the store fails after it, and reports the failure', async () => {
    const { manager, tools, store, failures } = setup();
    // search runs, and the store goes down while it runs.
    const searchOnce = {
      ...tools.search,
      execute: async () => {
        store.down = true;
        return 'search-ok';
      },
    };
    const { model, calls } = mockModel([
      { calls: [{ tool: 'search' }] },
      { calls: [{ tool: 'think' }] },
      { text: 'ok' },
    ]);
    const orchestration = orchestrate({
      manager,
      config: research,
      sessionId: 's',
      tools: { ...tools, search: searchOnce },
      onError: (e) => failures.push(e),
    });
    const result = streamText({ model, messages: [user], stopWhen: isStepCount(4), ...orchestration });
    const parts: { type: string; toolName?: string }[] = [];
    for await (const part of result.stream) parts.push(part);
    // The model got search's result, not an error; think could not be reserved, and was not run.
    expect(parts.filter((p) => p.type === 'tool-result').map((p) => p.toolName)).toEqual(['search']);
    expect(parts.filter((p) => p.type === 'tool-error').map((p) => p.toolName)).toEqual(['think']);
    expect(JSON.stringify(calls[1]?.options.prompt)).toContain('search-ok');
    expect(StoreUnavailableError.isInstance(failures[0])).toBe(true);
    // The store is back: settled() writes what was kept (search is recorded) and still reports the failure.
    store.down = false;
    await expect(orchestration.settled()).rejects.toSatisfy(StoreUnavailableError.isInstance);
    expect(await manager.getState('s')).toMatchObject({ recentlyUsedTools: ['search'], sequenceIndex: 1 });
  });
});
