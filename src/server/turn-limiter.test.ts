/**
 * Fair load: turns beyond the limit wait in arrival order, turns beyond the queue are refused
 * at once with `503 server-busy` and `Retry-After`, and a client that leaves the queue frees
 * its place.
 */
import type { LanguageModelV4 } from '@ai-sdk/provider';
import { type Logger, pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { chunksOf, errorOf, postJson, userMessage } from '../../test/helpers/chat-requests.js';
import { createOfflineModel } from '../ai-sdk/offline-model.js';
import { loadTemplate } from '../templates/load-template.js';
import { type BatonApp, createApp } from './create-app.js';
import { eventLoopPacer, nextEventLoopTurn } from './event-loop.js';
import { HttpError } from './http-errors.js';
import { createTurnLimiter } from './turn-limiter.js';

const reasoner = await loadTemplate(new URL('../../examples/agents/cognitive-reasoner.json', import.meta.url).pathname);
const RESEARCH = 'How many electric vehicles will be on the road by 2030?';

describe('createTurnLimiter', () => {
  it('runs at most maxTurns at once and hands freed slots to waiters in arrival order', async () => {
    const limiter = createTurnLimiter({ maxTurns: 2, maxQueued: 10 });
    const first = await limiter.acquire();
    const second = await limiter.acquire();
    const order: number[] = [];
    const waiting = [3, 4, 5].map((n) =>
      limiter.acquire().then((release) => {
        order.push(n);
        return release;
      }),
    );
    await Promise.resolve();
    expect({ running: limiter.running, queued: limiter.queued }).toEqual({ running: 2, queued: 3 });
    second();
    second(); // a second call frees nothing more
    const third = await waiting[0]!;
    expect({ running: limiter.running, queued: limiter.queued }).toEqual({ running: 2, queued: 2 });
    first();
    third();
    const [fourth, fifth] = await Promise.all([waiting[1]!, waiting[2]!]);
    expect(order).toEqual([3, 4, 5]);
    fourth();
    fifth();
    expect({ running: limiter.running, queued: limiter.queued }).toEqual({ running: 0, queued: 0 });
  });

  it('refuses beyond the queue at once, with server-busy and Retry-After', async () => {
    const limiter = createTurnLimiter({ maxTurns: 1, maxQueued: 1, retryAfterSeconds: 3 });
    await limiter.acquire();
    void limiter.acquire();
    const refusal = await limiter.acquire().catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(HttpError);
    expect(refusal).toMatchObject({ code: 'server-busy', status: 503, headers: { 'retry-after': '3' } });
  });

  it('drops a waiter whose signal aborts, so the next one takes its place in the queue', async () => {
    const limiter = createTurnLimiter({ maxTurns: 1, maxQueued: 1 });
    const running = await limiter.acquire();
    const leaving = new AbortController();
    const left = limiter.acquire(leaving.signal).catch((error: unknown) => error);
    leaving.abort(new Error('client gone'));
    expect(((await left) as Error).message).toBe('client gone');
    expect(limiter.queued).toBe(0);
    const next = limiter.acquire();
    running();
    (await next)();
    expect(limiter.running).toBe(0);
  });
});

describe('turns beyond minTurns', () => {
  /** A pacer that admits while `open` is true, and can be told that this changed. */
  function manualPacer() {
    let wake: () => void = () => undefined;
    const pacer = {
      open: false,
      asked: 0,
      admit() {
        pacer.asked++;
        return pacer.open;
      },
      onChange(callback: () => void) {
        wake = callback;
      },
    };
    const reopen = () => {
      pacer.open = true;
      wake();
    };
    return { pacer, reopen };
  }

  it('start only when the pacer admits them, and waiting ones start when it changes its mind', async () => {
    const { pacer, reopen } = manualPacer();
    const limiter = createTurnLimiter({ maxTurns: 4, maxQueued: 10, minTurns: 1, pacer });
    const first = await limiter.acquire();
    expect(pacer.asked).toBe(0); // within minTurns the pacer is not asked
    const second = limiter.acquire();
    const third = limiter.acquire();
    await Promise.resolve();
    expect({ running: limiter.running, queued: limiter.queued }).toEqual({ running: 1, queued: 2 });
    reopen();
    await Promise.all([second, third]);
    expect({ running: limiter.running, queued: limiter.queued }).toEqual({ running: 3, queued: 0 });
    first();
  });

  it('never exceed maxTurns, whatever the pacer says', async () => {
    const { pacer } = manualPacer();
    pacer.open = true;
    const limiter = createTurnLimiter({ maxTurns: 2, maxQueued: 5, minTurns: 1, pacer });
    await limiter.acquire();
    await limiter.acquire();
    void limiter.acquire();
    await Promise.resolve();
    expect({ running: limiter.running, queued: limiter.queued }).toEqual({ running: 2, queued: 1 });
  });
});

describe('eventLoopPacer', () => {
  it('admits one more turn per turn of the event loop, and none while the loop is held up', async () => {
    const pacer = eventLoopPacer({ maxDelayMs: 20 });
    let wakes = 0;
    pacer.onChange(() => wakes++);
    expect(pacer.admit()).toBe(true);
    expect(pacer.admit()).toBe(false); // the same turn of the loop
    await nextEventLoopTurn();
    expect(wakes).toBe(1);
    expect(pacer.admit()).toBe(true);
    // Something keeps the loop busy for 60 ms: no more turns until it comes round quickly again.
    const until = performance.now() + 60;
    while (performance.now() < until) {}
    await nextEventLoopTurn();
    expect(pacer.admit()).toBe(false);
    await nextEventLoopTurn();
    expect(pacer.admit()).toBe(true);
  });
});

describe('the chat route under load', () => {
  const apps: BatonApp[] = [];
  afterEach(async () => {
    for (const app of apps.splice(0)) await app.close();
  });

  /** An app running one turn at a time, with one place in its queue, and turns slow enough to overlap. */
  function busyApp(logger?: Logger): BatonApp {
    const app = createApp({
      ...(logger ? { logger } : {}),
      agents: [{ template: reasoner, model: createOfflineModel({ delayMs: 1 }) }],
      webRoot: false,
      maxTurns: 1,
      maxQueuedTurns: 1,
    });
    apps.push(app);
    return app;
  }
  const chat = (app: BatonApp, signal?: AbortSignal) =>
    postJson(app, '/api/chat/cognitive-reasoner', { messages: [userMessage(RESEARCH)] }, {}, signal);

  it('answers a turn beyond the queue with 503 and Retry-After at once, and serves the queued one after the running one', async () => {
    const app = busyApp();
    const finished: string[] = [];
    const running = chat(app).then(async (response) => {
      await chunksOf(response);
      finished.push('running');
      return response.status;
    });
    const queued = chat(app).then(async (response) => {
      await chunksOf(response);
      finished.push('queued');
      return response.status;
    });
    const refused = await chat(app);
    expect(refused.status).toBe(503);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await errorOf(refused)).code).toBe('server-busy');
    // Refused while both others were still in progress.
    expect(finished).toEqual([]);
    expect(await Promise.all([running, queued])).toEqual([200, 200]);
    expect(finished).toEqual(['running', 'queued']);
  });

  it('runs many turns at once when they wait on their model (as on a remote one), not just minTurns', async () => {
    // Each chunk of this model waits on a timer, as a remote model's chunks wait on the network.
    const offline = createOfflineModel({ delayMs: 2 });
    let streaming = 0;
    let most = 0;
    const model: LanguageModelV4 = {
      ...offline,
      doStream: async (call) => {
        const result = await offline.doStream(call);
        streaming++;
        most = Math.max(most, streaming);
        const counted = result.stream.pipeThrough(new TransformStream({ flush: () => void streaming-- }));
        return { ...result, stream: counted };
      },
    };
    const app = createApp({ agents: [{ template: reasoner, model }], webRoot: false, minTurns: 2 });
    apps.push(app);
    const responses = await Promise.all(Array.from({ length: 12 }, () => chat(app)));
    await Promise.all(responses.map((response) => chunksOf(response)));
    expect(most).toBeGreaterThan(6);
  });

  it('frees the place of a client that disconnects while its turn waits, and logs no fault for it', async () => {
    const logged: { level: number }[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void logged.push(JSON.parse(line)) });
    const app = busyApp(logger);
    const running = chat(app).then((response) => chunksOf(response));
    const leaving = new AbortController();
    const left = chat(app, leaving.signal).catch((error: unknown) => error);
    await new Promise((resolve) => setTimeout(resolve, 20));
    leaving.abort();
    await left;
    // Its place is free again: this one waits instead of being refused.
    const next = await chat(app);
    expect(next.status).toBe(200);
    expect((await chunksOf(next)).at(-1)?.type).toBe('finish');
    await running;
    expect(logged.length).toBeGreaterThan(0);
    expect(logged.filter((entry) => entry.level >= 40)).toEqual([]);
  });
});
