/**
 * The concurrency property across processes: two worker processes (test/fixtures/turn-worker.ts)
 * share a durable store (SQLite file, Redis, PostgreSQL) and play the turns of each random case
 * at the same time, half each, on one session. Their logs are merged and checked against the
 * SPEC oracle exactly as in test/concurrency.property.test.ts: every executed call was allowed
 * in the serial order of the writes with a fresh id, and the final session equals a serial run.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { type Case, caseArb, type Logged } from './helpers/concurrency-case.js';
import { verifyCase } from './helpers/concurrency-verify.js';
import { deleteRedisKeys, pingPostgres, pingRedis, serviceAvailable } from './helpers/services.js';

const ROOT = new URL('..', import.meta.url).pathname;
const REDIS_URL = 'redis://127.0.0.1:6379';
const POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';
const RUN = randomUUID().slice(0, 8);
const RUNS = 12;

/** A worker process and a way to give it jobs. */
interface Worker {
  play(c: Case, sessionId: string, turns: number[], startAt: number): Promise<Logged[]>;
  stop(): void;
}

async function startWorker(storeUrl: string): Promise<Worker> {
  const child: ChildProcessWithoutNullStreams = spawn(
    process.execPath,
    ['--import', 'tsx', 'test/fixtures/turn-worker.ts', storeUrl],
    { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const waiting = new Map<number, { resolve: (log: Logged[]) => void; reject: (error: Error) => void }>();
  let ready: () => void = () => undefined;
  const started = new Promise<void>((resolve, reject) => {
    ready = resolve;
    child.once('exit', (code) => reject(new Error(`worker exited with ${code} before it was ready:\n${stderr}`)));
  });
  createInterface({ input: child.stdout }).on('line', (line) => {
    if (line === 'ready') return ready();
    const answer = JSON.parse(line) as { id: number; log?: Logged[]; error?: string };
    const job = waiting.get(answer.id);
    waiting.delete(answer.id);
    if (answer.error !== undefined) job?.reject(new Error(`worker failed: ${answer.error}`));
    else job?.resolve(answer.log ?? []);
  });
  await started;
  let next = 0;
  return {
    play(c, sessionId, turns, startAt) {
      const id = next++;
      return new Promise<Logged[]>((resolve, reject) => {
        waiting.set(id, { resolve, reject });
        child.stdin.write(`${JSON.stringify({ id, case: c, sessionId, turns, startAt })}\n`);
      });
    },
    stop() {
      child.stdin.end();
      child.kill('SIGTERM');
    },
  };
}

/** Runs the property with two workers on `storeUrl`; the parent reads the final states. */
async function property(storeUrl: string): Promise<void> {
  const workers = await Promise.all([startWorker(storeUrl), startWorker(storeUrl)]);
  const reader = createOrchestrationManager({ store: storeUrl });
  // Runs in which the two processes' writes interleaved: a property that never raced would
  // prove nothing.
  let interleaved = 0;
  try {
    await fc.assert(
      fc.asyncProperty(caseArb, async (c) => {
        const sessionId = `xproc-${RUN}-${randomUUID()}`;
        const even = c.turns.map((_, i) => i).filter((i) => i % 2 === 0);
        const odd = c.turns.map((_, i) => i).filter((i) => i % 2 === 1);
        // Both start at the same moment, and pause milliseconds between calls, so they overlap.
        const startAt = Date.now() + 20;
        const logs = await Promise.all([
          workers[0]!.play(c, sessionId, even, startAt),
          workers[1]!.play(c, sessionId, odd, startAt),
        ]);
        verifyCase(c, logs.flat(), await reader.getStateManager().getState(sessionId));
        const order = logs
          .flatMap((log, worker) => log.filter((entry) => entry.changed).map((entry) => ({ worker, v: entry.version })))
          .sort((a, b) => a.v - b.v)
          .map((entry) => entry.worker);
        let switches = 0;
        for (let i = 1; i < order.length; i++) if (order[i] !== order[i - 1]) switches++;
        if (switches >= 2) interleaved++;
      }),
      { numRuns: RUNS },
    );
    expect(interleaved, 'no run interleaved the two processes').toBeGreaterThan(RUNS / 4);
  } finally {
    for (const worker of workers) worker.stop();
    await reader.close();
  }
}

describe('concurrent turns from two processes on one session equal a serial run of reservations', () => {
  describe('sqlite', () => {
    const dir = mkdtempSync(join(tmpdir(), 'baton-xproc-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    it('holds', () => property(`sqlite:${join(dir, 'sessions.db')}`), 180_000);
  });

  describe('redis', async () => {
    const skip = await serviceAvailable('redis', () => pingRedis(REDIS_URL));
    afterAll(async () => {
      // Store URLs carry no prefix: the workers use the default one, and session ids of this run.
      if (!skip) await deleteRedisKeys(REDIS_URL, `baton:{xproc-${RUN}-`);
    });
    it.skipIf(skip)('holds', () => property(REDIS_URL), 180_000);
  });

  describe('postgres', async () => {
    const skip = await serviceAvailable('postgres', () => pingPostgres(POSTGRES_URL));
    afterAll(async () => {
      if (skip) return;
      // Store URLs carry no table name: the workers use the default table, and session ids of this run.
      const client = new pg.Client({ connectionString: POSTGRES_URL });
      await client.connect();
      await client.query('DELETE FROM baton_sessions WHERE session_id LIKE $1', [`xproc-${RUN}-%`]);
      await client.end();
    });
    it.skipIf(skip)('holds', () => property(POSTGRES_URL), 180_000);
  });
});
