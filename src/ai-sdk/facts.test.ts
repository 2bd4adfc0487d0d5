/**
 * Facts and labels (SPEC section 11) in the AI SDK loop: what a tool returns reaches the
 * template's facts and labels through `orchestrate()`, so a later call of the turn (or of a later
 * turn) is judged on it: delete only what the listing returned; nothing leaves once a confidential
 * file was read. On the memory store, through generateText and streamText.
 */
import { generateText, isStepCount, streamText, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { OrchestrationConfig } from '../core/schema.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import { ScriptedModel } from '../testing/scripted-model.js';
import { orchestrate } from './orchestrate.js';

const config: OrchestrationConfig = {
  facts: [{ name: 'listed', tools: ['list_items'], value: 'result.items.map(i, i.id)', keep: 'union', max: 100 }],
  labels: [{ name: 'confidential', tools: ['read_file'], when: "result.classification == 'confidential'" }],
  rules: [
    {
      tools: ['delete_item'],
      when: '!(args.id in state.facts.listed)',
      effect: 'deny',
      reason: 'Delete only what was listed',
    },
    { tools: ['send_email'], when: "'confidential' in state.labels", effect: 'deny', reason: 'Nothing leaves now' },
  ],
  steps: [],
};

function setup() {
  const ran: string[] = [];
  const tools = {
    list_items: tool({
      inputSchema: z.object({}),
      execute: async () => {
        ran.push('list_items');
        return { items: [{ id: 'a' }, { id: 'b' }] };
      },
    }),
    delete_item: tool({
      inputSchema: z.object({ id: z.string() }),
      execute: async ({ id }) => {
        ran.push(`delete ${id}`);
        return 'deleted';
      },
    }),
    read_file: tool({
      inputSchema: z.object({ path: z.string() }),
      execute: async ({ path }) => {
        ran.push(`read ${path}`);
        return { classification: path.startsWith('secret') ? 'confidential' : 'public', text: '...' };
      },
    }),
    send_email: tool({
      inputSchema: z.object({ to: z.string() }),
      execute: async ({ to }) => {
        ran.push(`send ${to}`);
        return 'sent';
      },
    }),
  };
  return { ran, tools, manager: createOrchestrationManager() };
}

const messages = [{ role: 'user' as const, content: 'tidy up' }];
const call = (toolName: string, toolCallId: string, input: unknown = {}) => ({ toolName, toolCallId, input });

describe.each([false, true])('facts and labels through orchestrate(), streaming %s', (stream) => {
  async function turn(
    setupResult: ReturnType<typeof setup>,
    script: ConstructorParameters<typeof ScriptedModel>[0],
  ): Promise<void> {
    const { tools, manager } = setupResult;
    const model = new ScriptedModel(script);
    const orchestration = orchestrate({ manager, config, sessionId: 's', tools, messages, onError: () => undefined });
    if (stream) await streamText({ model, messages, stopWhen: isStepCount(5), ...orchestration }).consumeStream();
    else await generateText({ model, messages, stopWhen: isStepCount(5), ...orchestration });
    await orchestration.settled();
  }

  it('deletes only what the listing returned, in the same turn and the next', async () => {
    const s = setup();
    await turn(s, [
      { toolCalls: [call('delete_item', 'd0', { id: 'a' })] },
      { toolCalls: [call('list_items', 'l1')] },
      { toolCalls: [call('delete_item', 'd1', { id: 'a' }), call('delete_item', 'd2', { id: 'z' })] },
      { text: 'done' },
    ]);
    // Before the listing nothing may be deleted; after it, only a listed id.
    expect(s.ran).toEqual(['list_items', 'delete a']);
    const state = await s.manager.getStateManager().getState('s');
    expect(state?.facts).toEqual({ listed: { value: ['a', 'b'] } });
    await turn(s, [{ toolCalls: [call('delete_item', 'd3', { id: 'b' })] }, { text: 'done' }]);
    expect(s.ran).toEqual(['list_items', 'delete a', 'delete b']);
  });

  it('sends nothing once something confidential was read', async () => {
    const s = setup();
    await turn(s, [
      { toolCalls: [call('send_email', 'e0', { to: 'x' })] },
      { toolCalls: [call('read_file', 'r1', { path: 'secret/plan.txt' })] },
      { toolCalls: [call('send_email', 'e1', { to: 'y' })] },
      { text: 'done' },
    ]);
    expect(s.ran).toEqual(['send x', 'read secret/plan.txt']);
    expect((await s.manager.getStateManager().getState('s'))?.labels).toEqual(['confidential']);
  });
});
