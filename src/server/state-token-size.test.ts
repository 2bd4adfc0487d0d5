/**
 * Stateless sessions carry their state in the `x-orchestration-state` request header, and Node
 * answers a request whose headers are over its limit (16 KiB by default) with a bare `431`
 * before any route runs. A session's state keeps the ids of its latest 256 tool calls, so a
 * long session outgrows the header: the token's payload is compressed so that sessions with
 * hosted providers' ids fit, and when even that is too long the server must say so when it would
 * issue such a token, not hand out one that makes the next request fail with a status that
 * names nothing.
 */
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { maxHeaderSize } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { tool } from 'ai';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { compileOrchestration } from '../core/compile.js';
import { latestUserMessage } from '../core/messages.js';
import type { AgentTemplate } from '../core/schema.js';
import { APPROVALS_LIMIT, createState, type OrchestrationState, TOOL_CALL_IDS_LIMIT } from '../core/state.js';
import { transition } from '../core/transition.js';
import { MAX_CALL_ID_LENGTH } from '../orchestration/turn.js';
import { decodeStateToken, encodeStateToken } from '../stores/state-token.js';
import { ScriptedModel } from '../testing/scripted-model.js';
import { createApp } from './create-app.js';
import { MAX_STATE_TOKEN_LENGTH, STATE_HEADER } from './session-source.js';

const KEY = 'k'.repeat(32);
const template: AgentTemplate = {
  id: 'busy',
  name: 'Busy',
  tools: ['search'],
  options: { maxSteps: 4 },
  orchestration: { defaultStep: 'Work', steps: [{ name: 'Work', availableTools: { allowed: ['search'] } }] },
};
/** Headers a browser's chat request sends beside the token (Chrome, same origin, no cookies). */
const BROWSER_HEADERS: Record<string, string> = {
  'content-type': 'application/json',
  accept: '*/*',
  'accept-encoding': 'gzip, deflate, br, zstd',
  'accept-language': 'en-GB,en-US;q=0.9,en;q=0.8,de;q=0.7',
  origin: 'http://127.0.0.1',
  referer: 'http://127.0.0.1/chat/busy?session=0f9c1a52-5b0e-4a43-9d8e-6b1f2d3c4e5f',
  'sec-ch-ua': '"Chromium";v="126", "Google Chrome";v="126", "Not-A.Brand";v="99"',
  'sec-ch-ua-mobile': '?0',
  'sec-ch-ua-platform': '"macOS"',
  'sec-fetch-dest': 'empty',
  'sec-fetch-mode': 'cors',
  'sec-fetch-site': 'same-origin',
  'user-agent':
    'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36',
};

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

