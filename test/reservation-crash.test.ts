/**
 * A process dies between reserving a call and completing it (SIGKILL while its tool runs). While
 * it lives, it renews the reservation, so the call keeps its place for as long as it runs (three
 * leases here) and a racing `pay` waits for it (one that waits no longer than a lease gives up);
 * once it is dead nothing renews it, and when the lease ends the waiting `pay` runs: a crashed
 * process cannot block a session for longer than the lease. On every durable store, across
 * processes.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import type { OrchestrationEvent } from '../src/core/events.js';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { PAY_ONCE } from './fixtures/pay-once.js';
import { pingPostgres, pingRedis, serviceAvailable } from './helpers/services.js';

const ROOT = new URL('..', import.meta.url).pathname;
const LEASE_MS = 1_500;
const REDIS_URL = 'redis://127.0.0.1:6379';
const POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';

/**
 * Starts the dying process, waits until its reservation is stored, lets `whileAlive` check the
 * session while the process still runs (and renews its lease), then kills it.
 */
async function reserveAndDie(storeUrl: string, sessionId: string, whileAlive: () => Promise<void>): Promise<void> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'test/fixtures/reserve-and-die.ts', storeUrl, sessionId, String(LEASE_MS)],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
      if (output.includes('reserved')) resolve();
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
    });
    child.once('exit', (code) => reject(new Error(`the process exited (${code}) before reserving:\n${output}`)));
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    await whileAlive();
  } finally {
    child.kill('SIGKILL');
    await exited;
  }
}

async function crashAndRecover(storeUrl: string): Promise<void> {
  const sessionId = `crash-${randomUUID()}`;
  const events: OrchestrationEvent[] = [];
  const manager = createOrchestrationManager({ store: storeUrl, leaseMs: LEASE_MS, onEvent: (e) => events.push(e) });
  // A caller that waits for running calls no longer than one lease.
  const impatient = createOrchestrationManager({ store: storeUrl, leaseMs: LEASE_MS, waitMs: LEASE_MS });
  const request = (toolCallId: string, by = manager) =>
    by.requestTool(PAY_ONCE, [], sessionId, { tool: 'pay', toolCallId, agentTools: ['pay', 'think'] });
  try {
    await reserveAndDie(storeUrl, sessionId, async () => {
      // Alive for three leases: its renewals keep the call's place, so a racing pay waits for it
      // longer than a lease, and gives up.
      await sleep(2 * LEASE_MS);
      expect(await request('racing-while-alive', impatient)).toMatchObject({
        allowed: false,
        reason: { code: 'pending', cause: 'wait-bound', running: ['pay'] },
      });
    });
    // Killed now: its last renewal was at most a quarter of a lease ago.
    const killedAt = Date.now();
    // The dead process's pay may have gone through: a racing one waits while its lease runs, and
    // runs once it ended.
    expect(await request('after-the-lease')).toMatchObject({ allowed: true });
    const waited = Date.now() - killedAt;
    expect(waited).toBeGreaterThan(LEASE_MS / 2);
    expect(waited).toBeLessThan(LEASE_MS + 1_000);
    expect(events).toContainEqual(
      expect.objectContaining({ type: 'tool-released', toolCallId: 'dies-while-paying', reason: 'expired' }),
    );
    await manager.completeTool(PAY_ONCE, [], sessionId, 'after-the-lease');
    const state = await manager.getStateManager().getState(sessionId);
    expect(state?.recentlyUsedTools).toEqual(['pay']);
    expect(state?.pending).toBeUndefined();
    // The dead process's call id stays used: a retry of it is refused, never run.
    expect(await request('dies-while-paying')).toMatchObject({ allowed: false, reason: { code: 'duplicate-call' } });
  } finally {
    await manager.getStateManager().cleanupSession(sessionId);
    await manager.close();
    await impatient.close();
  }
}

describe('a process killed between reserve and complete', () => {
  const dir = mkdtempSync(join(tmpdir(), 'baton-crash-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('sqlite: blocks the call only until its lease ends', () => crashAndRecover(`sqlite:${join(dir, 's.db')}`), 30_000);

  describe('redis', async () => {
    const skip = await serviceAvailable('redis', () => pingRedis(REDIS_URL));
    it.skipIf(skip)('blocks the call only until its lease ends', () => crashAndRecover(REDIS_URL), 30_000);
  });

  describe('postgres', async () => {
    const skip = await serviceAvailable('postgres', () => pingPostgres(POSTGRES_URL));
    it.skipIf(skip)('blocks the call only until its lease ends', () => crashAndRecover(POSTGRES_URL), 30_000);
  });
});
