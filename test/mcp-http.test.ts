/**
 * `baton mcp --http`: Streamable HTTP with `Mcp-Session-Id` sessions, each its own orchestration
 * session, behind the API key of `baton serve`, and visible through its session routes.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CLI,
  connectStdio,
  EVERYTHING_SERVER,
  FILESYSTEM_SERVER,
  type HttpGatewayProcess,
  ROOT,
  startHttpGateway,
  templateFile,
  textOf,
  workDir,
} from './helpers/mcp-gateway.js';

const EDITOR = join(ROOT, 'examples/mcp/careful-editor.json');
const KEY = 'test-key-for-the-mcp-gateway';
const auth = { authorization: `Bearer ${KEY}` };

describe('baton mcp --http', () => {
  let gateway: HttpGatewayProcess;
  let dir: string;

  beforeAll(async () => {
    dir = workDir();
    gateway = await startHttpGateway([EDITOR, '--http', '0', '--', FILESYSTEM_SERVER, dir], {
      env: { BATON_API_KEY: KEY },
    });
  }, 60_000);
  afterAll(() => gateway?.stop());

  it('refuses a client without the API key', async () => {
    await expect(gateway.connect()).rejects.toThrow(/401|unauthorized/i);
    const response = await fetch(`${gateway.url}/api/sessions/anything`);
    expect(response.status).toBe(401);
  });

  it('keeps one orchestration session per MCP session, and shows it through the session routes', async () => {
    const a = await gateway.connect({ headers: auth });
    const b = await gateway.connect({ headers: auth });
    try {
      expect((await a.listTools()).tools.map((tool) => tool.name)).toEqual(['list_directory']);
      expect(textOf(await a.callTool({ name: 'list_directory', arguments: { path: dir } }))).toBe('');
      expect((await a.listTools()).tools.map((tool) => tool.name)).toContain('read_text_file');
      // b is another MCP session: its sequence has not started.
      expect((await b.listTools()).tools.map((tool) => tool.name)).toEqual(['list_directory']);
      const refused = await b.callTool({ name: 'read_text_file', arguments: { path: join(dir, 'x') } });
      expect(textOf(refused)).toMatch(/^Tool "read_text_file" was not run: step "Look" expects list_directory next/);

      const sessionId = (a.transport as StreamableHTTPClientTransport).sessionId!;
      const session = await fetch(`${gateway.url}/api/sessions/${sessionId}`, { headers: auth });
      expect(session.status).toBe(200);
      const body = (await session.json()) as { agentId: string; state: { recentlyUsedTools: string[] } };
      expect(body.agentId).toBe('careful-editor');
      expect(JSON.stringify(body)).toContain('list_directory');
      const events = await fetch(`${gateway.url}/api/sessions/${sessionId}/events`, { headers: auth });
      expect(events.status).toBe(200);
      expect(JSON.stringify(await events.json())).toContain('sequence-advanced');
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('answers an unknown Mcp-Session-Id with 404', async () => {
    const response = await fetch(`${gateway.url}/mcp`, {
      method: 'POST',
      headers: {
        ...auth,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-session-id': 'nope',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(response.status).toBe(404);
  });
});

describe('several upstreams at once', () => {
  let gateway: HttpGatewayProcess;
  let dir: string;

  beforeAll(async () => {
    dir = workDir();
    const template = templateFile({
      id: 'two-servers',
      tools: ['fs__list_directory', 'fs__read_text_file', 'everything__echo'],
      orchestration: { steps: [] },
    });
    gateway = await startHttpGateway([
      template,
      '--http',
      '0',
      '--upstream',
      `fs=${FILESYSTEM_SERVER} ${dir}`,
      '--upstream',
      `everything=${EVERYTHING_SERVER}`,
      '--upstream',
      `more=${EVERYTHING_SERVER}`,
    ]);
  }, 60_000);
  afterAll(() => gateway?.stop());

  it('qualifies tools by server and refuses unqualified, hidden and other-server names', async () => {
    const client = await gateway.connect();
    try {
      expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual([
        'fs__read_text_file',
        'fs__list_directory',
        'everything__echo',
      ]);
      expect(textOf(await client.callTool({ name: 'everything__echo', arguments: { message: 'hi' } }))).toBe(
        'Echo: hi',
      );
      for (const name of ['echo', 'fs__echo', 'everything__read_text_file', 'fs__write_file', 'everything__get-env']) {
        const refused = await client.callTool({ name, arguments: { message: 'x', path: join(dir, 'y'), content: '' } });
        expect(refused.isError, name).toBe(true);
        expect(textOf(refused), name).toMatch(new RegExp(`^Tool "${name}" was not run`));
      }
      // Prompts are qualified like tools, and each goes to its own server.
      const prompts = (await client.listPrompts()).prompts.map((prompt) => prompt.name);
      expect(prompts).toContain('everything__args-prompt');
      expect(prompts).toContain('more__args-prompt');
      expect(prompts.every((name) => /^(everything|more)__/.test(name))).toBe(true);
      const prompt = await client.getPrompt({ name: 'more__args-prompt', arguments: { city: 'Oslo' } });
      expect(JSON.stringify(prompt.messages)).toContain('Oslo');
      await expect(client.getPrompt({ name: 'args-prompt', arguments: { city: 'Oslo' } })).rejects.toThrow(
        /no upstream has it/,
      );
      const completion = await client.complete({
        ref: { type: 'ref/prompt', name: 'everything__completable-prompt' },
        argument: { name: 'department', value: 'Eng' },
      });
      expect(completion.completion.values).toContain('Engineering');
      // Resources of both servers, each read from the one that listed it.
      const { resources } = await client.listResources();
      expect(resources.length).toBeGreaterThan(0);
      const read = await client.readResource({ uri: resources[0]!.uri });
      expect(read.contents[0]?.uri).toBe(resources[0]!.uri);
    } finally {
      await client.close();
    }
  });
});

describe('sessions that clients leave open', () => {
  let gateway: HttpGatewayProcess;

  beforeAll(async () => {
    gateway = await startHttpGateway([
      EDITOR,
      '--http',
      '0',
      '--session-idle',
      '1000',
      '--max-sessions',
      '1',
      '--',
      FILESYSTEM_SERVER,
      workDir(),
    ]);
  }, 60_000);
  afterAll(() => gateway?.stop());

  it('are bounded in number, and closed once idle', async () => {
    const first = await gateway.connect();
    await expect(gateway.connect()).rejects.toThrow(/503|MCP sessions are open/);
    // Idle past --session-idle: closed (with its upstream), and its id is unknown from then on.
    await new Promise((resolve) => setTimeout(resolve, 3_000)); // no request meanwhile: polling would keep it open
    await expect(first.listTools()).rejects.toThrow(/404|not found/i);
    const second = await gateway.connect();
    expect((await second.listTools()).tools.map((tool) => tool.name)).toEqual(['list_directory']);
    await second.close();
    await first.close();
  }, 30_000);
});

describe('an upstream over Streamable HTTP', () => {
  let front: HttpGatewayProcess;
  let dir: string;

  beforeAll(async () => {
    dir = workDir();
    // The upstream is itself served over HTTP: a gateway that lets every filesystem tool through.
    const open = templateFile({ id: 'open', tools: ['*'], orchestration: { steps: [] } });
    front = await startHttpGateway([open, '--http', '0', '--', FILESYSTEM_SERVER, dir]);
  }, 60_000);
  afterAll(() => front?.stop());

  it('is reached with --upstream <url>, and the policy in front still decides', async () => {
    const gateway = await connectStdio([EDITOR, '--upstream', `${front.url}/mcp`]);
    try {
      expect((await gateway.client.listTools()).tools.map((tool) => tool.name)).toEqual(['list_directory']);
      const refused = await gateway.client.callTool({
        name: 'write_file',
        arguments: { path: join(dir, 'x.txt'), content: 'x' },
      });
      expect(refused.isError).toBe(true);
      expect(existsSync(join(dir, 'x.txt'))).toBe(false);
      expect(textOf(await gateway.client.callTool({ name: 'list_directory', arguments: { path: dir } }))).toBe('');
    } finally {
      await gateway.close();
    }
  }, 60_000);
});

describe('baton mcp --http on a port in use', () => {
  let gateway: HttpGatewayProcess;
  beforeAll(async () => {
    gateway = await startHttpGateway([EDITOR, '--http', '0', '--', FILESYSTEM_SERVER, workDir()]);
  }, 60_000);
  afterAll(() => gateway?.stop());

  it('says so in one line that names --http, as baton serve says it, and exits 1', () => {
    const { port } = new URL(gateway.url);
    const run = spawnSync(
      process.execPath,
      [...CLI, 'mcp', EDITOR, '--http', port, '--', FILESYSTEM_SERVER, workDir()],
      { cwd: ROOT, encoding: 'utf8', timeout: 60_000, env: { ...process.env, FORCE_COLOR: '0' } },
    );
    expect(run.status).toBe(1);
    // The upstream (started first, to check the template against it) writes its own lines there.
    const ours = run.stderr
      .split('\n')
      .filter((line) => !/^(Secure MCP Filesystem Server|Client does not support)/.test(line));
    expect(ours.filter(Boolean)).toEqual([
      `baton mcp: port ${port} on 127.0.0.1 is in use; pass --http <another> (0 picks a free one).`,
    ]);
  }, 60_000);
});

describe('DNS rebinding', () => {
  let gateway: HttpGatewayProcess;
  beforeAll(async () => {
    const open = templateFile({ id: 'open', tools: ['*'], orchestration: { steps: [] } });
    gateway = await startHttpGateway([open, '--http', '0', '--', FILESYSTEM_SERVER, workDir()]);
  }, 60_000);
  afterAll(() => gateway?.stop());

  /** A request as a page of a rebound name sends it: to this port, under the site's own name. */
  const requestAs = (host: string, method: string, path: string, body?: string, extra: Record<string, string> = {}) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const { port } = new URL(gateway.url);
      const request = httpRequest(
        {
          host: '127.0.0.1',
          port,
          method,
          path,
          headers: {
            host: `${host}:${port}`,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            ...extra,
          },
        },
        (response) => {
          let text = '';
          response.on('data', (chunk: Buffer) => {
            text += chunk.toString('utf8');
          });
          response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }));
        },
      );
      request.on('error', reject);
      request.end(body);
    });
  const initialize = JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'page', version: '1' } },
  });

  it('answers a gateway on loopback only for loopback names: a rebound site gets 403 on every route', async () => {
    for (const [method, path, body] of [
      ['POST', '/mcp', initialize],
      ['GET', '/api/sessions/x', undefined],
      ['GET', '/healthz', undefined],
    ] as const) {
      const refused = await requestAs('rebind.attacker.test', method, path, body);
      expect(refused.status, `${method} ${path}`).toBe(403);
      expect(JSON.parse(refused.body)).toMatchObject({ error: { code: 'cross-origin', path: 'header.host' } });
    }
    // The rebound page is same-origin with itself, so its browser says so: only the Host tells.
    const { port } = new URL(gateway.url);
    const rebound = await requestAs('rebind.attacker.test', 'POST', '/mcp', initialize, {
      origin: `http://rebind.attacker.test:${port}`,
      'sec-fetch-site': 'same-origin',
    });
    expect(rebound.status).toBe(403);
    expect(JSON.parse(rebound.body)).toMatchObject({ error: { code: 'cross-origin', path: 'header.host' } });
    // Under its own names it answers as before.
    expect((await requestAs('localhost', 'POST', '/mcp', initialize)).status).toBe(200);
    expect((await requestAs('127.0.0.1', 'GET', '/healthz')).status).toBe(200);
  }, 60_000);
});

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'browser', version: '1' } },
});