/** A stateless app behind a real Node HTTP server (Node's own header limit applies), and its URL. */
async function listen(model: ScriptedModel): Promise<string> {
  const app = createApp({
    agents: [template],
    model,
    tools: { search: tool({ inputSchema: z.object({}), execute: async () => 'found' }) },
    stateless: { keys: [KEY], replayStore: false },
    webRoot: false,
    // The refusal is logged as a failed chat stream; the test reads it from the stream instead.
    logger: pino({ level: 'silent' }),
  });
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  await once(server, 'listening');
  closers.push(
    () => app.close(),
    () => new Promise<void>((resolve) => server.close(() => resolve())),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function chatRequest(url: string, text: string, token?: string): Promise<Response> {
  return fetch(`${url}/api/chat/busy`, {
    method: 'POST',
    headers: { ...BROWSER_HEADERS, ...(token === undefined ? {} : { [STATE_HEADER]: token }) },
    body: JSON.stringify({ messages: [{ id: crypto.randomUUID(), role: 'user', parts: [{ type: 'text', text }] }] }),
  });
}

/** The JSON chunks of the UI message stream. */
async function chunksOf(response: Response): Promise<{ type: string; [field: string]: unknown }[]> {
  return (await response.text())
    .split('\n')
    .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
    .map((line) => JSON.parse(line.slice('data: '.length)));
}

/** Bytes that look random (so that they compress as badly as real ids), the same on every run. */
function noise(seed: string, length: number): Buffer {
  const blocks = Array.from({ length: Math.ceil(length / 32) }, (_, i) =>
    createHash('sha256').update(`${seed} ${i}`).digest(),
  );
  return Buffer.concat(blocks).subarray(0, length);
}

/**
 * A call id of the longest length a session keeps as it is, random base64url as some providers'
 * ids are: it compresses to about 3/4 of its length, the worst any real id does.
 */
const longId = (n: number) =>
  `call_${noise(`long ${n}`, 45)
    .toString('base64url')
    .slice(0, MAX_CALL_ID_LENGTH - 5)}`;

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
/** An id as OpenAI's: `call_` and 24 random base62 characters. */
const hostedId = (seed: string) =>
  `call_${Array.from(noise(seed, 24), (byte) => BASE62[byte % BASE62.length]).join('')}`;

/**
 * A long session with a hosted provider's ids, at the bounds a state keeps: the latest 256 call
 * ids, 16 approvals waiting to be used, 8 calls running (see `src/core/state.ts`).
 */
function longSession(now: number): OrchestrationState {
  const tools = ['search', 'fetch_page', 'read_file', 'write_file', 'run_tests', 'summarize'];
  return {
    ...createState(crypto.randomUUID(), now - 3_600_000),
    lastAccessed: now,
    agentId: 'busy',
    activeStep: 'Work',
    version: 412,
    toolUses: 248,
    sequenceIndex: 3,
    lastMessageKey: `m-${noise('message', 12).toString('base64url')}`,
    cumulativeTokenUsage: { promptTokens: 1_834_211, completionTokens: 92_133, totalTokens: 1_926_344 },
    stepTokens: { Work: 1_926_344 },
    recentlyUsedTools: Array.from({ length: 50 }, (_, i) => tools[i % tools.length]!),
    toolCallIds: Array.from({ length: TOOL_CALL_IDS_LIMIT }, (_, i) => hostedId(`id ${i}`)),
    counts: { 'rules[0]': { n: 212, at: Array.from({ length: 10 }, (_, i) => now - i * 60_000) } },
    approvals: Array.from({ length: APPROVALS_LIMIT }, (_, i) => ({
      id: hostedId(`approval ${i}`),
      tool: tools[i % tools.length]!,
      digest: noise(`digest ${i}`, 32).toString('base64url'),
      rule: `steps[0].rules[${i % 3}]`,
      at: `${noise(`at ${i}`, 4).readUInt32BE().toString(36)}.${noise(`at' ${i}`, 4).readUInt32BE().toString(36)}`,
    })),
    pending: Array.from({ length: 8 }, (_, i) => ({
      kind: 'call' as const,
      id: hostedId(`running ${i}`),
      tool: tools[i % tools.length]!,
      expiresAt: now + 60_000 + i,
      limits: ['rules[0]'],
      ...(i === 0 ? { message: { key: `m-${noise('message', 12).toString('base64url')}`, matches: [0, 2] } } : {}),
    })),
  };
}

/** The length a token of the uncompressed format before `v2` (`v1`) would have for `state`. */
function v1Length(state: OrchestrationState, exp: number): number {
  const payload = Buffer.from(JSON.stringify({ s: state, exp }), 'utf8').toString('base64url');
  return 'v1.'.length + 11 + 1 + payload.length + 1 + 43;
}

describe('state tokens and the request header limit', () => {
  it('leaves room for a browser request around the longest token it issues', () => {
    expect(MAX_STATE_TOKEN_LENGTH).toBe(maxHeaderSize - 2048);
    const headers = Object.entries(BROWSER_HEADERS).reduce((sum, [k, v]) => sum + k.length + v.length + 4, 0);
    expect(headers).toBeLessThan(1024);
  });

  it('issues a token for a long session with hosted ids, which the uncompressed format could not', () => {
    const now = Date.now();
    const state = longSession(now);
    const token = encodeStateToken(state, { keys: [KEY], now: () => now });
    expect(decodeStateToken(token, { keys: [KEY], now: () => now })).toEqual(state);
    // Measured: about 17,400 characters uncompressed, about 9,400 compressed.
    expect(v1Length(state, now + state.ttl)).toBeGreaterThan(MAX_STATE_TOKEN_LENGTH + 2000);
    expect(token.length).toBeLessThan(MAX_STATE_TOKEN_LENGTH - 4000);
  });

  it('carries a session under a rolling-window limit of 2,000 a day through 100,000 calls within the budget', () => {
    // The state a stateless session carries, made by the transition the server runs, with a
    // hosted provider's ids; it goes through a token and back every 100 calls, as it would
    // through requests (one per call would take a minute here, and change nothing).
    const plan = compileOrchestration({
      rules: [{ tools: ['search'], limit: { max: 2_000, per: '1d' }, reason: 'Enough for today' }],
      steps: [{ name: 'Work', isDefault: true }],
    });
    const message = latestUserMessage([{ role: 'user', content: 'search all day', id: 'm1' }]);
    let now = Date.UTC(2026, 0, 5);
    const at = () => ({ now, message, leaseMs: 60_000 });
    let state = transition(plan, createState(crypto.randomUUID(), now), { type: 'user-message' }, at()).state;
    let longest = 0;
    let allowed = 0;
    // About as fast as the limit lets calls through: 2,000 a day, 43.2 s apart on average.
    const gaps = noise('gaps', 100_000);
    for (let i = 0; i < 100_000; i++) {
      now += Math.floor((gaps[i]! / 255) * 86_400);
      const id = hostedId(`window ${i}`);
      const requested = transition(
        plan,
        state,
        { type: 'tool-requested', tool: 'search', toolCallId: id, agentTools: ['search'] },
        at(),
      );
      state = requested.state;
      if (requested.decision?.type === 'tool' && requested.decision.allowed) {
        allowed++;
        state = transition(plan, state, { type: 'tool-completed', toolCallId: id }, at()).state;
      }
      if (i % 100 === 99) {
        const token = encodeStateToken(state, { keys: [KEY], now: () => now });
        longest = Math.max(longest, token.length);
        state = decodeStateToken(token, { keys: [KEY], now: () => now });
      }
    }
    expect(allowed).toBeGreaterThan(90_000); // the limit refused some, and the session went on
    // Measured: at most 7,721 characters, the same from the first day on, of which the window's
    // count takes about 520; with the time of every call of the window kept, the token passed
    // the budget after about 1,050 calls.
    expect(longest).toBeLessThan(MAX_STATE_TOKEN_LENGTH);
    expect(state.counts?.['rules[0]']?.at?.length).toBeLessThanOrEqual(61);
    const withoutCounts = encodeStateToken({ ...state, counts: undefined }, { keys: [KEY], now: () => now });
    expect(encodeStateToken(state, { keys: [KEY], now: () => now }).length - withoutCounts.length).toBeLessThan(700);
  }, 120_000);

  it('refuses, with an error that says what to do, to issue a token no request could carry back', async () => {
    // A session at the bounds: 256 remembered call ids of the longest length kept as they are,
    // random, so that they compress no better than real ones.
    const calls = Array.from({ length: TOOL_CALL_IDS_LIMIT + 8 }, (_, i) => ({
      toolName: 'search',
      input: {},
      toolCallId: longId(i),
    }));
    const url = await listen(new ScriptedModel([{ toolCalls: calls }, { text: 'done' }]));
    const response = await chatRequest(url, 'search a lot');
    expect(response.status).toBe(200);
    const chunks = await chunksOf(response);
    const tokens = chunks
      .filter((chunk) => chunk.type === 'data-orchestration')
      .map((chunk) => (chunk.data as { stateToken?: string }).stateToken)
      .filter((token) => token !== undefined);
    // Without the bound, the turn hands out a token that every later request fails with: Node's
    // bare 431, before Baton sees the request.
    for (const token of tokens) {
      const next = await chatRequest(url, 'and more', token);
      expect(next.status).not.toBe(431);
      await next.body?.cancel();
    }
    expect(tokens).toEqual([]);
    const error = chunks.find((chunk) => chunk.type === 'error');
    expect(error?.errorText).toMatch(/no longer fits in a state token/);
    expect(error?.errorText).toContain(`at most ${MAX_STATE_TOKEN_LENGTH}`);
    expect(error?.errorText).toMatch(/start a new session/);
    expect(error?.errorText).toMatch(/--store/);
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'error' });
  });

  it('issues a token up to the bound, and a browser request carries it back', async () => {
    const url = await listen(new ScriptedModel([{ text: 'hello' }]));
    const first = await chunksOf(await chatRequest(url, 'hi'));
    const issued = first.findLast((chunk) => chunk.type === 'data-orchestration')?.data as { stateToken: string };
    const carried = decodeStateToken(issued.stateToken, { keys: [KEY] });
    // The same session, grown to just under the bound (signed with the server's key).
    const state = { ...carried, toolCallIds: [] as string[] };
    let token = encodeStateToken(state, { keys: [KEY] });
    for (let i = 0; ; i++) {
      const next = encodeStateToken({ ...state, toolCallIds: [...state.toolCallIds, longId(i)] }, { keys: [KEY] });
      if (next.length > MAX_STATE_TOKEN_LENGTH) break;
      state.toolCallIds.push(longId(i));
      token = next;
    }
    expect(token.length).toBeGreaterThan(MAX_STATE_TOKEN_LENGTH - 200);
    const response = await fetch(`${url}/api/sessions/${state.sessionId}`, {
      headers: { ...BROWSER_HEADERS, [STATE_HEADER]: token },
    });
    expect(response.status).toBe(200);
    await response.body?.cancel();
  });
});
