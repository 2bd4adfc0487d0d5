/**
 * `baton mcp` under attack: what a hostile or careless MCP client (or operator configuration)
 * can do to the gateway, and what it must never get. Driven with the official SDK's client and
 * raw HTTP against the MCP reference servers and the faulty upstream fixture, as the other
 * gateway tests are.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import {
  type CallToolResult,
  ElicitRequestSchema,
  type JSONRPCMessage,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import {
  connectStdio,
  EVERYTHING_SERVER,
  FILESYSTEM_SERVER,
  type HttpGatewayProcess,
  inProcessGateway,
  ROOT,
  type StdioGateway,
  startHttpGateway,
  templateFile,
  textOf,
  workDir,
} from './helpers/mcp-gateway.js';

const EDITOR = join(ROOT, 'examples/mcp/careful-editor.json');
const FAULTY = [process.execPath, '--import', 'tsx', join(ROOT, 'test/fixtures/mcp-faulty-upstream.ts')];

/** The processes `pid` started that are still running and whose command line holds `marker` (POSIX `ps`). */
function childrenOf(pid: number, marker: string): string[] {
  const table = execFileSync('ps', ['-A', '-o', 'pid=,ppid=,args='], { encoding: 'utf8' });
  return table.split('\n').flatMap((line) => {
    const [, parent, args] = /^\s*\d+\s+(\d+)\s+(.*)$/.exec(line) ?? [];
    return Number(parent) === pid && args?.includes(marker) ? [args] : [];
  });
}

/** A raw Streamable HTTP POST to the gateway's `/mcp`, as any HTTP client can send it. */
function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${url}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
}

const INITIALIZE = {
  jsonrpc: '2.0',
  id: 0,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};

describe('HTTP requests that never open an MCP session', () => {
  let gateway: HttpGatewayProcess;

  beforeAll(async () => {
    gateway = await startHttpGateway([
      EDITOR,
      '--http',
      '0',
      '--max-sessions',
      '2',
      '--',
      FILESYSTEM_SERVER,
      workDir(),
    ]);
  }, 60_000);
  afterAll(() => gateway?.stop());

  it('do not use up --max-sessions: a real client still connects after a burst of them', async () => {
    // No Mcp-Session-Id and no initialize: each is answered with an error and opens nothing.
    for (let i = 0; i < 4; i++) {
      const response = await post(gateway.url, { jsonrpc: '2.0', id: i + 1, method: 'tools/list' });
      expect(response.status).toBe(400);
      await response.body?.cancel();
    }
    const junk = await fetch(`${gateway.url}/mcp`, { method: 'POST', body: 'not json' });
    expect(junk.status).toBeGreaterThanOrEqual(400);
    await junk.body?.cancel();
    const probe = await fetch(`${gateway.url}/mcp`);
    expect(probe.status).toBeGreaterThanOrEqual(400);
    await probe.body?.cancel();
    // The two session slots are still free.
    const first = await gateway.connect();
    const second = await gateway.connect();
    try {
      expect((await first.listTools()).tools.map((tool) => tool.name)).toEqual(['list_directory']);
      expect((await second.listTools()).tools.map((tool) => tool.name)).toEqual(['list_directory']);
    } finally {
      await first.close();
      await second.close();
    }
  }, 30_000);
});

describe('an MCP session closed while its upstreams are still starting', () => {
  let gateway: HttpGatewayProcess;
  /** The upstream's root: it names the upstream's processes on their command lines. */
  const root = workDir();

  beforeAll(async () => {
    gateway = await startHttpGateway([EDITOR, '--http', '0', '--', FILESYSTEM_SERVER, root]);
  }, 60_000);
  afterAll(() => gateway?.stop());

  it('leaves no upstream process behind', async () => {
    // The start-up probe's upstream has gone once it is closed.
    await expect.poll(() => childrenOf(gateway.child.pid!, root), { timeout: 10_000 }).toEqual([]);
    for (let i = 0; i < 3; i++) {
      const opened = await post(gateway.url, INITIALIZE);
      const sessionId = opened.headers.get('mcp-session-id');
      expect(sessionId).toMatch(/^[0-9a-f-]{36}$/);
      // The client says goodbye at once, before the upstream it caused to start has answered.
      const deleted = await fetch(`${gateway.url}/mcp`, {
        method: 'DELETE',
        headers: { 'mcp-session-id': sessionId!, 'mcp-protocol-version': '2025-06-18' },
      });
      expect(deleted.status).toBe(200);
      await opened.body?.cancel().catch(() => undefined);
    }
    // Every upstream those sessions started is let go once it has connected.
    await expect.poll(() => childrenOf(gateway.child.pid!, root), { timeout: 15_000, interval: 250 }).toEqual([]);
    // And the gateway still serves.
    const client = await gateway.connect();
    try {
      expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual(['list_directory']);
    } finally {
      await client.close();
    }
  }, 40_000);
});

