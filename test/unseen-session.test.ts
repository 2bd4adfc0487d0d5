/**
 * A turn on a session this process has not seen (another process wrote it, or this one
 * restarted) reads the session before its first model step and decides that step on what it
 * read; the user message is written with the turn's first reservation, where the store decides
 * again. On every store, with a second store instance standing for the other process: the first
 * step offers what the stored session allows, and a write that lands between the read and the
 * reservation still decides what runs.
 */
import { isStepCount, streamText, type ToolSet, tool } from 'ai';
import { expect, it } from 'vitest';
import { z } from 'zod';
import { orchestrate } from '../src/ai-sdk/orchestrate.js';
import type { OrchestrationEvent } from '../src/core/events.js';
import type { OrchestrationConfig } from '../src/core/schema.js';
import { createOrchestrationManager, type OrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { ScriptedModel } from '../src/testing/scripted-model.js';
import { describeEachStore } from './helpers/store-kinds.js';

const config: OrchestrationConfig = {
  steps: [
    {
      name: 'Research',
      conditions: [{ type: 'message_regex', value: 'research' }],
      availableTools: { allowed: ['search', 'think', 'reflect'] },
      sequence: ['search', 'think', 'reflect'],
      resetSequenceOn: ['new_message'],
    },
    { name: 'Default', isDefault: true },
  ],
};
const messages = [{ role: 'user' as const, content: 'research the topic' }];

function makeTools(executed: string[]): ToolSet {
  const make = (name: string) =>
    tool({
      inputSchema: z.object({}),
      execute: async () => {
        executed.push(name);
        return `${name} done`;
      },
    });
  return { search: make('search'), think: make('think'), reflect: make('reflect') };
}

let ids = 0;

/** One turn of `manager` on `sessionId`, the model calling `calls` one per step, then answering. */
async function turn(
  manager: OrchestrationManager,
  sessionId: string,
  tools: ToolSet,
  calls: string[],
  onStep?: (stepNumber: number) => Promise<void>,
) {
  // Call ids unique across turns: a session refuses an id it has seen (a replayed call).
  const model = new ScriptedModel([
    ...calls.map((toolName) => ({ toolCalls: [{ toolName, input: {}, toolCallId: `${toolName}-${++ids}` }] })),
    { text: 'done' },
  ]);
  const orchestration = orchestrate({
    manager,
    config,
    sessionId,
    tools,
    messages,
    onError: () => undefined,
    ...(onStep ? { onStep: (info: { stepNumber: number }) => onStep(info.stepNumber) } : {}),
  });
  await streamText({ model, messages, stopWhen: isStepCount(calls.length + 2), ...orchestration }).consumeStream();
  await orchestration.settled().catch(() => undefined);
  return model;
}

describeEachStore('a turn on a session this process has not seen', (open, kind) => {
  it('offers at its first model step what the stored session allows', async () => {
    const executed: string[] = [];
    const tools = makeTools(executed);
    const sessionId = `unseen-offer-${kind}-${Math.random().toString(36).slice(2)}`;
    const first = createOrchestrationManager({ store: open() });
    await turn(first, sessionId, tools, ['search']);
    // Another process (or this one after a restart): it never saw the session.
    const other = createOrchestrationManager({ store: open() });
    const model = await turn(other, sessionId, tools, ['think', 'reflect']);
    // The same message: the sequence goes on from "think", as the stored session says.
    expect(model.offeredTools()[0]).toEqual(['think']);
    expect(executed).toEqual(['search', 'think', 'reflect']);
    const state = await other.getStateManager().getState(sessionId);
    expect(state?.recentlyUsedTools).toEqual(['search', 'think', 'reflect']);
  });

  it('runs only what the stored session allows when another write lands after the read', async () => {
    const executed: string[] = [];
    const tools = makeTools(executed);
    const sessionId = `unseen-race-${kind}-${Math.random().toString(36).slice(2)}`;
    const first = createOrchestrationManager({ store: open() });
    await turn(first, sessionId, tools, ['search']);
    const events: OrchestrationEvent[] = [];
    const other = createOrchestrationManager({ store: open(), onEvent: (e) => events.push(e) });
    // Between the other process's read (its first step offers "think") and its request, the
    // first process runs "think" itself: the stored session now waits for "reflect".
    const model = await turn(other, sessionId, tools, ['think'], async (stepNumber) => {
      if (stepNumber === 0) await turn(first, sessionId, tools, ['think']);
    });
    expect(model.offeredTools()[0]).toEqual(['think']);
    expect(executed).toEqual(['search', 'think']); // the second "think" never ran
    const refusal = events.find((e) => e.type === 'tool-rejected');
    expect(refusal?.type === 'tool-rejected' && [refusal.tool, refusal.reason.code]).toEqual(['think', 'sequence']);
    const state = await first.getStateManager().getState(sessionId);
    expect(state?.recentlyUsedTools).toEqual(['search', 'think']);
  });
});
