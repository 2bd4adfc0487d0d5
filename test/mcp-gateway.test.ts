/**
 * `baton mcp` in front of the MCP reference filesystem server, driven by the SDK's own client
 * over stdio, as a desktop client runs it. The disk is the witness: a refused write leaves no file.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import {
  CallToolResultSchema,
  type JSONRPCMessage,
  ListRootsRequestSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ToolRejectedError } from '../src/ai-sdk/orchestrate.js';
import { McpGateway } from '../src/mcp/gateway.js';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import {
  CLI,
  connectStdio,
  FILESYSTEM_SERVER,
  ROOT,
  type StdioGateway,
  templateFile,
  textOf,
  workDir,
} from './helpers/mcp-gateway.js';

const EDITOR = join(ROOT, 'examples/mcp/careful-editor.json');

/** The tools the reference server itself lists, straight from it. */
async function upstreamTools(dir: string) {
  const client = new Client({ name: 'direct', version: '1' });
  await client.connect(new StdioClientTransport({ command: FILESYSTEM_SERVER, args: [dir], stderr: 'ignore' }));
  try {
    return (await client.listTools()).tools;
  } finally {
    await client.close();
  }
}

describe('baton mcp over stdio, in front of the reference filesystem server', () => {
  let dir: string;
  let gateway: StdioGateway;
  let changes = 0;

  beforeAll(async () => {
    dir = workDir();
    gateway = await connectStdio([EDITOR, '--', FILESYSTEM_SERVER, dir], {
      onClient: (client) =>
        client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
          changes++;
        }),
    });
  }, 60_000);
  afterAll(() => gateway?.close());

  it('lists exactly what the active step allows, with the upstream definitions unchanged', async () => {
    const { tools } = await gateway.client.listTools();
    // Step "Look" starts with its sequence: list_directory first.
    expect(tools.map((tool) => tool.name)).toEqual(['list_directory']);
    const direct = (await upstreamTools(dir)).find((tool) => tool.name === 'list_directory');
    expect(tools[0]).toEqual(direct);
  });

  it('refuses a write the step does not allow: the upstream never sees it, the disk has no file, the client reads why', async () => {
    const result = await gateway.client.callTool({
      name: 'write_file',
      arguments: { path: join(dir, 'early.txt'), content: 'too early' },
    });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toBe(
      'Tool "write_file" was not run: step "Look" allows only list_allowed_directories, list_directory, read_text_file, search_files. Allowed tools now: list_directory.',
    );
    expect(existsSync(join(dir, 'early.txt'))).toBe(false);
  });

  it('advances the sequence, announces the new tool list, then lets a write through once a file was read', async () => {
    const before = changes;
    const listed = await gateway.client.callTool({ name: 'list_directory', arguments: { path: dir } });
    expect(listed.isError).toBeFalsy();
    await expect.poll(() => changes).toBeGreaterThan(before);
    expect((await gateway.client.listTools()).tools.map((tool) => tool.name)).toEqual([
      'read_text_file',
      'list_directory',
      'search_files',
      'list_allowed_directories',
    ]);
    // Hidden by the template: never listed, never run.
    const moved = await gateway.client.callTool({
      name: 'move_file',
      arguments: { source: join(dir, 'a'), destination: join(dir, 'b') },
    });
    expect(textOf(moved)).toMatch(/^Tool "move_file" was not run: "move_file" is not one of the agent's tools/);

    const seed = join(dir, 'seed.txt');
    const write = await gateway.client.callTool({ name: 'write_file', arguments: { path: seed, content: 'no' } });
    expect(write.isError).toBe(true);
    expect(existsSync(seed)).toBe(false);
    // A read of a missing file fails at the upstream: not recorded, so the step does not change.
    const failed = await gateway.client.callTool({ name: 'read_text_file', arguments: { path: seed } });
    expect(failed.isError).toBe(true);
    expect((await gateway.client.listTools()).tools.map((tool) => tool.name)).not.toContain('write_file');
  });

  it('counts a limit rule across the session: the fourth write is refused with the rule’s reason', async () => {
    // Make a file to read through the upstream itself: reading it switches to step "Write".
    const list = await gateway.client.callTool({ name: 'list_allowed_directories', arguments: {} });
    expect(textOf(list)).toContain(dir);
    const before = changes;
    const write0 = join(dir, 'readme.txt');
    // Not yet: still in "Look".
    expect(
      (await gateway.client.callTool({ name: 'write_file', arguments: { path: write0, content: 'x' } })).isError,
    ).toBe(true);
    expect(existsSync(write0)).toBe(false);
    writeFileSync(join(dir, 'hello.txt'), 'hello');
    const read = await gateway.client.callTool({ name: 'read_text_file', arguments: { path: join(dir, 'hello.txt') } });
    expect(textOf(read)).toBe('hello');
    await expect.poll(() => changes).toBeGreaterThan(before);
    expect((await gateway.client.listTools()).tools.map((tool) => tool.name)).toEqual([
      'read_text_file',
      'write_file',
      'create_directory',
      'list_directory',
    ]);
    for (const n of [1, 2, 3]) {
      const ok = await gateway.client.callTool({
        name: 'write_file',
        arguments: { path: join(dir, `w${n}.txt`), content: `${n}` },
      });
      expect(ok.isError).toBeFalsy();
    }
    const fourth = await gateway.client.callTool({
      name: 'write_file',
      arguments: { path: join(dir, 'w4.txt'), content: '4' },
    });
    expect(fourth.isError).toBe(true);
    expect(textOf(fourth)).toContain('At most three writes per session');
    expect(
      readdirSync(dir)
        .filter((file) => file.startsWith('w'))
        .sort(),
    ).toEqual(['w1.txt', 'w2.txt', 'w3.txt']);
    expect(readFileSync(join(dir, 'w2.txt'), 'utf8')).toBe('2');
  });

  it('relays an error of the upstream once, as the upstream said it', async () => {
    // The filesystem server serves no resources: it answers -32601, and the client reads that
    // once, as it would from the server directly (the SDK's client prefixes what it receives).
    const direct = new Client({ name: 'direct', version: '1' });
    await direct.connect(new StdioClientTransport({ command: FILESYSTEM_SERVER, args: [dir], stderr: 'ignore' }));
    const theirs = await direct.listResources().catch((error: Error) => error.message);
    await direct.close();
    expect(theirs).toBe('MCP error -32601: Method not found');
    await expect(gateway.client.listResources()).rejects.toThrow(/^MCP error -32601: Method not found$/);
    await expect(gateway.client.listPrompts()).rejects.toThrow(/^MCP error -32601: Method not found$/);
  });
});