describe('several upstreams whose names could be confused', () => {
  it('are refused at start, rather than have one server answer for another', async () => {
    const template = templateFile({ id: 'two', tools: ['*'], orchestration: { steps: [] } });
    // "e__x__echo" could be server "e"'s tool "x__echo" or server "e__x"'s "echo"; "a___b" could be
    // "a"'s "_b" or "a_"'s "b".
    for (const [first, second] of [
      ['e', 'e__x'],
      ['a', 'a_'],
    ]) {
      const error = await connectStdio([
        template,
        '--upstream',
        `${first}=${EVERYTHING_SERVER}`,
        '--upstream',
        `${second}=${EVERYTHING_SERVER}`,
      ]).then(
        async (gateway) => {
          // Before the fix: it started, and a prompt of "e__x" went to "e".
          const prompt = await gateway.client
            .getPrompt({ name: `${second}__args-prompt`, arguments: { city: 'Oslo' } })
            .then(
              () => 'answered',
              (e: Error) => e.message,
            );
          await gateway.close();
          return new Error(`started; the prompt of ${second}: ${prompt}`);
        },
        (e: Error) => e,
      );
      expect(String(error)).toMatch(new RegExp(`upstream name "${second}"`));
    }
  }, 60_000);
});

describe('a call refused while another call of the session changes its tools', () => {
  let gateway: StdioGateway;
  let changes = 0;

  afterEach(() => gateway?.close());

  it('still gets the client a tools/list_changed once the session is idle', async () => {
    // "ok" moves the session to step "After"; "slow" needs a person's approval, which is declined.
    const template = templateFile({
      id: 'busy',
      tools: ['ok', 'slow', 'hang'],
      orchestration: {
        steps: [
          { name: 'Start', isDefault: true, availableTools: { allowed: ['ok', 'slow'] } },
          {
            name: 'After',
            conditions: [{ type: 'tool_used', value: 'ok' }],
            availableTools: { allowed: ['slow', 'hang'] },
          },
        ],
        rules: [{ tools: ['slow'], effect: 'approve', reason: 'A person starts slow work' }],
      },
    });
    gateway = await connectStdio([template, '--', ...FAULTY], {
      client: { capabilities: { elicitation: {} } },
      onClient: (client) => {
        client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
          changes++;
        });
        // While the person thinks, the client runs "ok" (which changes the tools), then declines.
        client.setRequestHandler(ElicitRequestSchema, async () => {
          const ok = await client.callTool({ name: 'ok', arguments: {} });
          expect(textOf(ok)).toBe('ok');
          return { action: 'decline' };
        });
      },
    });
    expect((await gateway.client.listTools()).tools.map((tool) => tool.name)).toEqual(['ok', 'slow']);
    const declined = await gateway.client.callTool({ name: 'slow', arguments: { ms: 10 } });
    expect(declined.isError).toBe(true);
    expect(textOf(declined)).toContain('A person starts slow work');
    // The set the client was told of ([ok, slow]) is no longer true: it must hear so.
    await expect.poll(() => changes, { timeout: 3_000 }).toBeGreaterThan(0);
    expect((await gateway.client.listTools()).tools.map((tool) => tool.name)).toEqual(['hang', 'slow']);
  }, 60_000);
});

