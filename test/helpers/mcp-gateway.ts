/**
 * `baton mcp` driven as an MCP client would: spawned from the repository's source with tsx and
 * connected with the official SDK's client over stdio or Streamable HTTP, or run in this process
 * with the client linked in memory.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, type ClientOptions } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { validateTemplate } from '../../src/core/validate-template.js';
import { McpGateway, type McpGatewayOptions } from '../../src/mcp/gateway.js';
import type { OrchestrationManager } from '../../src/orchestration/orchestration-manager.js';

export const ROOT = new URL('../..', import.meta.url).pathname;
/** The reference servers, as installed by the project (devDependencies). */
export const FILESYSTEM_SERVER = join(ROOT, 'node_modules/.bin/mcp-server-filesystem');
export const EVERYTHING_SERVER = join(ROOT, 'node_modules/.bin/mcp-server-everything');

/** Node flags and script that run the CLI from source. */
export const CLI = ['--import', 'tsx', join(ROOT, 'src/cli/index.ts')];

/** Writes `template` to a new temporary file and returns its path. */
export function templateFile(template: object): string {
  const dir = mkdtempSync(join(tmpdir(), 'baton-mcp-template-'));
  const file = join(dir, 'template.json');
  writeFileSync(file, JSON.stringify(template));
  return file;
}

/** A fresh temporary directory (the filesystem server's root). */
export function workDir(): string {
  return mkdtempSync(join(tmpdir(), 'baton-mcp-work-'));
}

/** A connected client of a `baton mcp` started over stdio, and what it printed on stderr. */
export interface StdioGateway {
  client: Client;
  transport: StdioClientTransport;
  stderr(): string;
  close(): Promise<void>;
}

/** Starts `baton mcp <args>` over stdio and connects the SDK's client to it. */
export async function connectStdio(
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; client?: ClientOptions; onClient?: (client: Client) => void } = {},
): Promise<StdioGateway> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [...CLI, 'mcp', ...args],
    cwd: ROOT,
    env: { ...(process.env as Record<string, string>), FORCE_COLOR: '0', ...(options.env as Record<string, string>) },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  const client = new Client({ name: 'baton-test', version: '1.0.0' }, options.client ?? {});
  options.onClient?.(client);
  try {
    await client.connect(transport, { timeout: 30_000 });
  } catch (error) {
    await client.close().catch(() => undefined);
    throw new Error(`baton mcp did not start: ${(error as Error).message}\n${stderr}`);
  }
  return { client, transport, stderr: () => stderr, close: () => client.close() };
}

/** A running `baton mcp --http`. */
export interface HttpGatewayProcess {
  /** `http://127.0.0.1:<port>` */
  url: string;
  child: ChildProcess;
  output(): string;
  /** A new SDK client connected to `/mcp` (a new MCP session). */
  connect(options?: { headers?: Record<string, string>; client?: ClientOptions }): Promise<Client>;
  stop(): Promise<void>;
}

/** Starts `baton mcp <args> --http 0` and resolves once it listens. */
export function startHttpGateway(
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv } = {},
): Promise<HttpGatewayProcess> {
  const child = spawn(process.execPath, [...CLI, 'mcp', ...args], {
    cwd: ROOT,
    env: { ...process.env, FORCE_COLOR: '0', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  return new Promise((resolve, reject) => {
    const giveUp = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`baton mcp --http did not start:\n${output}`));
    }, 30_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      const url = /listening on (http:\/\/\S+)\/mcp/.exec(output)?.[1];
      if (url === undefined) return;
      clearTimeout(giveUp);
      child.stdout?.off('data', onData);
      resolve({
        url,
        child,
        output: () => output,
        async connect(connectOptions = {}) {
          const client = new Client({ name: 'baton-test', version: '1.0.0' }, connectOptions.client ?? {});
          await client.connect(
            new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
              requestInit: { headers: connectOptions.headers ?? {} },
            }),
          );
          return client;
        },
        stop: () =>
          new Promise<void>((done) => {
            if (child.exitCode !== null || child.signalCode !== null) return done();
            child.once('exit', () => done());
            child.kill('SIGTERM');
            setTimeout(() => child.kill('SIGKILL'), 5_000).unref();
          }),
      });
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(giveUp);
      reject(new Error(`baton mcp --http exited (${code}) before listening:\n${output}`));
    });
  });
}

/** The text of a tool result's first content block. */
export function textOf(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content.map((block) => block.text ?? '').join('\n');
}

/** A gateway in this process, in front of the filesystem server on `dir`, with a client connected in memory. */
export interface InProcessGateway {
  readonly gateway: McpGateway;
  readonly client: Client;
  /** The client side of the in-memory link (to send raw JSON-RPC). */
  readonly clientSide: InMemoryTransport;
  close(): Promise<void>;
}

/**
 * Starts a gateway for `template` (as `validateTemplate` takes it) on `manager`'s store, in front
 * of the filesystem server on `dir`, and connects a client to `sessionId` through memory.
 */
export async function inProcessGateway(
  template: unknown,
  manager: OrchestrationManager,
  dir: string,
  sessionId: string,
  /** The upstream to start instead of the filesystem server on `dir`. */
  upstream?: { command: string; args: string[]; env?: Record<string, string> },
  /** More options of the gateway (its restart policy, where its messages go). */
  options: Pick<McpGatewayOptions, 'restart' | 'onError' | 'watchMs' | 'trustAnnotationChanges'> = {},
): Promise<InProcessGateway> {
  const parsed = validateTemplate(template);
  if (!parsed.success) throw new Error(JSON.stringify(parsed.issues));
  const gateway = new McpGateway({
    template: parsed.template,
    upstreams: [upstream === undefined ? { command: FILESYSTEM_SERVER, args: [dir] } : upstream],
    ...(upstream?.env === undefined ? {} : { env: { ...process.env, ...upstream.env } }),
    manager,
    upstreamStderr: 'ignore',
    ...options,
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await gateway.connect(serverSide, { sessionId });
  const client = new Client({ name: 'test', version: '1' });
  await client.connect(clientSide);
  return {
    gateway,
    client,
    clientSide,
    async close() {
      await client.close();
      await gateway.close();
    },
  };
}
