/**
 * The HTTP API through `app.request()`: what a client sees on every route, including every
 * way a request can be wrong.
 */

import { deflateRawSync, inflateRawSync } from 'node:zlib';
import type { LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { parseJsonEventStream, readUIMessageStream, type UIMessageChunk, uiMessageChunkSchema } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createOfflineModel } from '../ai-sdk/offline-model.js';
import { StoreUnavailableError } from '../core/errors.js';
import type { AgentTemplate } from '../core/schema.js';
import { createState } from '../core/state.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import { memoryStore } from '../stores/memory.js';
import { encodeStateToken } from '../stores/state-token.js';
import type { SessionStore } from '../stores/types.js';
import { loadTemplate } from '../templates/load-template.js';
import type {
  AgentDetailResponse,
  AgentListResponse,
  ApiErrorBody,
  BatonUIMessage,
  OrchestrationSnapshot,
  SessionResponse,
} from './api-types.js';
import { type BatonApp, type CreateAppOptions, createApp } from './create-app.js';

const reasoner = await loadTemplate(new URL('../../examples/agents/cognitive-reasoner.json', import.meta.url).pathname);
const study = await loadTemplate(new URL('../../examples/agents/study-buddy.json', import.meta.url).pathname);
const RESEARCH = 'How many electric vehicles will be on the road by 2030?';
const KEY_A = 'a'.repeat(32);
const KEY_B = 'b'.repeat(32);

const apps: BatonApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

function makeApp(options: Partial<CreateAppOptions> = {}): BatonApp {
  const app = createApp({ agents: [reasoner, study], model: 'offline', webRoot: false, ...options });
  apps.push(app);
  return app;
}

function userMessage(text: string, id = crypto.randomUUID()) {
  return { id, role: 'user' as const, parts: [{ type: 'text' as const, text }] };
}

