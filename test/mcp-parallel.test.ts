/**
 * Calls sent together on one MCP session, as clients and agents send them. A call that nothing
 * running can change runs at once, however many run; a call whose answer depends on a running one
 * waits for it and is then decided as a serial run would decide it, never refused `pending`
 * because a sibling was still running. Against the faulty upstream's `slow` and `ok` tools (every
 * call that reaches it is appended to a file), in one gateway on every store, and across two
 * gateway processes sharing one session on Redis and on PostgreSQL.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, describe, expect, it } from 'vitest';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import {
  connectStdio,
  inProcessGateway,
  ROOT,
  type StdioGateway,
  templateFile,
  textOf,
  workDir,
} from './helpers/mcp-gateway.js';
import { pingPostgres, pingRedis, serviceAvailable } from './helpers/services.js';
import { describeEachStore, POSTGRES_URL, REDIS_URL } from './helpers/store-kinds.js';

const UPSTREAM = [process.execPath, '--import', 'tsx', join(ROOT, 'test/fixtures/mcp-faulty-upstream.ts')];

/** `ok` only once `slow` ran: the sequence slow -> ok. */
const SEQUENCE = {
  id: 'slow-then-ok',
  tools: ['slow', 'ok'],
  orchestration: { steps: [{ name: 'Work', isDefault: true, sequence: ['slow', 'ok'] }] },
};
const OPEN = { id: 'open', tools: ['slow', 'ok'], orchestration: { steps: [] } };
const THREE_OKS = {
  id: 'three-oks',
  tools: ['slow', 'ok'],
  orchestration: {
    steps: [],
    rules: [{ tools: ['ok'], limit: { max: 3, per: 'session' }, reason: 'Three per session' }],
  },
};

/** A file the upstream appends every call it starts to, and what it holds. */
function callsFile(): { path: string; read: () => string[] } {
  const path = join(workDir(), 'calls.txt');
  writeFileSync(path, '');
  return { path, read: () => readFileSync(path, 'utf8').split('\n').filter(Boolean) };
}

/**
 * `slow` (600 ms) and `ok` sent together, `ok` once `slow` has had `after` ms to be reserved (two
 * processes: which request reaches the store first is otherwise a race, and a serial run of `ok`
 * first rightly refuses it). When each answered, in ms from the start.
 */
async function slowAndOk(slowBy: Client, okBy: Client, after = 0) {
  const start = Date.now();
  const at = (promise: Promise<unknown>) => promise.then((result) => ({ result, ms: Date.now() - start }));
  const slow = at(slowBy.callTool({ name: 'slow', arguments: { ms: 600 } }));
  if (after > 0) await new Promise((resolve) => setTimeout(resolve, after));
  const ok = at(okBy.callTool({ name: 'ok', arguments: {} }));
  return { slow: await slow, ok: await ok };
}

describeEachStore('calls sent together on one MCP session, in one gateway', (open) => {
  it('runs a call that depends on a running one after it, never refusing it as pending', async () => {
    const calls = callsFile();
    const { client, close } = await inProcessGateway(
      SEQUENCE,
      createOrchestrationManager({ store: open() }),
      workDir(),
      `seq-${randomUUID()}`,
      { command: UPSTREAM[0]!, args: UPSTREAM.slice(1), env: { CALLS_FILE: calls.path } },
    );
    try {
      const { slow, ok } = await slowAndOk(client, client);
      expect(slow.result).not.toHaveProperty('isError', true);
      expect(ok.result, textOf(ok.result as never)).not.toHaveProperty('isError', true);
      // `ok` waited for `slow` to complete, then ran: the upstream saw them in that order.
      expect(calls.read()).toEqual(['slow', 'ok']);
      expect(ok.ms).toBeGreaterThanOrEqual(slow.ms);
    } finally {
      await close();
    }
  }, 60_000);

  it('runs 32 independent calls at once, all of them', async () => {
    const calls = callsFile();
    const { client, close } = await inProcessGateway(
      OPEN,
      createOrchestrationManager({ store: open() }),
      workDir(),
      `open-${randomUUID()}`,
      { command: UPSTREAM[0]!, args: UPSTREAM.slice(1), env: { CALLS_FILE: calls.path } },
    );
    try {
      const start = Date.now();
      const results = await Promise.all(
        Array.from({ length: 32 }, () => client.callTool({ name: 'slow', arguments: { ms: 300 } })),
      );
      const elapsed = Date.now() - start;
      expect(results.filter((result) => result.isError === true)).toEqual([]);
      expect(calls.read()).toHaveLength(32);
      // Side by side: about one call's 300 ms, not 32 of them.
      expect(elapsed).toBeLessThan(3_000);
    } finally {
      await close();
    }
  }, 60_000);
});

describe('a thousand calls at once under a limit of three', () => {
  it('runs exactly three, answers the rest promptly, and keeps the session small', async () => {
    const calls = callsFile();
    const manager = createOrchestrationManager();
    const sessionId = `flood-${randomUUID()}`;
    const { client, close } = await inProcessGateway(THREE_OKS, manager, workDir(), sessionId, {
      command: UPSTREAM[0]!,
      args: UPSTREAM.slice(1),
      env: { CALLS_FILE: calls.path },
    });
    try {
      const start = Date.now();
      const results = await Promise.all(
        Array.from({ length: 1_000 }, () => client.callTool({ name: 'ok', arguments: {} })),
      );
      const elapsed = Date.now() - start;
      expect(results.filter((result) => result.isError !== true)).toHaveLength(3);
      expect(calls.read()).toEqual(['ok', 'ok', 'ok']);
      // Every refusal says why: over the limit, or too many already waiting on the session.
      for (const refused of results.filter((result) => result.isError === true)) {
        expect(textOf(refused)).toMatch(/Three per session|calls already wait on this session/);
      }
      expect(elapsed).toBeLessThan(15_000);
      const state = await manager.getStateManager().getState(sessionId);
      expect(state?.pending).toBeUndefined();
      expect(JSON.stringify(state).length).toBeLessThan(30_000);
    } finally {
      await close();
    }
  }, 60_000);
});

describe('calls sent together on one session shared by two gateway processes', async () => {
  const redisSkip = await serviceAvailable('redis', () => pingRedis(REDIS_URL));
  const postgresSkip = await serviceAvailable('postgres', () => pingPostgres(POSTGRES_URL));
  const gateways: StdioGateway[] = [];
  afterAll(() => Promise.all(gateways.map((gateway) => gateway.close())));

  const both = async (store: string) => {
    const calls = callsFile();
    const template = templateFile(SEQUENCE);
    const session = `mcp-seq-${randomUUID()}`;
    const args = [template, '--store', store, '--session', session, '--', ...UPSTREAM];
    const started = await Promise.all([
      connectStdio(args, { env: { CALLS_FILE: calls.path } }),
      connectStdio(args, { env: { CALLS_FILE: calls.path } }),
    ]);
    gateways.push(...started);
    const [a, b] = started as [StdioGateway, StdioGateway];
    const { slow, ok } = await slowAndOk(a.client, b.client, 200);
    expect(slow.result).not.toHaveProperty('isError', true);
    expect(ok.result, textOf(ok.result as never)).not.toHaveProperty('isError', true);
    expect(calls.read()).toEqual(['slow', 'ok']);
  };

  it.skipIf(redisSkip)('on Redis: both run, the dependent one after the other', () => both(REDIS_URL), 60_000);
  it.skipIf(postgresSkip)(
    'on PostgreSQL: both run, the dependent one after the other',
    () => both(POSTGRES_URL),
    60_000,
  );
});
