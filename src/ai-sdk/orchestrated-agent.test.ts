import { isStepCount, type ModelMessage, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type ModelCall, mockModel } from '../../test/helpers/mock-model.js';
import type { OrchestrationEvent } from '../core/events.js';
import type { OrchestrationConfig } from '../core/schema.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import { createOrchestratedAgent } from './orchestrated-agent.js';

const config: OrchestrationConfig = {
  steps: [
    {
      name: 'Research',
      conditions: [{ type: 'message_contains', value: 'research' }],
      sequence: ['search', 'think'],
      availableTools: { allowed: ['search', 'think', 'reflect'] },
    },
    { name: 'Open', isDefault: true },
  ],
};

function setup() {
  const events: OrchestrationEvent[] = [];
  const manager = createOrchestrationManager({ onEvent: (e) => events.push(e) });
  const executed: string[] = [];
  const make = (name: string) =>
    tool({
      inputSchema: z.object({}),
      execute: async (): Promise<string> => {
        executed.push(name);
        return `${name}-ok`;
      },
    });
  const tools = { search: make('search'), think: make('think'), reflect: make('reflect') };
  return { events, manager, executed, tools };
}

/** Tokens depend on the conversation, so each session's usage is known whatever the interleaving. */
const tokensOf = (call: ModelCall) => (JSON.stringify(call.options.prompt).includes('cats') ? 100 : 1000);

/** Calls the one tool it is offered, else answers. */
const obedient = (call: ModelCall) =>
  call.offered.length === 1
    ? { calls: [{ tool: call.offered[0]! }], inputTokens: tokensOf(call), outputTokens: 1 }
    : { text: 'Done.', inputTokens: tokensOf(call), outputTokens: 1 };

const cats: ModelMessage[] = [{ role: 'user', content: 'Please research cats' }];
const dogs: ModelMessage[] = [{ role: 'user', content: 'Please research dogs' }];

describe('one ToolLoopAgent for every session', () => {
  it('serves two sessions at once, each orchestrated, with exact token usage', async () => {
    const { manager, tools, executed } = setup();
    const { model } = mockModel(obedient);
    const agent = createOrchestratedAgent({ model, tools, manager, config, stopWhen: isStepCount(6) });
    const [a, b] = await Promise.all([
      agent.generate({ messages: cats, options: { sessionId: 'a' } }),
      agent.stream({ messages: dogs, options: { sessionId: 'b' } }).then(async (result) => {
        await result.consumeStream();
        await result.orchestration.settled();
        return { usage: await result.usage, steps: await result.steps };
      }),
    ]);
    expect(executed.sort()).toEqual(['search', 'search', 'think', 'think']);
    // Each session: its own sequence, and exactly its own steps' tokens.
    for (const [sessionId, result, perStep] of [
      ['a', a, 100],
      ['b', b, 1000],
    ] as const) {
      expect(result.steps).toHaveLength(3);
      expect(await manager.getState(sessionId)).toMatchObject({
        activeStep: 'Research',
        sequenceIndex: 2,
        recentlyUsedTools: ['search', 'think'],
        cumulativeTokenUsage: { promptTokens: 3 * perStep, completionTokens: 3, totalTokens: 3 * perStep + 3 },
      });
      expect(result.usage.inputTokens).toBe(3 * perStep);
    }
  });

  it('keeps counting a session across calls, and keeps enforcing: an out-of-order call never runs', async () => {
    const { manager, tools, executed, events } = setup();
    const { model, calls } = mockModel([
      { calls: [{ tool: 'think' }] }, // out of order: only search is offered
      { calls: [{ tool: 'search' }] },
      { text: 'first' },
      { calls: [{ tool: 'think' }] },
      { text: 'second' },
    ]);
    const agent = createOrchestratedAgent({ model, tools, manager, config });
    const first = await agent.generate({ messages: cats, options: { sessionId: 's' } });
    expect(first.text).toBe('first');
    expect(executed).toEqual(['search']);
    expect(events.find((e) => e.type === 'tool-rejected')).toMatchObject({ tool: 'think' });
    const second = await agent.generate({ prompt: 'Please research cats', options: { sessionId: 's' } });
    expect(second.text).toBe('second');
    expect(executed).toEqual(['search', 'think']);
    expect(calls.map((c) => c.offered)).toEqual([
      ['search'],
      ['search'],
      ['think'],
      ['think'],
      ['search', 'think', 'reflect'],
    ]);
    expect((await manager.getState('s'))?.cumulativeTokenUsage.totalTokens).toBe(5 * 15);
  });

  it("composes the agent's own prepareStep and callbacks, and refuses a call without a session", async () => {
    const { manager, tools } = setup();
    const { model, calls } = mockModel(obedient);
    const ends: string[] = [];
    const agent = createOrchestratedAgent({
      model,
      tools,
      manager,
      config,
      instructions: 'Be brief.',
      prepareStep: () => ({ temperature: 0.5 }),
      onStepEnd: (step) => void ends.push(`agent:${step.stepNumber}`),
    });
    await agent.generate({
      messages: cats,
      options: { sessionId: 's' },
      onStepEnd: (step) => void ends.push(`call:${step.stepNumber}`),
    });
    expect(ends.sort()).toEqual(['agent:0', 'agent:1', 'agent:2', 'call:0', 'call:1', 'call:2']);
    expect(calls.map((c) => c.options.temperature)).toEqual([0.5, 0.5, 0.5]);
    expect(JSON.stringify(calls[0]?.options.prompt[0])).toMatch(/Be brief\.\\n\\n## Orchestration/);
    const before = calls.length;
    // @ts-expect-error: the session is a required call option
    await expect(agent.generate({ messages: cats, options: {} })).rejects.toThrow(/sessionId/);
    expect(calls.length).toBe(before);
  });
});