describe('a client of a gateway with --watch', () => {
  it('hears one tools/list_changed per change of its tools, and none before any', async () => {
    const dir = workDir();
    const template = templateFile({
      id: 'watched-alone',
      tools: ['list_directory', 'write_file'],
      orchestration: {
        steps: [
          {
            name: 'First',
            isDefault: true,
            sequence: ['list_directory'],
            availableTools: { allowed: ['list_directory', 'write_file'] },
          },
        ],
      },
    });
    let changes = 0;
    const gateway = await connectStdio([template, '--watch', '20', '--', FILESYSTEM_SERVER, dir], {
      onClient: (client) =>
        client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
          changes++;
        }),
    });
    try {
      // Several re-reads happen before the client first lists its tools: nothing changed.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect((await gateway.client.listTools()).tools.map((tool) => tool.name)).toEqual(['list_directory']);
      expect(changes).toBe(0);
      await gateway.client.callTool({ name: 'list_directory', arguments: { path: dir } });
      await expect.poll(() => changes).toBe(1);
      // Many more re-reads: the change was told once.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(changes).toBe(1);
      expect((await gateway.client.listTools()).tools.map((tool) => tool.name)).toEqual([
        'write_file',
        'list_directory',
      ]);
    } finally {
      await gateway.close();
    }
  }, 60_000);
});

describe('baton mcp refuses what it cannot honour, at start', () => {
  it('names the steps of a template that depends on user messages', () => {
    const file = templateFile({
      id: 'chatty',
      tools: ['read_text_file'],
      orchestration: {
        steps: [
          { name: 'Greet', conditions: [{ type: 'message_contains', value: 'hello' }] },
          { name: 'Work', isDefault: true, resetSequenceOn: ['new_message'], sequence: ['read_text_file'] },
        ],
      },
    });
    const run = spawnSync(process.execPath, [...CLI, 'mcp', file, '--', FILESYSTEM_SERVER, workDir()], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 30_000,
      input: '',
    });
    expect(run.status).toBe(1);
    expect(run.stdout).toBe(''); // stdout is the protocol's: nothing else goes there
    expect(run.stderr).toContain('step "Greet": condition message_contains');
    expect(run.stderr).toContain('step "Work": resetSequenceOn "new_message"');
  });

  it('says what is wrong with an upstream that cannot start, to the client and on stderr', async () => {
    const error = await connectStdio([EDITOR, '--', join(ROOT, 'no-such-server')]).catch((e: Error) => e);
    expect(error).toBeInstanceOf(Error);
    expect(String(error)).toMatch(/could not connect to the upstream MCP server ".*no-such-server"/);
  });
});

