/**
 * Fuzzes the HTTP API through `app.request()` (no port): 10,000 random and mutated requests
 * (methods, paths with unicode and control characters, garbage headers, invalid JSON, wrong
 * content types, valid chat bodies with fields deleted, retyped, huge or deeply nested, bodies
 * over the limit, too many messages, garbage and forged `x-orchestration-state` tokens).
 *
 * Whatever arrives, a client must get a 2xx or a 4xx, never a 5xx; every error body must be
 * `{ error: { code, message, path? } }`; a chat the server accepted must stream to its end
 * without an error chunk; nothing may be logged as a server fault; and the server must still
 * answer a real chat afterwards.
 *
 * Seeded and reproducible: each run draws a seed (more ground covered over time), a failure
 * prints it, and `BATON_FUZZ_SEED=<seed>` replays it. `BATON_FUZZ_STATS=1` prints the statuses.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { UIMessageChunk } from 'ai';
import fc from 'fast-check';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentTemplate } from '../src/core/schema.js';
import { createState, type OrchestrationState } from '../src/core/state.js';
import type { ApiErrorBody, OrchestrationSnapshot } from '../src/server/api-types.js';
import { type BatonApp, createApp } from '../src/server/create-app.js';
import { encodeStateToken } from '../src/stores/state-token.js';
import { loadTemplate } from '../src/templates/load-template.js';

const AGENTS_DIR = new URL('../examples/agents/', import.meta.url).pathname;
const SEED = Number(process.env.BATON_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
/** Small, so that oversized bodies are cheap to build. */
const BODY_LIMIT = 64 * 1024;
const MAX_MESSAGES = 100;
const KEY_A = 'fuzz-key-a-'.padEnd(40, 'a');
const KEY_B = 'fuzz-key-b-'.padEnd(40, 'b');
const FOREIGN_KEY = 'fuzz-key-of-another-deployment'.padEnd(40, 'x');
const API_KEY = 'fuzz-api-key';
const RESEARCH = 'How many electric vehicles will be on the road by 2030?';
/** Requests per property; they add up to 10,000. */
const RUNS = { random: 3000, chatBodies: 4500, stateless: 2000, sessions: 500 } as const;
const TOTAL_RUNS = RUNS.random + RUNS.chatBodies + RUNS.stateless + RUNS.sessions;

const templates: AgentTemplate[] = await Promise.all(
  readdirSync(AGENTS_DIR)
    .filter((name) => name.endsWith('.json'))
    .sort()
    .map((name) => loadTemplate(`${AGENTS_DIR}${name}`)),
);
const AGENT_IDS = templates.map((template) => template.id);
const STEP_NAMES = templates.flatMap((template) => (template.orchestration?.steps ?? []).map((step) => step.name));
const TOOL_NAMES = [...new Set(templates.flatMap((template) => template.tools))];

/** Everything the apps log at warn level or above: a server fault is a failure even when hidden in a stream. */
const logged: { level: number; msg: string; err?: { message?: string; stack?: string } }[] = [];
const logger = pino(
  { level: 'warn' },
  new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) logged.push(JSON.parse(line));
      done();
    },
  }),
);

type AppName = 'stateful' | 'stateless' | 'authed';
let apps: Record<AppName, BatonApp>;

/** Session ids the stateful app knows, so that session routes are also hit on their success paths. */
const knownSessions: string[] = [];
/** A token the stateless app issued, which mutations start from. */
let issuedToken = '';
let issuedSessionId = '';
/** A stand-in for the built inspector, so that its file serving is fuzzed whether or not dist/web exists. */
let webRoot = '';

beforeAll(async () => {
  webRoot = mkdtempSync(join(tmpdir(), 'baton-fuzz-web-'));
  mkdirSync(join(webRoot, 'assets'));
  writeFileSync(join(webRoot, 'index.html'), '<!doctype html><title>inspector</title>');
  writeFileSync(join(webRoot, 'assets', 'app.js'), 'console.log("inspector");');
  const common = { agents: templates, model: 'offline', bodyLimit: BODY_LIMIT, maxMessages: MAX_MESSAGES, logger };
  apps = {
    stateful: createApp({ ...common, store: 'memory:', webRoot }),
    stateless: createApp({ ...common, stateless: { keys: [KEY_A, KEY_B] }, webRoot: false }),
    authed: createApp({ ...common, apiKey: API_KEY, webRoot: false }),
  };
  for (const agentId of AGENT_IDS) {
    const turn = await validChat('stateful', agentId, RESEARCH);
    knownSessions.push(turn.sessionId);
  }
  const stateless = await validChat('stateless', 'cognitive-reasoner', RESEARCH);
  issuedSessionId = stateless.sessionId;
  issuedToken = stateless.final.stateToken ?? '';
  expect(issuedToken).toMatch(/^v2\./);
});