describe('a browser client on another origin', () => {
  let gateway: HttpGatewayProcess;

  beforeAll(async () => {
    gateway = await startHttpGateway([
      EDITOR,
      '--http',
      '0',
      '--cors',
      'https://app.example.com',
      '--',
      FILESYSTEM_SERVER,
      workDir(),
    ]);
  }, 60_000);
  afterAll(() => gateway?.stop());

  it('may send and read the MCP session headers', async () => {
    const preflight = await fetch(`${gateway.url}/mcp`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://app.example.com',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'content-type, mcp-session-id, mcp-protocol-version',
      },
    });
    expect(preflight.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
    expect(preflight.headers.get('access-control-allow-headers')).toMatch(/mcp-session-id/);
    const initialize = await fetch(`${gateway.url}/mcp`, {
      method: 'POST',
      headers: {
        origin: 'https://app.example.com',
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'browser', version: '1' } },
      }),
    });
    expect(initialize.status).toBe(200);
    expect(initialize.headers.get('access-control-expose-headers')).toMatch(/mcp-session-id/);
    expect(initialize.headers.get('mcp-session-id')).toMatch(/^[0-9a-f-]{36}$/);
    await initialize.body?.cancel();
  });

  /** An `initialize` POST to /mcp with `headers` (a JSON body unless they say otherwise). */
  const post = (headers: Record<string, string>, body = INITIALIZE) =>
    fetch(`${gateway.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
      body,
    });

  it('refuses what a page of any other origin sends to /mcp, as /api refuses it, before the MCP server sees it', async () => {
    const refusals: Record<string, string>[] = [
      // A page of another site, as every current browser marks it.
      { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' },
      // An older browser: Origin only.
      { origin: 'https://evil.example' },
      // The "simple" request a page may send without asking first: text/plain, no preflight.
      { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site', 'content-type': 'text/plain' },
      // Another port of the same machine is another origin (same-site, not same-origin).
      { origin: 'http://localhost:5173', 'sec-fetch-site': 'same-site' },
    ];
    for (const headers of refusals) {
      const refused = await post(headers);
      expect(refused.status, JSON.stringify(headers)).toBe(403);
      expect(await refused.json(), JSON.stringify(headers)).toMatchObject({
        error: { code: 'cross-origin', path: 'header.origin', message: expect.stringContaining('--cors') },
      });
    }
    // The --cors origin passes, whatever the browser marks it as; so do the gateway's own origin
    // and requests of no browser (no Origin, no Sec-Fetch-Site: curl, a server, an MCP SDK client).
    const allowances: Record<string, string>[] = [
      { origin: 'https://app.example.com', 'sec-fetch-site': 'cross-site' },
      { origin: gateway.url, 'sec-fetch-site': 'same-origin' },
      {},
    ];
    for (const headers of allowances) {
      const allowed = await post(headers);
      expect(allowed.status, JSON.stringify(headers)).toBe(200);
      await allowed.body?.cancel();
    }
  });

  it("refuses another origin's request in an open MCP session, which goes on for its own client", async () => {
    const client = await gateway.connect();
    try {
      const sessionId = (client.transport as StreamableHTTPClientTransport).sessionId!;
      const ending = await fetch(`${gateway.url}/mcp`, {
        method: 'DELETE',
        headers: { origin: 'https://evil.example', 'sec-fetch-site': 'cross-site', 'mcp-session-id': sessionId },
      });
      expect(ending.status).toBe(403);
      const call = await post(
        { origin: 'https://evil.example', 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-06-18' },
        JSON.stringify({
          jsonrpc: '2.0',
          id: 7,
          method: 'tools/call',
          params: { name: 'list_directory', arguments: {} },
        }),
      );
      expect(call.status).toBe(403);
      // The SDK's own client is no browser: it still lists and calls.
      expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual(['list_directory']);
    } finally {
      await client.close();
    }
  });
});
