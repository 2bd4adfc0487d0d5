import { OpenTelemetry } from '@ai-sdk/otel';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { isStepCount, streamText, tool } from 'ai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { orchestrate } from '../ai-sdk/orchestrate.js';
import type { OrchestrationConfig } from '../core/schema.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import { ScriptedModel } from '../testing/scripted-model.js';
import { createTelemetry, eventAttributes, spanEventName } from './otel.js';

const exporter = new InMemorySpanExporter();
const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
const tracer = provider.getTracer('test');

beforeAll(() => {
  // Spans are only "active" across awaits with an async context manager, as in any Node app.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
});
afterAll(() => {
  context.disable();
});
afterEach(() => exporter.reset());

const config: OrchestrationConfig = {
  steps: [
    {
      name: 'Research',
      conditions: [{ type: 'message_contains', value: 'research' }],
      availableTools: { allowed: ['search', 'think'] },
      sequence: ['search', 'think'],
    },
    { name: 'Default', isDefault: true },
  ],
};
const messages = [{ role: 'user' as const, content: 'Please research EV adoption' }];

function makeTools() {
  const make = (name: string) =>
    tool({ description: name, inputSchema: z.object({}), execute: async () => `${name}-ok` });
  return { search: make('search'), think: make('think') };
}

/** search, think (the sequence), search again (allowed once it is complete), then an answer. */
function researchModel() {
  return new ScriptedModel([
    { toolCalls: [{ toolName: 'search', input: {}, toolCallId: 'c1' }] },
    { toolCalls: [{ toolName: 'think', input: {}, toolCallId: 'c2' }] },
    { toolCalls: [{ toolName: 'search', input: {}, toolCallId: 'c3' }] },
    { text: 'Done.' },
  ]);
}

/** One chat turn through `orchestrate()` + `streamText`, inside a `request` span. */
async function turn(options: { aiSdkSpans: boolean; sessionId: string }) {
  const manager = createOrchestrationManager();
  createTelemetry({ tracer }).instrument(manager);
  const request = tracer.startSpan('request');
  await context.with(trace.setSpan(context.active(), request), async () => {
    const orchestration = orchestrate({
      manager,
      config,
      sessionId: options.sessionId,
      tools: makeTools(),
      messages,
      onError: (error) => {
        throw error;
      },
    });
    const result = streamText({
      model: researchModel(),
      messages,
      stopWhen: isStepCount(6),
      // Per call, so that no global AI SDK state leaks between tests.
      telemetry: options.aiSdkSpans ? { integrations: [new OpenTelemetry({ tracer })] } : { isEnabled: false },
      ...orchestration,
    });
    await result.consumeStream();
    await orchestration.settled();
  });
  request.end();
  const spans = exporter.getFinishedSpans();
  return { spans, request: byName(spans, 'request') };
}

function byName(spans: readonly ReadableSpan[], name: string): ReadableSpan {
  const found = spans.find((span) => span.name === name);
  if (!found) throw new Error(`no span "${name}" among ${spans.map((s) => s.name).join(', ')}`);
  return found;
}

function events(span: ReadableSpan, name: string) {
  return span.events.filter((event) => event.name === name).map((event) => event.attributes ?? {});
}

/** The names of a span's ancestors, nearest first. */
function ancestors(spans: readonly ReadableSpan[], span: ReadableSpan): string[] {
  const names: string[] = [];
  let parentId = span.parentSpanContext?.spanId;
  while (parentId !== undefined) {
    const parent = spans.find((candidate) => candidate.spanContext().spanId === parentId);
    if (!parent) break;
    names.push(parent.name);
    parentId = parent.parentSpanContext?.spanId;
  }
  return names;
}