describe('an upstream slower to start than --call-timeout', () => {
  it('still starts: the call timeout bounds calls, not the upstream’s start', async () => {
    const dir = workDir();
    // An upstream that takes a second to come up, as `npx -y` does while it downloads a server.
    const gateway = await connectStdio([
      EDITOR,
      '--call-timeout',
      '500',
      '--',
      'sh',
      '-c',
      `sleep 1.5 && exec "${FILESYSTEM_SERVER}" "${dir}"`,
    ]);
    try {
      expect((await gateway.client.listTools()).tools.map((tool) => tool.name)).toEqual(['list_directory']);
      expect(textOf(await gateway.client.callTool({ name: 'list_directory', arguments: { path: dir } }))).toBe('');
    } finally {
      await gateway.close();
    }
  }, 60_000);
});

describe('a call a person must approve, with an input padded to hide what matters', () => {
  let gateway: StdioGateway | undefined;
  afterEach(() => gateway?.close());

  /** A gateway whose `ok` needs a person; `asked` collects what the person was shown, `answer` is theirs. */
  async function approving(asked: string[], answer: 'accept' | 'decline') {
    const template = templateFile({
      id: 'padded',
      tools: ['ok'],
      orchestration: {
        steps: [{ name: 'Start', isDefault: true, availableTools: { allowed: ['ok'] } }],
        rules: [{ tools: ['ok'], effect: 'approve', reason: 'A person checks every call' }],
      },
    });
    return connectStdio([template, '--', ...FAULTY], {
      client: { capabilities: { elicitation: {} } },
      onClient: (client) => {
        client.setRequestHandler(ElicitRequestSchema, async (request) => {
          asked.push(String(request.params.message));
          return { action: answer };
        });
      },
    });
  }

  it('shows the person the whole input, never a clipped one', async () => {
    const asked: string[] = [];
    gateway = await approving(asked, 'accept');
    // What matters (ms) comes after 3,000 characters of padding.
    const result = await gateway.client.callTool({ name: 'ok', arguments: { note: 'x'.repeat(3_000), ms: 5_000 } });
    expect(textOf(result)).toBe('ok');
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain('"ms":5000');
  }, 60_000);

  it('asks nobody, and runs nothing, when the input is too long to show whole', async () => {
    const asked: string[] = [];
    gateway = await approving(asked, 'accept');
    const result = await gateway.client.callTool({ name: 'ok', arguments: { note: 'x'.repeat(20_000), ms: 5_000 } });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain('too long to show whole');
    expect(asked).toEqual([]);
  }, 60_000);
});

describe('a client whose JSON-RPC request ids are huge', () => {
  it('gets its calls decided once each, and the session does not keep the ids whole', async () => {
    const lister = {
      id: 'lister',
      tools: ['list_directory'],
      orchestration: { steps: [{ name: 'Look', isDefault: true, availableTools: { allowed: ['list_directory'] } }] },
    };
    const manager = createOrchestrationManager();
    const dir = workDir();
    const sessionId = `huge-ids-${randomUUID()}`;
    const { clientSide, close } = await inProcessGateway(lister, manager, dir, sessionId);
    // Answers to the requests sent below, by id, taken before the client sees them.
    const answers = new Map<string | number, JSONRPCMessage>();
    const forward = clientSide.onmessage;
    clientSide.onmessage = (message, extra) => {
      if ('id' in message && typeof message.id === 'string' && message.id.length > 1_000)
        answers.set(message.id, message);
      else forward?.(message, extra);
    };
    const call = async (id: string) => {
      await clientSide.send({
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: 'list_directory', arguments: { path: dir } },
      });
      await expect.poll(() => answers.has(id), { timeout: 10_000 }).toBe(true);
      return answers.get(id) as { result?: CallToolResult };
    };
    try {
      const huge = 'r'.repeat(200_000);
      expect((await call(`${huge}-1`)).result?.isError).not.toBe(true);
      expect((await call(`${huge}-2`)).result?.isError).not.toBe(true);
      const state = await manager.getStateManager().getState(sessionId);
      expect(state?.recentlyUsedTools).toEqual(['list_directory', 'list_directory']);
      // Two calls of 200,000-character ids: the session keeps a digest of each, not the ids.
      expect(JSON.stringify(state).length).toBeLessThan(5_000);
    } finally {
      await close();
      await manager.close();
    }
  }, 60_000);
});
