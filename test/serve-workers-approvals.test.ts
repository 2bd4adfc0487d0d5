/**
 * `baton serve --workers 2` and tool approvals: an approval one worker asked for is accepted by
 * the other (they share the approval key: with stored sessions the primary makes it and hands it
 * to each worker; stateless workers derive it from the state keys they share), and a forged or
 * replayed one is refused by whichever worker gets it. Every request goes on a connection of
 * its own, so the primary hands them to the workers in turn. The server is the `baton` program
 * with a `pay` tool that needs approval (test/fixtures/serve-with-approvals.ts), which records
 * each call it runs in a file, whichever process ran it.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APPROVAL_AGENTS, ApprovalClient, type ToolRun } from './helpers/approvals.js';
import type { RequestTarget } from './helpers/chat-requests.js';
import { type ServeProcess, startServeProcess, stopServeProcess } from './helpers/serve-process.js';

/** Three cold `tsx` starts (primary and two workers) on a loaded two-core machine take a while. */
const START_TIMEOUT_MS = 120_000;
const SESSIONS = 4;
const STATE_KEY = 'serve-workers-approvals-state-key-0123456789';

const scratch = mkdtempSync(join(tmpdir(), 'baton-workers-approvals-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** The parent's BATON_* settings (an API key, an approval key) must not change what the servers do. */
const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('BATON_')));

/** Requests to `url`, each on a connection of its own (no keep-alive), answered as a fetch Response. */
function freshConnections(url: string): RequestTarget {
  return {
    request: (path, init = {}) =>
      new Promise<Response>((resolve, reject) => {
        const req = request(`${url}${path}`, {
          method: init.method ?? 'GET',
          agent: false,
          headers: init.headers as Record<string, string> | undefined,
        });
        req.on('response', (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => {
            const headers = new Headers();
            for (const [name, value] of Object.entries(res.headers)) {
              if (typeof value === 'string') headers.set(name, value);
            }
            resolve(new Response(Buffer.concat(chunks), { status: res.statusCode ?? 0, headers }));
          });
          res.on('error', reject);
        });
        req.on('error', reject);
        req.end(typeof init.body === 'string' ? init.body : undefined);
      }),
  };
}

/** The workers that logged the chat requests of `sessionId`, in log order. */
function workersOf(server: ServeProcess, sessionId: string): number[] {
  return server
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as { worker?: number; path?: string; sessionId?: string })
    .filter((entry) => entry.sessionId === sessionId && entry.path?.startsWith('/api/chat/'))
    .map((entry) => entry.worker ?? 0);
}

function runsIn(file: string): ToolRun[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as ToolRun);
}

const modes: [string, string[], Record<string, string>][] = [
  ['stored sessions (a key the primary makes)', [], {}],
  ['stateless sessions (keys from BATON_STATE_KEYS)', ['--stateless'], { BATON_STATE_KEYS: STATE_KEY }],
];

describe.each(modes)('baton serve --workers 2 with %s', (mode, flags, extraEnv) => {
  const dir = join(scratch, mode.split(' ')[0]!);
  const runs = join(dir, 'runs.jsonl');
  let server: ServeProcess;

  beforeAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    writeFileSync(runs, '');
    server = await startServeProcess(
      [
        APPROVAL_AGENTS,
        '--model',
        'offline',
        '--port',
        '0',
        '--store',
        `sqlite:${join(dir, 'state.db')}`,
        '--workers',
        '2',
        '--log-level',
        'info',
        ...flags,
      ],
      {
        name: `workers (${mode})`,
        env: { ...env, ...extraEnv, TOOL_RUNS: runs, FORCE_COLOR: '0' },
        timeoutMs: START_TIMEOUT_MS - 10_000,
        entry: {
          script: ['test/fixtures/serve-with-approvals.ts', 'serve'],
          ready: /^Baton listening on (http:\/\/\S+)$/m,
        },
      },
    );
    const deadline = Date.now() + 60_000;
    while (!/^Workers: 2 /m.test(server.output())) {
      if (Date.now() > deadline) throw new Error(`the workers did not all start:\n${server.output()}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }, START_TIMEOUT_MS);

  afterAll(async () => {
    if (server) await stopServeProcess(server);
  });

  it('runs approvals whichever worker asked for them, once, and refuses forged and replayed ones', async () => {
    const target = freshConnections(server.url);
    const clients: ApprovalClient[] = [];
    for (let i = 0; i < SESSIONS; i++) {
      const client = new ApprovalClient(target, 'shop');
      await client.say('Please settle my invoice');
      expect(client.pendingApproval().approval?.signature).toBeDefined();
      clients.push(client);
    }
    expect(runsIn(runs)).toEqual([]);
    const asked = clients.map((client) => client.pendingApproval());
    const grants = clients.map((client) => structuredClone(client.messages));

    // Forged on their way back, on whichever worker they land: refused, nothing runs.
    const forged = clients[0]!;
    const unsigned = structuredClone(grants[0]!);
    const part = unsigned.at(-1)!.parts.find((p) => (p as { state?: string }).state === 'approval-requested') as {
      state: string;
      approval: { approved?: boolean; signature?: string };
      input: { amount: number };
    };
    part.state = 'approval-responded';
    part.approval.approved = true;
    for (const change of [
      () => {
        part.approval.signature = undefined;
      },
      () => {
        part.approval.signature = asked[1]!.approval!.signature;
      },
      () => {
        part.approval.signature = asked[0]!.approval!.signature;
        part.input = { ...part.input, amount: 1_000_000 };
      },
    ]) {
      change();
      const response = await forged.post(unsigned);
      expect(response.status, await response.clone().text()).toBe(400);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('invalid-history');
    }
    expect(runsIn(runs)).toEqual([]);

    // The genuine approvals: each runs once.
    for (const client of clients) await client.answer(true);
    const ran = runsIn(runs);
    expect(ran.map((run) => run.toolCallId).sort()).toEqual(asked.map((p) => p.toolCallId).sort());
    for (const run of ran) {
      expect(run.input).toEqual(asked.find((p) => p.toolCallId === run.toolCallId)?.input);
    }
    // Asked on one worker and approved on the other, at least once (the primary alternates).
    const crossed = clients.filter((client) => new Set(workersOf(server, client.sessionId!)).size === 2);
    expect(
      crossed.length,
      `workers per session: ${clients.map((c) => workersOf(server, c.sessionId!).join('→')).join(', ')}`,
    ).toBeGreaterThan(0);

    // Replayed after it ran: refused by either worker.
    for (const [i, client] of clients.slice(0, 2).entries()) {
      const replay = structuredClone(grants[i]!);
      const request = replay.at(-1)!.parts.find((p) => (p as { state?: string }).state === 'approval-requested') as {
        state: string;
        approval: { approved?: boolean };
      };
      request.state = 'approval-responded';
      request.approval.approved = true;
      const response = await client.post(replay);
      expect(response.status, await response.clone().text()).toBe(400);
    }
    expect(runsIn(runs)).toHaveLength(SESSIONS);
  }, 120_000);
});
