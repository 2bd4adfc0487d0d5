/**
 * The calls a model emits in one step, under `orchestrate()`: independent ones run side by side,
 * as the AI SDK runs them without Baton (three 200 ms searches take about 200 ms, not 600); a
 * call whose answer depends on an earlier one of the step waits for it and is decided as a serial
 * run in emission order decides it (a rule that allows `save` once `search` was used; a limit the
 * two share). On the memory store and through generateText and streamText.
 */
import { generateText, isStepCount, streamText, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { OrchestrationConfig } from '../core/schema.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import { ScriptedModel } from '../testing/scripted-model.js';
import { orchestrate } from './orchestrate.js';

const messages = [{ role: 'user' as const, content: 'find and save it' }];

/** Tools that take `ms` and note when they started and ended (ms since `t0`). */
function timedTools(ms: number) {
  const t0 = Date.now();
  const spans: { tool: string; id: string; start: number; end: number }[] = [];
  const make = (name: string) =>
    tool({
      inputSchema: z.object({ q: z.string().optional() }),
      execute: async (_input, { toolCallId }) => {
        const start = Date.now() - t0;
        await new Promise((resolve) => setTimeout(resolve, ms));
        spans.push({ tool: name, id: toolCallId, start, end: Date.now() - t0 });
        return `${name} done`;
      },
    });
  return { spans, tools: { search: make('search'), save: make('save'), fetch: make('fetch') } };
}

const call = (toolName: string, toolCallId: string) => ({ toolName, toolCallId, input: {} });

async function runStep(config: OrchestrationConfig, calls: ReturnType<typeof call>[], stream = false) {
  const manager = createOrchestrationManager();
  const { spans, tools } = timedTools(200);
  const model = new ScriptedModel([{ toolCalls: calls }, { text: 'done' }]);
  const orchestration = orchestrate({ manager, config, sessionId: 's', tools, messages, onError: () => undefined });
  const start = Date.now();
  let outcomes: { type: string; toolCallId: string }[];
  if (stream) {
    const result = streamText({ model, messages, stopWhen: isStepCount(3), ...orchestration });
    await result.consumeStream();
    outcomes = ((await result.steps)[0]?.content ?? []) as never;
  } else {
    const result = await generateText({ model, messages, stopWhen: isStepCount(3), ...orchestration });
    outcomes = (result.steps[0]?.content ?? []) as never;
  }
  await orchestration.settled();
  const elapsed = Date.now() - start;
  const state = await manager.getStateManager().getState('s');
  const results = outcomes.filter((part) => part.type === 'tool-result' || part.type === 'tool-error');
  return { spans, elapsed, state, results, all: outcomes };
}

const open: OrchestrationConfig = { steps: [{ name: 'Work', isDefault: true }] };

describe.each([false, true])('one model step, streaming %s', (stream) => {
  it('runs three independent calls side by side', async () => {
    const { spans, elapsed, state } = await runStep(
      open,
      [call('search', 'a'), call('search', 'b'), call('search', 'c')],
      stream,
    );
    expect(spans.map((span) => span.id).sort()).toEqual(['a', 'b', 'c']);
    // They overlap: each started before any ended.
    const firstEnd = Math.min(...spans.map((span) => span.end));
    for (const span of spans) expect(span.start).toBeLessThan(firstEnd);
    expect(elapsed).toBeLessThan(450);
    // Recorded in the order the model emitted them.
    expect(state?.recentlyUsedTools).toEqual(['search', 'search', 'search']);
  });

  it('makes a call that a rule allows only after an earlier call of the step wait for it', async () => {
    const config: OrchestrationConfig = {
      rules: [
        {
          tools: ['save'],
          when: "'search' in state.recentlyUsedTools",
          effect: 'allow',
          reason: 'Search before saving',
        },
      ],
      steps: [{ name: 'Work', isDefault: true }],
    };
    const { spans, state, results } = await runStep(config, [call('search', 's1'), call('save', 'v1')], stream);
    // save was decided once search completed, so it ran, and after it.
    expect(results.map((part) => part.type)).toEqual(['tool-result', 'tool-result']);
    const search = spans.find((span) => span.id === 's1')!;
    const save = spans.find((span) => span.id === 'v1')!;
    expect(save.start).toBeGreaterThanOrEqual(search.end);
    expect(state?.recentlyUsedTools).toEqual(['search', 'save']);
  });

  it('decides calls that share a limit in emission order, as a serial run would', async () => {
    const config: OrchestrationConfig = {
      rules: [{ tools: ['search', 'fetch'], limit: { max: 1, per: 'turn' }, reason: 'One lookup per question' }],
      steps: [{ name: 'Work', isDefault: true }],
    };
    const { spans, state, all } = await runStep(config, [call('search', 's1'), call('fetch', 'f1')], stream);
    expect(spans.map((span) => span.id)).toEqual(['s1']);
    // Refused before it ran, as a serial run refuses it: the approval hook decides the step's
    // calls as if the earlier ones ran, and answers the model with the reason.
    const refusal = all.find((part) => part.type === 'tool-approval-response') as unknown as {
      approved: boolean;
      reason: string;
      toolCall: { toolCallId: string };
    };
    expect(refusal).toMatchObject({ approved: false, toolCall: { toolCallId: 'f1' } });
    expect(refusal.reason).toMatch(/One lookup per question/);
    expect(state?.recentlyUsedTools).toEqual(['search']);
  });
});
