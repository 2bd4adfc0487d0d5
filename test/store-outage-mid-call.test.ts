/**
 * The store goes down while a chat turn's tool runs, and comes back. The tool completes during
 * the outage, so the turn cannot write its completion (nor its end), and its reservation stays
 * in the session's pending log as if the call still ran: every later user message queues behind
 * it, and once 256 wait, a chat turn is refused `429 session-busy`. The process that ran the call
 * lives and holds the completion, so it must write it as soon as the store answers again, not at
 * its next lease renewal: here the lease is a minute (a renewal every 15 s), so only that can
 * make the session serve again within the bound. Meanwhile chat turns of the session keep
 * coming, as users keep sending, from the moment the store answers again.
 *
 * Against a redis-server (append-only file, fsync always: the reservation survives a SIGKILL)
 * and a PostgreSQL server (stopped `-m immediate`) that this file starts, kills and restarts.
 * Each prints how long after the store answered again the completion was written.
 */
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { tool } from 'ai';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { OrchestrationConfig } from '../src/core/schema.js';
import { parseTemplate } from '../src/core/validate-template.js';
import { createApp } from '../src/server/create-app.js';
import { postgresStore } from '../src/stores/postgres.js';
import { redisStore } from '../src/stores/redis.js';
import type { SessionStore } from '../src/stores/types.js';
import { chunksOf, postJson, userMessage } from './helpers/chat-requests.js';
import { freePort } from './helpers/free-port.js';
import { mockModel } from './helpers/mock-model.js';
import {
  createPostgresServer,
  findPostgresBinaries,
  removePostgresServer,
  startPostgres,
  stopPostgresImmediately,
} from './helpers/postgres-server.js';
import { redisServerRuns, startRedisServer, stopProcess } from './helpers/redis-server.js';
import { serviceAvailable } from './helpers/services.js';

/** Long, so that a lease renewal (every quarter lease) cannot be what writes the completion. */
const LEASE_MS = 60_000;
/**
 * Within this long after the store answers again the completion must be written: the turn tries
 * again at most a second apart, plus the store's own reconnection.
 */
const WRITTEN_WITHIN_MS = 2_000;
/** Chat turns go on this long after the completion was written: the session serves them all. */
const AFTER_MS = 300;
/** Chat turns of the session sent at once, each loop one after another. */
const SENDERS = 4;

const CONFIG: OrchestrationConfig = {
  steps: [
    {
      name: 'Research',
      conditions: [{ type: 'message_regex', value: 'research|look up' }],
      sequence: ['search', 'summarize'],
      resetSequenceOn: ['new_message'],
    },
  ],
};

/** The store's server, as the test stops and restarts it. */
interface Outage {
  /** The app's store: short timeouts, so that calls fail fast while the server is down. */
  appStore(): SessionStore;
  /** Another connection, to read what is stored. */
  checker(): SessionStore;
  stop(): Promise<void>;
  /** Resolves once the server answers again. */
  restart(): Promise<void>;
}

/** What one outage cost: figures the test prints. */
interface Figures {
  writtenMs: number;
  turns: number;
}