function post(app: BatonApp, path: string, body: unknown, headers: Record<string, string> = {}) {
  return app.request(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** The JSON chunks of an SSE UI message stream, in order. */
async function chunksOf(response: Response): Promise<UIMessageChunk[]> {
  const text = await response.text();
  return text
    .split('\n')
    .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
    .map((line) => JSON.parse(line.slice('data: '.length)) as UIMessageChunk);
}

function snapshotsOf(chunks: UIMessageChunk[]): OrchestrationSnapshot[] {
  return chunks
    .filter((chunk) => chunk.type === 'data-orchestration')
    .map((chunk) => (chunk as unknown as { data: OrchestrationSnapshot }).data);
}

async function chat(app: BatonApp, text: string, extra: Record<string, unknown> = {}, agent = 'cognitive-reasoner') {
  const response = await post(app, `/api/chat/${agent}`, { messages: [userMessage(text)], ...extra });
  expect(response.status).toBe(200);
  const chunks = await chunksOf(response);
  return { response, chunks, snapshots: snapshotsOf(chunks), sessionId: response.headers.get('x-session-id')! };
}

async function errorOf(response: Response): Promise<ApiErrorBody['error']> {
  expect(response.headers.get('content-type')).toContain('application/json');
  const body = (await response.json()) as ApiErrorBody;
  expect(typeof body.error.code).toBe('string');
  expect(typeof body.error.message).toBe('string');
  return body.error;
}

describe('agents', () => {
  it('lists the agents with their tools and steps', async () => {
    const body = (await (await makeApp().request('/api/agents')).json()) as AgentListResponse;
    expect(body.agents.map((agent) => agent.id)).toEqual(['cognitive-reasoner', 'study-buddy']);
    const first = body.agents[0]!;
    expect(first.tools).toContain('search');
    expect(first.steps).toContain('ResearchMode');
    expect(first.defaultStep).toBe('DefaultMode');
  });

  it('describes one agent: template, steps with sequences, graph and Mermaid source', async () => {
    const body = (await (await makeApp().request('/api/agents/cognitive-reasoner')).json()) as AgentDetailResponse;
    expect(body.template.id).toBe('cognitive-reasoner');
    const research = body.stepDetails.find((step) => step.name === 'ResearchMode')!;
    expect(research.sequence).toEqual([['search'], ['think'], ['reflect']]);
    expect(body.graph.nodes.filter((node) => node.kind === 'step')).toHaveLength(body.steps.length);
    expect(body.mermaid).toMatch(/^flowchart/);
    expect(body.mermaid).toContain('ResearchMode');
  });

  it('answers an unknown agent with 404 naming the agents it has', async () => {
    const error = await errorOf(await makeApp().request('/api/agents/nobody'));
    expect(error).toMatchObject({ code: 'unknown-agent', path: 'path.agentId' });
    expect(error.message).toContain('cognitive-reasoner');
  });
});

describe('chat', () => {
  it('streams the answer with one orchestration part per model step, the sequence advancing', async () => {
    const app = makeApp();
    const { response, chunks, snapshots, sessionId } = await chat(app, RESEARCH);
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    expect(response.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    expect(sessionId).toMatch(/^[0-9a-f-]{36}$/);

    expect(snapshots.map((s) => s.activeStep)).toEqual(Array(snapshots.length).fill('ResearchMode'));
    expect(snapshots.map((s) => s.sequence?.index)).toEqual([0, 1, 2, 3, 3]);
    expect(snapshots.slice(0, 3).map((s) => s.allowedTools)).toEqual([['search'], ['think'], ['reflect']]);
    const last = snapshots.at(-1)!;
    expect(last).toMatchObject({ final: true, stepNumber: null, sessionId, agentId: 'cognitive-reasoner' });
    expect(last.sequence?.completed).toBe(true);
    expect(last.recentlyUsedTools).toEqual(['search', 'think', 'reflect']);
    expect(last.tokenUsage.totalTokens).toBeGreaterThan(0);
    // Every snapshot shares one id, so a client keeps one part and replaces it in place.
    const ids = chunks.filter((c) => c.type === 'data-orchestration').map((c) => (c as { id?: string }).id);
    expect(new Set(ids)).toEqual(new Set(['orchestration']));
    // The final snapshot comes after the answer's text and before `finish`.
    const types = chunks.map((c) => c.type);
    expect(types.lastIndexOf('text-end')).toBeLessThan(types.lastIndexOf('data-orchestration'));
    expect(types.at(-1)).toBe('finish');
  });

  it('gives a client (the AI SDK reader) one orchestration part holding the final state', async () => {
    const app = makeApp();
    const response = await post(app, '/api/chat/cognitive-reasoner', { messages: [userMessage(RESEARCH)] });
    let message: BatonUIMessage | undefined;
    // Parsed as useChat's transport does: the AI SDK's own SSE parser and chunk schema.
    const chunks: UIMessageChunk[] = [];
    const reader = parseJsonEventStream({ stream: response.body!, schema: uiMessageChunkSchema }).getReader();
    for (let read = await reader.read(); !read.done; read = await reader.read()) {
      if (!read.value.success) throw read.value.error;
      chunks.push(read.value.value);
    }
    const stream = new ReadableStream<UIMessageChunk>({
      start(controller) {
        for (const chunk of chunks) controller.enqueue(chunk);
        controller.close();
      },
    });
    for await (const update of readUIMessageStream<BatonUIMessage>({ stream })) message = update;
    const parts = message!.parts.filter((part) => part.type === 'data-orchestration');
    expect(parts).toHaveLength(1);
    expect(parts[0]!.data.final).toBe(true);
    expect(message!.parts.filter((part) => part.type.startsWith('tool-')).map((part) => part.type)).toEqual([
      'tool-search',
      'tool-think',
      'tool-reflect',
    ]);
    expect(message!.metadata?.sessionId).toBe(response.headers.get('x-session-id'));
  });

  it('continues a session by id, and the session routes report what the stream said', async () => {
    const app = makeApp();
    const first = await chat(app, RESEARCH);
    const second = await chat(app, 'Critique the argument that remote work improves productivity', {
      sessionId: first.sessionId,
    });
    expect(second.sessionId).toBe(first.sessionId);
    const final = second.snapshots.at(-1)!;
    expect(final.activeStep).toBe('EvaluationMode');
    expect(final.recentlyUsedTools).toEqual(['search', 'think', 'reflect', 'critique', 'debate', 'reflect']);

    const session = (await (await app.request(`/api/sessions/${first.sessionId}`)).json()) as SessionResponse;
    expect(session.agentId).toBe('cognitive-reasoner');
    expect(session.state.activeStep).toBe(final.activeStep);
    expect(session.state.recentlyUsedTools).toEqual(final.recentlyUsedTools);
    const compare = session.tools.find((tool) => tool.tool === 'compare')!;
    expect(compare.allowed).toBe(false);
    expect(compare.reason?.code).toBe('not-allowed');
    expect(session.tools.filter((tool) => tool.allowed).map((tool) => tool.tool)).toEqual(final.allowedTools);
  });

  it('lets a client choose the id of a new session', async () => {
    const { sessionId, snapshots } = await chat(makeApp(), RESEARCH, { sessionId: 'my-session.1' });
    expect(sessionId).toBe('my-session.1');
    expect(snapshots.at(-1)!.sessionId).toBe('my-session.1');
  });

  it('refuses a session of another agent with 409, changing nothing', async () => {
    const app = makeApp();
    const { sessionId } = await chat(app, RESEARCH);
    const response = await post(app, '/api/chat/study-buddy', { sessionId, messages: [userMessage('hello')] });
    expect(response.status).toBe(409);
    expect(await errorOf(response)).toMatchObject({ code: 'session-of-another-agent', path: 'body.sessionId' });
    const session = (await (await app.request(`/api/sessions/${sessionId}`)).json()) as SessionResponse;
    expect(session.agentId).toBe('cognitive-reasoner');
    expect(session.state.recentlyUsedTools).toEqual(['search', 'think', 'reflect']);
  });

  it('never runs a tool the step does not allow, even when the model calls it', async () => {
    const app = makeApp({ agents: [{ template: reasoner, model: createOfflineModel({ misbehave: true }) }] });
    const { chunks, snapshots } = await chat(app, RESEARCH);
    const refused = chunks.find((c) => c.type === 'tool-output-error' || c.type === 'tool-input-error') as
      | { errorText: string; toolCallId: string }
      | undefined;
    expect(refused?.errorText).toMatch(/not (run|available|allowed)|unavailable|No such tool/i);
    const executed = chunks.filter((c) => c.type === 'tool-output-available');
    expect(executed).toHaveLength(3);
    expect(snapshots.at(-1)!.recentlyUsedTools).toEqual(['search', 'think', 'reflect']);
  });
});

describe('a client that leaves', () => {
  it('stops the turn when the client disconnects: no more tools run, and the session stays usable', async () => {
    const app = makeApp({
      agents: [{ template: reasoner, model: createOfflineModel({ delayMs: 10 }) }],
    });
    const abort = new AbortController();
    const response = await app.request('/api/chat/cognitive-reasoner', {
      method: 'POST',
      body: JSON.stringify({ messages: [userMessage(RESEARCH)] }),
      signal: abort.signal,
    });
    const sessionId = response.headers.get('x-session-id')!;
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let seen = '';
    while (!seen.includes('tool-output-available')) seen += (await reader.read()).value ?? '';
    abort.abort();
    await reader.cancel().catch(() => undefined);
    // Long enough for the two remaining tools and the answer, had the turn gone on.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const session = (await (await app.request(`/api/sessions/${sessionId}`)).json()) as SessionResponse;
    expect(session.state.recentlyUsedTools).toEqual(['search']);
    const next = await chat(app, RESEARCH, { sessionId });
    expect(next.snapshots.at(-1)!.sequence?.completed).toBe(true);
  });
});

describe('a client that reads slowly', () => {
  it('does not hold its turn: the turn runs to its end, and the next one starts, before it reads a byte', async () => {
    const app = makeApp({ maxTurns: 1, maxQueuedTurns: 1 });
    const unread = await post(app, '/api/chat/cognitive-reasoner', { messages: [userMessage(RESEARCH)] });
    // The app's only slot is the first turn's until that turn has ended.
    const next = await post(app, '/api/chat/cognitive-reasoner', { messages: [userMessage(RESEARCH)] });
    const snapshots = (await chunksOf(next)).filter((c) => c.type === 'data-orchestration');
    expect(snapshots.length).toBeGreaterThan(1);
    // The first answer was kept whole for its client.
    expect((await chunksOf(unread)).at(-1)).toEqual({ type: 'finish', finishReason: 'stop' });
  });
});

describe('a model that fails', () => {
  // A turn of the app's one slot: were a failed turn never to end, the second would wait forever.
  const failing: [string, () => MockLanguageModelV4][] = [
    [
      'before it streams',
      () => new MockLanguageModelV4({ doStream: () => Promise.reject(new Error('provider down')) }),
    ],
    [
      'with a stream that ends without output',
      () =>
        new MockLanguageModelV4({
          doStream: async () => ({
            stream: new ReadableStream<LanguageModelV4StreamPart>({ start: (c) => c.close() }),
          }),
        }),
    ],
  ];
  it.each(failing)(
    'ends the answer with an error, frees the turn and keeps the session usable (%s)',
    async (_name, model) => {
      const app = makeApp({
        agents: [{ template: reasoner, model: model() }],
        maxTurns: 1,
        maxQueuedTurns: 1,
        logger: pino({ level: 'silent' }),
      });
      const response = await post(app, '/api/chat/cognitive-reasoner', { messages: [userMessage(RESEARCH)] });
      expect(response.status).toBe(200);
      const chunks = await chunksOf(response);
      expect(chunks.some((c) => c.type === 'error')).toBe(true);
      expect(chunks.at(-1)).toEqual({ type: 'finish', finishReason: 'error' });
      const sessionId = response.headers.get('x-session-id')!;
      const next = await post(app, '/api/chat/cognitive-reasoner', { messages: [userMessage(RESEARCH)], sessionId });
      expect(next.status).toBe(200);
      expect((await chunksOf(next)).at(-1)).toMatchObject({ type: 'finish' });
    },
  );
});

describe('bad requests', () => {
  const cases: [string, unknown, number, string, string | undefined][] = [
    ['invalid JSON', '{"messages": [', 400, 'invalid-json', 'body'],
    ['an empty body', '', 400, 'invalid-json', 'body'],
    ['an array body', [], 400, 'invalid-body', 'body'],
    ['no messages', {}, 400, 'invalid-body', 'body.messages'],
    ['messages of the wrong type', { messages: 'hi' }, 400, 'invalid-body', 'body.messages'],
    ['an empty message list', { messages: [] }, 400, 'invalid-body', 'body.messages'],
    [
      'a message with an unknown role',
      { messages: [{ id: '1', role: 'robot', parts: [] }] },
      400,
      'invalid-body',
      'body.messages[0].role',
    ],
    [
      'a part without a type',
      { messages: [{ id: '1', role: 'user', parts: [{ text: 'x' }] }] },
      400,
      'invalid-body',
      'body.messages[0].parts[0].type',
    ],
    [
      'a text part without text',
      { messages: [{ id: '1', role: 'user', parts: [{ type: 'text' }] }] },
      400,
      'invalid-messages',
      'body.messages',
    ],
    [
      'no user message',
      { messages: [{ id: '1', role: 'assistant', parts: [{ type: 'text', text: 'hi' }] }] },
      400,
      'no-user-message',
      'body.messages',
    ],
    [
      'a session id with a slash',
      { sessionId: 'a/b', messages: [userMessage('x')] },
      400,
      'invalid-body',
      'body.sessionId',
    ],
    [
      'a file part naming a URL for the server to fetch',
      {
        messages: [
          {
            id: '1',
            role: 'user',
            parts: [{ type: 'file', mediaType: 'text/plain', url: 'http://169.254.169.254/latest/meta-data' }],
          },
        ],
      },
      400,
      'invalid-body',
      'body.messages[0].parts[0].url',
    ],
    ['a numeric session id', { sessionId: 7, messages: [userMessage('x')] }, 400, 'invalid-body', 'body.sessionId'],
  ];
  it.each(cases)('answers %s with a 4xx JSON error saying where', async (_name, body, status, code, path) => {
    const response = await post(makeApp(), '/api/chat/cognitive-reasoner', body);
    expect(response.status).toBe(status);
    const error = await errorOf(response);
    expect(error.code).toBe(code);
    expect(error.path).toBe(path);
  });

  it('refuses too many messages, and a body over the size limit', async () => {
    const app = makeApp({ maxMessages: 3, bodyLimit: 2048 });
    const many = { messages: Array.from({ length: 4 }, (_, i) => userMessage(`m${i}`)) };
    const tooMany = await post(app, '/api/chat/cognitive-reasoner', many);
    expect(tooMany.status).toBe(400);
    expect(await errorOf(tooMany)).toMatchObject({ code: 'too-many-messages', path: 'body.messages' });
    const large = await post(app, '/api/chat/cognitive-reasoner', { messages: [userMessage('x'.repeat(4096))] });
    expect(large.status).toBe(413);
    expect((await errorOf(large)).code).toBe('body-too-large');
  });

  it('answers a wrong method with 405 and Allow, and an unknown path with 404', async () => {
    const app = makeApp();
    const wrong = await app.request('/api/chat/cognitive-reasoner');
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('POST');
    expect((await errorOf(wrong)).code).toBe('method-not-allowed');
    expect((await errorOf(await app.request('/api/nothing'))).code).toBe('not-found');
  });

  it('answers a malformed session id in the path with 400, an unknown one with 404', async () => {
    const app = makeApp();
    expect(await errorOf(await app.request('/api/sessions/%20bad'))).toMatchObject({
      code: 'invalid-session-id',
      path: 'path.sessionId',
    });
    const missing = await app.request('/api/sessions/never-seen');
    expect(missing.status).toBe(404);
    expect((await errorOf(missing)).code).toBe('session-not-found');
  });
});

describe('sessions', () => {
  it('resets progress but keeps the owner and token usage', async () => {
    const app = makeApp();
    const { sessionId, snapshots } = await chat(app, RESEARCH);
    const response = await app.request(`/api/sessions/${sessionId}/reset`, { method: 'POST' });
    expect(response.status).toBe(200);
    const reset = (await response.json()) as SessionResponse;
    expect(reset.agentId).toBe('cognitive-reasoner');
    expect(reset.state.recentlyUsedTools).toEqual([]);
    expect(reset.state.tokenUsage).toEqual(snapshots.at(-1)!.tokenUsage);
    expect(reset.state.activeStep).toBe('DefaultMode');
  });

  it('deletes a session', async () => {
    const app = makeApp();
    const { sessionId } = await chat(app, RESEARCH);
    expect((await app.request(`/api/sessions/${sessionId}`, { method: 'DELETE' })).status).toBe(204);
    expect((await app.request(`/api/sessions/${sessionId}`)).status).toBe(404);
  });
});

describe('the store', () => {
  const broken: SessionStore = {
    name: 'broken',
    get: () => Promise.reject(new StoreUnavailableError('broken', 'connection refused')),
    update: () => Promise.reject(new StoreUnavailableError('broken', 'connection refused')),
    delete: () => Promise.reject(new StoreUnavailableError('broken', 'connection refused')),
    sweep: () => Promise.resolve(0),
    close: () => Promise.resolve(),
  };

  it('answers 503 with Retry-After when it is down, on chat, sessions and health', async () => {
    const app = makeApp({ manager: createOrchestrationManager({ store: broken }) });
    const chatResponse = await post(app, '/api/chat/cognitive-reasoner', { messages: [userMessage(RESEARCH)] });
    expect(chatResponse.status).toBe(503);
    expect(Number(chatResponse.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await errorOf(chatResponse)).code).toBe('store-unavailable');
    const session = await app.request('/api/sessions/abc');
    expect(session.status).toBe(503);
    const health = await app.request('/healthz');
    expect(health.status).toBe(503);
    expect(await health.json()).toMatchObject({ ok: false, store: 'broken' });
  });

  it("tells clients it is down, and keeps its driver's words (hosts, ports) for the log", async () => {
    const detail = 'connect ECONNREFUSED 10.0.3.7:6379';
    const down = () => Promise.reject(new StoreUnavailableError('redis', detail));
    const store: SessionStore = { ...broken, name: 'redis', get: down, update: down, delete: down };
    const logged: string[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void logged.push(line) });
    const app = makeApp({ manager: createOrchestrationManager({ store }), logger });
    const bodies = [
      await post(app, '/api/chat/cognitive-reasoner', { messages: [userMessage(RESEARCH)] }),
      await app.request('/api/sessions/abc'),
      await app.request('/healthz'),
    ];
    for (const response of bodies) {
      expect(response.status).toBe(503);
      const text = await response.text();
      expect(text).not.toContain('10.0.3.7');
      expect(text).toMatch(/unavailable/);
    }
    expect(logged.filter((line) => line.includes('10.0.3.7'))).toHaveLength(3);
  });

  it('costs 4 round trips for a 3-tool research turn: the user message and the session claim ride on the first reservation', async () => {
    const inner = memoryStore();
    const trips: string[] = [];
    const counting: SessionStore = {
      name: 'counting',
      get: (id) => {
        trips.push('get');
        return inner.get(id);
      },
      update: (id, fn) => {
        trips.push('update');
        return inner.update(id, fn);
      },
      readLog: (id) => inner.readLog!(id),
      peek: (id) => inner.peek!(id), // no I/O: not a round trip
      delete: (id) => inner.delete(id),
      sweep: () => inner.sweep(),
      close: () => inner.close(),
    };
    // With the event log the inspector reads (written at the end of every turn).
    const app = makeApp({ manager: createOrchestrationManager({ store: counting, eventLog: 100 }) });
    // A server that has been answering: the store is known to answer (the first turn after a
    // start also checks that, with one more round trip, so that a store that is down is a 503).
    await chat(app, 'Hello');
    trips.length = 0;
    const turn = await chat(app, RESEARCH);
    expect(turn.snapshots.at(-1)).toMatchObject({ final: true, recentlyUsedTools: ['search', 'think', 'reflect'] });
    // Three reservations (the first with the message and the claim), and the final record.
    expect(trips).toEqual(['update', 'update', 'update', 'update']);
    // A second turn of the same session costs the same: it begins from the store's last copy.
    trips.length = 0;
    await chat(app, 'And by 2040?', { sessionId: turn.sessionId });
    expect(trips.length).toBeLessThanOrEqual(4);
    expect(trips).not.toContain('get');
  });

  it('reports a healthy store', async () => {
    const health = await makeApp().request('/healthz');
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ ok: true, store: 'memory', agents: 2 });
  });
});