afterAll(async () => {
  if (apps) await Promise.all(Object.values(apps).map((app) => app.close()));
  if (webRoot) rmSync(webRoot, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// Sending and checking

interface FuzzRequest {
  app: AppName;
  method: string;
  path: string;
  headers: [string, string][];
  body?: string | Uint8Array<ArrayBuffer>;
}

const stats = { sent: 0, byStatus: new Map<number, number>(), chatsStreamed: 0 };

function describeRequest(request: FuzzRequest): string {
  const body =
    request.body === undefined
      ? '(none)'
      : typeof request.body === 'string'
        ? JSON.stringify(request.body.slice(0, 400)) +
          (request.body.length > 400 ? `… (${request.body.length} chars)` : '')
        : `${request.body.byteLength} raw bytes`;
  const headers = request.headers.map(([name, value]) => `${name}: ${JSON.stringify(value.slice(0, 120))}`);
  return `[seed ${SEED}, replay with BATON_FUZZ_SEED=${SEED}] ${request.app} app: ${request.method} ${request.path.slice(0, 300)}\n  headers: ${headers.join('; ') || '(none)'}\n  body: ${body}`;
}

/** The JSON chunks of an SSE UI message stream, in order. */
function sseChunks(text: string): UIMessageChunk[] {
  return text
    .split('\n')
    .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
    .map((line) => JSON.parse(line.slice('data: '.length)) as UIMessageChunk);
}

/** Sends one request and checks what any client may rely on; throws (with the request) otherwise. */
async function send(request: FuzzRequest): Promise<void> {
  const init: RequestInit = { method: request.method, headers: request.headers };
  if (request.body !== undefined) init.body = request.body;
  const built = new Request(`http://localhost${request.path}`, init);
  stats.sent += 1;
  const faultsBefore = logged.length;
  let response: Response;
  try {
    response = await apps[request.app].request(built);
  } catch (error) {
    throw new Error(`the app threw instead of answering: ${String(error)}\n${describeRequest(request)}`);
  }
  const { status } = response;
  stats.byStatus.set(status, (stats.byStatus.get(status) ?? 0) + 1);
  const fail = (why: string, detail = ''): never => {
    throw new Error(`${why} (status ${status})${detail ? `: ${detail}` : ''}\n${describeRequest(request)}`);
  };
  const text = await response.text();
  if (!((status >= 200 && status < 300) || (status >= 400 && status < 500))) fail('not a 2xx or 4xx', text);
  // A file of the inspector answers an unsatisfiable Range the standard way, with an empty 416.
  const staticRange = status === 416 && !request.path.startsWith('/api/');
  if (status >= 400 && request.method !== 'HEAD' && !staticRange) {
    if (!response.headers.get('content-type')?.includes('application/json')) fail('error body is not JSON', text);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      fail('error body does not parse', text);
    }
    const error = (body as Partial<ApiErrorBody>).error;
    const shapeOk =
      typeof body === 'object' &&
      body !== null &&
      Object.keys(body).length === 1 &&
      typeof error === 'object' &&
      error !== null &&
      typeof error.code === 'string' &&
      error.code.length > 0 &&
      typeof error.message === 'string' &&
      error.message.length > 0 &&
      (error.path === undefined || typeof error.path === 'string') &&
      Object.keys(error).every((key) => key === 'code' || key === 'message' || key === 'path');
    if (!shapeOk) fail('error body is not { error: { code, message, path? } }', text);
  }
  if (response.headers.get('content-type')?.includes('text/event-stream')) {
    stats.chatsStreamed += 1;
    const chunks = sseChunks(text);
    const broken = chunks.find((chunk) => chunk.type === 'error');
    if (broken) fail('an accepted chat failed in its stream', JSON.stringify(broken));
    if (chunks.at(-1)?.type !== 'finish') fail('the chat stream did not finish', text.slice(-300));
  }
  const faults = logged.slice(faultsBefore).filter((entry) => entry.level >= 50);
  if (faults.length > 0) fail('the server logged a fault', JSON.stringify(faults[0]).slice(0, 2000));
}

interface ChatTurn {
  sessionId: string;
  snapshots: OrchestrationSnapshot[];
  final: OrchestrationSnapshot;
}

/** One valid chat turn, checked: it streams the whole orchestrated research turn. */
async function validChat(app: AppName, agentId: string, text: string, headers: Record<string, string> = {}) {
  const response = await apps[app].request(`/api/chat/${agentId}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text }] }] }),
  });
  expect(response.status).toBe(200);
  const chunks = sseChunks(await response.text());
  expect(chunks.filter((chunk) => chunk.type === 'error')).toEqual([]);
  const snapshots = chunks
    .filter((chunk) => chunk.type === 'data-orchestration')
    .map((chunk) => (chunk as unknown as { data: OrchestrationSnapshot }).data);
  const final = snapshots.at(-1)!;
  expect(final.final).toBe(true);
  return { sessionId: response.headers.get('x-session-id')!, snapshots, final } satisfies ChatTurn;
}

// ---------------------------------------------------------------------------------------------
// Generators. `fc.gen()` draws values one after another, so later choices can depend on earlier
// ones; fast-check still records and shrinks every draw.

type Gen = fc.GeneratorValue;

// `g` caches arbitraries by builder and deep-equal arguments, and regexes or arbitraries passed
// as arguments all compare equal: such draws go through builders of their own.
const headerNameTail = () => fc.stringMatching(/^[a-z0-9-]{1,20}$/);
const sessionIdLike = () => fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,140}$/);
const toolHistory = () => fc.array(fc.constantFrom(...TOOL_NAMES, 'ghost', ''), { maxLength: 200 });
const callIds = () => fc.array(fc.string({ maxLength: 10 }), { maxLength: 120 });

function pick<T>(g: Gen, values: readonly T[]): T {
  return values[g(fc.nat, { max: values.length - 1 })]!;
}

/** Header-safe text: Latin-1 without NUL, CR or LF (what `Headers` accepts), sometimes long. */
function headerValue(g: Gen): string {
  const kind = g(fc.nat, { max: 9 });
  if (kind === 0) return 'x'.repeat(g(fc.integer, { min: 1000, max: 100_000 }));
  const raw = g(fc.string, { unit: 'binary', maxLength: 60 });
  return [...raw]
    .map((char) => {
      const code = char.codePointAt(0)!;
      if (code === 0 || code === 10 || code === 13) return ' ';
      return code > 0xff ? String.fromCharCode((code % 0xe0) + 0x20) : char;
    })
    .join('')
    .trim();
}

const HEADER_NAMES = [
  'content-type',
  'x-session-id',
  'x-orchestration-state',
  'authorization',
  'accept',
  'accept-encoding',
  'content-encoding',
  'origin',
  'cookie',
  'range',
  'if-none-match',
  'if-modified-since',
  'x-forwarded-for',
  'access-control-request-method',
] as const;

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'application/json; charset=latin1',
  'text/plain',
  'multipart/form-data; boundary=x',
  'application/x-www-form-urlencoded',
  'application/octet-stream',
  '',
  '*/*',
  'application/json; charset=utf-16',
];

function garbageHeaders(g: Gen): [string, string][] {
  const headers: [string, string][] = [];
  for (let i = g(fc.nat, { max: 4 }); i > 0; i--) {
    const name = g(fc.boolean) ? pick(g, HEADER_NAMES) : `x-${g(headerNameTail)}`;
    const value =
      name === 'content-type' && g(fc.boolean)
        ? pick(g, CONTENT_TYPES)
        : name === 'authorization' && g(fc.boolean)
          ? pick(g, ['Bearer', 'Bearer ', `Bearer ${API_KEY}`, `bearer ${API_KEY}`, `Basic ${API_KEY}`, 'Bearer a b'])
          : name === 'range' && g(fc.boolean)
            ? pick(g, ['bytes=0-0', 'bytes=-1', 'bytes=99999999-', 'bytes=5-1', 'bytes=0-1,2-3,4-5', 'bytes=x'])
            : headerValue(g);
    headers.push([name, value]);
  }
  return headers;
}

/** A path parameter: real ids, or unicode, control characters, bad percent-encoding, traversal, length. */
function pathParam(g: Gen): string {
  switch (g(fc.nat, { max: 9 })) {
    case 0:
      return pick(g, AGENT_IDS);
    case 1:
      return pick(g, [...knownSessions, issuedSessionId]);
    case 2:
      return g(fc.uuid);
    case 3:
      return encodeURIComponent(g(fc.string, { unit: 'grapheme', maxLength: 30 }));
    case 4:
      // Raw: the URL parser percent-encodes what it must and keeps the rest (slashes, dots...).
      return g(fc.string, { unit: 'binary', maxLength: 30 }).replace(/[?#]/g, '_');
    case 5: {
      const control = g(fc.integer, { min: 0, max: 0x1f });
      return `a%${control.toString(16).padStart(2, '0').toUpperCase()}b`;
    }
    case 6:
      return pick(g, [
        '%',
        '%%',
        '%G1',
        '%E0%A4',
        '%C0%80',
        '%FF',
        '%ED%A0%80',
        '%2F',
        '%2e%2e%2f%2e%2e',
        '..',
        '.',
        '%00',
      ]);
    case 7:
      return `${pick(g, ['a', 'é', '%20', '.'])}`.repeat(g(fc.integer, { min: 100, max: 20_000 }));
    case 8:
      return `${pick(g, AGENT_IDS)}${pick(g, ['/', '/extra', '%2Fx', '.json', ' ', '%20', '\u0000', '\u202e'])}`;
    default:
      return g(sessionIdLike);
  }
}

function randomPath(g: Gen): string {
  const p = () => pathParam(g);
  let path: string;
  switch (g(fc.nat, { max: 11 })) {
    case 0:
      path = `/api/chat/${p()}`;
      break;
    case 1:
      path = '/api/agents';
      break;
    case 2:
      path = `/api/agents/${p()}`;
      break;
    case 3:
      path = `/api/sessions/${p()}`;
      break;
    case 4:
      path = `/api/sessions/${p()}/reset`;
      break;
    case 5:
      path = '/healthz';
      break;
    case 6:
      path = '/';
      break;
    case 7:
      path = `/${p()}`;
      break;
    case 8:
      path = `/api/${p()}`;
      break;
    case 9:
      path = g(fc.boolean) ? '/assets/app.js' : `/assets/${p()}`;
      break;
    case 10:
      path = `/api/sessions/${p()}/${p()}`;
      break;
    default:
      path = `/${g(fc.webPath)}`;
  }
  if (g(fc.nat, { max: 7 }) === 0)
    path += `?${g(fc.string, { unit: 'grapheme-ascii', maxLength: 40 }).replace(/#/g, '')}`;
  return path;
}

const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS', 'get', 'post', 'PROPFIND', 'M-SEARCH'];

function canHaveBody(method: string): boolean {
  return !['GET', 'HEAD'].includes(method.toUpperCase());
}

// ---------------------------------------------------------------------------------------------
// Valid chat bodies and their mutations

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Stands for deeply nested JSON, spliced into the text after `JSON.stringify`. */
const DEEP = '\u0000deep:';

function validBody(g: Gen): { [key: string]: Json } {
  const text = pick(g, [
    RESEARCH,
    'hello',
    'How can we solve traffic problems?',
    'Critique this plan please',
    'Compare cats versus dogs',
    'Quiz me on photosynthesis',
  ]);
  const messages: Json[] = [];
  if (g(fc.nat, { max: 3 }) === 0) {
    // A conversation with a finished tool call in the history, as useChat sends it.
    messages.push(
      { id: 'u0', role: 'user', parts: [{ type: 'text', text: 'What is the statistics of solar?' }] },
      {
        id: 'a0',
        role: 'assistant',
        parts: [
          { type: 'step-start' },
          {
            type: 'tool-search',
            toolCallId: 'call-1',
            state: 'output-available',
            input: { query: 'solar' },
            output: { results: [] },
          },
          { type: 'text', text: 'Nothing found.', state: 'done' },
        ],
      },
    );
  }
  messages.push({ id: `m${g(fc.nat, { max: 9 })}`, role: 'user', parts: [{ type: 'text', text }] });
  const body: { [key: string]: Json } = { messages };
  if (g(fc.boolean)) body.sessionId = `fuzz-${g(fc.nat, { max: 50 })}`;
  // What useChat sends: its chat id, the session (the same as sessionId, or another).
  if (g(fc.boolean))
    body.id = g(fc.boolean) && body.sessionId !== undefined ? body.sessionId : `fuzz-${g(fc.nat, { max: 50 })}`;
  if (g(fc.boolean)) body.trigger = pick(g, ['submit-message', 'regenerate-message']);
  return body;
}

/** Every path into a JSON value, the root (`[]`) included. */
function pathsOf(value: Json, prefix: (string | number)[] = [], into: (string | number)[][] = []) {
  into.push(prefix);
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) pathsOf(item, [...prefix, i], into);
  } else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) pathsOf(item, [...prefix, key], into);
  }
  return into;
}

const PART_TYPES = [
  'text',
  'reasoning',
  'file',
  'source-url',
  'source-document',
  'step-start',
  'dynamic-tool',
  'tool-search',
  'tool-nonexistent',
  'tool-',
  'data-orchestration',
  'data-x',
  '',
  'TEXT',
];
const TOOL_STATES = [
  'input-streaming',
  'input-available',
  'output-available',
  'output-error',
  'approval-requested',
  'approval-responded',
  'output-denied',
  'bogus',
];

/** A UI message part that may or may not be valid for its type. */
function fuzzPart(g: Gen): Json {
  const part: { [key: string]: Json } = { type: pick(g, PART_TYPES) };
  const fields: Record<string, () => Json> = {
    text: () => (g(fc.boolean) ? g(fc.string, { maxLength: 50 }) : (g(fc.jsonValue, { maxDepth: 2 }) as Json)),
    state: () => pick(g, [...TOOL_STATES, 'done', 'streaming']),
    toolCallId: () => (g(fc.boolean) ? `call-${g(fc.nat, { max: 3 })}` : (g(fc.jsonValue, { maxDepth: 1 }) as Json)),
    toolName: () => pick(g, [...TOOL_NAMES, 'nope', '']),
    input: () => g(fc.jsonValue, { maxDepth: 2 }) as Json,
    output: () => g(fc.jsonValue, { maxDepth: 2 }) as Json,
    errorText: () => g(fc.string, { maxLength: 20 }),
    // No http(s) URLs: the AI SDK would download them, and a test must not reach the network.
    url: () =>
      pick(g, [
        'data:image/png;base64,AAAA',
        'data:text/plain;base64,aGk=',
        'data:image/png;base64,',
        'data:;base64,AAAAA',
        'data:,x',
        'not a url',
        'javascript:x',
        'file:///etc/passwd',
        '',
      ]),
    mediaType: () => pick(g, ['image/png', 'text/plain', '', 'application/pdf']),
    data: () => g(fc.jsonValue, { maxDepth: 3 }) as Json,
    providerMetadata: () => g(fc.jsonValue, { maxDepth: 3 }) as Json,
    approval: () => g(fc.jsonValue, { maxDepth: 2 }) as Json,
  };
  for (const [name, make] of Object.entries(fields)) if (g(fc.nat, { max: 2 }) === 0) part[name] = make();
  return part;
}

const MUTATIONS = [
  'delete',
  'retype',
  'huge-string',
  'deep',
  'wrap',
  'unicode',
  'number-edge',
  'proto-key',
  'many-messages',
  'role',
  'part',
  'session-id',
] as const;

function setAt(root: Json, path: (string | number)[], value: Json | undefined): Json | undefined {
  if (path.length === 0) return value;
  let parent = root as { [key: string]: Json } | Json[];
  for (const key of path.slice(0, -1)) parent = (parent as Record<string | number, Json>)[key] as typeof parent;
  const last = path.at(-1)!;
  if (value === undefined) {
    if (Array.isArray(parent)) parent.splice(last as number, 1);
    else delete parent[last as string];
  } else {
    (parent as Record<string | number, Json>)[last] = value;
  }
  return root;
}

/** Applies one to three mutations to a valid body; returns the request text (or nothing). */
function mutatedChatBody(g: Gen): string | undefined {
  let body: Json | undefined = validBody(g);
  const deep: string[] = [];
  for (let n = g(fc.integer, { min: 1, max: 3 }); n > 0 && body !== undefined; n--) {
    const paths = pathsOf(body);
    const path = paths[g(fc.nat, { max: paths.length - 1 })]!;
    const isObject = body !== null && typeof body === 'object' && !Array.isArray(body);
    const messages = isObject ? (body as { messages?: Json }).messages : undefined;
    let mutation = pick(g, MUTATIONS);
    // Once the root itself was replaced, only the mutations that need no object remain.
    if (!isObject && (mutation === 'many-messages' || mutation === 'session-id')) mutation = 'retype';
    switch (mutation) {
      case 'delete':
        body = setAt(body, path, undefined);
        break;
      case 'retype':
        body = setAt(body, path, g(fc.jsonValue, { maxDepth: 3 }) as Json);
        break;
      case 'huge-string': {
        const unit = pick(g, ['a', 'é', '😀', '\u0000', '\\', '"']);
        body = setAt(body, path, unit.repeat(g(fc.integer, { min: 1000, max: 40_000 })));
        break;
      }
      case 'deep': {
        // Either side of the server's depth limit (100), far past it, and past the size limit.
        const depth = g(fc.boolean) ? g(fc.integer, { min: 1, max: 120 }) : g(fc.integer, { min: 120, max: 40_000 });
        const [open, close] = pick(g, [
          ['[', ']'],
          ['{"a":', '}'],
          ['{"type":"text","text":', '}'],
        ] as const);
        deep.push(`${open.repeat(depth)}0${close.repeat(depth)}`);
        body = setAt(body, path, `${DEEP}${deep.length - 1}`);
        break;
      }
      case 'wrap':
        body = setAt(body, path, g(fc.boolean) ? [structuredClone(valueAt(body, path))] : { v: valueAt(body, path) });
        break;
      case 'unicode':
        body = setAt(body, path, g(fc.string, { unit: 'binary', maxLength: 40 }));
        break;
      case 'number-edge':
        body = setAt(body, path, pick(g, [1e308, -0, -1, 2 ** 53 + 2, 0.5, 1e-320, '', ' ']));
        break;
      case 'proto-key': {
        const target = valueAt(body, path);
        if (target !== null && typeof target === 'object' && !Array.isArray(target)) {
          // Own properties, so that JSON.stringify writes them as the keys a client could send.
          Object.defineProperty(
            target,
            pick(g, ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty']),
            {
              value: g(fc.jsonValue, { maxDepth: 2 }),
              enumerable: true,
              configurable: true,
              writable: true,
            },
          );
        }
        break;
      }
      case 'many-messages':
        if (Array.isArray(messages) && messages.length > 0) {
          const count = g(fc.integer, { min: MAX_MESSAGES - 2, max: MAX_MESSAGES + 50 });
          (body as { messages: Json }).messages = Array.from(
            { length: count },
            (_, i) => messages[i % messages.length]!,
          );
        } else {
          (body as { [key: string]: Json }).messages = Array.from(
            { length: g(fc.integer, { min: MAX_MESSAGES + 1, max: 30_000 }) },
            () => 0,
          );
        }
        break;
      case 'role':
        if (Array.isArray(messages) && messages.length > 0) {
          const message = messages[g(fc.nat, { max: messages.length - 1 })] as { [key: string]: Json };
          if (message && typeof message === 'object')
            message.role = pick(g, ['user', 'assistant', 'system', 'tool', 'data', '', 'USER', 'function']);
        }
        break;
      case 'part':
        if (Array.isArray(messages) && messages.length > 0) {
          const message = messages[g(fc.nat, { max: messages.length - 1 })] as { parts?: Json };
          if (message && typeof message === 'object' && Array.isArray(message.parts)) message.parts.push(fuzzPart(g));
        }
        break;
      case 'session-id':
        // As sessionId, or as useChat's chat id (id), or as both (perhaps naming different sessions).
        (body as { [key: string]: Json })[pick(g, ['sessionId', 'id'])] = pick(g, [
          pick(g, knownSessions),
          issuedSessionId,
          '',
          '-leading-dash',
          'a'.repeat(129),
          'a'.repeat(128),
          'spaces in id',
          'ünïcödé',
          'a\u0000b',
          g(fc.string, { unit: 'binary', maxLength: 20 }),
        ]);
        break;
    }
  }
  if (body === undefined) return undefined;
  let text = JSON.stringify(body);
  // Splice the deep structures in as text: building them as objects would overflow this
  // test's own stack in JSON.stringify.
  deep.forEach((nested, i) => {
    text = text.replace(JSON.stringify(`${DEEP}${i}`), nested);
  });
  return text;
}

function valueAt(root: Json, path: (string | number)[]): Json {
  let value = root;
  for (const key of path) value = (value as Record<string | number, Json>)[key]!;
  return value;
}

/** Any body: none, JSON, text, bytes (invalid UTF-8 too), a mutated chat body, or over the limit. */
function randomBody(g: Gen): string | Uint8Array<ArrayBuffer> | undefined {
  switch (g(fc.nat, { max: 7 })) {
    case 0:
      return undefined;
    case 1:
      return g(fc.json, { maxDepth: 3 });
    case 2:
      return g(fc.string, { unit: 'grapheme', maxLength: 200 });
    case 3:
      return new Uint8Array(g(fc.uint8Array, { maxLength: 300 }));
    case 4:
      return 'x'.repeat(BODY_LIMIT + g(fc.integer, { min: 1, max: 10_000 }));
    case 5:
      // Right at the limit, in multi-byte characters: the limit counts bytes.
      return `{"messages":"${'é'.repeat(Math.floor(BODY_LIMIT / 2) - g(fc.integer, { min: -20, max: 20 }))}"}`;
    default:
      return mutatedChatBody(g);
  }
}

// ---------------------------------------------------------------------------------------------
// State tokens for the stateless app

function baseState(sessionId: string): OrchestrationState {
  return { ...createState(sessionId, Date.now(), 0), version: 1 };
}

/** A well-formed state with odd contents, signed with a key the server holds (or another one). */
function signedOddState(g: Gen, sessionId: string): string {
  const state = baseState(sessionId);
  if (g(fc.boolean)) state.activeStep = pick(g, [...STEP_NAMES, 'NoSuchStep', '']);
  if (g(fc.boolean)) state.sequenceIndex = pick(g, [1, 2, 3, 4, 99, 2 ** 31, Number.MAX_SAFE_INTEGER]);
  if (g(fc.boolean)) state.recentlyUsedTools = g(toolHistory);
  if (g(fc.boolean)) state.agentId = pick(g, [...AGENT_IDS, 'ghost-agent', '']);
  if (g(fc.boolean)) state.lastMessageKey = g(fc.string, { maxLength: 20 });
  if (g(fc.boolean)) state.toolCallIds = g(callIds);
  if (g(fc.boolean)) state.cumulativeTokenUsage = { promptTokens: 1e12, completionTokens: 7, totalTokens: 3 };
  const keys = g(fc.nat, { max: 5 }) === 0 ? [FOREIGN_KEY] : [pick(g, [KEY_A, KEY_B])];
  const expired = g(fc.nat, { max: 5 }) === 0;
  return encodeStateToken(state, { keys, ttl: 1000, ...(expired ? { now: () => Date.now() - 10_000 } : {}) });
}

/** A state header: the issued token, a mutation of it, a forged one, or garbage. */
function stateToken(g: Gen, sessionId: string): string {
  const token = issuedToken;
  switch (g(fc.nat, { max: 8 })) {
    case 0:
      return token;
    case 1: {
      const at = g(fc.nat, { max: token.length - 1 });
      const replacement = pick(g, ['A', '_', '-', '.', '=', '+', '/', ' ', 'é']);
      return token.slice(0, at) + replacement + token.slice(at + 1);
    }
    case 2:
      return token.slice(0, g(fc.nat, { max: token.length - 1 }));
    case 3:
      return token + pick(g, ['.', '.x', 'A', '==', `.${token}`]);
    case 4: {
      const parts = token.split('.');
      const i = g(fc.nat, { max: parts.length - 1 });
      parts[i] = pick(g, [
        '',
        // The version is signed: the same payload labelled with the older, uncompressed format
        // must fail the signature, not be parsed as plain JSON.
        'v1',
        'AAAAAAAAAAA',
        parts[(i + 1) % parts.length]!,
        g(fc.base64String, { maxLength: 60 }),
      ]);
      return parts.join('.');
    }
    case 5:
    case 6:
      return signedOddState(g, sessionId);
    case 7:
      return headerValue(g);
    default:
      return `${pick(g, ['v1', 'v2'])}.${'A'.repeat(11)}.${'A'.repeat(g(fc.integer, { min: 1, max: 200_000 }))}.${'A'.repeat(43)}`;
  }
}

// ---------------------------------------------------------------------------------------------

const params = (runs: number) => ({ seed: SEED, numRuns: runs, endOnFailure: true });

describe.sequential(`HTTP API fuzzing (seed ${SEED})`, () => {
  it(`answers ${RUNS.random} random requests on every route with a 2xx or a well-formed 4xx`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.gen(), async (g) => {
        const method = pick(g, METHODS);
        const request: FuzzRequest = {
          app: pick(g, ['stateful', 'stateful', 'stateless', 'authed'] as const),
          method,
          path: randomPath(g),
          headers: garbageHeaders(g),
        };
        if (canHaveBody(method)) {
          const body = randomBody(g);
          if (body !== undefined) request.body = body;
        }
        await send(request);
      }),
      params(RUNS.random),
    );
  }, 120_000);

  it(`refuses ${RUNS.chatBodies} mutated chat bodies with a 4xx, or streams them to the end`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.gen(), async (g) => {
        const headers: [string, string][] = [['content-type', pick(g, CONTENT_TYPES)]];
        if (g(fc.nat, { max: 9 }) === 0) headers.push(...garbageHeaders(g));
        const agentId = g(fc.nat, { max: 19 }) === 0 ? pathParam(g) : pick(g, AGENT_IDS);
        const body = mutatedChatBody(g);
        await send({
          app: 'stateful',
          method: 'POST',
          path: `/api/chat/${agentId}`,
          headers,
          ...(body === undefined ? {} : { body }),
        });
      }),
      params(RUNS.chatBodies),
    );
  }, 120_000);

  it(`refuses ${RUNS.stateless} garbage, altered, foreign and odd x-orchestration-state tokens cleanly`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.gen(), async (g) => {
        const sessionId = g(fc.boolean) ? issuedSessionId : pick(g, [`fuzz-${g(fc.nat, { max: 9 })}`, 'a', '-x', '']);
        const token = stateToken(g, sessionId);
        const route = g(fc.nat, { max: 3 });
        const headers: [string, string][] = [
          ['content-type', 'application/json'],
          ['x-orchestration-state', token],
        ];
        let request: FuzzRequest;
        if (route === 0) {
          // Mostly broken bodies, so that only a few of these run a whole turn.
          const body = g(fc.nat, { max: 3 }) === 0 ? JSON.stringify(validBody(g)) : mutatedChatBody(g);
          request = {
            app: 'stateless',
            method: 'POST',
            path: `/api/chat/${pick(g, AGENT_IDS)}`,
            headers,
            ...(body === undefined ? {} : { body }),
          };
        } else {
          const id = g(fc.nat, { max: 3 }) === 0 ? pathParam(g) : sessionId || 'x';
          const [method, path] = pick(g, [
            ['GET', `/api/sessions/${id}`],
            ['DELETE', `/api/sessions/${id}`],
            ['POST', `/api/sessions/${id}/reset`],
          ] as const);
          request = { app: 'stateless', method, path, headers };
        }
        await send(request);
      }),
      params(RUNS.stateless),
    );
  }, 120_000);

  it(`answers ${RUNS.sessions} session-route requests with unicode and control characters in the id`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.gen(), async (g) => {
        const id = pathParam(g);
        const [method, path] = pick(g, [
          ['GET', `/api/sessions/${id}`],
          ['DELETE', `/api/sessions/${id}`],
          ['POST', `/api/sessions/${id}/reset`],
          ['PUT', `/api/sessions/${id}`],
          ['GET', `/api/agents/${id}`],
          ['POST', `/api/chat/${id}`],
        ] as const);
        await send({ app: pick(g, ['stateful', 'authed'] as const), method, path, headers: garbageHeaders(g) });
      }),
      params(RUNS.sessions),
    );
  }, 120_000);

  it('sent 10,000 requests, some of which ran whole chats, and every app still works', async () => {
    if (process.env.BATON_FUZZ_STATS) console.log(stats);
    expect(stats.sent).toBeGreaterThanOrEqual(TOTAL_RUNS);
    // Mutations must leave some bodies valid, or the streaming path would go unfuzzed.
    expect(stats.chatsStreamed).toBeGreaterThan(0);
    expect(stats.byStatus.get(200)).toBeGreaterThan(0);
    expect(logged.filter((entry) => entry.level >= 50)).toEqual([]);

    const turn = await validChat('stateful', 'cognitive-reasoner', RESEARCH);
    expect(turn.final.activeStep).toBe('ResearchMode');
    expect(turn.final.sequence?.completed).toBe(true);
    expect(turn.final.recentlyUsedTools).toEqual(['search', 'think', 'reflect']);
    const session = await apps.stateful.request(`/api/sessions/${turn.sessionId}`);
    expect(session.status).toBe(200);

    const stateless = await validChat('stateless', 'cognitive-reasoner', RESEARCH);
    expect(stateless.final.sequence?.completed).toBe(true);
    const carried = await apps.stateless.request(`/api/sessions/${stateless.sessionId}`, {
      headers: { 'x-orchestration-state': stateless.final.stateToken! },
    });
    expect(carried.status).toBe(200);

    const authed = await validChat('authed', 'cognitive-reasoner', RESEARCH, { authorization: `Bearer ${API_KEY}` });
    expect(authed.final.sequence?.completed).toBe(true);

    const health = await apps.stateful.request('/healthz');
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ ok: true });
  });
});
