/**
 * Token budgets and telemetry against a hostile model: a provider that reports token usage a
 * budget cannot count (negative, fractional, past the largest safe integer), and a model whose
 * tool arguments end up in a rule's evaluation error.
 *
 * - A negative count used to be subtracted: the provider refunded the session's budget, and a
 *   large one made the cumulative usage negative, so the store refused the turn's writes.
 * - A fraction or a sum past `Number.MAX_SAFE_INTEGER` made the state one no store accepts: the
 *   turn failed, and with the sum past the limit every later turn of the session failed too.
 * - A rule that failed to evaluate on the model's arguments ("Invalid duration string: <the
 *   argument>") put the argument into `baton.reason.message`, while docs/telemetry.md promises
 *   that Baton's span events never carry what tools take.
 */
import { isStepCount, streamText, tool } from 'ai';
import { expect, it } from 'vitest';
import { z } from 'zod';
import { orchestrate } from '../src/ai-sdk/orchestrate.js';
import type { OrchestrationConfig } from '../src/core/schema.js';
import { createOrchestrationManager, type OrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { memoryStore } from '../src/stores/memory.js';
import { createTelemetry, type TelemetryAttributes, type TelemetryTracer } from '../src/telemetry/otel.js';
import { mockModel, type Reply } from './helpers/mock-model.js';

const BUDGET: OrchestrationConfig = { budget: { totalTokens: 100 }, steps: [] };

/** One turn of `replies` (then "done"); what the model was asked and whether the turn failed. */
async function turn(manager: OrchestrationManager, config: OrchestrationConfig, sessionId: string, replies: Reply[]) {
  const mock = mockModel(replies);
  const ran: string[] = [];
  const tools = {
    search: tool({
      inputSchema: z.object({}),
      execute: async () => {
        ran.push('search');
        return 'found';
      },
    }),
  };
  const messages = [{ role: 'user' as const, content: `question ${Math.random()}` }];
  const orchestration = orchestrate({ manager, config, sessionId, tools, messages, onError: () => undefined });
  const result = streamText({ model: mock.model, messages, stopWhen: isStepCount(10), ...orchestration });
  let failure: unknown;
  try {
    await result.consumeStream();
    await orchestration.settled();
  } catch (error) {
    failure = error;
  }
  return { modelCalls: mock.calls.length, ran, failure };
}

const searching = (id: string, inputTokens: number): Reply => ({
  calls: [{ tool: 'search', id }],
  inputTokens,
  outputTokens: 0,
});

it('a provider reporting negative token usage cannot refund the budget', async () => {
  const manager = createOrchestrationManager({ store: memoryStore() });
  // 60 tokens a step, every other step "refunded": counted as reported, the budget never runs out.
  const replies = Array.from({ length: 10 }, (_, i) => searching(`n${i}`, i % 2 === 0 ? 60 : -60));
  const { modelCalls, failure } = await turn(manager, BUDGET, 'negative', replies);
  expect(failure).toBeUndefined();
  // 60, 0 (nothing spent is nothing refunded), 60: the budget is spent after the third call.
  expect(modelCalls).toBe(3);
  expect((await manager.getState('negative'))!.cumulativeTokenUsage.totalTokens).toBe(120);
});

it('a provider reporting a fraction of a token does not fail the turn, and counts it whole', async () => {
  const manager = createOrchestrationManager({ store: memoryStore() });
  const { ran, failure } = await turn(manager, BUDGET, 'fraction', [searching('f1', 10.5), searching('f2', 10)]);
  expect(failure).toBeUndefined();
  expect(ran).toEqual(['search', 'search']);
  const state = (await manager.getState('fraction'))!;
  expect(state.recentlyUsedTools).toEqual(['search', 'search']);
  // 11 + 10, then "done" (10 input and 5 output tokens).
  expect(state.cumulativeTokenUsage.totalTokens).toBe(36);
});

it('huge token usage in a shadow-mode session never locks it: later turns still record their tools', async () => {
  const manager = createOrchestrationManager({ store: memoryStore() });
  const shadow: OrchestrationConfig = { ...BUDGET, shadow: true };
  const first = await turn(manager, shadow, 'huge', [{ text: 'ok', inputTokens: Number.MAX_SAFE_INTEGER - 5 }]);
  expect(first.failure).toBeUndefined();
  for (const n of [1, 2]) {
    const later = await turn(manager, shadow, 'huge', [searching(`h${n}`, 10)]);
    expect(later.failure).toBeUndefined();
    expect((await manager.getState('huge'))!.recentlyUsedTools).toHaveLength(n);
  }
  expect((await manager.getState('huge'))!.cumulativeTokenUsage.totalTokens).toBe(Number.MAX_SAFE_INTEGER);
});

/** A tracer that keeps every span event's attributes (Baton starts a span per event when none is active). */
function recordingTracer(): { tracer: TelemetryTracer; recorded: TelemetryAttributes[] } {
  const recorded: TelemetryAttributes[] = [];
  const tracer: TelemetryTracer = {
    startSpan: () => ({
      addEvent: (_name, attributes) => recorded.push({ ...attributes }),
      setAttributes: () => undefined,
      isRecording: () => true,
      end: () => undefined,
    }),
  };
  return { tracer, recorded };
}

it("keeps a tool's arguments out of the span events when a rule cannot be evaluated on them", async () => {
  const secret = '4111 1111 1111 1111 exp 12/29';
  const config: OrchestrationConfig = {
    rules: [{ tools: ['wait'], when: "duration(args.timeout) > duration('30s')", effect: 'deny', reason: 'Too long' }],
    steps: [],
  };
  const manager = createOrchestrationManager({ store: memoryStore() });
  const { tracer, recorded } = recordingTracer();
  createTelemetry({ tracer }).instrument(manager);
  const wait = tool({ inputSchema: z.object({ timeout: z.string() }), execute: async () => 'waited' });
  const messages = [{ role: 'user' as const, content: 'wait for it' }];
  const orchestration = orchestrate({ manager, config, sessionId: 'leak', tools: { wait }, messages });
  const mock = mockModel([{ calls: [{ tool: 'wait', id: 'w1', input: { timeout: secret } }] }]);
  const result = streamText({ model: mock.model, messages, stopWhen: isStepCount(3), ...orchestration });
  await result.consumeStream();
  await orchestration.settled();
  const rejected = recorded.find((attributes) => attributes['baton.reason.code'] === 'rule');
  // Still says which rule refused the call and that it could not be evaluated...
  expect(rejected).toMatchObject({
    'baton.tool': 'wait',
    'baton.reason.rule': 'rules[0]',
    'baton.reason.message': 'rule rules[0] could not be evaluated, so the call is refused',
  });
  // ...and nothing recorded quotes what the model passed.
  expect(JSON.stringify(recorded)).not.toContain('4111');
});
