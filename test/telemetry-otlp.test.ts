/**
 * `baton serve --otel` in a child process exports its spans over OTLP/HTTP to a receiver this
 * test runs (a node:http server on 127.0.0.1 that takes `POST /v1/traces` in the OTLP JSON
 * encoding, which is what `@opentelemetry/exporter-trace-otlp-http` sends):
 *
 * - one trace per chat turn: the request's `SERVER` span (continuing the client's trace when it
 *   sends `traceparent`), the AI SDK's spans under it and the orchestration decisions as
 *   `baton.*` span events, every span naming the session and the agent;
 * - nothing a user typed, no instructions, tool definitions, tool inputs or outputs, unless the
 *   operator opts in with `--otel-record-content`;
 * - no span for the inspector's polling;
 * - and from `baton mcp --otel`, over HTTP and stdio, the decisions of its MCP sessions.
 */
import { spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { UIMessageChunk } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { builtinTools } from '../src/agents/tools/index.js';
import { chunksOf, userMessage } from './helpers/chat-requests.js';
import {
  CLI,
  connectStdio,
  FILESYSTEM_SERVER,
  ROOT,
  startHttpGateway,
  textOf,
  workDir,
} from './helpers/mcp-gateway.js';
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

/** SPAN_KIND_SERVER in OTLP's numbering. */
const OTLP_SERVER = 2;

/** An OTLP/HTTP receiver that keeps every export, raw and parsed. */
interface Receiver {
  url: string;
  /** Every request body, as received. */
  bodies: string[];
  contentTypes: string[];
  spans(): { span: OtlpSpan; resource: Record<string, unknown> }[];
  close(): Promise<void>;
}

async function startReceiver(): Promise<Receiver> {
  const bodies: string[] = [];
  const contentTypes: string[] = [];
  const server: Server = createServer((request, response) => {
    if (request.method !== 'POST' || request.url !== '/v1/traces') {
      response.writeHead(404).end();
      return;
    }
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      contentTypes.push(String(request.headers['content-type']));
      bodies.push(Buffer.concat(chunks).toString('utf8'));
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    bodies,
    contentTypes,
    spans: () =>
      bodies.flatMap((body) =>
        (JSON.parse(body) as OtlpExport).resourceSpans.flatMap((resourceSpans) =>
          resourceSpans.scopeSpans.flatMap((scope) =>
            (scope.spans ?? []).map((span) => ({ span, resource: attributes(resourceSpans.resource?.attributes) })),
          ),
        ),
      ),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** `baton serve examples/agents --otel <flags>` exporting to `receiver`. */
function serveWithOtel(receiver: Receiver, flags: readonly string[], env: Record<string, string> = {}) {
  // The parent's BATON_* and OTEL_* settings must not change what the server does.
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !key.startsWith('BATON_') && !key.startsWith('OTEL_')),
  );
  return startServeProcess(
    ['examples/agents', '--model', 'offline', '--port', '0', '--log-level', 'silent', '--otel', ...flags],
    {
      name: `baton serve --otel ${flags.join(' ')}`,
      env: {
        ...inherited,
        FORCE_COLOR: '0',
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_BSP_SCHEDULE_DELAY: '50',
        ...env,
      },
      timeoutMs: 60_000,
    },
  );
}

/** Resolves once `ready()` holds, or fails after `timeoutMs` naming the spans received. */
async function waitFor(receiver: Receiver, ready: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ready()) {
    if (Date.now() > deadline) {
      throw new Error(
        `spans did not arrive; received: ${receiver
          .spans()
          .map(({ span }) => span.name)
          .join(', ')}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The spans of one trace, once its `SERVER` span (the last to end) has arrived. */
async function traceOf(receiver: Receiver, traceId: () => string | undefined): Promise<OtlpSpan[]> {
  const server = () =>
    receiver.spans().find(({ span }) => span.kind === OTLP_SERVER && span.traceId === traceId())?.span;
  await waitFor(receiver, () => traceId() !== undefined && server() !== undefined);
  return receiver
    .spans()
    .map(({ span }) => span)
    .filter((span) => span.traceId === traceId());
}

/** The trace of a session's turn, found as a trace backend would: by `gen_ai.conversation.id`. */
const turnTraceId = (receiver: Receiver, sessionId: string) =>
  receiver.spans().find(({ span }) => attributes(span.attributes)['gen_ai.conversation.id'] === sessionId)?.span
    .traceId;

const eventsNamed = (span: OtlpSpan, name: string) =>
  (span.events ?? []).filter((event) => event.name === name).map((event) => attributes(event.attributes));

/** A W3C `traceparent` of a trace the client started. */
function traceparent(): { header: string; traceId: string; parentId: string } {
  const hex = (bytes: number) => Buffer.from(crypto.getRandomValues(new Uint8Array(bytes))).toString('hex');
  const traceId = hex(16);
  const parentId = hex(8);
  return { header: `00-${traceId}-${parentId}-01`, traceId, parentId };
}

async function chat(server: ServeProcess, text: string, headers: Record<string, string> = {}) {
  const response = await fetch(`${server.url}/api/chat/cognitive-reasoner`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ messages: [userMessage(text)] }),
  });
  expect(response.status).toBe(200);
  const sessionId = response.headers.get('x-session-id');
  expect(sessionId).toBeTruthy();
  return { sessionId: sessionId!, chunks: await chunksOf(response) };
}

describe('baton serve --otel', () => {
  let receiver: Receiver;
  let server: ServeProcess;

  beforeAll(async () => {
    receiver = await startReceiver();
    server = await serveWithOtel(receiver, []);
  }, 90_000);

  afterAll(async () => {
    if (server) await stopServeProcess(server);
    await receiver?.close();
  });

  it('prints where traces go', async () => {
    // The helper resolves on the "listening" line; the lines after it may still be on their way.
    const deadline = Date.now() + 10_000;
    while (!server.output().includes('Inspector:') && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(server.output()).toContain(
      `Traces: OTLP/HTTP to ${receiver.url}/v1/traces (with AI SDK spans; message and tool content not recorded)`,
    );
  });

  it("exports a chat turn as one trace: the client's, the request, the AI SDK's spans under it, the decisions as events", async () => {
    const client = traceparent();
    const { sessionId } = await chat(server, 'How many electric vehicles will be on the road by 2030?', {
      traceparent: client.header,
    });
    const spans = await traceOf(receiver, () => client.traceId);
    expect(receiver.contentTypes[0]).toContain('application/json');
    expect(receiver.spans().every(({ resource }) => resource['service.name'] === 'baton')).toBe(true);

    // The request's span continues the client's trace, named after its route.
    const request = spans.find((span) => span.kind === OTLP_SERVER)!;
    expect(request.name).toBe('POST /api/chat/:agentId');
    expect(request.parentSpanId).toBe(client.parentId);
    expect(attributes(request.attributes)).toMatchObject({
      'http.request.method': 'POST',
      'http.route': '/api/chat/:agentId',
      'url.path': '/api/chat/cognitive-reasoner',
      'http.response.status_code': 200,
    });

    const agent = spans.find((span) => span.name.startsWith('invoke_agent'));
    expect(agent?.parentSpanId).toBe(request.spanId);
    expect(attributes(agent?.attributes)).toMatchObject({ 'gen_ai.agent.name': 'cognitive-reasoner' });
    const tools = spans.filter((span) => span.name.startsWith('execute_tool'));
    expect(tools.map((span) => span.name)).toEqual([
      'execute_tool search',
      'execute_tool think',
      'execute_tool reflect',
    ]);

    // Every span of the turn names its session and agent, so a trace backend finds the turn.
    for (const span of spans) {
      expect(attributes(span.attributes), span.name).toMatchObject({
        'gen_ai.conversation.id': sessionId,
        'baton.session_id': sessionId,
        'baton.agent_id': 'cognitive-reasoner',
      });
    }

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

  it('starts a trace of its own for a chat turn without traceparent', async () => {
    const { sessionId } = await chat(server, 'Compare trains versus planes for a 500 km trip.');
    const request = () =>
      receiver
        .spans()
        .find(
          ({ span }) =>
            span.kind === OTLP_SERVER && attributes(span.attributes)['gen_ai.conversation.id'] === sessionId,
        )?.span;
    await waitFor(receiver, () => request() !== undefined);
    expect(request()!.parentSpanId ?? '').toBe('');
  });

  it("traces no poll of the inspector's, and a read that carries traceparent", async () => {
    const { sessionId } = await chat(server, 'Brainstorm names for a bakery.');
    // Every span exported so far: the turn's, once its request span has arrived.
    await traceOf(receiver, () => turnTraceId(receiver, sessionId));
    const before = receiver.spans().length;
    const polls = [
      `/api/sessions/${sessionId}`,
      `/api/sessions/${sessionId}/events`,
      '/api/agents',
      '/api/agents/cognitive-reasoner',
      '/healthz',
      '/',
    ];
    for (let round = 0; round < 5; round++) {
      for (const path of polls) await (await fetch(`${server.url}${path}`)).arrayBuffer();
    }
    // A read the client traces is traced; it ends after every poll, so once it has arrived,
    // any span of the polls would have too.
    const client = traceparent();
    const read = await fetch(`${server.url}/api/sessions/${sessionId}`, { headers: { traceparent: client.header } });
    expect(read.status).toBe(200);
    await read.arrayBuffer();
    const spans = await traceOf(receiver, () => client.traceId);
    expect(spans.map((span) => span.name)).toEqual(['GET /api/sessions/:sessionId']);
    expect(attributes(spans[0]!.attributes)).toMatchObject({
      'http.route': '/api/sessions/:sessionId',
      'gen_ai.conversation.id': sessionId,
      'baton.session_id': sessionId,
    });
    const since = receiver
      .spans()
      .slice(before)
      .map(({ span }) => span)
      .filter((span) => span.kind === OTLP_SERVER);
    expect(since.map((span) => span.name)).toEqual(['GET /api/sessions/:sessionId']);
  });
});

/** The user's secrets: none of them may leave the process unless the operator opts in. */
const CARD = '4111 1111 1111 1111';
const PASSWORD = `hunter2-${crypto.randomUUID().slice(0, 8)}`;
const SECRET_MESSAGE = `My card is ${CARD} and my password is ${PASSWORD}. How many electric vehicles will be on the road by 2030?`;

/** What the turn said besides the user's message: the tools' outputs and the answer, from its stream. */
function contentOf(chunks: readonly UIMessageChunk[]): { toolOutput: string; answer: string } {
  const outputs = chunks.flatMap((chunk) => (chunk.type === 'tool-output-available' ? [chunk.output] : []));
  const search = outputs[0] as { results: { snippet: string }[] };
  const answer = chunks.flatMap((chunk) => (chunk.type === 'text-delta' ? [chunk.delta] : [])).join('');
  // A sentence of a search hit: text that only the tool's output holds.
  const toolOutput = search.results[0]!.snippet.slice(0, 60);
  expect(SECRET_MESSAGE).not.toContain(toolOutput);
  return { toolOutput, answer: answer.slice(0, 60) };
}

/** The markers of everything that counts as content, by what it is. */
function contentMarkers(chunks: readonly UIMessageChunk[]): Record<string, string> {
  const { toolOutput, answer } = contentOf(chunks);
  return {
    'card number': CARD,
    password: PASSWORD,
    'tool output': toolOutput,
    answer,
    instructions: 'You are the Cognitive Reasoner',
    'tool definition': String(builtinTools.search.description).slice(0, 60),
  };
}

/** Which markers appear anywhere in what the receiver got (attributes, events, names: the raw bodies). */
function leaked(receiver: Receiver, markers: Record<string, string>): string[] {
  const exported = receiver.bodies.join('\n');
  // The JSON encoding escapes some characters: look for each marker as JSON writes it, too.
  return Object.entries(markers)
    .filter(([, marker]) => exported.includes(marker) || exported.includes(JSON.stringify(marker).slice(1, -1)))
    .map(([what]) => what);
}

describe('baton serve --otel: content', () => {
  it('exports no message text, instructions, tool definitions, tool inputs or outputs by default', async () => {
    const receiver = await startReceiver();
    const server = await serveWithOtel(receiver, []);
    try {
      const { sessionId, chunks } = await chat(server, SECRET_MESSAGE);
      const spans = await traceOf(receiver, () => turnTraceId(receiver, sessionId));
      // The turn was recorded, AI SDK spans included: the absence below is not an empty export.
      expect(spans.some((span) => span.name.startsWith('invoke_agent'))).toBe(true);
      expect(spans.filter((span) => span.name.startsWith('execute_tool'))).toHaveLength(3);
      expect(leaked(receiver, contentMarkers(chunks))).toEqual([]);
    } finally {
      await stopServeProcess(server);
      await receiver.close();
    }
  }, 90_000);

  it('exports all of it with --otel-record-content', async () => {
    const receiver = await startReceiver();
    const server = await serveWithOtel(receiver, ['--otel-record-content']);
    try {
      const { sessionId, chunks } = await chat(server, SECRET_MESSAGE);
      await traceOf(receiver, () => turnTraceId(receiver, sessionId));
      const markers = contentMarkers(chunks);
      expect(leaked(receiver, markers)).toEqual(Object.keys(markers));
      expect(server.output()).toContain('message and tool content recorded');
    } finally {
      await stopServeProcess(server);
      await receiver.close();
    }
  }, 90_000);

  it('refuses --otel-record-content without --otel', async () => {
    const inherited = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('BATON_')));
    const started = startServeProcess(
      ['examples/agents', '--model', 'offline', '--port', '0', '--otel-record-content'],
      {
        env: { ...inherited, FORCE_COLOR: '0' },
      },
    );
    await expect(started).rejects.toThrow(/--otel-record-content needs --otel/);
  }, 60_000);
});

describe('baton serve --otel --stateless', () => {
  it("records the orchestration decisions of stateless turns too, on the request's trace", async () => {
    const receiver = await startReceiver();
    const stateless = await serveWithOtel(receiver, ['--stateless'], { BATON_STATE_KEYS: 'k'.repeat(32) });
    try {
      const { sessionId } = await chat(stateless, 'How many EVs will be sold in 2031?');
      const reserved = () =>
        receiver
          .spans()
          .flatMap(({ span }) =>
            eventsNamed(span, 'baton.tool-reserved').filter((event) => event['baton.session_id'] === sessionId),
          );
      await waitFor(receiver, () => reserved().length === 3);
      expect(reserved().map((event) => event['baton.tool'])).toEqual(['search', 'think', 'reflect']);
      const spans = await traceOf(receiver, () => turnTraceId(receiver, sessionId));
      const request = spans.find((span) => span.kind === OTLP_SERVER);
      expect(attributes(request?.attributes)).toMatchObject({
        'gen_ai.conversation.id': sessionId,
        'baton.agent_id': 'cognitive-reasoner',
      });
    } finally {
      await stopServeProcess(stateless);
      await receiver.close();
    }
  }, 90_000);
});

const EDITOR = join(ROOT, 'examples/mcp/careful-editor.json');

describe('baton mcp --otel', () => {
  /** The parent's BATON_* and OTEL_* settings must not change what the gateway does. */
  const otelEnv = (receiver: Receiver) => ({
    ...Object.fromEntries(
      Object.entries(process.env).filter(([key]) => !key.startsWith('BATON_') && !key.startsWith('OTEL_')),
    ),
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_BSP_SCHEDULE_DELAY: '50',
  });
  /** Every decision event of `sessionId` the receiver got, by name. */
  const decisions = (receiver: Receiver, sessionId: string) =>
    receiver
      .spans()
      .flatMap(({ span }) =>
        (span.events ?? [])
          .map((event) => ({ name: event.name, attributes: attributes(event.attributes), span }))
          .filter((event) => event.attributes['baton.session_id'] === sessionId),
      );

  it('is documented in baton mcp --help', () => {
    const help = spawnSync(process.execPath, [...CLI, 'mcp', '--help'], { cwd: ROOT, encoding: 'utf8' });
    // Commander wraps the text to the terminal: compared with the spaces normalized.
    expect(help.stdout.replace(/\s+/g, ' ')).toContain(
      '--otel export traces over OTLP/HTTP to $OTEL_EXPORTER_OTLP_ENDPOINT',
    );
  });

  it('over HTTP: exports the decisions of an MCP session, on the spans of its /mcp requests', async () => {
    const receiver = await startReceiver();
    const dir = workDir();
    const gateway = await startHttpGateway([EDITOR, '--http', '0', '--otel', '--', FILESYSTEM_SERVER, dir], {
      env: otelEnv(receiver),
    });
    try {
      expect(gateway.output()).toContain(`Traces: OTLP/HTTP to ${receiver.url}/v1/traces`);
      const client = await gateway.connect();
      const sessionId = (client.transport as StreamableHTTPClientTransport).sessionId!;
      expect(textOf(await client.callTool({ name: 'list_directory', arguments: { path: dir } }))).toBe('');
      const refused = await client.callTool({ name: 'write_file', arguments: { path: join(dir, 'x'), content: 'x' } });
      expect(refused.isError).toBe(true);
      await client.close();
      await waitFor(receiver, () =>
        decisions(receiver, sessionId).some((event) => event.name === 'baton.tool-rejected'),
      );
      const events = decisions(receiver, sessionId);
      expect(events.find((event) => event.name === 'baton.tool-reserved')?.attributes).toMatchObject({
        'baton.tool': 'list_directory',
        'baton.step': 'Look',
      });
      const rejected = events.find((event) => event.name === 'baton.tool-rejected')!;
      expect(rejected.attributes).toMatchObject({ 'baton.tool': 'write_file', 'baton.reason.code': 'not-allowed' });
      // On the request that made the call, which names the session and the agent.
      expect(rejected.span.kind).toBe(OTLP_SERVER);
      expect(attributes(rejected.span.attributes)).toMatchObject({
        'http.route': '/mcp',
        'gen_ai.conversation.id': sessionId,
        'baton.agent_id': 'careful-editor',
      });
    } finally {
      await gateway.stop();
      await receiver.close();
    }
  }, 90_000);

  it('over stdio: exports the decisions of the session, flushed when the client leaves', async () => {
    const receiver = await startReceiver();
    const dir = workDir();
    const gateway = await connectStdio([EDITOR, '--session', 'traced', '--otel', '--', FILESYSTEM_SERVER, dir], {
      env: otelEnv(receiver),
    });
    try {
      const refused = await gateway.client.callTool({
        name: 'write_file',
        arguments: { path: join(dir, 'x'), content: 'x' },
      });
      expect(refused.isError).toBe(true);
    } finally {
      await gateway.close();
    }
    await waitFor(receiver, () => decisions(receiver, 'traced').some((event) => event.name === 'baton.tool-rejected'));
    expect(gateway.stderr()).toContain(`Traces: OTLP/HTTP to ${receiver.url}/v1/traces`);
    await receiver.close();
  }, 90_000);
});
