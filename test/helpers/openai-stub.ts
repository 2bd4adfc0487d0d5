/**
 * A local OpenAI-compatible chat completions server for end-to-end tests: `POST
 * /v1/chat/completions` on 127.0.0.1, streaming (SSE) or not, answering with tool calls or text
 * as a policy decides from the request. It speaks the wire format that
 * `@ai-sdk/openai-compatible` parses (see docs notes §8), so tests exercise the real provider
 * path: HTTP, SSE parsing, tool-call deltas, finish reasons and usage chunks.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A tool as the request offers it. */
export interface StubTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: JsonSchema };
}

/** A message of the request (only the fields the stub reads). */
export interface StubMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content?: string | null | readonly { type: string; text?: string }[];
  tool_calls?: readonly { id: string; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
}

/** The body of a chat completions request. */
export interface StubRequestBody {
  model: string;
  messages: StubMessage[];
  tools?: StubTool[];
  tool_choice?: unknown;
  stream?: boolean;
  stream_options?: { include_usage?: boolean };
  temperature?: number;
}

/** One request the stub received. */
export interface StubRequest {
  body: StubRequestBody;
  /** Names of the tools offered, in request order (`[]` when `tools` was absent). */
  offeredTools: string[];
  headers: IncomingMessage['headers'];
}

/** Token counts of one response. */
export interface StubUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** What the stub answers with. */
export type StubReply =
  | { type: 'tool-calls'; calls: { name: string; arguments: Record<string, unknown> }[] }
  | { type: 'text'; text: string };

/** Decides the reply to one request; `index` counts requests from 0. */
export type StubPolicy = (request: StubRequest, index: number) => StubReply;

/** Options of {@link startOpenAIStub}. */
export interface OpenAIStubOptions {
  /** Default: {@link callFirstOfferedTool}. */
  policy?: StubPolicy;
  /** Characters per streamed argument fragment (default 7: several fragments per call). */
  fragmentSize?: number;
}

/** A running stub. */
export interface OpenAIStub {
  /** Pass this as the provider's `baseURL`. */
  readonly baseURL: string;
  /** Every request received, in order. */
  readonly requests: StubRequest[];
  /** The usage reported for each response, in order. */
  readonly usages: StubUsage[];
  /** Tool call ids sent, in order. */
  readonly toolCallIds: string[];
  close(): Promise<void>;
}

type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  enum?: unknown[];
  minItems?: number;
  minimum?: number;
  maximum?: number;
};

/** The text of the latest user message of a request. */
export function lastUserText(request: StubRequest): string {
  const user = request.body.messages.findLast((m) => m.role === 'user');
  if (user === undefined) return '';
  if (typeof user.content === 'string') return user.content;
  return (user.content ?? []).map((p) => p.text ?? '').join('\n');
}

/** How many tool results follow the latest user message (the tool calls of this turn so far). */
export function toolResultsThisTurn(request: StubRequest): StubMessage[] {
  const messages = request.body.messages;
  const lastUser = messages.findLastIndex((m) => m.role === 'user');
  return messages.slice(lastUser + 1).filter((m) => m.role === 'tool');
}

/**
 * The default policy, a naive model: it calls the first tool it is offered, with arguments built
 * from the tool's JSON schema, until it has made `perTurn` calls since the latest user message;
 * then (or when nothing is offered) it answers with text naming the tools whose results it got.
 * Under orchestration the first offered tool is the next one of the sequence.
 */
export function callFirstOfferedTool(perTurn = 3): StubPolicy {
  return (request) => {
    const results = toolResultsThisTurn(request);
    const first = request.body.tools?.[0];
    if (first !== undefined && results.length < perTurn) {
      return {
        type: 'tool-calls',
        calls: [
          { name: first.function.name, arguments: argumentsFor(first.function.parameters, lastUserText(request)) },
        ],
      };
    }
    const names = toolNamesOfResults(request);
    return {
      type: 'text',
      text: names.length ? `Final answer, from ${names.join(' then ')}.` : `Final answer to: ${lastUserText(request)}`,
    };
  };
}

/** The tool names behind this turn's tool results, in order. */
export function toolNamesOfResults(request: StubRequest): string[] {
  const names = new Map<string, string>();
  for (const message of request.body.messages) {
    for (const call of message.tool_calls ?? []) names.set(call.id, call.function.name);
  }
  return toolResultsThisTurn(request).map((m) => names.get(m.tool_call_id ?? '') ?? '?');
}

