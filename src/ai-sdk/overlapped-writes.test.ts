/**
 * Store writes that travel while the AI SDK does its own work, on a store with round trips.
 * The first call a model step runs is reserved when it is approved, before the AI SDK gets to
 * `execute`: still the one write per call, still decided by the store, and released when the
 * call never runs. The turn's end is written while the AI SDK wraps up the call, and nobody
 * sees the turn over (the response ending, the app's `onStepEnd` and `onEnd`) before it is
 * stored.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { isStepCount, streamText, type ToolSet, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { OrchestrationConfig } from '../core/schema.js';
import { createOrchestrationManager, type OrchestrationManager } from '../orchestration/orchestration-manager.js';
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

function makeTools(log: string[] = []): ToolSet {
  const make = (name: string) =>
    tool({
      inputSchema: z.object({}),
      execute: async () => {
        log.push(`${name} ran`);
        return 'ok';
      },
    });
  return { a: make('a'), b: make('b') };
}

/**
 * Wraps each guarded tool's `execute` in place (the tools stay the guarded ones): `around` gets
 * the tool's name and a function that runs the guarded `execute`.
 */
function aroundExecute(tools: ToolSet, around: (name: string, run: () => unknown) => unknown): void {
  for (const [name, guarded] of Object.entries(tools)) {
    const execute = guarded.execute;
    if (execute === undefined) continue;
    guarded.execute = (input, options) => around(name, () => execute(input, options)) as never;
  }
}

/** Marks in `log` when the AI SDK calls each guarded tool's `execute`. */
function markExecute(tools: ToolSet, log: string[]): void {
  aroundExecute(tools, (name, run) => {
    log.push(`execute ${name}`);
    return run();
  });
}

/**
 * One turn of `model` (default {@link script}) on session "s" through `orchestrate()` and
 * `streamText`, consumed and settled. `prepare` gets the orchestration before the turn starts,
 * to wrap its guarded tools.
 */
async function runTurn(options: {
  manager: OrchestrationManager;
  tools: ToolSet;
  model?: ScriptedModel;
  config?: OrchestrationConfig;
  prepare?: (orchestration: ReturnType<typeof orchestrate>) => void;
}) {
  const { manager, tools } = options;
  const orchestration = orchestrate({ manager, config: options.config ?? config, sessionId: 's', tools, messages });
  options.prepare?.(orchestration);
  const model = options.model ?? script();
  const result = streamText({ model, messages, stopWhen: isStepCount(5), ...orchestration });
  await result.consumeStream();
  await orchestration.settled();
  return result;
}

/**
 * A memory store behind a round trip: no copies this process could peek at, every update
 * taking `delayMs`, and the update numbered `holdUpdate` (1-based) held until `release()`.
 */
