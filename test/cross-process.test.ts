/**
 * Four processes record tool uses on one session through a shared store, all at once: each
 * process opens its own manager and fires 100 concurrent `processToolUsage` calls. Afterwards
 * exactly 400 uses must be recorded, with the version counting 400 writes (SPEC section 6: two
 * changes to the same session, from two processes sharing a store, never lose either one).
 * Each store also runs a control with a deliberately non-atomic worker, which must be caught
 * losing updates, so a check that could never fail would not go unnoticed.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OrchestrationState } from '../src/core/state.js';
import { postgresStore } from '../src/stores/postgres.js';
import { redisStore } from '../src/stores/redis.js';
import { sqliteStore } from '../src/stores/sqlite.js';
import type { SessionStore } from '../src/stores/types.js';
import { deleteRedisKeys, pingPostgres, pingRedis, serviceAvailable } from './helpers/services.js';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const PROCESSES = 4;
const USES_PER_PROCESS = 100;
const TOTAL = PROCESSES * USES_PER_PROCESS;
/** Four cold `tsx` starts on a loaded two-core machine can take a while. */
const TIMEOUT_MS = 120_000;
const REDIS_URL = 'redis://127.0.0.1:6379';
const POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';

interface WorkerResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** One worker process, resolved once it printed `ready`. */
interface Worker {
  child: ChildProcessWithoutNullStreams;
  ready: Promise<void>;
  finished: Promise<WorkerResult>;
}

function startWorker(storeUrl: string, sessionId: string, mode: 'atomic' | 'racy'): Worker {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'test/fixtures/tool-use-worker.ts', storeUrl, sessionId, String(USES_PER_PROCESS), mode],
    { cwd: root, stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  let signalReady: () => void = () => undefined;
  let failReady: (error: Error) => void = () => undefined;
  const ready = new Promise<void>((resolve, reject) => {
    signalReady = resolve;
    failReady = reject;
  });
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    if (stdout.split('\n').includes('ready')) signalReady();
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const giveUp = setTimeout(() => child.kill('SIGKILL'), TIMEOUT_MS - 10_000);
  const finished = new Promise<WorkerResult>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(giveUp);
      failReady(new Error(`worker exited with code ${code} before it was ready:\n${stderr}`));
      resolve({ code, stdout, stderr });
    });
  });
  return { child, ready, finished };
}

/** Starts the workers, lets them all go at once once every one is ready, and waits for them. */
async function runWorkers(storeUrl: string, sessionId: string, mode: 'atomic' | 'racy' = 'atomic'): Promise<void> {
  const workers = Array.from({ length: PROCESSES }, () => startWorker(storeUrl, sessionId, mode));
  try {
    await Promise.all(workers.map((w) => w.ready));
  } catch (error) {
    for (const w of workers) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => w.finished));
    throw error;
  }
  for (const w of workers) w.child.stdin.end('go\n');
  const results = await Promise.all(workers.map((w) => w.finished));
  for (const [i, result] of results.entries()) {
    expect(result.code, `worker ${i} failed:\n${result.stderr}`).toBe(0);
    expect(result.stdout.trim().split('\n')).toEqual(['ready', `done ${USES_PER_PROCESS}`]);
  }
}

function countOf(tools: readonly string[], tool: string): number {
  return tools.filter((t) => t === tool).length;
}

/** Runs the atomic workload and its racy control against one store. */
function crossProcessTests(storeUrl: () => string, openStore: () => SessionStore) {
  it(
    `records all ${TOTAL} concurrent tool uses of ${PROCESSES} processes`,
    async () => {
      const sessionId = `cross-${randomUUID()}`;
      await runWorkers(storeUrl(), sessionId);
      const store = openStore();
      try {
        const state = (await store.get(sessionId)) as OrchestrationState;
        expect(state).toBeDefined();
        expect(state.recentlyUsedTools).toHaveLength(TOTAL);
        expect(state.version).toBe(TOTAL);
        expect(countOf(state.recentlyUsedTools, 'search')).toBe(TOTAL / 2);
        expect(countOf(state.recentlyUsedTools, 'summarize')).toBe(TOTAL / 2);
        expect(state.activeStep).toBe('research');
      } finally {
        await store.close();
      }
    },
    TIMEOUT_MS,
  );

  it(
    'control: a non-atomic read-then-write worker is caught losing updates',
    async () => {
      const sessionId = `racy-${randomUUID()}`;
      await runWorkers(storeUrl(), sessionId, 'racy');
      const store = openStore();
      try {
        const state = (await store.get(sessionId)) as OrchestrationState;
        // Every write landed (the version counts them), yet most of the uses were lost.
        expect(state.version).toBe(TOTAL);
        expect(state.recentlyUsedTools.length).toBeLessThan(TOTAL);
      } finally {
        await store.close();
      }
    },
    TIMEOUT_MS,
  );
}

describe('across processes: SQLite', () => {
  // Made in beforeAll, not here: a run filtered to other stores skips this suite's hooks.
  let directory = '';
  const path = () => join(directory, 'state.db');
  beforeAll(() => {
    directory = mkdtempSync(join(tmpdir(), 'baton-cross-process-'));
  });
  afterAll(() => rmSync(directory, { recursive: true, force: true }));
  crossProcessTests(
    () => `sqlite:${path()}`,
    () => sqliteStore({ path: path() }),
  );
});

const redisSkip = await serviceAvailable('redis', () => pingRedis(REDIS_URL));

describe.skipIf(redisSkip)('across processes: Redis', () => {
  const prefix = `baton-cross:${randomUUID().slice(0, 8)}:`;
  afterAll(async () => {
    await deleteRedisKeys(REDIS_URL, prefix);
  });
  crossProcessTests(
    () => `${REDIS_URL}?prefix=${encodeURIComponent(prefix)}`,
    () => redisStore({ url: REDIS_URL, prefix }),
  );
});

const postgresSkip = await serviceAvailable('postgres', () => pingPostgres(POSTGRES_URL));

describe.skipIf(postgresSkip)('across processes: PostgreSQL', () => {
  const table = `baton_cross_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  afterAll(async () => {
    const admin = new pg.Client({ connectionString: POSTGRES_URL });
    await admin.connect();
    try {
      await admin.query(`DROP TABLE IF EXISTS "${table}_log", "${table}", "${table}_migrations"`);
    } finally {
      await admin.end();
    }
  });
  crossProcessTests(
    () => `${POSTGRES_URL}?table=${table}`,
    () => postgresStore({ connectionString: POSTGRES_URL, table }),
  );
});
