/**
 * Against real `baton serve` processes, as a client on the network meets them: a history with
 * a dangling tool call is a 400 naming the part, a replayed state token is refused, and a
 * burst beyond the turn limit and its queue is answered at once with 503 and Retry-After
 * while the admitted turns complete.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiErrorBody, OrchestrationSnapshot } from '../src/server/api-types.js';
import { type ServeProcess, startServeProcess, stopServeProcess } from './helpers/serve-process.js';

const START_TIMEOUT_MS = 90_000;
const RESEARCH = 'How many electric vehicles will be on the road by 2030?';
const STATE_KEY = 'serve-turns-test-key-'.padEnd(40, 'k');

let stateless: ServeProcess;
let limited: ServeProcess;

/** `baton serve` with the offline model on a free port, the parent's BATON_* settings left out. */
function start(name: string, args: string[], env: Record<string, string> = {}): Promise<ServeProcess> {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('BATON_')));
  return startServeProcess(['examples/agents', '--model', 'offline', '--port', '0', '--log-level', 'silent', ...args], {
    name,
    env: { ...inherited, FORCE_COLOR: '0', ...env },
    timeoutMs: START_TIMEOUT_MS - 5_000,
  });
}

beforeAll(async () => {
  [stateless, limited] = await Promise.all([
    start('stateless', ['--stateless'], { BATON_STATE_KEYS: STATE_KEY }),
    // One turn at a time, one waiting; slow enough for a burst to find both taken.
    start('limited', ['--store', 'memory:', '--max-turns', '1', '--max-queued-turns', '1', '--offline-delay', '2']),
  ]);
}, START_TIMEOUT_MS);

afterAll(async () => {
  await Promise.all([stateless, limited].filter(Boolean).map((server) => stopServeProcess(server)));
});

function chat(server: ServeProcess, messages: unknown[], headers: Record<string, string> = {}) {
  return fetch(`${server.url}/api/chat/cognitive-reasoner`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ messages }),
  });
}

const user = (text: string) => ({ id: crypto.randomUUID(), role: 'user', parts: [{ type: 'text', text }] });

/** The final snapshot of a chat stream that must have succeeded. */
async function finalOf(response: Response): Promise<OrchestrationSnapshot> {
  const text = await response.text();
  expect(response.status, text.slice(0, 500)).toBe(200);
  const parts = text
    .split('\n')
    .filter((line) => line.startsWith('data: {'))
    .map((line) => JSON.parse(line.slice(6)) as { type: string; data?: OrchestrationSnapshot });
  expect(parts.filter((part) => part.type === 'error')).toEqual([]);
  return parts.filter((part) => part.type === 'data-orchestration').at(-1)!.data!;
}

describe('baton serve', () => {
  it('answers a history with a dangling tool call with 400 at the part, not a failed stream', async () => {
    const dangling = {
      id: 'a1',
      role: 'assistant',
      parts: [{ type: 'tool-search', toolCallId: 'c1', state: 'input-available', input: { query: 'EVs' } }],
    };
    const response = await chat(stateless, [user(RESEARCH), dangling, user('and then?')]);
    expect(response.status).toBe(400);
    expect(((await response.json()) as ApiErrorBody).error).toMatchObject({
      code: 'invalid-history',
      path: 'body.messages[1].parts[0].state',
    });
  });

  it('refuses a replayed state token with 409 stale-state-token, and continues with the current one', async () => {
    const first = await finalOf(await chat(stateless, [user(RESEARCH)]));
    const second = await finalOf(
      await chat(stateless, [user('Critique the argument that remote work improves productivity')], {
        'x-orchestration-state': first.stateToken!,
      }),
    );
    const replay = await chat(stateless, [user(RESEARCH)], { 'x-orchestration-state': first.stateToken! });
    expect(replay.status).toBe(409);
    expect(((await replay.json()) as ApiErrorBody).error.code).toBe('stale-state-token');
    const third = await finalOf(
      await chat(stateless, [user(RESEARCH)], { 'x-orchestration-state': second.stateToken! }),
    );
    expect(third.recentlyUsedTools.slice(0, second.recentlyUsedTools.length)).toEqual(second.recentlyUsedTools);
  });

  it('answers a burst beyond its turn limit and queue with 503 and Retry-After at once, and completes the admitted turns', async () => {
    const answers = await Promise.all(
      Array.from({ length: 6 }, async () => {
        const response = await chat(limited, [user(RESEARCH)]);
        const answeredAt = performance.now();
        const body = await response.text();
        return { response, body, answeredAt, endedAt: performance.now() };
      }),
    );
    const refused = answers.filter(({ response }) => response.status === 503);
    const admitted = answers.filter(({ response }) => response.status === 200);
    expect(admitted).toHaveLength(2);
    expect(refused).toHaveLength(4);
    for (const { response, body } of refused) {
      expect(Number(response.headers.get('retry-after'))).toBeGreaterThan(0);
      expect((JSON.parse(body) as ApiErrorBody).error.code).toBe('server-busy');
    }
    for (const { body } of admitted) {
      expect(body).not.toContain('"type":"error"');
      expect(body).toContain('"final":true');
    }
    // Refused at once: before the first admitted turn had even finished streaming.
    const lastRefusal = Math.max(...refused.map(({ answeredAt }) => answeredAt));
    expect(lastRefusal).toBeLessThan(Math.min(...admitted.map(({ endedAt }) => endedAt)));
  });
});