/** Arguments that satisfy a simple object schema: every required property gets a value. */
export function argumentsFor(schema: JsonSchema | undefined, text: string): Record<string, unknown> {
  const args: Record<string, unknown> = {};
  for (const name of schema?.required ?? []) args[name] = valueFor(schema?.properties?.[name], text);
  return args;
}

function valueFor(schema: JsonSchema | undefined, text: string): unknown {
  if (schema?.enum?.length) return schema.enum[0];
  const type = Array.isArray(schema?.type) ? schema.type.find((t) => t !== 'null') : schema?.type;
  switch (type) {
    case 'number':
    case 'integer':
      return Math.min(Math.max(1, schema?.minimum ?? 1), schema?.maximum ?? 1);
    case 'boolean':
      return true;
    case 'array':
      return Array.from({ length: Math.max(2, schema?.minItems ?? 0) }, (_, i) =>
        valueFor(schema?.items, `${text} ${i}`),
      );
    case 'object':
      return argumentsFor(schema, text);
    default:
      return text || 'text';
  }
}

/** Starts the stub on 127.0.0.1 on a port the OS picks. */
export async function startOpenAIStub(options: OpenAIStubOptions = {}): Promise<OpenAIStub> {
  const policy = options.policy ?? callFirstOfferedTool();
  const fragmentSize = Math.max(1, options.fragmentSize ?? 7);
  const requests: StubRequest[] = [];
  const usages: StubUsage[] = [];
  const toolCallIds: string[] = [];

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: String(error), type: 'stub_error' } }));
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}`, type: 'not_found' } }));
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as StubRequestBody;
    const request: StubRequest = {
      body,
      offeredTools: (body.tools ?? []).map((t) => t.function.name),
      headers: req.headers,
    };
    const index = requests.length;
    requests.push(request);
    const reply = policy(request, index);
    // Deterministic but distinct per request, and large enough that sums are unambiguous.
    const usage: StubUsage = { prompt_tokens: 100 + index, completion_tokens: 10 + index, total_tokens: 0 };
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
    usages.push(usage);
    const id = `chatcmpl-${index}`;
    const created = 1_700_000_000 + index;
    const calls =
      reply.type === 'tool-calls'
        ? reply.calls.map((c, i) => ({
            id: `call_${index}_${i}`,
            name: c.name,
            arguments: JSON.stringify(c.arguments),
          }))
        : [];
    toolCallIds.push(...calls.map((c) => c.id));

    if (body.stream !== true) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id,
          object: 'chat.completion',
          created,
          model: body.model,
          choices: [
            {
              index: 0,
              message:
                reply.type === 'text'
                  ? { role: 'assistant', content: reply.text }
                  : {
                      role: 'assistant',
                      content: null,
                      tool_calls: calls.map((c) => ({
                        id: c.id,
                        type: 'function',
                        function: { name: c.name, arguments: c.arguments },
                      })),
                    },
              finish_reason: reply.type === 'text' ? 'stop' : 'tool_calls',
            },
          ],
          usage,
        }),
      );
      return;
    }

    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    const send = (data: unknown) => res.write(`data: ${JSON.stringify(data)}\n\n`);
    const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) =>
      send({
        id,
        object: 'chat.completion.chunk',
        created,
        model: body.model,
        choices: [{ index: 0, delta, finish_reason: finishReason }],
      });
    if (reply.type === 'text') {
      chunk({ role: 'assistant', content: '' });
      for (const word of reply.text.match(/\S+\s*/g) ?? [reply.text]) chunk({ content: word });
      chunk({}, 'stop');
    } else {
      for (const [i, call] of calls.entries()) {
        // The first delta of a call names it; the arguments follow in fragments on the same index.
        chunk({
          ...(i === 0 ? { role: 'assistant', content: null } : {}),
          tool_calls: [{ index: i, id: call.id, type: 'function', function: { name: call.name, arguments: '' } }],
        });
        for (let at = 0; at < call.arguments.length; at += fragmentSize) {
          chunk({ tool_calls: [{ index: i, function: { arguments: call.arguments.slice(at, at + fragmentSize) } }] });
        }
      }
      chunk({}, 'tool_calls');
    }
    if (body.stream_options?.include_usage) {
      send({ id, object: 'chat.completion.chunk', created, model: body.model, choices: [], usage });
    }
    res.write('data: [DONE]\n\n');
    res.end();
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    usages,
    toolCallIds,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}
