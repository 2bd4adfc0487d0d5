/**
 * `createApp` in an app that set up OpenTelemetry itself (a tracer provider, an async context
 * manager and the AI SDK's `@ai-sdk/otel` integration, registered globally as its docs say):
 * what the spans of a chat turn carry, through `app.request()` inside a `SERVER` span as an
 * HTTP instrumentation would start it.
 */
import { OpenTelemetry } from '@ai-sdk/otel';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { registerTelemetry } from 'ai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { chunksOf, postJson, userMessage } from '../../test/helpers/chat-requests.js';
import { createAgent } from '../agents/create-agent.js';
import { builtinTools } from '../agents/tools/index.js';
import { createRequestScopeProcessor } from '../telemetry/request-scope.js';
import { loadTemplate } from '../templates/load-template.js';
import { type BatonApp, type CreateAppOptions, createApp } from './create-app.js';

const reasoner = await loadTemplate(new URL('../../examples/agents/cognitive-reasoner.json', import.meta.url).pathname);
const exporter = new InMemorySpanExporter();
const provider = new TracerProvider({
  spanProcessors: [createRequestScopeProcessor(), new SimpleSpanProcessor({ exporter })],
});
const tracer = provider.getTracer('app');
const integration = new OpenTelemetry({ tracer });

beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(provider);
  registerTelemetry(integration);
});
afterAll(() => {
  const registry = (globalThis as { AI_SDK_TELEMETRY_INTEGRATIONS?: object[] }).AI_SDK_TELEMETRY_INTEGRATIONS;
  registry?.splice(registry.indexOf(integration), 1);
  trace.disable();
  context.disable();
});

const apps: BatonApp[] = [];
afterEach(async () => {
  exporter.reset();
  for (const app of apps.splice(0)) await app.close();
});

const CARD = '4111 1111 1111 1111';
const PASSWORD = `hunter2-${crypto.randomUUID().slice(0, 8)}`;
const MESSAGE = `My card is ${CARD} and my password is ${PASSWORD}. How many electric vehicles will be on the road by 2030?`;

/** One chat turn, handled inside a `SERVER` span; resolves to its session, stream and spans. */
async function turn(options: Partial<CreateAppOptions>) {
  const app = createApp({ agents: [reasoner], model: 'offline', webRoot: false, ...options });
  apps.push(app);
  const server = tracer.startSpan('POST', { kind: 1 });
  const response = await context.with(trace.setSpan(context.active(), server), () =>
    postJson(app, '/api/chat/cognitive-reasoner', { messages: [userMessage(MESSAGE)] }),
  );
  expect(response.status).toBe(200);
  const chunks = await chunksOf(response);
  server.end();
  const spans: ReadableSpan[] = exporter.getFinishedSpans();
  expect(spans.filter((span) => span.name.startsWith('execute_tool'))).toHaveLength(3);
  return { sessionId: response.headers.get('x-session-id')!, chunks, spans };
}

/** Every attribute and event of the spans, as text. */
function exported(spans: readonly ReadableSpan[]): string {
  return JSON.stringify(spans.map((span) => ({ name: span.name, attributes: span.attributes, events: span.events })));
}

/** The markers of the turn's content: the user's secrets, a tool's output, instructions, a tool's definition. */
function markers(chunks: Awaited<ReturnType<typeof turn>>['chunks']): string[] {
  const output = chunks.find((chunk) => chunk.type === 'tool-output-available') as
    | { output: { results: { snippet: string }[] } }
    | undefined;
  return [
    CARD,
    PASSWORD,
    output!.output.results[0]!.snippet.slice(0, 60),
    'You are the Cognitive Reasoner',
    String(builtinTools.search.description).slice(0, 60),
  ];
}

describe('createApp and the AI SDK telemetry of its agents', () => {
  it('records no content in the AI SDK spans, even without the telemetry option', async () => {
    const { chunks, spans } = await turn({});
    const text = exported(spans);
    expect(markers(chunks).filter((marker) => text.includes(marker))).toEqual([]);
    // The spans are there, naming the agent; only the content is left out.
    expect(spans.find((span) => span.name.startsWith('invoke_agent'))?.attributes['gen_ai.agent.name']).toBe(
      'cognitive-reasoner',
    );
  });

  it('records the content with telemetry.recordContent', async () => {
    const { chunks, spans } = await turn({ telemetry: { tracer, recordContent: true } });
    const text = exported(spans);
    expect(markers(chunks).filter((marker) => !text.includes(marker))).toEqual([]);
  });

  it("names the session and the agent on every span of the request, the server's included", async () => {
    const { sessionId, spans } = await turn({ telemetry: { tracer } });
    expect(spans.length).toBeGreaterThan(10);
    for (const span of spans) {
      expect(span.attributes, span.name).toMatchObject({
        'gen_ai.conversation.id': sessionId,
        'baton.session_id': sessionId,
        'baton.agent_id': 'cognitive-reasoner',
      });
    }
    // The decisions are recorded, on the request's span and the tools'.
    const request = spans.find((span) => span.name === 'POST')!;
    expect(request.events.filter((event) => event.name === 'baton.tools-offered')).toHaveLength(4);
  });

  it('records no decision and names no session without the telemetry option', async () => {
    const { spans } = await turn({});
    expect(spans.flatMap((span) => span.events).filter((event) => event.name.startsWith('baton.'))).toEqual([]);
    expect(spans.filter((span) => 'baton.session_id' in span.attributes)).toEqual([]);
  });
});

describe('createAgent and the AI SDK telemetry', () => {
  /** The spans' text after one call of `run`, and whether it holds the user's secrets. */
  async function leaks(run: () => Promise<void>): Promise<boolean> {
    await run();
    const text = exported(exporter.getFinishedSpans());
    expect(text).toContain('invoke_agent');
    return text.includes(CARD) || text.includes(PASSWORD);
  }

  it('records no content from handleMessage or the ToolLoopAgent unless recordContent', async () => {
    for (const recordContent of [undefined, false, true]) {
      const agent = createAgent(reasoner, {
        model: 'offline',
        ...(recordContent === undefined ? {} : { telemetry: { recordContent } }),
      });
      const messages = [userMessage(MESSAGE)];
      const viaHandleMessage = await leaks(async () => {
        await (await agent.handleMessage({ messages, sessionId: crypto.randomUUID() })).consumeStream();
      });
      exporter.reset();
      const viaAgent = await leaks(async () => {
        await agent.toolLoopAgent.generate({ prompt: MESSAGE, options: { sessionId: crypto.randomUUID() } });
      });
      exporter.reset();
      expect([recordContent, viaHandleMessage, viaAgent]).toEqual([recordContent, !!recordContent, !!recordContent]);
    }
  });
});
