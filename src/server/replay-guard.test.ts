/**
 * Stateless mode and its replay guard, as clients see them: a token continues its session
 * once, an older token is refused with `stale-state-token` (no rolling a session back), a
 * request refused before its turn costs nothing, processes sharing a replay store refuse what
 * any of them saw, and per-process marks never refuse the newest token behind a load balancer.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { chatTurn, errorOf, postJson, userMessage } from '../../test/helpers/chat-requests.js';
import { deleteRedisKeys, pingRedis, serviceAvailable } from '../../test/helpers/services.js';
import { redisStore } from '../stores/redis.js';
import { loadTemplate } from '../templates/load-template.js';
import type { SessionResponse } from './api-types.js';
import { type BatonApp, type CreateAppOptions, createApp } from './create-app.js';

const reasoner = await loadTemplate(new URL('../../examples/agents/cognitive-reasoner.json', import.meta.url).pathname);
const study = await loadTemplate(new URL('../../examples/agents/study-buddy.json', import.meta.url).pathname);
const RESEARCH = 'How many electric vehicles will be on the road by 2030?';
const CRITIQUE = 'Critique the argument that remote work improves productivity';
const KEYS = ['k'.repeat(32)];
const REDIS_URL = 'redis://127.0.0.1:6379';
const setIntervalOriginal = globalThis.setInterval;
const clearIntervalOriginal = globalThis.clearInterval;
const skipRedis = await serviceAvailable('redis', () => pingRedis(REDIS_URL));

const apps: BatonApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function statelessApp(stateless: Partial<NonNullable<CreateAppOptions['stateless']>> = {}): BatonApp {
  const app = createApp({
    agents: [reasoner, study],
    model: 'offline',
    webRoot: false,
    stateless: { keys: KEYS, ...stateless },
  });
  apps.push(app);
  return app;
}

/** One turn: the conversation so far plus `text`, continuing with `token` when given. */
async function turn(app: BatonApp, text: string, token?: string, extra: Record<string, unknown> = {}) {
  const result = await chatTurn(
    app,
    'cognitive-reasoner',
    { messages: [userMessage(text)], ...extra },
    token ? { 'x-orchestration-state': token } : {},
  );
  return { ...result, token: result.final.stateToken! };
}

function send(app: BatonApp, text: string, token?: string, extra: Record<string, unknown> = {}) {
  return postJson(
    app,
    '/api/chat/cognitive-reasoner',
    { messages: [userMessage(text)], ...extra },
    token ? { 'x-orchestration-state': token } : {},
  );
}

async function expectStale(response: Response) {
  expect(response.status).toBe(409);
  expect(await errorOf(response)).toMatchObject({ code: 'stale-state-token', path: 'header.x-orchestration-state' });
}

describe('the replay guard', () => {
  it('refuses an older token, so a session cannot be rolled back, and continues with the current one', async () => {
    const app = statelessApp();
    const first = await turn(app, RESEARCH);
    const second = await turn(app, CRITIQUE, first.token);
    expect(second.sessionId).toBe(first.sessionId);
    const progress = second.final.recentlyUsedTools;
    expect(progress.length).toBeGreaterThan(3);

    // Sending the first token again would undo the second turn's tools and token usage.
    await expectStale(await send(app, RESEARCH, first.token));
    await expectStale(
      await postJson(app, `/api/sessions/${first.sessionId}/reset`, '', { 'x-orchestration-state': first.token }),
    );

    const third = await turn(app, RESEARCH, second.token);
    expect(third.final.recentlyUsedTools.slice(0, progress.length)).toEqual(progress);
    expect(third.final.tokenUsage.totalTokens).toBeGreaterThan(second.final.tokenUsage.totalTokens);
  });

  it('spends a token once, even when two requests race with it', async () => {
    const app = statelessApp();
    const { token } = await turn(app, RESEARCH);
    const [a, b] = await Promise.all([send(app, CRITIQUE, token), send(app, CRITIQUE, token)]);
    const statuses = [a.status, b.status].sort();
    expect(statuses).toEqual([200, 409]);
    await Promise.all([a.text(), b.text()]);
  });

  it('refuses to start a new session under an id that already has tokens', async () => {
    const app = statelessApp();
    const mine = await turn(app, RESEARCH, undefined, { sessionId: 'my-session' });
    expect(mine.sessionId).toBe('my-session');
    // Without a token the session would restart from nothing: history and token usage gone.
    await expectStale(await send(app, RESEARCH, undefined, { sessionId: 'my-session' }));
    await turn(app, CRITIQUE, mine.token);
  });

  it('spends the token on a reset, which answers with the next one; a delete revokes the session', async () => {
    const app = statelessApp();
    const first = await turn(app, RESEARCH);
    const reset = await postJson(app, `/api/sessions/${first.sessionId}/reset`, '', {
      'x-orchestration-state': first.token,
    });
    expect(reset.status).toBe(200);
    expect(((await reset.json()) as SessionResponse).state.recentlyUsedTools).toEqual([]);
    const afterReset = reset.headers.get('x-orchestration-state')!;
    await expectStale(await send(app, RESEARCH, first.token));
    const next = await turn(app, RESEARCH, afterReset);

    const deleted = await app.request(`/api/sessions/${first.sessionId}`, {
      method: 'DELETE',
      headers: { 'x-orchestration-state': next.token },
    });
    expect(deleted.status).toBe(204);
    await expectStale(await send(app, RESEARCH, next.token));
  });

  it('keeps the token valid when a request is refused before its turn starts', async () => {
    const app = statelessApp();
    const { token } = await turn(app, RESEARCH);
    const malformed = await postJson(
      app,
      '/api/chat/cognitive-reasoner',
      {
        messages: [
          userMessage(RESEARCH),
          {
            id: 'a',
            role: 'assistant',
            parts: [{ type: 'tool-search', toolCallId: 'c', state: 'input-available', input: { query: 'x' } }],
          },
        ],
      },
      { 'x-orchestration-state': token },
    );
    expect(malformed.status).toBe(400);
    // Claimed, then refused: the session belongs to another agent.
    const foreign = await postJson(
      app,
      '/api/chat/study-buddy',
      { messages: [userMessage('Quiz me on photosynthesis')] },
      { 'x-orchestration-state': token },
    );
    expect(foreign.status).toBe(409);
    expect((await errorOf(foreign)).code).toBe('session-of-another-agent');
    await turn(app, CRITIQUE, token);
  });

  it('shows any validly signed token on GET: a read changes nothing and reveals only what the token holds', async () => {
    const app = statelessApp();
    const first = await turn(app, RESEARCH);
    await turn(app, CRITIQUE, first.token);
    const view = await app.request(`/api/sessions/${first.sessionId}`, {
      headers: { 'x-orchestration-state': first.token },
    });
    expect(view.status).toBe(200);
    expect(((await view.json()) as SessionResponse).state.recentlyUsedTools).toEqual(first.final.recentlyUsedTools);
  });

  it('accepts any validly signed token when turned off (replayStore: false)', async () => {
    const app = statelessApp({ replayStore: false });
    const first = await turn(app, RESEARCH);
    await turn(app, CRITIQUE, first.token);
    await turn(app, CRITIQUE, first.token);
  });

  it('runs one turn at a time per session in a process, even for two requests sent together with replayStore: false', async () => {
    // Both requests carry a valid token and no guard refuses it: if both ran, they would share
    // the one working copy of the session, and the first to end would drop it under the other
    // (whose tool then ran unrecorded, and whose token would carry a half-written state).
    const app = statelessApp({ replayStore: false });
    const first = await turn(app, RESEARCH);
    const responses = await Promise.all([send(app, CRITIQUE, first.token), send(app, CRITIQUE, first.token)]);
    const served = responses.filter((response) => response.status === 200);
    const refused = responses.filter((response) => response.status !== 200);
    expect(served).toHaveLength(1);
    expect(refused).toHaveLength(1);
    expect(await errorOf(refused[0]!)).toMatchObject({ code: 'stale-state-token', message: /already running/ });
    await served[0]!.text();
    // The session is free again once that turn ended.
    await turn(app, CRITIQUE, first.token);
  });
});

