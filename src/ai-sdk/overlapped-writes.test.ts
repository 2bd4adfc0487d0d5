/**
 * Store writes that travel while the AI SDK does its own work, on a store with round trips:
 * the turn's end is written while the AI SDK wraps up the call, and nobody sees the turn over
 * (the response ending, the app's `onStepEnd` and `onEnd`) before it is stored.
 */
import { isStepCount, streamText, type ToolSet, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { OrchestrationConfig } from '../core/schema.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import { memoryStore } from '../stores/memory.js';
import type { SessionStore } from '../stores/types.js';
import { ScriptedModel } from '../testing/scripted-model.js';
import { orchestrate } from './orchestrate.js';

const config: OrchestrationConfig = {
  steps: [{ name: 'Work', isDefault: true, sequence: ['a', 'b'], requireSequence: true }],
};
const messages = [{ role: 'user' as const, content: 'go' }];
/** Two tool steps and an answer, 15 tokens each (the scripted model's default usage). */
const script = () =>
  new ScriptedModel([
    { toolCalls: [{ toolName: 'a', input: {}, toolCallId: 'a-1' }] },
    { toolCalls: [{ toolName: 'b', input: {}, toolCallId: 'b-1' }] },
    { text: 'done' },
  ]);
const TURN_TOKENS = 45;

function makeTools(): ToolSet {
  const make = () => tool({ inputSchema: z.object({}), execute: async () => 'ok' });
  return { a: make(), b: make() };
}

/**
 * A memory store behind a round trip: no copies this process could peek at, every update
 * taking `delayMs`, and the update numbered `holdUpdate` (1-based) held until `release()`.
 */
function remoteLike(options: { delayMs?: number; holdUpdate?: number } = {}) {
  const shared = memoryStore();
  const log: string[] = [];
  let updates = 0;
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const store: SessionStore = {
    name: 'remote-like',
    get: (sessionId) => shared.get(sessionId),
    update: async (sessionId, fn) => {
      const n = ++updates;
      log.push(`update ${n} sent`);
      if (options.delayMs) await new Promise((resolve) => setTimeout(resolve, options.delayMs));
      if (n === options.holdUpdate) await released;
      const state = await shared.update(sessionId, fn);
      log.push(`update ${n} stored`);
      return state;
    },
    delete: (sessionId) => shared.delete(sessionId),
    sweep: () => shared.sweep(),
    close: () => shared.close(),
  };
  return { store, shared, log, release };
}

describe("the turn's end is written while the AI SDK wraps up the call", () => {
  it('travels while the AI SDK works toward onEnd, and the response ends only once it is stored', async () => {
    // The turn writes three times: reserving a (with the message), reserving b, and its end.
    const { store, shared, log, release } = remoteLike({ holdUpdate: 3 });
    const manager = createOrchestrationManager({ store });
    const orchestration = orchestrate({ manager, config, sessionId: 's', tools: makeTools(), messages });
    const result = streamText({
      model: script(),
      messages,
      stopWhen: isStepCount(5),
      ...orchestration,
      // Marks when the AI SDK reaches onEnd, then runs the orchestration's.
      onEnd: (event) => {
        log.push('onEnd reached');
        return orchestration.onEnd(event);
      },
    });
    let consumed = false;
    const consuming = result.consumeStream().then(() => {
      consumed = true;
    });
    await expect.poll(() => log.includes('onEnd reached'), { timeout: 2_000 }).toBe(true);
    // The end's write is under way and held: the AI SDK went on to onEnd meanwhile, and the
    // response has not ended.
    expect(log).toContain('update 3 sent');
    expect(log).not.toContain('update 3 stored');
    expect(consumed).toBe(false);
    release();
    await consuming;
    expect(log.indexOf('update 3 stored')).toBeLessThan(log.length);
    const stored = await shared.get('s');
    expect(stored?.cumulativeTokenUsage.totalTokens).toBe(TURN_TOKENS);
    expect(stored?.recentlyUsedTools).toEqual(['a', 'b']);
    await orchestration.settled();
  });

  it("the app's onStepEnd and onEnd see the end stored, and so does the caller once the response ended", async () => {
    const { store, shared } = remoteLike({ delayMs: 15 });
    const manager = createOrchestrationManager({ store });
    const seen: Record<string, number | undefined> = {};
    const orchestration = orchestrate({
      manager,
      config,
      sessionId: 's',
      tools: makeTools(),
      messages,
      onStepEnd: async (step) => {
        if (step.toolCalls.length === 0) seen.onStepEnd = (await shared.get('s'))?.cumulativeTokenUsage.totalTokens;
      },
      onEnd: async () => {
        seen.onEnd = (await shared.get('s'))?.cumulativeTokenUsage.totalTokens;
      },
    });
    const result = streamText({ model: script(), messages, stopWhen: isStepCount(5), ...orchestration });
    await result.consumeStream();
    // No settled(): the response ending is what a client sees.
    expect((await shared.get('s'))?.cumulativeTokenUsage.totalTokens).toBe(TURN_TOKENS);
    expect(seen).toEqual({ onStepEnd: TURN_TOKENS, onEnd: TURN_TOKENS });
    await orchestration.settled();
  });
});
