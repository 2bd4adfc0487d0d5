/**
 * The gateway's upstreams over a session's life: what they are started with, and what happens
 * when one goes away. Driven as a desktop client drives `baton mcp`: spawned over stdio, with the
 * SDK's client.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { freePort } from './helpers/free-port.js';
import {
  connectStdio,
  EVERYTHING_SERVER,
  FILESYSTEM_SERVER,
  inProcessGateway,
  ROOT,
  type StdioGateway,
  templateFile,
  textOf,
  workDir,
} from './helpers/mcp-gateway.js';

const READER = templateFile({
  id: 'reader',
  tools: ['read_text_file', 'list_directory'],
  orchestration: { steps: [] },
});

/**
 * What `npx -y -p baton-agents -p @modelcontextprotocol/sdk baton mcp …` (the README's desktop
 * configuration) leaves in the environment of the gateway it launches, as npm 11 sets it: every
 * setting given on its command line as `npm_config_*` (arrays joined by blank lines), and the
 * lifecycle and package variables of the script it runs.
 */
const NPX_LAUNCHER_ENV = {
  npm_command: 'exec',
  npm_config_package: 'baton-agents\n\n@modelcontextprotocol/sdk',
  npm_config_yes: 'true',
  npm_lifecycle_event: 'npx',
  npm_lifecycle_script: 'baton',
  npm_package_name: 'baton-agents',
  npm_package_json: '/nowhere/package.json',
};

describe('the environment an upstream starts with', () => {
  const gateways: StdioGateway[] = [];
  afterEach(async () => {
    await Promise.all(gateways.map((gateway) => gateway.close()));
    gateways.length = 0;
  });

  it('lets the README’s desktop line start: `npx -y <server>` behind a gateway that npx launched', async () => {
    const dir = workDir();
    writeFileSync(join(dir, 'note.txt'), 'hello from the disk');
    // The inner command is the README's, with --offline: the server is resolved from this
    // repository's node_modules (the gateway's working directory), never from the network. With
    // npm_config_package passed on, npx would run "@modelcontextprotocol/server-filesystem" as a
    // program of that name ("not found"), and the gateway could not connect to it.
    const gateway = await connectStdio(
      [READER, '--', 'npx', '--offline', '-y', '@modelcontextprotocol/server-filesystem', dir],
      { env: NPX_LAUNCHER_ENV },
    );
    gateways.push(gateway);
    const read = await gateway.client.callTool({ name: 'read_text_file', arguments: { path: join(dir, 'note.txt') } });
    expect(read.isError).toBeFalsy();
    expect(textOf(read)).toBe('hello from the disk');
  }, 90_000);

  it('keeps what the user set: PATH, HOME and their own variables reach the upstream', async () => {
    const dir = workDir();
    const seen = join(dir, 'env.txt');
    // The upstream writes the variables it got, then serves as the filesystem server does.
    const script = `env > ${JSON.stringify(seen)} && exec ${JSON.stringify(process.execPath)} ${JSON.stringify(join(ROOT, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js'))} ${JSON.stringify(dir)}`;
    const gateway = await connectStdio([READER, '--', 'sh', '-c', script], {
      env: { ...NPX_LAUNCHER_ENV, BATON_TEST_MINE: 'kept', NPM_CONFIG_REGISTRY: 'https://registry.example.com/' },
    });
    gateways.push(gateway);
    const read = await gateway.client.callTool({ name: 'read_text_file', arguments: { path: seen } });
    const names = textOf(read)
      .split('\n')
      .map((line) => line.slice(0, line.indexOf('=')));
    expect(names).toEqual(expect.arrayContaining(['PATH', 'HOME', 'BATON_TEST_MINE', 'NPM_CONFIG_REGISTRY']));
    expect(names.filter((name) => name.startsWith('npm_'))).toEqual([]);
  }, 60_000);
});

const FAULTY = [process.execPath, '--import', 'tsx', join(ROOT, 'test/fixtures/mcp-faulty-upstream.ts')];

/** The processes `pid` started (the gateway's upstreams). */
function childrenOf(pid: number): number[] {
  try {
    return execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number);
  } catch {
    return []; // pgrep exits 1 when there are none
  }
}