describe('stateless mode', () => {
  const stateless = () => makeApp({ stateless: { keys: [KEY_A] } });

  it('carries the state in a signed token from turn to turn', async () => {
    const app = stateless();
    const first = await chat(app, RESEARCH);
    // The token comes at the end of the stream only: one issued with the headers would hold
    // the state before the turn, which the turn's own token replaces (and the guard refuses).
    expect(first.response.headers.get('x-orchestration-state')).toBeNull();
    const token = first.snapshots.at(-1)!.stateToken!;
    expect(token).toMatch(/^v2\./);
    const second = await post(
      app,
      '/api/chat/cognitive-reasoner',
      { messages: [userMessage(RESEARCH), userMessage('Thanks, and what is the outlook?')] },
      { 'x-orchestration-state': token },
    );
    expect(second.headers.get('x-session-id')).toBe(first.sessionId);
    const snapshots = snapshotsOf(await chunksOf(second));
    // The history of the first turn came back with the token.
    expect(snapshots.at(-1)!.recentlyUsedTools.slice(0, 3)).toEqual(['search', 'think', 'reflect']);
    expect(snapshots.at(-1)!.recentlyUsedTools.length).toBeGreaterThan(3);

    const session = await app.request(`/api/sessions/${first.sessionId}`, {
      headers: { 'x-orchestration-state': token },
    });
    expect(((await session.json()) as SessionResponse).state.recentlyUsedTools).toEqual(['search', 'think', 'reflect']);
  });

  it('rejects a tampered, foreign or expired token with 401 and the reason', async () => {
    const app = stateless();
    const { snapshots } = await chat(app, RESEARCH);
    const token = snapshots.at(-1)!.stateToken!;
    const parts = token.split('.');
    // The payload is raw deflate of the JSON (see src/stores/state-token.ts).
    const payload = JSON.parse(inflateRawSync(Buffer.from(parts[2]!, 'base64url')).toString('utf8'));
    payload.s.sequenceIndex = 0;
    const forged = deflateRawSync(Buffer.from(JSON.stringify(payload))).toString('base64url');
    const tampered = [parts[0], parts[1], forged, parts[3]].join('.');
    const now = Date.now();
    const state = { ...createState('s1', now, 0), version: 1, agentId: 'cognitive-reasoner' };
    const foreign = encodeStateToken(state, { keys: [KEY_B] });
    const expired = encodeStateToken(state, { keys: [KEY_A], ttl: 1, now: () => now - 1000 });
    for (const [bad, reason] of [
      [tampered, /signature/],
      [foreign, /key/],
      [expired, /expired/],
      ['garbage', /part/],
    ] as const) {
      const response = await post(
        app,
        '/api/chat/cognitive-reasoner',
        { messages: [userMessage(RESEARCH)] },
        { 'x-orchestration-state': bad },
      );
      expect(response.status).toBe(401);
      const error = await errorOf(response);
      expect(error).toMatchObject({ code: 'invalid-state-token', path: 'header.x-orchestration-state' });
      expect(error.message).toMatch(reason);
    }
  });

  it('needs the token for the session routes', async () => {
    const response = await stateless().request('/api/sessions/abc');
    expect(response.status).toBe(401);
    expect((await errorOf(response)).code).toBe('missing-state-token');
  });
});

