/**
 * A turn on a session this process does not know reads it before its first model step.
 * `orchestrate()` starts that read at once, so it travels while the AI SDK sets up its loop: these
 * tests check it is the same one read (never an extra round trip), that the first step decides
 * on it, and that a read that fails is reported by the turn, never as an unhandled rejection.
 */
import { isStepCount, streamText, type ToolSet, tool } from 'ai';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { OrchestrationConfig } from '../core/schema.js';
import type { OrchestrationState } from '../core/state.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import { memoryStore } from '../stores/memory.js';
import type { SessionStore } from '../stores/types.js';
import { ScriptedModel } from '../testing/scripted-model.js';
import { orchestrate } from './orchestrate.js';

const config: OrchestrationConfig = {
  steps: [{ name: 'Work', isDefault: true, sequence: ['a', 'b'], requireSequence: true }],
};
const messages = [{ role: 'user' as const, content: 'go' }];

function makeTools(ran: string[]): ToolSet {
  const make = (name: string) =>
    tool({
      inputSchema: z.object({}),
      execute: async () => {
        ran.push(name);
        return 'ok';
      },
    });
  return { a: make('a'), b: make('b') };
}

/**
 * A memory store that keeps no copies this process could peek at (as a store shared with other
 * processes cannot vouch for one), counting its reads; `failReads` makes them fail.
 */
function remoteLike(shared: SessionStore, options: { failReads?: boolean } = {}) {
  const reads: string[] = [];
  const store: SessionStore = {
    name: 'remote-like',
    get: (sessionId) => {
      reads.push(sessionId);
      return options.failReads ? Promise.reject(new Error('the store is down')) : shared.get(sessionId);
    },
    update: (sessionId, fn) => shared.update(sessionId, fn),
    delete: (sessionId) => shared.delete(sessionId),
    sweep: () => shared.sweep(),
    close: () => shared.close(),
  };
  return { store, reads };
}

const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);
beforeEach(() => {
  unhandled.length = 0;
  process.on('unhandledRejection', onUnhandled);
});
afterEach(() => {
  process.off('unhandledRejection', onUnhandled);
});

describe('orchestrate() reads a session it does not know ahead of the first model step', () => {
  it('starts the read at once, reads once, and decides the first step on it', async () => {
    const shared = memoryStore();
    const ran: string[] = [];
    const tools = makeTools(ran);
    // Another process ran "a" in this session.
    const elsewhere = createOrchestrationManager({ store: shared });
    await elsewhere.processToolUsage(config, messages, 'known-elsewhere', 'a');
    const { store, reads } = remoteLike(shared);
    const manager = createOrchestrationManager({ store });

    const orchestration = orchestrate({ manager, config, sessionId: 'known-elsewhere', tools, messages });
    // Before the model loop even starts.
    expect(reads).toEqual(['known-elsewhere']);
    const model = new ScriptedModel([
      { toolCalls: [{ toolName: 'b', input: {}, toolCallId: 'b-1' }] },
      { text: 'done' },
    ]);
    await streamText({ model, messages, stopWhen: isStepCount(3), ...orchestration }).consumeStream();
    await orchestration.settled();

    expect(reads).toEqual(['known-elsewhere']); // the one read, not a second at the first step
    expect(model.offeredTools()[0]).toEqual(['b']); // the sequence goes on where the store says
    expect(ran).toEqual(['b']);
    const state = (await shared.get('known-elsewhere')) as OrchestrationState;
    expect(state.recentlyUsedTools).toEqual(['a', 'b']);
  });

  it('reads nothing for a session it knows, or one the caller says is new', async () => {
    const { store, reads } = remoteLike(memoryStore());
    const manager = createOrchestrationManager({ store });
    orchestrate({ manager, config, sessionId: 'new-one', tools: makeTools([]), messages, newSession: true });
    expect(reads).toEqual([]);
  });

  it('a read that fails stops the first model step with the store error, and is never unhandled', async () => {
    const { store } = remoteLike(memoryStore(), { failReads: true });
    const manager = createOrchestrationManager({ store });
    const ran: string[] = [];
    const orchestration = orchestrate({ manager, config, sessionId: 'down', tools: makeTools(ran), messages });
    // An orchestration made and never run: its failed read must not surface as unhandled either.
    orchestrate({ manager, config, sessionId: 'never-run', tools: makeTools([]), messages });
    const model = new ScriptedModel([
      { toolCalls: [{ toolName: 'a', input: {}, toolCallId: 'a-1' }] },
      { text: 'done' },
    ]);
    const streamErrors: unknown[] = [];
    const result = streamText({
      model,
      messages,
      stopWhen: isStepCount(3),
      ...orchestration,
      onError: ({ error }) => {
        streamErrors.push(error);
      },
    });
    await result.consumeStream();
    await orchestration.settled().catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(streamErrors).toEqual([expect.objectContaining({ message: 'the store is down' })]);
    expect(ran).toEqual([]);
    expect(model.calls).toHaveLength(0); // no model call was made on a session it could not read
    expect(unhandled).toEqual([]);
  });
});