describe('several processes', () => {
  it('never refuses the newest token when a load balancer alternates between processes with their own marks', async () => {
    const a = statelessApp();
    const b = statelessApp();
    let token: string | undefined;
    for (const [index, app] of [a, b, a, b, a].entries()) {
      token = (await turn(app, index % 2 === 0 ? RESEARCH : CRITIQUE, token)).token;
    }
  });

  it('refuses an older token on every process that shares a SQLite replay store', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'baton-replay-'));
    dirs.push(dir);
    const replayStore = `sqlite:${join(dir, 'marks.db')}`;
    const a = statelessApp({ replayStore });
    const b = statelessApp({ replayStore });
    const first = await turn(a, RESEARCH);
    await turn(b, CRITIQUE, first.token);
    await expectStale(await send(a, RESEARCH, first.token));
  });

  it.skipIf(skipRedis)('refuses an older token on every process that shares a Redis replay store', async () => {
    const prefix = `baton-test-replay-${randomUUID()}:`;
    // Two clients, as two processes would have.
    const stores = [redisStore({ url: REDIS_URL, prefix }), redisStore({ url: REDIS_URL, prefix })];
    try {
      const a = statelessApp({ replayStore: stores[0] });
      const b = statelessApp({ replayStore: stores[1] });
      const first = await turn(a, RESEARCH);
      const second = await turn(b, CRITIQUE, first.token);
      await expectStale(await send(b, RESEARCH, first.token));
      await expectStale(await send(a, RESEARCH, first.token));
      await turn(a, RESEARCH, second.token);
    } finally {
      await Promise.all(stores.map((store) => store.close()));
      await deleteRedisKeys(REDIS_URL, prefix);
    }
  });
});

describe('resources', () => {
  it('leaves no timer behind per request, refused or served', async () => {
    const app = statelessApp();
    const { token } = await turn(app, RESEARCH);
    await turn(app, CRITIQUE, token);
    // Timers that are unref'ed do not show in process.getActiveResourcesInfo(): count them.
    const live = new Set<unknown>();
    const setInterval = vi.spyOn(globalThis, 'setInterval').mockImplementation(((
      ...args: Parameters<typeof globalThis.setInterval>
    ) => {
      const timer = setIntervalOriginal(...args);
      live.add(timer);
      return timer;
    }) as typeof globalThis.setInterval);
    const clearInterval = vi.spyOn(globalThis, 'clearInterval').mockImplementation((timer) => {
      live.delete(timer);
      clearIntervalOriginal(timer);
    });
    try {
      for (let i = 0; i < 70; i++) {
        const response = await send(app, RESEARCH, token);
        expect(response.status).toBe(409);
        await response.text();
      }
      let current: string | undefined;
      for (let i = 0; i < 10; i++) current = (await turn(app, RESEARCH, current)).token;
    } finally {
      setInterval.mockRestore();
      clearInterval.mockRestore();
    }
    expect(live.size).toBe(0);
  });
});