/** Resolves after `ms`. */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('an upstream that goes away mid-session', () => {
  const gateways: StdioGateway[] = [];
  afterEach(async () => {
    await Promise.all(gateways.map((gateway) => gateway.close()));
    gateways.length = 0;
  });

  const startStdio = async (args: readonly string[], env: Record<string, string> = {}) => {
    let changes = 0;
    const gateway = await connectStdio(args, {
      env,
      onClient: (client) =>
        client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
          changes++;
        }),
    });
    gateways.push(gateway);
    return { gateway, client: gateway.client, changes: () => changes };
  };

  it('that crashes mid-call is restarted: the call fails clearly, later calls on the session run again', async () => {
    const calls = join(workDir(), 'calls.txt');
    const template = templateFile({
      id: 'restarts',
      tools: ['ok', 'crash', 'slow'],
      orchestration: {
        steps: [],
        rules: [{ tools: ['crash'], limit: { max: 1, per: 'session' }, reason: 'One crash per session' }],
      },
    });
    const { gateway, client, changes } = await startStdio([template, '--', ...FAULTY], { CALLS_FILE: calls });
    expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual(['ok', 'crash', 'slow']);

    const crashed = await client.callTool({ name: 'crash', arguments: {} });
    expect(crashed.isError).toBe(true);
    expect(textOf(crashed)).toMatch(
      /^Tool "crash" failed at the upstream MCP server: MCP error -32000: Connection closed \(the upstream MCP server ".*mcp-faulty-upstream\.ts" exited and is restarting; try again in a moment\)$/,
    );
    // Sent while the upstream starts again (at least 100 ms, and a process start): not sent, and
    // said so. The session's tools went away, which the client was told.
    const early = await client.callTool({ name: 'ok', arguments: {} });
    expect(textOf(early)).toMatch(
      /^Tool "ok" was not run: the upstream MCP server ".*mcp-faulty-upstream\.ts" exited and is restarting; try again in a moment\.$/,
    );
    // What passes through to it is refused the same way, never with "Not connected".
    await expect(client.listPrompts()).rejects.toThrow(
      /^MCP error -32603: The upstream MCP server ".*mcp-faulty-upstream\.ts" exited and is restarting; try again in a moment\.$/,
    );
    // ...and came back, which the client is told too.
    await expect.poll(() => changes(), { timeout: 15_000 }).toBe(2);
    // The crashed call may have run before the upstream died: it counted (abandoned).
    expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual(['ok', 'slow']);
    expect(textOf(await client.callTool({ name: 'ok', arguments: {} }))).toBe('ok');
    expect(textOf(await client.callTool({ name: 'crash', arguments: {} }))).toContain('One crash per session');
    expect(readFileSync(calls, 'utf8').split('\n').filter(Boolean)).toEqual(['crash', 'ok']);
    // The operator reads which session's which upstream, and what was done.
    const upstream = '"[^"]*mcp-faulty-upstream\\.ts"';
    expect(gateway.stderr()).toMatch(
      new RegExp(`baton mcp: session "mcp-[^"]+": upstream ${upstream} exited; restarting it in 100 ms`),
    );
    expect(gateway.stderr()).toMatch(
      new RegExp(`baton mcp: session "mcp-[^"]+": upstream ${upstream} is back \\(restart 1\\)`),
    );
    expect(gateway.stderr()).not.toMatch(/Not connected/);
  }, 60_000);

  it('the reference filesystem server, killed: writes on the same session reach the disk again, and none was lost unsaid', async () => {
    const dir = workDir();
    const template = templateFile({
      id: 'writer',
      tools: ['write_file', 'read_text_file'],
      orchestration: { steps: [] },
    });
    const { gateway, client } = await startStdio([template, '--', FILESYSTEM_SERVER, dir]);
    const write = (file: string) =>
      client.callTool({ name: 'write_file', arguments: { path: join(dir, file), content: file } });
    expect((await write('before.txt')).isError).toBeFalsy();
    const [upstream, ...others] = childrenOf(gateway.transport.pid!);
    expect(others).toEqual([]);
    process.kill(upstream!, 'SIGKILL');
    // Every write until the restart is refused with why (the gateway may not have seen the exit
    // yet, then the call fails as it is sent); none says "Not connected", and none left a file.
    let written: string | undefined;
    const refused: string[] = [];
    for (let i = 0; written === undefined && i < 200; i++) {
      const file = `after-${i}.txt`;
      const result = await write(file);
      if (result.isError) {
        expect(textOf(result)).toMatch(/exited and is restarting; try again in a moment/);
        refused.push(file);
        await sleep(50);
      } else {
        written = file;
      }
    }
    expect(written).toBeDefined();
    expect(readFileSync(join(dir, written!), 'utf8')).toBe(written);
    for (const file of refused) expect(existsSync(join(dir, file))).toBe(false);
    expect(
      textOf(await client.callTool({ name: 'read_text_file', arguments: { path: join(dir, 'before.txt') } })),
    ).toBe('before.txt');
    expect(childrenOf(gateway.transport.pid!)).not.toContain(upstream);
    expect(gateway.stderr()).toMatch(
      /session "mcp-[^"]+": upstream "[^"]*mcp-server-filesystem [^"]*" exited; restarting it/,
    );
  }, 60_000);

  describe('over Streamable HTTP', () => {
    let server: ChildProcess | undefined;
    afterEach(() => {
      server?.kill('SIGKILL');
    });

    /** Starts the everything server over Streamable HTTP on `port`; resolves once it listens. */
    const serve = (port: number) =>
      new Promise<ChildProcess>((resolve, reject) => {
        const child = spawn(EVERYTHING_SERVER, ['streamableHttp'], {
          env: { ...process.env, PORT: String(port) },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let output = '';
        const onData = (chunk: Buffer) => {
          output += chunk.toString('utf8');
          if (/listening on port/i.test(output)) resolve(child);
        };
        child.stdout?.on('data', onData);
        child.stderr?.on('data', onData);
        child.once('exit', (code) => reject(new Error(`the everything server exited (${code}):\n${output}`)));
      });

    it('that drops mid-call is connected again, and calls on the same session run again', async () => {
      const port = await freePort();
      server = await serve(port);
      const url = `http://127.0.0.1:${port}/mcp`;
      const template = templateFile({
        id: 'remote',
        tools: ['echo', 'trigger-long-running-operation'],
        orchestration: { steps: [] },
      });
      const { gateway, client, changes } = await startStdio([template, '--upstream', url]);
      expect(textOf(await client.callTool({ name: 'echo', arguments: { message: 'one' } }))).toBe('Echo: one');
      let progressed = 0;
      const long = client.callTool(
        { name: 'trigger-long-running-operation', arguments: { duration: 20, steps: 20 } },
        undefined,
        {
          onprogress: () => {
            progressed++;
          },
          timeout: 60_000,
        },
      );
      await expect.poll(() => progressed, { timeout: 10_000 }).toBeGreaterThan(0);
      server.kill('SIGKILL');
      const began = Date.now();
      const dropped = await long;
      expect(Date.now() - began).toBeLessThan(15_000);
      expect(dropped.isError).toBe(true);
      expect(textOf(dropped)).toMatch(
        /^Tool "trigger-long-running-operation" failed at the upstream MCP server: .*\(the upstream MCP server "http:\/\/127\.0\.0\.1:\d+\/mcp" stopped answering .* and is reconnecting; try again in a moment\)$/,
      );
      const down = await client.callTool({ name: 'echo', arguments: { message: 'two' } });
      expect(textOf(down)).toMatch(
        /^Tool "echo" was not run: the upstream MCP server "http:.*" stopped answering .* and is reconnecting; try again in a moment\.$/,
      );
      // The server comes back (a new process: the old HTTP session is gone with it).
      server = await serve(port);
      await expect.poll(() => changes(), { timeout: 20_000 }).toBe(2);
      expect(textOf(await client.callTool({ name: 'echo', arguments: { message: 'three' } }))).toBe('Echo: three');
      expect(gateway.stderr()).toMatch(
        /session "mcp-[^"]+": upstream "http:\/\/127\.0\.0\.1:\d+\/mcp" stopped answering/,
      );
      expect(gateway.stderr()).toMatch(/upstream "http:\/\/127\.0\.0\.1:\d+\/mcp" is back \(reconnect 1\)/);
    }, 90_000);
  });

  it('that keeps failing is given up, said once, and the session says so to every call', async () => {
    // The upstream starts once; every restart exits at once.
    const mark = join(workDir(), 'started');
    const script = `if [ -e "$MARK" ]; then exit 1; fi; touch "$MARK"; exec ${FAULTY.map((word) => JSON.stringify(word)).join(' ')}`;
    const said: string[] = [];
    const sessionId = `give-up-${randomUUID()}`;
    const manager = createOrchestrationManager({ store: 'memory:' });
    const { client, close } = await inProcessGateway(
      { id: 'gives-up', tools: ['ok', 'crash'], orchestration: { steps: [] } },
      manager,
      workDir(),
      sessionId,
      { command: 'sh', args: ['-c', script], env: { MARK: mark } },
      {
        restart: { initialDelayMs: 10, maxDelayMs: 40, maxFailures: 3, windowMs: 60_000 },
        onError: (error) => said.push((error as Error).message),
      },
    );
    try {
      expect(textOf(await client.callTool({ name: 'crash', arguments: {} }))).toMatch(/is restarting/);
      await expect
        .poll(() => said.filter((line) => /not restarted again/.test(line)), { timeout: 15_000 })
        .toHaveLength(1);
      const givenUp = said.find((line) => /not restarted again/.test(line))!;
      expect(givenUp).toMatch(
        new RegExp(
          `^session "${sessionId}": upstream "sh -c .*" could not be restarted \\(.*\\); it failed 3 times within 60 s, so it is not restarted again: its tools stay unavailable to this session until the client reconnects$`,
        ),
      );
      const after = await client.callTool({ name: 'ok', arguments: {} });
      expect(textOf(after)).toMatch(
        /^Tool "ok" was not run: the upstream MCP server "sh -c .*" could not be restarted \(.*\) and is not restarted again \(it failed 3 times within 60 s\); reconnect to try again\.$/,
      );
      expect((await client.listTools()).tools).toEqual([]);
      await sleep(200);
      expect(said.filter((line) => /not restarted again/.test(line))).toHaveLength(1);
      expect(said.filter((line) => /restarting it in/.test(line))).toHaveLength(2);
    } finally {
      await close();
      await manager.close();
    }
  }, 60_000);
});