describe('a hostile client', () => {
  let dir: string;
  let gateway: StdioGateway;

  beforeAll(async () => {
    dir = workDir();
    gateway = await connectStdio([EDITOR, '--', FILESYSTEM_SERVER, dir]);
  }, 60_000);
  afterAll(() => gateway?.close());

  const writes = () => readdirSync(dir);

  it('gets 0 forbidden executions from hidden, unknown, look-alike and malformed calls, and the gateway stays up', async () => {
    const target = join(dir, 'pwned.txt');
    const names = [
      'write_file',
      'move_file',
      'edit_file',
      'Write_file',
      'write_file ',
      ' write_file',
      'write_file\u200b',
      'write\u2011file',
      'write_file/../write_file',
      'fs.write_file',
      'other.write_file',
      '*',
      'write_*',
      '',
      'x'.repeat(5000),
      '__proto__',
      'constructor',
    ];
    for (const name of names) {
      const result = await gateway.client
        .callTool({ name, arguments: { path: target, content: 'x', source: target, destination: target } })
        .catch((error: Error) => ({ isError: true, content: [{ type: 'text', text: error.message }] }));
      expect(result.isError, name).toBe(true);
    }
    // Malformed arguments to an allowed tool: the upstream refuses them as a tool error.
    for (const args of [{}, { path: 42 }, { path: [dir] }, { path: `${dir}/../../etc` }]) {
      const result = await gateway.client.callTool({
        name: 'list_directory',
        arguments: args as Record<string, unknown>,
      });
      expect(result.isError).toBe(true);
    }
    expect(writes()).toEqual([]);
    expect((await gateway.client.listTools()).tools.map((tool) => tool.name)).toEqual(['list_directory']);
  });

  it('answers a flood of tools/list and still decides calls', async () => {
    const lists = await Promise.all(Array.from({ length: 300 }, () => gateway.client.listTools()));
    for (const list of lists) expect(list.tools.map((tool) => tool.name)).toEqual(['list_directory']);
    await gateway.client.ping();
  });

  it('runs a repeated request id at most once', async () => {
    // A raw client on the gateway's stdio, sending the same JSON-RPC id twice.
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [...CLI, 'mcp', EDITOR, '--', FILESYSTEM_SERVER, dir],
      cwd: ROOT,
      stderr: 'ignore',
    });
    const answers: JSONRPCMessage[] = [];
    transport.onmessage = (message) => {
      answers.push(message);
    };
    await transport.start();
    await transport.send({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    await expect.poll(() => answers.length, { timeout: 20_000 }).toBe(1);
    await transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    const call = {
      jsonrpc: '2.0' as const,
      id: 7,
      method: 'tools/call',
      params: { name: 'list_directory', arguments: { path: dir } },
    };
    const replies = () => answers.filter((answer) => 'id' in answer && answer.id === 7);
    await transport.send(call);
    await expect.poll(() => replies().length, { timeout: 20_000 }).toBe(1);
    await transport.send(call);
    await expect.poll(() => replies().length, { timeout: 20_000 }).toBe(2);
    const [first, second] = replies().map((answer) =>
      CallToolResultSchema.parse((answer as { result: unknown }).result),
    );
    expect(first!.isError).toBeFalsy();
    expect(second!.isError).toBe(true);
    expect(textOf(second)).toContain('was already used in this session');
    await transport.close();
  });
});

describe('annotation selectors over upstream tools', () => {
  it('offers what the upstream declares read-only, and refuses the rest', async () => {
    const dir = workDir();
    const template = templateFile({ id: 'readers', tools: ['@readOnly'], orchestration: { steps: [] } });
    const gateway = await connectStdio([template, '--', FILESYSTEM_SERVER, dir]);
    try {
      const direct = await upstreamTools(dir);
      const listed = (await gateway.client.listTools()).tools.map((tool) => tool.name);
      expect(listed).toEqual(direct.filter((tool) => tool.annotations?.readOnlyHint === true).map((tool) => tool.name));
      expect(listed).toContain('read_text_file');
      const write = await gateway.client.callTool({
        name: 'write_file',
        arguments: { path: join(dir, 'x'), content: '' },
      });
      expect(write.isError).toBe(true);
      expect(readdirSync(dir)).toEqual([]);
    } finally {
      await gateway.close();
    }
  }, 60_000);
});

