/**
 * `baton serve --otel` in a child process exports a chat turn's spans over OTLP/HTTP to a
 * receiver this test runs (a node:http server on 127.0.0.1 that takes `POST /v1/traces` in the
 * OTLP JSON encoding, which is what `@opentelemetry/exporter-trace-otlp-http` sends): one trace
 * per request, with the request's `SERVER` span, the AI SDK's spans under it and the
 * orchestration decisions as `baton.*` span events.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ServeProcess, startServeProcess, stopServeProcess } from './helpers/serve-process.js';

/** An OTLP attribute value, as the JSON encoding writes it. */
interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: OtlpValue[] };
}
interface OtlpAttribute {
  key: string;
  value: OtlpValue;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: OtlpAttribute[];
  events?: { name: string; attributes?: OtlpAttribute[] }[];
}
interface OtlpExport {
  resourceSpans: { resource?: { attributes?: OtlpAttribute[] }; scopeSpans: { spans?: OtlpSpan[] }[] }[];
}

/** Attribute values as plain JSON values. */
function plain(value: OtlpValue): unknown {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.arrayValue) return (value.arrayValue.values ?? []).map(plain);
  return undefined;
}
const attributes = (list: OtlpAttribute[] | undefined) =>
  Object.fromEntries((list ?? []).map((attribute) => [attribute.key, plain(attribute.value)]));

const received: OtlpExport[] = [];
const contentTypes: string[] = [];
let receiver: Server;
let receiverUrl: string;
let server: ServeProcess;

beforeAll(async () => {
  receiver = createServer((request, response) => {
    if (request.method !== 'POST' || request.url !== '/v1/traces') {
      response.writeHead(404).end();
      return;
    }
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      contentTypes.push(String(request.headers['content-type']));
      received.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as OtlpExport);
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  // The parent's BATON_* and OTEL_* settings must not change what the server does.
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !key.startsWith('BATON_') && !key.startsWith('OTEL_')),
  );
  server = await startServeProcess(
    ['examples/agents', '--model', 'offline', '--store', 'memory:', '--port', '0', '--log-level', 'silent', '--otel'],
    {
      name: 'baton serve --otel',
      env: { ...env, FORCE_COLOR: '0', OTEL_EXPORTER_OTLP_ENDPOINT: receiverUrl, OTEL_BSP_SCHEDULE_DELAY: '100' },
      timeoutMs: 60_000,
    },
  );
}, 90_000);

afterAll(async () => {
  if (server) await stopServeProcess(server);
  await new Promise<void>((resolve) => receiver?.close(() => resolve()));
});

function allSpans(): { span: OtlpSpan; resource: Record<string, unknown> }[] {
  return received.flatMap((batch) =>
    batch.resourceSpans.flatMap((resourceSpans) =>
      resourceSpans.scopeSpans.flatMap((scope) =>
        (scope.spans ?? []).map((span) => ({ span, resource: attributes(resourceSpans.resource?.attributes) })),
      ),
    ),
  );
}

