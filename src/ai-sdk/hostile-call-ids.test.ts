/**
 * A hostile (or broken self-hosted) model that emits megabyte tool call ids and tool names: the
 * session keeps every id it sees (its latest 256), its pending log and its event log, so what it
 * keeps of each must be bounded, while the calls are still decided as they would be with short
 * ones (a repeated id refused, an unknown tool refused).
 */
import { generateText, isStepCount, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { OrchestrationEvent } from '../core/events.js';
import type { OrchestrationConfig } from '../core/schema.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import { callIdKey, MAX_CALL_ID_LENGTH } from '../orchestration/turn.js';
import { ScriptedModel, type ScriptedTurn } from '../testing/scripted-model.js';
import { orchestrate } from './orchestrate.js';

const MEGABYTE = 1024 * 1024;
/** Far below one megabyte, far above what a few short ids and events need. */
const BOUND = 64 * 1024;

const config: OrchestrationConfig = {
  steps: [{ name: 'Default', isDefault: true, availableTools: { allowed: ['search', 'think'] } }],
};
const messages = [{ role: 'user' as const, content: 'look it up' }];

async function run(script: ScriptedTurn[]) {
  const events: OrchestrationEvent[] = [];
  // The event log keeps the session's state beside each event: a long id would be kept in all.
  const manager = createOrchestrationManager({ eventLog: 100, onEvent: (event) => events.push(event) });
  const executed: string[] = [];
  const make = (name: string) =>
    tool({
      description: name,
      inputSchema: z.object({}),
      execute: async () => {
        executed.push(name);
        return `${name}-ok`;
      },
    });
  const orchestration = orchestrate({
    manager,
    config,
    sessionId: 's',
    tools: { search: make('search'), think: make('think') },
    messages,
    onError: () => undefined,
  });
  const result = await generateText({
    model: new ScriptedModel(script),
    messages,
    stopWhen: isStepCount(10),
    ...orchestration,
  });
  await orchestration.settled();
  const states = manager.getStateManager();
  const state = await states.getState('s');
  const store = await states.store();
  const log = (await store.readLog?.('s')) ?? [];
  await manager.close();
  return { result, events, executed, state, log };
}

const size = (value: unknown) => JSON.stringify(value).length;

describe('model-chosen call ids and tool names are kept bounded', () => {
  it('keeps a megabyte call id as its digest, and still refuses the call when the id repeats', async () => {
    const huge = `call_${'x'.repeat(MEGABYTE)}`;
    const { result, events, executed, state, log } = await run([
      { toolCalls: [{ toolName: 'search', input: {}, toolCallId: huge }] },
      // The same id again, for another tool: a call id runs at most once.
      { toolCalls: [{ toolName: 'think', input: {}, toolCallId: huge }] },
      { text: 'done' },
    ]);
    expect(result.text).toBe('done');
    expect(executed).toEqual(['search']);
    // Nothing the session keeps holds the id itself.
    expect(size(state)).toBeLessThan(BOUND);
    expect(log.length).toBeGreaterThan(0);
    expect(size(log)).toBeLessThan(BOUND);
    expect(size(events)).toBeLessThan(BOUND);
    const key = callIdKey(huge);
    expect(key).toMatch(/^sha256:[A-Za-z0-9_-]{43}$/);
    expect(state?.toolCallIds).toEqual([key]);
    expect(state?.recentlyUsedTools).toEqual(['search']);
    const refused = events.find((event) => event.type === 'tool-rejected');
    expect(refused).toMatchObject({ tool: 'think', toolCallId: key, reason: { code: 'duplicate-call' } });
  });

  it('keeps a short id as it is', async () => {
    const id = `call_${'y'.repeat(MAX_CALL_ID_LENGTH - 5)}`;
    expect(callIdKey(id)).toBe(id);
    const { executed, state } = await run([{ toolCalls: [{ toolName: 'search', input: {}, toolCallId: id }] }]);
    expect(executed).toEqual(['search']);
    expect(state?.toolCallIds).toEqual([id]);
  });

  it('refuses a tool with a megabyte name without keeping the name whole', async () => {
    const name = `search${'z'.repeat(MEGABYTE)}`;
    const id = `call_${'w'.repeat(MEGABYTE)}`;
    const { result, events, executed, state, log } = await run([
      { toolCalls: [{ toolName: name, input: {}, toolCallId: id }] },
      { text: 'done' },
    ]);
    expect(result.text).toBe('done');
    expect(executed).toEqual([]);
    expect(size(state)).toBeLessThan(BOUND);
    expect(size(log)).toBeLessThan(BOUND);
    expect(size(events)).toBeLessThan(BOUND);
    const refused = events.filter((event) => event.type === 'tool-rejected');
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatchObject({ toolCallId: callIdKey(id), reason: { code: 'no-such-tool' } });
    const kept = (refused[0] as Extract<OrchestrationEvent, { type: 'tool-rejected' }>).tool;
    expect(kept.length).toBeLessThanOrEqual(128);
    // Its beginning and its length, for a person reading the refusal.
    expect(kept.startsWith('searchzzz')).toBe(true);
    expect(kept).toContain(`(${name.length} characters)`);
  });
});