describe('calls racing a step change', () => {
  it('never run a write once the step that forbids it is decided: every refused write left no file', async () => {
    const dir = workDir();
    writeFileSync(join(dir, 'lock.txt'), 'locked');
    // Drafting allows writes; reading lock.txt switches to Locked, where writing is not allowed.
    const template = templateFile({
      id: 'race',
      tools: ['write_file', 'read_text_file'],
      orchestration: {
        steps: [
          { name: 'Draft', isDefault: true, availableTools: { allowed: ['write_file', 'read_text_file'] } },
          {
            name: 'Locked',
            conditions: [{ type: 'tool_used', value: 'read_text_file' }],
            availableTools: { allowed: ['read_text_file'] },
          },
        ],
      },
    });
    const gateway = await connectStdio([template, '--', FILESYSTEM_SERVER, dir]);
    try {
      const write = (i: number) =>
        gateway.client.callTool({ name: 'write_file', arguments: { path: join(dir, `w${i}.txt`), content: `${i}` } });
      const calls = [
        ...[0, 1, 2].map(write),
        gateway.client.callTool({ name: 'read_text_file', arguments: { path: join(dir, 'lock.txt') } }),
        ...[3, 4, 5, 6, 7, 8].map(write),
      ];
      const results = await Promise.all(calls);
      const writes = results.filter((_, i) => i !== 3);
      // writes[i] wrote w<i>.txt (the read was calls[3]).
      const ran = writes.flatMap((result, i) => (result.isError ? [] : [`w${i}.txt`]));
      for (const result of writes.filter((r) => r.isError))
        expect(textOf(result)).toMatch(/^Tool "write_file" was not run: /);
      // The disk holds exactly the writes that were allowed: a refused one never reached the server.
      const written = readdirSync(dir).filter((name) => name !== 'lock.txt');
      expect(written.sort()).toEqual(ran.sort());
      expect((await gateway.client.listTools()).tools.map((tool) => tool.name)).toEqual(['read_text_file']);
      const late = await write(99);
      expect(textOf(late)).toContain('step "Locked" allows only read_text_file');
      expect(existsSync(join(dir, 'w99.txt'))).toBe(false);
    } finally {
      await gateway.close();
    }
  }, 60_000);
});

describe('the reason a refused call gets', () => {
  it('is the one explain() gives, in the AI SDK loop’s words', async () => {
    const template = JSON.parse(readFileSync(EDITOR, 'utf8'));
    const manager = createOrchestrationManager();
    const dir = workDir();
    const gateway = new McpGateway({
      template,
      upstreams: [{ command: FILESYSTEM_SERVER, args: [dir] }],
      manager,
      upstreamStderr: 'ignore',
    });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    const session = await gateway.connect(serverSide, { sessionId: 'explained' });
    const client = new Client({ name: 'test', version: '1' });
    await client.connect(clientSide);
    try {
      for (const tool of ['write_file', 'read_text_file', 'move_file']) {
        const explanation = await manager.explain(template, undefined, 'explained', session.agentTools);
        const judged = explanation.tools.find((entry) => entry.tool === tool);
        const result = await client.callTool({ name: tool, arguments: { path: join(dir, 'x') } });
        const expected = judged?.reason
          ? new ToolRejectedError(tool, judged.reason, explanation.allowedTools).message
          : `Tool "${tool}" was not run: "${tool}" is not one of the agent's tools. Allowed tools now: ${explanation.allowedTools.join(', ')}.`;
        expect(textOf(result)).toBe(expected);
      }
    } finally {
      await client.close();
      await gateway.close();
    }
  }, 60_000);
});