describe('access', () => {
  it('requires the bearer key on /api when one is set, but not on /healthz', async () => {
    const app = makeApp({ apiKey: 'secret-key' });
    const none = await app.request('/api/agents');
    expect(none.status).toBe(401);
    expect((await errorOf(none)).code).toBe('unauthorized');
    expect((await app.request('/api/agents', { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    expect((await app.request('/api/agents', { headers: { authorization: 'Bearer secret-key' } })).status).toBe(200);
    expect((await app.request('/healthz')).status).toBe(200);
  });

  it('answers CORS preflights for the configured origins and exposes the session headers', async () => {
    const app = makeApp({ corsOrigins: ['https://app.example'] });
    const preflight = await app.request('/api/chat/cognitive-reasoner', {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('https://app.example');
    const cross = await post(
      app,
      '/api/chat/cognitive-reasoner',
      { messages: [userMessage(RESEARCH)] },
      { origin: 'https://app.example' },
    );
    expect(cross.headers.get('access-control-expose-headers')).toContain('x-session-id');
    await cross.text();
  });

  it("refuses a browser's writes for a page of another origin, and only those", async () => {
    const app = makeApp({ corsOrigins: ['https://app.example'] });
    const created = await post(app, '/api/chat/cognitive-reasoner', { id: 's-1', messages: [userMessage(RESEARCH)] });
    expect(created.status).toBe(200);
    await created.text();
    const reset = (headers: Record<string, string>) =>
      app.request('/api/sessions/s-1/reset', { method: 'POST', headers });
    const refused: Record<string, string>[] = [
      { 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' },
      { 'sec-fetch-site': 'same-site', origin: 'http://localhost:3000' },
      // A page that lies in Origin cannot lie in Sec-Fetch-Site, which the browser sets.
      { 'sec-fetch-site': 'cross-site', origin: 'http://localhost' },
      { 'sec-fetch-site': 'cross-site' },
      { 'sec-fetch-site': 'cross-site', origin: 'null' },
      // An older browser: no Sec-Fetch-Site, so Origin decides.
      { origin: 'https://evil.example' },
      { origin: 'http://localhost:3000' },
    ];
    for (const headers of refused) {
      const response = await reset(headers);
      expect(response.status, JSON.stringify(headers)).toBe(403);
      expect(await errorOf(response)).toMatchObject({ code: 'cross-origin', path: 'header.origin' });
      const chat = await post(
        app,
        '/api/chat/cognitive-reasoner',
        { id: 's-2', messages: [userMessage('hi')] },
        {
          ...headers,
          'content-type': 'text/plain',
        },
      );
      expect(chat.status).toBe(403);
      expect((await app.request('/api/sessions/s-1', { method: 'DELETE', headers })).status).toBe(403);
    }
    expect((await app.request('/api/sessions/s-2')).status).toBe(404);
    // Reads stay open: without CORS headers a page of another origin cannot see the answer.
    expect((await app.request('/api/sessions/s-1', { headers: refused[0] })).status).toBe(200);

    const allowed: Record<string, string>[] = [
      {}, // curl, a server: no browser
      { 'sec-fetch-site': 'same-origin', origin: 'http://localhost' },
      { 'sec-fetch-site': 'same-origin' },
      { 'sec-fetch-site': 'cross-site', origin: 'https://app.example' },
      { 'sec-fetch-site': 'same-site', origin: 'https://app.example' },
      { origin: 'http://localhost' },
      { origin: 'https://app.example' },
    ];
    for (const headers of allowed) expect((await reset(headers)).status, JSON.stringify(headers)).toBe(200);
    expect((await app.request('/api/sessions/s-1', { method: 'DELETE' })).status).toBe(204);
  });
});

describe('createApp', () => {
  it('refuses two agents with one id', () => {
    expect(() => createApp({ agents: [reasoner, { ...reasoner } as AgentTemplate], model: 'offline' })).toThrow(
      /two agents have the id "cognitive-reasoner"/,
    );
  });
});
