/**
 * Scale-out: two `baton serve` processes on different ports share one Redis store, and a load
 * balancer could send any request to either. One session is served alternately by both
 * (A, B, A, B ... with messages that switch the cognitive reasoner between modes, so the step
 * and its sequence change every turn), then by both at once. Afterwards the session's history
 * (`recentlyUsedTools`, read through either server) holds every tool use the streams reported
 * as executed (`tool-output-available` chunks): none lost, none invented, each turn's in order.
 * A session created on one server also belongs to its agent on the other (409 for another).
 *
 * Needs Redis at 127.0.0.1:6379: skipped without it, a failure with BATON_REQUIRE_SERVICES=1.
 */
import { randomUUID } from 'node:crypto';
import type { UIMessageChunk } from 'ai';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_HISTORY_LIMIT } from '../src/core/state.js';
import type { ApiErrorBody, OrchestrationSnapshot, SessionResponse } from '../src/server/api-types.js';
import { redisSessionKey } from '../src/stores/redis.js';
import { COGNITIVE_MODES } from './helpers/cognitive-modes.js';
import { type ServeProcess, startServeProcess, stopServeProcess } from './helpers/serve-process.js';
import { deleteRedisKeys, pingRedis, serviceAvailable } from './helpers/services.js';

const REDIS_URL = 'redis://127.0.0.1:6379';
/** Two cold `tsx` starts on a loaded two-core machine can take a while. */
const START_TIMEOUT_MS = 90_000;
const AGENT = 'cognitive-reasoner';

const redisSkip = await serviceAvailable('redis', () => pingRedis(REDIS_URL));

type Server = ServeProcess;

/** Starts `baton serve` on a free port and resolves once it printed where it listens. */
function startServer(name: string, storeUrl: string): Promise<Server> {
  // The parent's BATON_* settings (an API key, a model) must not change what the servers do.
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('BATON_')));
  return startServeProcess(
    ['examples/agents', '--model', 'offline', '--port', '0', '--store', storeUrl, '--log-level', 'silent'],
    { name, env, timeoutMs: START_TIMEOUT_MS - 5_000 },
  );
}

const stopServer = (server: Server) => stopServeProcess(server);

/** What one chat turn streamed. */
interface Turn {
  server: string;
  text: string;
  /** Tools whose output the stream delivered, in stream order: the ones that ran. */
  executed: string[];
  final: OrchestrationSnapshot;
}