describe('requests and notifications between the upstream and the client', () => {
  it('pass through both ways: the filesystem server asks the client for its roots, and hears when they change', async () => {
    const [fromArgs, first, second] = [workDir(), workDir(), workDir()];
    let roots = [first];
    const template = templateFile({ id: 'open', tools: ['*'], orchestration: { steps: [] } });
    const gateway = await connectStdio([template, '--', FILESYSTEM_SERVER, fromArgs], {
      client: { capabilities: { roots: { listChanged: true } } },
      onClient: (client) =>
        client.setRequestHandler(ListRootsRequestSchema, async () => ({
          roots: roots.map((path) => ({ uri: `file://${path}` })),
        })),
    });
    const allowed = async () =>
      textOf(await gateway.client.callTool({ name: 'list_allowed_directories', arguments: {} }));
    try {
      await expect.poll(allowed, { timeout: 10_000 }).toContain(first);
      expect(await allowed()).not.toContain(fromArgs);
      roots = [second];
      await gateway.client.sendRootsListChanged();
      await expect.poll(allowed, { timeout: 10_000 }).toContain(second);
      expect(await allowed()).not.toContain(first);
    } finally {
      await gateway.close();
    }
  }, 60_000);
});

describe('a rule that keeps writes in one folder', () => {
  /** Every file under `dir`, relative to it. */
  const filesUnder = (dir: string): string[] =>
    readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile())
      .map((entry) => relative(dir, join(entry.parentPath, entry.name)))
      .sort();

  /** A work folder with `allowed/` and the folders a write may try to reach. */
  function workWithFolders(): { dir: string; allowed: string } {
    const dir = workDir();
    for (const folder of ['allowed/sub', 'allowed/%2e%2e', 'other', 'allowedX']) {
      mkdirSync(join(dir, folder), { recursive: true });
    }
    return { dir, allowed: join(dir, 'allowed') };
  }

  const confinedTo = (when: string) =>
    templateFile({
      id: 'confined',
      tools: ['write_file'],
      orchestration: {
        rules: [{ tools: ['write_file'], when, effect: 'deny', reason: 'Write only under allowed/' }],
        steps: [],
      },
    });

  it('with startsWith, lets allowed/../other through: the upstream writes other/x.txt', async () => {
    const { dir, allowed } = workWithFolders();
    const gateway = await connectStdio([
      confinedTo(`!args.path.startsWith('${allowed}/')`),
      '--',
      FILESYSTEM_SERVER,
      dir,
    ]);
    try {
      const result = await gateway.client.callTool({
        name: 'write_file',
        arguments: { path: `${allowed}/../other/x.txt`, content: 'escaped' },
      });
      expect(result.isError).toBeFalsy();
      expect(filesUnder(dir)).toEqual(['other/x.txt']);
    } finally {
      await gateway.close();
    }
  }, 60_000);

  it('with isWithinPath, refuses every way out through .., // and ./, and writes encoded names as names', async () => {
    const { dir, allowed } = workWithFolders();
    const gateway = await connectStdio([
      confinedTo(`!args.path.isWithinPath('${allowed}')`),
      '--',
      FILESYSTEM_SERVER,
      dir,
    ]);
    const write = (path: string) => gateway.client.callTool({ name: 'write_file', arguments: { path, content: path } });
    try {
      for (const path of [
        `${allowed}/../other/a.txt`,
        `${allowed}//../other/b.txt`,
        `${allowed}/./../other/c.txt`,
        `${allowed}/sub/../../other/d.txt`,
        `${dir}/allowedX/e.txt`,
        `${dir}/f.txt`,
      ]) {
        const result = await write(path);
        expect(result.isError, path).toBe(true);
        expect(textOf(result), path).toBe(
          'Tool "write_file" was not run: Write only under allowed/. Allowed tools now: write_file.',
        );
      }
      for (const path of [
        `${allowed}/g.txt`,
        `${dir}//allowed//h.txt`,
        `${dir}/./allowed/./i.txt`,
        `${allowed}/sub/../j.txt`,
        // Filesystems do not decode %2e%2e: a folder of that name inside allowed/, and a file name.
        `${allowed}/%2e%2e/k.txt`,
        `${allowed}/%2e%2e%2fother%2fl.txt`,
      ]) {
        expect((await write(path)).isError, path).toBeFalsy();
      }
      // The disk: nothing outside allowed/, everything inside where its path says.
      expect(filesUnder(dir)).toEqual(
        [
          'allowed/%2e%2e/k.txt',
          'allowed/%2e%2e%2fother%2fl.txt',
          'allowed/g.txt',
          'allowed/h.txt',
          'allowed/i.txt',
          'allowed/j.txt',
        ].sort(),
      );
      expect(readFileSync(join(allowed, 'h.txt'), 'utf8')).toBe(`${dir}//allowed//h.txt`);
    } finally {
      await gateway.close();
    }
  }, 60_000);
});