function remoteLike(
  options: { delayMs?: number; holdUpdate?: number; failUpdate?: number; onUpdate?: (n: number) => void } = {},
) {
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
      options.onUpdate?.(n);
      if (options.delayMs) await new Promise((resolve) => setTimeout(resolve, options.delayMs));
      if (n === options.holdUpdate) await released;
      if (n === options.failUpdate) throw new Error('the store went away');
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

describe('the first call a model step runs is reserved when it is approved', () => {
  it('sends the reservation before the AI SDK calls execute; later calls of the step are reserved by execute, in order', async () => {
    const config: OrchestrationConfig = { steps: [{ name: 'Work', isDefault: true }] };
    const { store, shared, log } = remoteLike({ delayMs: 5 });
    const model = new ScriptedModel([
      {
        toolCalls: [
          { toolName: 'a', input: {}, toolCallId: 'a-1' },
          { toolName: 'b', input: {}, toolCallId: 'b-1' },
        ],
      },
      { text: 'done' },
    ]);
    await runTurn({
      manager: createOrchestrationManager({ store }),
      tools: makeTools(log),
      model,
      config,
      prepare: (orchestration) => markExecute(orchestration.tools, log),
    });
    // a's reservation (with the message) left before execute; b's waited for a's run, as ever.
    expect(log.slice(0, 7)).toEqual([
      'update 1 sent',
      'execute a',
      'execute b',
      'update 1 stored',
      'a ran',
      'update 2 sent',
      'update 2 stored',
    ]);
    expect(log.slice(7)).toEqual(['b ran', 'update 3 sent', 'update 3 stored']);
    const stored = await shared.get('s');
    expect(stored?.recentlyUsedTools).toEqual(['a', 'b']);
    expect(stored?.pending ?? []).toEqual([]);
  });

  it("reports the early reservation's events in the context of the call's execute (its telemetry span)", async () => {
    // The AI SDK runs a tool's execute inside its tool span, as an AsyncLocalStorage context;
    // a listener (the OpenTelemetry one) puts each event on the span of the context it runs in.
    const running = new AsyncLocalStorage<string>();
    const { store, log } = remoteLike({ delayMs: 5 });
    const manager = createOrchestrationManager({
      store,
      onEvent: (event) => {
        if (event.type === 'tool-reserved') log.push(`reported ${event.toolCallId} in ${running.getStore()}`);
      },
    });
    await runTurn({
      manager,
      tools: makeTools(log),
      prepare: (orchestration) => aroundExecute(orchestration.tools, (name, run) => running.run(name, run)),
    });
    // a was stored before its execute, b from within it: both reported inside their execute.
    expect(log.filter((line) => line.startsWith('reported'))).toEqual(['reported a-1 in a', 'reported b-1 in b']);
  });

  it('a call the store refuses is not run, even though the approval let it through', async () => {
    // Another process runs "a" while this turn's first step is decided on the copy it read.
    const { store, shared } = remoteLike({
      onUpdate: (n) => {
        if (n === 1) void other.processToolUsage(config, messages, 's', 'a');
      },
    });
    const other = createOrchestrationManager({ store: shared });
    const ran: string[] = [];
    const result = await runTurn({ manager: createOrchestrationManager({ store }), tools: makeTools(ran) });
    // The sequence moved on to "b" under the turn: its "a" is refused by the store and never runs.
    expect(ran).toEqual(['b ran']);
    const steps = await result.steps;
    expect(steps[0]?.toolResults).toEqual([]);
    expect((await shared.get('s'))?.recentlyUsedTools).toEqual(['a', 'b']);
  });

  it('a failed early reservation runs nothing, is reported by settled(), and is never an unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      // The first write is a's reservation, sent from the approval hook.
      const { store } = remoteLike({ failUpdate: 1 });
      const manager = createOrchestrationManager({ store });
      const ran: string[] = [];
      const orchestration = orchestrate({
        manager,
        config,
        sessionId: 's',
        tools: makeTools(ran),
        messages,
        onError: () => undefined,
      });
      const result = streamText({ model: script(), messages, stopWhen: isStepCount(5), ...orchestration });
      await Promise.allSettled([result.consumeStream()]);
      await expect(orchestration.settled()).rejects.toThrow('the store went away');
      expect(ran).not.toContain('a ran');
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it("two concurrent turns on one session, each reserving early, run the sequence's first tool once", async () => {
    // Two processes (managers) share the session's store; each turn's first call is reserved from
    // its approval hook while the other's write is in flight. The scripted model keeps calling
    // the script's tools whatever it is offered (the AI SDK logs the tool choice it broke).
    const { store, shared } = remoteLike({ delayMs: 5 });
    const ran: string[] = [];
    const turns = await Promise.allSettled(
      [1, 2].map(() => runTurn({ manager: createOrchestrationManager({ store }), tools: makeTools(ran) })),
    );
    expect(turns.map((turn) => turn.status)).toEqual(['fulfilled', 'fulfilled']);
    expect(ran.filter((line) => line === 'a ran')).toEqual(['a ran']);
    // Whatever ran was recorded, and nothing was recorded that did not run.
    const stored = await shared.get('s');
    expect([...(stored?.recentlyUsedTools ?? [])].sort()).toEqual(ran.map((line) => line.replace(' ran', '')).sort());
    expect(stored?.pending ?? []).toEqual([]);
  });

  it('a call id the model repeats in one step runs once, though the first was reserved early', async () => {
    const config: OrchestrationConfig = { steps: [{ name: 'Work', isDefault: true }] };
    const { store, shared } = remoteLike({ delayMs: 5 });
    const ran: string[] = [];
    const model = new ScriptedModel([
      {
        toolCalls: [
          { toolName: 'a', input: {}, toolCallId: 'same' },
          { toolName: 'b', input: {}, toolCallId: 'same' },
        ],
      },
      { toolCalls: [{ toolName: 'a', input: {}, toolCallId: 'same' }] },
      { text: 'done' },
    ]);
    await runTurn({ manager: createOrchestrationManager({ store }), tools: makeTools(ran), model, config });
    expect(ran).toEqual(['a ran']);
    const stored = await shared.get('s');
    expect(stored?.recentlyUsedTools).toEqual(['a']);
    expect(stored?.pending ?? []).toEqual([]);
  });

  it('reserves nothing for a client-side tool, which the AI SDK never runs here', async () => {
    const config: OrchestrationConfig = { steps: [{ name: 'Work', isDefault: true }] };
    const { store, shared } = remoteLike();
    // "ask" has no execute: the loop stops at it and the client answers.
    const tools: ToolSet = { ...makeTools(), ask: tool({ inputSchema: z.object({}) }) };
    const model = new ScriptedModel([{ toolCalls: [{ toolName: 'ask', input: {}, toolCallId: 'ask-1' }] }]);
    await runTurn({ manager: createOrchestrationManager({ store }), tools, model, config });
    const stored = await shared.get('s');
    expect(stored?.toolCallIds ?? []).not.toContain('ask-1');
    expect(stored?.pending ?? []).toEqual([]);
  });

  it('a reservation execute never takes (the call was aborted before it ran) is released with the turn', async () => {
    const controller = new AbortController();
    // The first write is a's reservation, sent from the approval: abort the call there.
    const { store, shared, log } = remoteLike({
      delayMs: 5,
      onUpdate: (n) => {
        if (n === 1) controller.abort();
      },
    });
    const manager = createOrchestrationManager({ store });
    const ran: string[] = [];
    const tools = makeTools(ran);
    const orchestration = orchestrate({ manager, config, sessionId: 's', tools, messages });
    markExecute(orchestration.tools, log);
    const result = streamText({
      model: new ScriptedModel([{ toolCalls: [{ toolName: 'a', input: {}, toolCallId: 'a-1' }] }, { text: 'done' }]),
      messages,
      abortSignal: controller.signal,
      stopWhen: isStepCount(5),
      ...orchestration,
    });
    // The aborted call may end the stream and settled() with the abort: what matters is what ran.
    await Promise.allSettled([result.consumeStream()]);
    await Promise.allSettled([orchestration.settled()]);
    expect(log).not.toContain('execute a');
    expect(ran).toEqual([]);
    const stored = await shared.get('s');
    // Reserved, then released: nothing pending, nothing recorded as used.
    expect(stored?.pending ?? []).toEqual([]);
    expect(stored?.recentlyUsedTools).toEqual([]);
    expect(stored?.toolCallIds).toContain('a-1');
  });
});