/** One chat turn on `server`, read to the end of its stream. */
async function chat(server: Server, sessionId: string, text: string, messageId: string): Promise<Turn> {
  const response = await fetch(`${server.url}/api/chat/${AGENT}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ sessionId, messages: [{ id: messageId, role: 'user', parts: [{ type: 'text', text }] }] }),
  });
  const body = await response.text();
  expect(response.status, `${server.name}: ${body}`).toBe(200);
  expect(response.headers.get('x-session-id')).toBe(sessionId);
  const chunks = body
    .split('\n')
    .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
    .map((line) => JSON.parse(line.slice('data: '.length)) as UIMessageChunk);
  expect(chunks.filter((chunk) => chunk.type === 'error')).toEqual([]);
  const names = new Map<string, string>();
  const executed: string[] = [];
  for (const chunk of chunks) {
    if (chunk.type === 'tool-input-start' || chunk.type === 'tool-input-available') {
      names.set(chunk.toolCallId, chunk.toolName);
    } else if (chunk.type === 'tool-output-available') {
      executed.push(names.get(chunk.toolCallId) ?? `unknown call ${chunk.toolCallId}`);
    }
  }
  const snapshots = chunks
    .filter((chunk) => chunk.type === 'data-orchestration')
    .map((chunk) => (chunk as unknown as { data: OrchestrationSnapshot }).data);
  const final = snapshots.at(-1)!;
  expect(final.final).toBe(true);
  return { server: server.name, text, executed, final };
}

async function session(server: Server, sessionId: string): Promise<SessionResponse> {
  const response = await fetch(`${server.url}/api/sessions/${sessionId}`);
  expect(response.status).toBe(200);
  return (await response.json()) as SessionResponse;
}

/** True when `merged` interleaves `a` and `b`, each kept in its own order. */
function isInterleaving(a: readonly string[], b: readonly string[], merged: readonly string[]): boolean {
  if (merged.length !== a.length + b.length) return false;
  // reachable[j]: a[0..i) and b[0..j) can make merged[0..i+j).
  let reachable = Array.from({ length: b.length + 1 }, (_, j) => b.slice(0, j).every((tool, k) => merged[k] === tool));
  for (let i = 1; i <= a.length; i++) {
    const next = new Array<boolean>(b.length + 1).fill(false);
    for (let j = 0; j <= b.length; j++) {
      const at = merged[i + j - 1];
      next[j] = (reachable[j]! && a[i - 1] === at) || (j > 0 && next[j - 1]! && b[j - 1] === at);
    }
    reachable = next;
  }
  return reachable[b.length]!;
}

const MODES = COGNITIVE_MODES;

describe.skipIf(redisSkip)('two server processes sharing one Redis store', () => {
  // A namespace of this run's own: ioredis takes `keyPrefix` from the URL's query, and the
  // Redis store puts it before every key it writes (scripts included).
  const prefix = `baton-scale-out:${randomUUID().slice(0, 8)}:`;
  const storeUrl = `${REDIS_URL}/0?keyPrefix=${encodeURIComponent(prefix)}`;
  let a: Server;
  let b: Server;

  beforeAll(async () => {
    [a, b] = await Promise.all([startServer('A', storeUrl), startServer('B', storeUrl)]);
    expect(a.url).not.toBe(b.url);
  }, START_TIMEOUT_MS);

  afterAll(async () => {
    await Promise.all([a, b].filter(Boolean).map((server) => stopServer(server)));
    await deleteRedisKeys(REDIS_URL, prefix);
  });

  it('loses no tool use of a session served alternately, then concurrently, by both', async () => {
    const sessionId = `scale-out-${randomUUID()}`;
    const sequential: Turn[] = [];
    for (const [i, mode] of MODES.entries()) {
      const server = i % 2 === 0 ? a : b;
      const turn = await chat(server, sessionId, mode.text, `m${i}`);
      // The other process sees the new mode and its finished sequence: the state is shared.
      expect(turn.final.activeStep, `turn ${i} on ${server.name}`).toBe(mode.step);
      expect(turn.executed, `turn ${i} on ${server.name}`).toEqual(mode.tools);
      expect(turn.final.sequence?.completed).toBe(true);
      sequential.push(turn);
    }
    const afterSequential = sequential.flatMap((turn) => turn.executed);
    expect((await session(b, sessionId)).state.recentlyUsedTools).toEqual(afterSequential);

    // Reset through B, seen by A: the concurrent rounds below start from an empty history, so
    // that even their worst case (every turn using all its model steps) fits in the history.
    const reset = await fetch(`${b.url}/api/sessions/${sessionId}/reset`, { method: 'POST' });
    expect(reset.status).toBe(200);
    expect((await session(a, sessionId)).state.recentlyUsedTools).toEqual([]);

    // Both processes at once on the same session: different modes, then the same one. A turn
    // whose message was superseded by the other's newer one may start no tools (docs/behaviour.md),
    // so a round may run the tools of one turn only; what matters here is that every use that
    // ran is recorded, in each turn's order.
    const rounds: [Turn, Turn][] = [];
    rounds.push(
      await Promise.all([chat(a, sessionId, MODES[0].text, 'c1-a'), chat(b, sessionId, MODES[2].text, 'c1-b')]),
    );
    rounds.push(
      await Promise.all([chat(b, sessionId, MODES[3].text, 'c2-b'), chat(a, sessionId, MODES[3].text, 'c2-a')]),
    );

    const fromA = await session(a, sessionId);
    const fromB = await session(b, sessionId);
    expect(fromA.agentId).toBe(AGENT);
    expect(fromB.state.recentlyUsedTools).toEqual(fromA.state.recentlyUsedTools);
    const history = fromA.state.recentlyUsedTools;
    const executedCount = rounds.flat().reduce((n, turn) => n + turn.executed.length, 0);
    // The history keeps the latest 50 uses; beyond that this check would need the dropped ones.
    expect(executedCount).toBeLessThanOrEqual(DEFAULT_HISTORY_LIMIT);
    // Every executed use recorded exactly once: nothing lost, nothing doubled.
    expect(history).toHaveLength(executedCount);
    let at = 0;
    for (const [first, second] of rounds) {
      const length = first.executed.length + second.executed.length;
      // Concurrent turns interleave, but each one's uses keep their order.
      const merged = history.slice(at, at + length);
      expect(
        isInterleaving(first.executed, second.executed, merged),
        `${JSON.stringify(merged)} interleaves ${JSON.stringify(first.executed)} (${first.server}) and ${JSON.stringify(second.executed)} (${second.server})`,
      ).toBe(true);
      at += length;
    }
    expect(rounds.every(([first, second]) => first.executed.length + second.executed.length > 0)).toBe(true);

    // The state really lives in Redis, under this run's prefix.
    const admin = new Redis(REDIS_URL);
    try {
      expect(await admin.exists(redisSessionKey(sessionId, `${prefix}baton:`))).toBe(1);
    } finally {
      admin.disconnect();
    }
  }, 120_000);

  it('shows a session created on A on B, owned by the same agent (409 for another)', async () => {
    const sessionId = `scale-out-owner-${randomUUID()}`;
    await chat(a, sessionId, MODES[1].text, 'o1');
    const seen = await session(b, sessionId);
    expect(seen.agentId).toBe(AGENT);
    expect(seen.state.activeStep).toBe('ProblemSolvingMode');
    expect(seen.state.recentlyUsedTools).toEqual(MODES[1].tools);

    const other = await fetch(`${b.url}/api/chat/study-buddy`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        sessionId,
        messages: [{ id: 'o2', role: 'user', parts: [{ type: 'text', text: 'Quiz me' }] }],
      }),
    });
    expect(other.status).toBe(409);
    const error = ((await other.json()) as ApiErrorBody).error;
    expect(error).toMatchObject({ code: 'session-of-another-agent', path: 'body.sessionId' });
    expect(error.message).toContain(AGENT);

    // The refused request changed nothing: A still serves the session to its agent.
    const again = await chat(a, sessionId, MODES[0].text, 'o3');
    expect(again.executed).toEqual(MODES[0].tools);
    expect((await session(b, sessionId)).state.recentlyUsedTools).toEqual([...MODES[1].tools, ...MODES[0].tools]);

    // Deleted on B, gone on A.
    expect((await fetch(`${b.url}/api/sessions/${sessionId}`, { method: 'DELETE' })).status).toBe(204);
    expect((await fetch(`${a.url}/api/sessions/${sessionId}`)).status).toBe(404);
  }, 60_000);
});
