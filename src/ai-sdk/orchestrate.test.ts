import { generateText, isStepCount, streamText, ToolLoopAgent, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { OrchestrationEvent } from '../core/events.js';
import type { OrchestrationConfig } from '../core/schema.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import { ScriptedModel } from '../testing/scripted-model.js';
import { orchestrate } from './orchestrate.js';

const config: OrchestrationConfig = {
  steps: [
    {
      name: 'Research',
      conditions: [{ type: 'message_contains', value: 'research' }],
      availableTools: { allowed: ['search', 'think', 'reflect'] },
      sequence: ['search', 'think', 'reflect'],
      instructions: 'Search, think, then reflect.',
    },
    { name: 'Default', isDefault: true },
  ],
};

function makeTools() {
  const executed: string[] = [];
  const make = (name: string, fail = false) =>
    tool({
      description: name,
      inputSchema: z.object({ q: z.string().optional() }),
      execute: async (): Promise<string> => {
        executed.push(name);
        if (fail) throw new Error(`${name} broke`);
        return `${name}-ok`;
      },
    });
  return {
    executed,
    tools: { search: make('search'), think: make('think'), reflect: make('reflect'), flaky: make('flaky', true) },
  };
}

const research = [{ role: 'user' as const, content: 'Please research EV adoption' }];
const call = (toolName: string, toolCallId?: string) => ({
  toolName,
  input: {},
  ...(toolCallId ? { toolCallId } : {}),
});

function setup(script: ConstructorParameters<typeof ScriptedModel>[0]) {
  const events: OrchestrationEvent[] = [];
  const manager = createOrchestrationManager({ onEvent: (e) => events.push(e) });
  const model = new ScriptedModel(script);
  const { tools, executed } = makeTools();
  const orchestration = orchestrate({
    manager,
    config,
    sessionId: 's',
    tools,
    messages: research,
    onError: () => undefined,
  });
  return { events, manager, model, executed, orchestration };
}

describe('orchestrate() with the AI SDK', () => {
  it('offers exactly the allowed tools before every model step, following the sequence', async () => {
    const { model, executed, orchestration, manager } = setup([
      { toolCalls: [call('search')] },
      { toolCalls: [call('think')] },
      { toolCalls: [call('reflect')] },
      { text: 'Answer.' },
    ]);
    const result = await generateText({ model, messages: research, stopWhen: isStepCount(10), ...orchestration });
    expect(model.offeredTools()).toEqual([['search'], ['think'], ['reflect'], ['search', 'think', 'reflect']]);
    expect(executed).toEqual(['search', 'think', 'reflect']);
    expect(result.text).toBe('Answer.');
    expect(await manager.getState('s')).toMatchObject({ activeStep: 'Research', sequenceIndex: 3 });
    // The model is told where it is.
    const system = model.calls[1]?.prompt.find((m) => m.role === 'system');
    expect(system?.content).toContain('Next required tool: think');
    expect(system?.content).toContain('Search, think, then reflect.');
  });

  it('never runs an out-of-order call or a call to a tool that was not offered', async () => {
    const { model, executed, orchestration, events } = setup([
      { toolCalls: [call('reflect')] }, // out of order: only search is offered
      { toolCalls: [call('ghost')] }, // not a tool at all
      { toolCalls: [call('search')] },
      { text: 'ok' },
    ]);
    await streamText({ model, messages: research, stopWhen: isStepCount(6), ...orchestration }).consumeStream();
    await orchestration.settled();
    expect(executed).toEqual(['search']);
    const rejected = events.filter((e) => e.type === 'tool-rejected');
    expect(rejected.map((e) => e.type === 'tool-rejected' && [e.tool, e.reason.code])).toEqual([
      ['reflect', 'not-offered'],
      ['ghost', 'no-such-tool'],
    ]);
    // The rejected call cost a step but did not move the sequence.
    expect(model.offeredTools()).toEqual([['search'], ['search'], ['search'], ['think']]);
  });

  it('refuses in execute too, when the caller forgot to spread prepareStep (defence in depth)', async () => {
    const { model, executed, orchestration } = setup([{ toolCalls: [call('reflect')] }, { text: 'ok' }]);
    const result = await generateText({
      model,
      messages: research,
      stopWhen: isStepCount(3),
      tools: orchestration.tools, // no prepareStep: every tool is offered by the SDK
    });
    expect(executed).toEqual([]);
    const error = result.steps[0]?.content.find((c) => c.type === 'tool-error');
    expect(String((error as { error?: unknown } | undefined)?.error)).toMatch(/Tool "reflect" was not run/);
  });

  it('handles two calls in one step in emission order: the second is checked against the first', async () => {
    const { model, executed, orchestration, manager, events } = setup([
      { toolCalls: [call('search', 'a'), call('search', 'b')] },
      { text: 'ok' },
    ]);
    await generateText({ model, messages: research, stopWhen: isStepCount(3), ...orchestration });
    // The first search fills position 1; the second search is no longer allowed (think is).
    expect(executed).toEqual(['search']);
    expect(await manager.getState('s')).toMatchObject({ sequenceIndex: 1, recentlyUsedTools: ['search'] });
    expect(events.some((e) => e.type === 'tool-rejected' && e.tool === 'search')).toBe(true);
  });

  it('does not record a tool that throws, so the sequence does not advance', async () => {
    const manager = createOrchestrationManager();
    const { tools, executed } = makeTools();
    const flakyConfig: OrchestrationConfig = { steps: [{ name: 'F', isDefault: true, sequence: ['flaky', 'search'] }] };
    const model = new ScriptedModel([{ toolCalls: [call('flaky')] }, { text: 'gave up' }]);
    const orchestration = orchestrate({ manager, config: flakyConfig, sessionId: 'f', tools, messages: research });
    await generateText({ model, messages: research, stopWhen: isStepCount(3), ...orchestration });
    expect(executed).toEqual(['flaky']);
    expect(await manager.getState('f')).toMatchObject({ sequenceIndex: 0, recentlyUsedTools: [] });
  });

  it('adds token usage after every model step, summing exactly', async () => {
    const { model, orchestration, manager } = setup([
      { toolCalls: [call('search')], inputTokens: 100, outputTokens: 7 },
      { toolCalls: [call('think')], inputTokens: 150, outputTokens: 9 },
      { text: 'done', inputTokens: 210, outputTokens: 30 },
    ]);
    const result = streamText({ model, messages: research, stopWhen: isStepCount(5), ...orchestration });
    await result.consumeStream();
    await orchestration.settled();
    expect((await manager.getState('s'))?.cumulativeTokenUsage).toEqual({
      promptTokens: 460,
      completionTokens: 46,
      totalTokens: 506,
    });
    expect((await result.usage).totalTokens).toBe(506);
  });

  it('switches step within the same turn when a sequence_match sequence completes', async () => {
    const manager = createOrchestrationManager();
    const { tools } = makeTools();
    const matchConfig: OrchestrationConfig = {
      steps: [
        {
          name: 'Reflective',
          conditions: [{ type: 'sequence_match' }],
          sequence: ['search', 'think'],
          availableTools: { allowed: ['reflect', 'search', 'think'] },
        },
        { name: 'Open', isDefault: true },
      ],
    };
    const model = new ScriptedModel([{ toolCalls: [call('search')] }, { toolCalls: [call('think')] }, { text: 'ok' }]);
    const orchestration = orchestrate({ manager, config: matchConfig, sessionId: 'm', tools, messages: research });
    await generateText({ model, messages: research, stopWhen: isStepCount(5), ...orchestration });
    // Step 3 of the same turn already sees the new step: its sequence starts over at search.
    expect(model.offeredTools()[2]).toEqual(['search']);
    expect((await manager.getState('m'))?.activeStep).toBe('Reflective');
  });

  it('changes nothing when the same turn is replayed with the same toolCallIds', async () => {
    const script = [{ toolCalls: [call('search', 'c1')] }, { toolCalls: [call('think', 'c2')] }, { text: 'ok' }];
    const { orchestration, manager } = setup(script);
    await generateText({
      model: new ScriptedModel(script),
      messages: research,
      stopWhen: isStepCount(5),
      ...orchestration,
    });
    const after = await manager.getState('s');
    expect(after).toMatchObject({ sequenceIndex: 2, recentlyUsedTools: ['search', 'think'] });
    const { tools } = makeTools();
    // A retried delivery of the same calls (as a client replaying the turn would send them).
    for (const [id, name] of [
      ['c1', 'search'],
      ['c2', 'think'],
    ] as const) {
      await manager.recordToolUse(config, research, 's', name, { toolCallId: id });
    }
    expect(Object.keys(tools)).toContain('search');
    expect((await manager.getState('s'))?.recentlyUsedTools).toEqual(['search', 'think']);
    expect((await manager.getState('s'))?.sequenceIndex).toBe(2);
  });

  it('works with ToolLoopAgent and reports each step to onStep', async () => {
    const manager = createOrchestrationManager();
    const { tools, executed } = makeTools();
    const steps: string[] = [];
    const orchestration = orchestrate({
      manager,
      config,
      sessionId: 'agent',
      tools,
      messages: research,
      onStep: (info) => {
        steps.push(`${info.activeStep}:${info.sequence?.index}:${info.allowedTools.join('|')}`);
      },
    });
    const agent = new ToolLoopAgent({
      model: new ScriptedModel([{ toolCalls: [call('search')] }, { toolCalls: [call('think')] }, { text: 'fin' }]),
      ...orchestration,
    });
    const result = await agent.generate({ messages: research });
    expect(result.text).toBe('fin');
    expect(executed).toEqual(['search', 'think']);
    expect(steps).toEqual(['Research:0:search', 'Research:1:think', 'Research:2:reflect']);
  });

  it('offers no tools and forbids tool calls when the sequence is blocked', async () => {
    const manager = createOrchestrationManager();
    const { tools } = makeTools();
    const blocked: OrchestrationConfig = { steps: [{ name: 'B', isDefault: true, sequence: ['missing_tool'] }] };
    const model = new ScriptedModel([{ text: 'cannot' }]);
    const orchestration = orchestrate({ manager, config: blocked, sessionId: 'b', tools, messages: research });
    await generateText({ model, messages: research, ...orchestration });
    expect(model.calls[0]?.tools ?? []).toEqual([]);
    const system = model.calls[0]?.prompt.find((m) => m.role === 'system');
    expect(system?.content).toContain('No tools are available in this step');
  });

  it("converts each tool's input schema to JSON Schema once, not at every model step", async () => {
    let conversions = 0;
    let validations = 0;
    // A Standard Schema that counts how often the AI SDK asks for its JSON Schema.
    const counted = {
      '~standard': {
        version: 1 as const,
        vendor: 'counted',
        validate: (value: unknown) => {
          validations++;
          return { value: value as { q?: string } };
        },
        jsonSchema: {
          input: () => {
            conversions++;
            return { type: 'object', properties: { q: { type: 'string' } } };
          },
          output: () => ({ type: 'object' }),
        },
      },
    };
    const executed: string[] = [];
    const make = (name: string) =>
      tool({ description: name, inputSchema: counted, execute: async () => void executed.push(name) });
    const tools = { search: make('search'), think: make('think'), reflect: make('reflect') };
    const manager = createOrchestrationManager();
    const script = () => [
      { toolCalls: [call('search')] },
      { toolCalls: [call('think')] },
      { toolCalls: [call('reflect')] },
      { text: 'done' },
    ];
    const bare = new ScriptedModel(script());
    await streamText({ model: bare, messages: research, tools, stopWhen: isStepCount(6) }).consumeStream();
    const bareConversions = conversions;
    expect(bareConversions).toBeGreaterThanOrEqual(12); // each of 3 tools at each of 4 steps
    conversions = 0;
    for (const sessionId of ['one', 'two']) {
      const model = new ScriptedModel(script());
      const orchestration = orchestrate({ manager, config, sessionId, tools, messages: research });
      await streamText({ model, messages: research, stopWhen: isStepCount(6), ...orchestration }).consumeStream();
      await orchestration.settled();
      // The model gets the JSON Schema the AI SDK would send, for the tools offered.
      expect(model.calls.map((c) => c.tools?.map((t) => t.type === 'function' && t.inputSchema))).toEqual(
        model.calls.map((c) =>
          c.tools?.map(() => bare.calls[0]?.tools?.[0]?.type === 'function' && bare.calls[0].tools[0].inputSchema),
        ),
      );
    }
    expect(conversions).toBe(1); // one schema object, converted once for both turns
    expect(executed).toEqual([
      'search',
      'think',
      'reflect',
      'search',
      'think',
      'reflect',
      'search',
      'think',
      'reflect',
    ]);
    expect(validations).toBe(9); // every call's input is still validated by the tool's schema
  });

  it('with a wrong newSession hint, runs only what the stored session allows', async () => {
    const events: OrchestrationEvent[] = [];
    const manager = createOrchestrationManager({ onEvent: (e) => events.push(e) });
    const { tools, executed } = makeTools();
    const turn = async (model: ScriptedModel, newSession: boolean) => {
      const orchestration = orchestrate({ manager, config, sessionId: 'w', tools, messages: research, newSession });
      await streamText({ model, messages: research, stopWhen: isStepCount(4), ...orchestration }).consumeStream();
      await orchestration.settled();
    };
    await turn(new ScriptedModel([{ toolCalls: [call('search')] }, { text: 'searched' }]), false);
    // The session waits for "think"; the hint says it is new, so the first step offers "search".
    const hinted = new ScriptedModel([{ toolCalls: [call('search', 'second-search')] }, { text: 'done' }]);
    await turn(hinted, true);
    expect(hinted.offeredTools()[0]).toEqual(['search']);
    expect(executed).toEqual(['search']); // the second search was refused by the stored session
    const refusal = events.findLast((e) => e.type === 'tool-rejected');
    expect(refusal?.type === 'tool-rejected' && [refusal.tool, refusal.reason.code]).toEqual(['search', 'sequence']);
    const state = await manager.getStateManager().getState('w');
    expect(state?.recentlyUsedTools).toEqual(['search']);
  });

  it("with a wrong newSession hint, runs nothing on another agent's session", async () => {
    const manager = createOrchestrationManager();
    const { tools, executed } = makeTools();
    const owner = orchestrate({ manager, config, sessionId: 'owned', tools, messages: research, agentId: 'a' });
    await streamText({ model: new ScriptedModel([{ text: 'hi' }]), messages: research, ...owner }).consumeStream();
    await owner.settled();
    const intruder = orchestrate({
      manager,
      config,
      sessionId: 'owned',
      tools,
      messages: research,
      agentId: 'b',
      newSession: true,
      onError: () => undefined, // the refusal: settled() rejects with it below
    });
    const model = new ScriptedModel([{ toolCalls: [call('search', 'intruding')] }, { text: 'done' }]);
    await streamText({ model, messages: research, stopWhen: isStepCount(4), ...intruder }).consumeStream();
    await expect(intruder.settled()).rejects.toMatchObject({ code: 'session-of-another-agent' });
    expect(executed).toEqual([]);
    const state = await manager.getStateManager().getState('owned');
    expect(state?.agentId).toBe('a');
    expect(state?.recentlyUsedTools).toEqual([]);
  });

  it('tells the model the same at the same place in every turn, and narrowed tools as narrowed', async () => {
    const manager = createOrchestrationManager();
    const { tools } = makeTools();
    const script = () => [
      { toolCalls: [call('search')] },
      { toolCalls: [call('think')] },
      { toolCalls: [call('reflect')] },
      { text: 'Answer.' },
    ];
    const systems = async (sessionId: string, activeTools?: ('search' | 'think' | 'reflect' | 'flaky')[]) => {
      const model = new ScriptedModel(activeTools ? script().filter((_, i) => i !== 2) : script());
      const orchestration = orchestrate({
        manager,
        config,
        sessionId,
        tools,
        messages: research,
        onError: () => undefined,
        ...(activeTools ? { activeTools } : {}),
      });
      await generateText({ model, messages: research, stopWhen: isStepCount(6), ...orchestration });
      await orchestration.settled();
      return model.calls.map((c) => c.prompt.find((m) => m.role === 'system')?.content);
    };
    const first = await systems('a');
    expect(first[1]).toContain('Next required tool: think');
    expect(first[1]).toContain('Allowed tools now: think');
    expect(first[3]).toContain('Allowed tools now: search, think, reflect');
    // A second turn (new arrays, the same places in the sequence) is told word for word the same.
    expect(await systems('b')).toEqual(first);
    // The app leaves reflect out: at the same place the model hears that nothing is offered, not
    // what the turns before it heard there.
    expect(first[2]).toContain('Allowed tools now: reflect');
    const narrowed = await systems('c', ['search', 'think', 'flaky']);
    expect(narrowed.slice(0, 2)).toEqual(first.slice(0, 2));
    expect(narrowed[2]).toContain('No tools are available in this step');
    expect(narrowed[2]).not.toContain('Allowed tools now');
  });

  it('reports every model step to a listener that subscribes between turns', async () => {
    const manager = createOrchestrationManager();
    const { tools } = makeTools();
    const turn = async (sessionId: string) => {
      const model = new ScriptedModel([{ toolCalls: [call('search')] }, { text: 'ok' }]);
      const orchestration = orchestrate({ manager, config, sessionId, tools, messages: research });
      await generateText({ model, messages: research, stopWhen: isStepCount(4), ...orchestration });
      await orchestration.settled();
    };
    await turn('quiet'); // nobody listens: nothing is built for nobody
    const offers: string[][] = [];
    const unsubscribe = manager.subscribe((event) => {
      if (event.type === 'tools-offered') offers.push([...event.tools]);
    });
    await turn('heard');
    unsubscribe();
    expect(offers).toEqual([['search'], ['think']]);
  });
});