/** Resolves once `ready()` holds for the spans received, or fails after `timeoutMs`. */
async function waitFor(ready: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ready()) {
    if (Date.now() > deadline) {
      throw new Error(
        `spans did not arrive; received: ${allSpans()
          .map(({ span }) => span.name)
          .join(', ')}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('baton serve --otel', () => {
  it('prints where traces go', async () => {
    // The helper resolves on the "listening" line; the lines after it may still be on their way.
    const deadline = Date.now() + 10_000;
    while (!server.output().includes('Inspector:') && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(server.output()).toContain(`Traces: OTLP/HTTP to ${receiverUrl}/v1/traces (with AI SDK spans)`);
  });

  it("exports a chat turn's spans: the request, the AI SDK's spans under it, the decisions as events", async () => {
    const response = await fetch(`${server.url}/api/chat/cognitive-reasoner`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        messages: [
          {
            id: 'm1',
            role: 'user',
            parts: [{ type: 'text', text: 'How many electric vehicles will be on the road by 2030?' }],
          },
        ],
      }),
    });
    const body = await response.text();
    expect(response.status, body).toBe(200);
    const sessionId = response.headers.get('x-session-id');
    expect(sessionId).toBeTruthy();

    const requestSpan = () => allSpans().find(({ span }) => span.name === 'POST /api/chat')?.span;
    // The request span ends with the streamed body, after everything under it.
    await waitFor(() => requestSpan() !== undefined);
    const request = requestSpan()!;
    expect(request.kind).toBe(2); // SPAN_KIND_SERVER in OTLP's numbering
    expect(attributes(request.attributes)).toMatchObject({
      'http.request.method': 'POST',
      'url.path': '/api/chat/cognitive-reasoner',
      'http.response.status_code': 200,
    });
    expect(contentTypes[0]).toContain('application/json');

    const trace = allSpans().filter(({ span }) => span.traceId === request.traceId);
    expect(trace.every(({ resource }) => resource['service.name'] === 'baton')).toBe(true);
    const spans = trace.map(({ span }) => span);
    const agent = spans.find((span) => span.name.startsWith('invoke_agent'));
    expect(agent?.parentSpanId).toBe(request.spanId);
    const tools = spans.filter((span) => span.name.startsWith('execute_tool'));
    expect(tools.map((span) => span.name)).toEqual([
      'execute_tool search',
      'execute_tool think',
      'execute_tool reflect',
    ]);

    const eventsNamed = (span: OtlpSpan, name: string) =>
      (span.events ?? []).filter((event) => event.name === name).map((event) => attributes(event.attributes));
    // Each call was reserved inside its own AI SDK tool span.
    for (const tool of tools) {
      const [reserved] = eventsNamed(tool, 'baton.tool-reserved');
      expect(reserved).toMatchObject({
        'baton.session_id': sessionId,
        'baton.step': 'ResearchMode',
        'baton.tool': tool.name.slice('execute_tool '.length),
      });
    }
    // The step decisions (prepareStep runs in the request's context) are on the request span.
    const offered = eventsNamed(request, 'baton.tools-offered');
    expect(offered.map((event) => event['baton.tools'])).toEqual([
      ['search'],
      ['think'],
      ['reflect'],
      ['search', 'think', 'reflect'],
    ]);
    expect(offered[0]).toMatchObject({ 'baton.session_id': sessionId, 'baton.step': 'ResearchMode' });
    const advanced = spans.flatMap((span) => eventsNamed(span, 'baton.sequence-advanced'));
    expect(advanced.map((event) => event['baton.tool'])).toEqual(['search', 'think', 'reflect']);
  });
});

describe('baton serve --otel --stateless', () => {
  it("records the orchestration decisions of stateless turns too, on the request's trace", async () => {
    const env = Object.fromEntries(
      Object.entries(process.env).filter(([key]) => !key.startsWith('BATON_') && !key.startsWith('OTEL_')),
    );
    const stateless = await startServeProcess(
      ['examples/agents', '--model', 'offline', '--stateless', '--port', '0', '--log-level', 'silent', '--otel'],
      {
        name: 'baton serve --otel --stateless',
        env: {
          ...env,
          FORCE_COLOR: '0',
          BATON_STATE_KEYS: 'k'.repeat(32),
          OTEL_EXPORTER_OTLP_ENDPOINT: receiverUrl,
          OTEL_BSP_SCHEDULE_DELAY: '100',
        },
        timeoutMs: 60_000,
      },
    );
    try {
      const response = await fetch(`${stateless.url}/api/chat/cognitive-reasoner`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          messages: [{ id: 's1', role: 'user', parts: [{ type: 'text', text: 'How many EVs will be sold in 2031?' }] }],
        }),
      });
      expect(response.status, await response.text()).toBe(200);
      const sessionId = response.headers.get('x-session-id');
      const reserved = () =>
        allSpans().flatMap(({ span }) =>
          (span.events ?? [])
            .filter((event) => event.name === 'baton.tool-reserved')
            .map((event) => attributes(event.attributes))
            .filter((event) => event['baton.session_id'] === sessionId),
        );
      await waitFor(() => reserved().length === 3);
      expect(reserved().map((event) => event['baton.tool'])).toEqual(['search', 'think', 'reflect']);
    } finally {
      await stopServeProcess(stateless);
    }
  }, 90_000);
});