describe('createTelemetry(): orchestration events as OpenTelemetry span events', () => {
  it('records each decision of a turn on the active span, with session, step, tools and reason', async () => {
    const { spans, request } = await turn({ aiSdkSpans: false, sessionId: 'plain' });
    const offered = events(request, 'baton.tools-offered');
    expect(offered.map((a) => a['baton.tools'])).toEqual([
      ['search'],
      ['think'],
      ['search', 'think'],
      ['search', 'think'],
    ]);
    expect(offered[0]).toMatchObject({
      'baton.session_id': 'plain',
      'baton.step': 'Research',
      'baton.tool_choice': 'auto',
      'baton.sequence.index': 0,
      'baton.sequence.length': 2,
      'baton.sequence.expected': ['search'],
    });
    expect(events(request, 'baton.step-changed')[0]).toMatchObject({ 'baton.to': 'Research' });
    expect(events(request, 'baton.tool-reserved')).toEqual([
      expect.objectContaining({ 'baton.tool': 'search', 'baton.tool_call_id': 'c1', 'baton.step': 'Research' }),
      expect.objectContaining({ 'baton.tool': 'think', 'baton.tool_call_id': 'c2' }),
      // Once the sequence is complete the step allows both again.
      expect.objectContaining({ 'baton.tool': 'search', 'baton.tool_call_id': 'c3' }),
    ]);
    expect(events(request, 'baton.sequence-advanced')).toEqual([
      expect.objectContaining({ 'baton.tool': 'search', 'baton.index': 1, 'baton.length': 2 }),
      expect.objectContaining({ 'baton.tool': 'think', 'baton.index': 2 }),
    ]);
    expect(events(request, 'baton.sequence-completed')).toHaveLength(1);
    // No span of Baton's own: every event had a span to go to.
    expect(spans.map((s) => s.name)).toEqual(['request']);
  });

  it('records a rejection with its reason code', async () => {
    const manager = createOrchestrationManager();
    createTelemetry({ tracer }).instrument(manager);
    const request = tracer.startSpan('request');
    await context.with(trace.setSpan(context.active(), request), async () => {
      await manager.getActiveStep(config, messages, 'rejecting'); // the message selects Research
      const decision = await manager.requestTool(config, messages, 'rejecting', {
        tool: 'think',
        toolCallId: 'early',
        agentTools: ['search', 'think'],
      });
      expect(decision.allowed).toBe(false);
    });
    request.end();
    const [rejected] = events(byName(exporter.getFinishedSpans(), 'request'), 'baton.tool-rejected');
    expect(rejected).toMatchObject({
      'baton.session_id': 'rejecting',
      'baton.tool': 'think',
      'baton.tool_call_id': 'early',
      'baton.step': 'Research',
      'baton.reason.code': 'sequence',
      'baton.reason.expected': ['search'],
      'baton.allowed_tools': ['search'],
    });
    expect(String(rejected?.['baton.reason.message'])).toContain('search');
  });

  it('records rule decisions: a refusal names its rule, and an approval asked for is an event of its own', async () => {
    const ruled: OrchestrationConfig = {
      rules: [
        { tools: ['pay'], when: 'args.amount > 1000', effect: 'deny', reason: 'Payments over 1000 need finance' },
        { tools: ['pay'], when: 'args.amount > 100', effect: 'approve', reason: 'Payments over 100 need a person' },
      ],
      steps: [{ name: 'Checkout', isDefault: true }],
    };
    const manager = createOrchestrationManager();
    createTelemetry({ tracer }).instrument(manager);
    const pay = tool({ inputSchema: z.object({ amount: z.number() }), execute: async () => 'paid' });
    const request = tracer.startSpan('request');
    await context.with(trace.setSpan(context.active(), request), async () => {
      const orchestration = orchestrate({ manager, config: ruled, sessionId: 'ruled', tools: { pay }, messages });
      const result = streamText({
        model: new ScriptedModel([
          { toolCalls: [{ toolName: 'pay', input: { amount: 5000 }, toolCallId: 'big' }] },
          { toolCalls: [{ toolName: 'pay', input: { amount: 500 }, toolCallId: 'asks' }] },
        ]),
        messages,
        stopWhen: isStepCount(4),
        ...orchestration,
      });
      await result.consumeStream();
      await orchestration.settled();
    });
    request.end();
    const span = byName(exporter.getFinishedSpans(), 'request');
    expect(events(span, 'baton.tool-rejected')).toContainEqual(
      expect.objectContaining({
        'baton.tool_call_id': 'big',
        'baton.reason.code': 'rule',
        'baton.reason.rule': 'rules[0]',
        'baton.reason.effect': 'deny',
        'baton.reason.message': 'Payments over 1000 need finance',
      }),
    );
    expect(events(span, 'baton.approval-requested')).toEqual([
      expect.objectContaining({
        'baton.tool': 'pay',
        'baton.tool_call_id': 'asks',
        'baton.rule': 'rules[1]',
        'baton.reason': 'Payments over 100 need a person',
      }),
    ]);
  });

  it('nests the decisions taken in a tool call under the AI SDK spans when its telemetry is on', async () => {
    const { spans, request } = await turn({ aiSdkSpans: true, sessionId: 'nested' });
    const agent = spans.find((span) => span.name.startsWith('invoke_agent'));
    expect(agent?.parentSpanContext?.spanId).toBe(request.spanContext().spanId);

    const toolSpans = spans.filter((span) => span.name.startsWith('execute_tool'));
    expect(toolSpans.map((span) => span.name)).toEqual([
      'execute_tool search',
      'execute_tool think',
      'execute_tool search',
    ]);
    const [search, think, searchAgain] = toolSpans as [ReadableSpan, ReadableSpan, ReadableSpan];
    // The reservation is decided inside the SDK's tool span: step n, then invoke_agent, above it.
    expect(ancestors(spans, search)).toEqual(['step 1', agent?.name, 'request']);
    expect(events(search, 'baton.tool-reserved')).toEqual([
      expect.objectContaining({ 'baton.session_id': 'nested', 'baton.tool': 'search', 'baton.tool_call_id': 'c1' }),
    ]);
    // think's request also wrote search's completion: the sequence advanced under think's span.
    expect(events(think, 'baton.sequence-advanced')).toEqual([expect.objectContaining({ 'baton.tool': 'search' })]);
    expect(events(think, 'baton.tool-reserved')).toEqual([expect.objectContaining({ 'baton.tool': 'think' })]);
    expect(ancestors(spans, think)).toEqual(['step 2', agent?.name, 'request']);
    expect(events(searchAgain, 'baton.sequence-completed')).toHaveLength(1);

    // prepareStep runs in the caller's context (the SDK makes only its tool and model-call spans
    // active): the step decisions are on the request span, the parent of invoke_agent.
    expect(events(request, 'baton.tools-offered').map((a) => a['baton.tools'])).toEqual([
      ['search'],
      ['think'],
      ['search', 'think'],
      ['search', 'think'],
    ]);
    // Baton started no span of its own.
    expect(spans.filter((span) => span.name.startsWith('baton.'))).toEqual([]);
  });

  it('records what shadow mode would have blocked', async () => {
    const manager = createOrchestrationManager();
    createTelemetry({ tracer }).instrument(manager);
    const shadowConfig: OrchestrationConfig = { ...config, shadow: true };
    const request = tracer.startSpan('request');
    await context.with(trace.setSpan(context.active(), request), async () => {
      const orchestration = orchestrate({
        manager,
        config: shadowConfig,
        sessionId: 'shadow',
        tools: makeTools(),
        messages,
        onError: (error) => {
          throw error;
        },
      });
      const model = new ScriptedModel([
        { toolCalls: [{ toolName: 'think', input: {}, toolCallId: 'w1' }] },
        { text: 'ok' },
      ]);
      const result = streamText({ model, messages, stopWhen: isStepCount(3), ...orchestration });
      await result.consumeStream();
      await orchestration.settled();
    });
    request.end();
    const span = byName(exporter.getFinishedSpans(), 'request');
    expect(events(span, 'baton.tools-offered')[0]).toMatchObject({
      'baton.tools': ['search', 'think'],
      'baton.shadow': true,
      'baton.would_offer': ['search'],
    });
    expect(events(span, 'baton.tool-would-block')).toEqual([
      expect.objectContaining({ 'baton.tool': 'think', 'baton.tool_call_id': 'w1', 'baton.reason.code': 'sequence' }),
    ]);
  });

  it('starts a short span for an event when no span is active', () => {
    const telemetry = createTelemetry({ tracer });
    telemetry.listener({
      type: 'tool-released',
      sessionId: 's',
      tool: 'search',
      toolCallId: 'c9',
      reason: 'expired',
    });
    const [span] = exporter.getFinishedSpans();
    expect(span?.name).toBe('baton.tool-released');
    expect(span?.parentSpanContext).toBeUndefined();
    expect(span?.attributes).toMatchObject({ 'baton.reason': 'expired', 'baton.tool_call_id': 'c9' });
    expect(span?.events.map((event) => event.name)).toEqual(['baton.tool-released']);
  });

  it('records a span under an active span that has ended, not on it', async () => {
    const telemetry = createTelemetry({ tracer });
    const request = tracer.startSpan('request');
    request.end();
    context.with(trace.setSpan(context.active(), request), () =>
      telemetry.listener({ type: 'sequence-completed', sessionId: 's', step: 'Research' }),
    );
    const late = byName(exporter.getFinishedSpans(), 'baton.sequence-completed');
    expect(late.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
    expect(byName(exporter.getFinishedSpans(), 'request').events).toEqual([]);
  });
});

describe('eventAttributes()', () => {
  it('flattens any event, including types added later, into baton.* attributes', () => {
    const future = {
      type: 'budget-exceeded',
      sessionId: 's',
      budget: { scope: 'step', limitTokens: 1000, usedTokens: 1200 },
      steps: [['search'], ['think', 'reflect']],
      flags: [true, false],
      nothing: undefined,
    };
    expect(spanEventName(future.type)).toBe('baton.budget-exceeded');
    expect(eventAttributes(future)).toEqual({
      'baton.session_id': 's',
      'baton.budget.scope': 'step',
      'baton.budget.limit_tokens': 1000,
      'baton.budget.used_tokens': 1200,
      'baton.steps': '[["search"],["think","reflect"]]',
      'baton.flags': [true, false],
    });
  });
});