async function outageMidCall(kind: string, outage: Outage): Promise<Figures> {
  let started: () => void = () => undefined;
  const running = new Promise<void>((resolve) => {
    started = resolve;
  });
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const tools = {
    search: tool({
      inputSchema: z.object({}),
      execute: async () => {
        started();
        await released;
        return 'found';
      },
    }),
    summarize: tool({ inputSchema: z.object({}), execute: async () => 'summary' }),
  };
  // The first model call calls search; every other one answers.
  const mock = mockModel((call) =>
    call.index === 0 ? { calls: [{ tool: 'search', id: 'outage-search' }] } : { text: 'ok' },
  );
  const logged: string[] = [];
  const logger = pino({ level: 'error' }, { write: (line: string) => void logged.push(line) });
  const template = parseTemplate({ id: 'outage', tools: ['search', 'summarize'], orchestration: CONFIG });
  const app = createApp({
    agents: [template],
    model: mock.model,
    tools,
    store: outage.appStore(),
    leaseMs: LEASE_MS,
    webRoot: false,
    logger,
  });
  const sessionId = `outage-${kind}-${randomUUID()}`;
  const checker = outage.checker();
  try {
    const first = postJson(app, '/api/chat/outage', { sessionId, messages: [userMessage('research cats')] });
    await running;
    expect((await checker.get(sessionId))?.pending).toMatchObject([{ kind: 'call', id: 'outage-search' }]);

    await outage.stop();
    // The tool completes while the store is down: the turn ends without writing it.
    release();
    const response = await first;
    expect(response.status).toBe(200);
    await chunksOf(response);
    expect(logged.join('\n')).toMatch(/is unavailable/);

    await outage.restart();
    const back = performance.now();
    let writtenAt: number | undefined;
    const statuses: number[] = [];
    const sender = async () => {
      while (
        writtenAt === undefined
          ? performance.now() - back < 2 * WRITTEN_WITHIN_MS
          : performance.now() - writtenAt < AFTER_MS
      ) {
        const reply = await postJson(app, '/api/chat/outage', { sessionId, messages: [userMessage('look up dogs')] });
        statuses.push(reply.status);
        await reply.text();
      }
    };
    const watch = async () => {
      while (performance.now() - back < 2 * WRITTEN_WITHIN_MS) {
        const stored = await checker.get(sessionId).catch(() => undefined);
        if (stored !== undefined && stored.pending === undefined) {
          writtenAt = performance.now();
          return;
        }
        await sleep(5);
      }
    };
    await Promise.all([watch(), ...Array.from({ length: SENDERS }, sender)]);
    const writtenMs = writtenAt === undefined ? Number.POSITIVE_INFINITY : Math.round(writtenAt - back);
    const refused = statuses.filter((status) => status === 429).length;
    console.log(
      `${kind}: the completion was written ${writtenMs} ms after the store answered again; ` +
        `${statuses.length} chat turns of the session meanwhile, ${refused} refused 429`,
    );
    expect(writtenMs).toBeLessThan(WRITTEN_WITHIN_MS);
    // No turn was refused as busy, nor failed: the store answered for all of them.
    expect(statuses.filter((status) => status !== 200)).toEqual([]);
    expect(statuses.length).toBeGreaterThan(0);
    // The completion is recorded (in its place, not released as late), and nothing waits.
    const after = await checker.get(sessionId);
    expect(after?.recentlyUsedTools).toEqual(['search']);
    expect(after?.pending).toBeUndefined();
    expect(logged.join('\n')).not.toMatch(/lease-lost/);
    return { writtenMs, turns: statuses.length };
  } finally {
    release();
    await app.close();
    await checker.close();
  }
}

describe('redis: a restart while a call runs', async () => {
  const skip = await serviceAvailable('redis', redisServerRuns);
  const children = new Set<ChildProcess>();
  const dir = await mkdtemp(join(tmpdir(), 'baton-outage-redis-'));
  afterAll(async () => {
    await Promise.all([...children].map((child) => stopProcess(child)));
    await rm(dir, { recursive: true, force: true });
  });

  it.skipIf(skip)(
    'writes the completion as soon as Redis answers again; no turn is refused',
    async () => {
      const port = await freePort();
      const start = () =>
        startRedisServer(port, dir, ['--appendonly', 'yes', '--appendfsync', 'always'], (child) => {
          children.add(child);
          child.once('exit', () => children.delete(child));
        });
      let server = await start();
      const url = `redis://127.0.0.1:${port}`;
      await outageMidCall('redis', {
        appStore: () => redisStore({ url, commandTimeoutMs: 1_000, prefix: 'outage:' }),
        checker: () => redisStore({ url, commandTimeoutMs: 1_000, prefix: 'outage:' }),
        stop: () => stopProcess(server),
        restart: async () => {
          server = await start();
        },
      });
    },
    30_000,
  );
});

describe('postgres: a restart while a call runs', () => {
  const bin = findPostgresBinaries();
  if (bin === undefined && process.env.BATON_REQUIRE_SERVICES === '1') {
    throw new Error('BATON_REQUIRE_SERVICES=1 but there are no PostgreSQL server binaries under /usr/lib/postgresql');
  }

  it.skipIf(bin === undefined)(
    'writes the completion as soon as PostgreSQL answers again; no turn is refused',
    async () => {
      const server = await createPostgresServer(bin ?? '');
      try {
        await startPostgres(server);
        const store = () =>
          postgresStore({
            connectionString: server.url,
            table: 'baton_outage',
            statementTimeoutMs: 1_000,
            connectionTimeoutMillis: 1_000,
            poolSize: 4,
          });
        await outageMidCall('postgres', {
          appStore: store,
          checker: store,
          stop: () => stopPostgresImmediately(server),
          restart: () => startPostgres(server),
        });
      } finally {
        await removePostgresServer(server);
      }
    },
    60_000,
  );
});
