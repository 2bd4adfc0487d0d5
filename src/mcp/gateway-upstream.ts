/**
 * The upstream side of the MCP gateway: which servers it fronts (a command or a URL, each with an
 * optional name), connecting to them with the MCP SDK's own client, and the names their tools get
 * downstream.
 *
 * Several upstreams qualify their tools as `name__tool`, as `baton-agents/mcp`'s `mcpTools()`
 * does: the MCP SDK accepts tool names of `A-Z a-z 0-9 _ - .` only (SEP-986 as shipped has no
 * `/`), and model providers accept only `A-Z a-z 0-9 _ -`, so a client can hand the names to
 * any model unchanged. A single upstream without a name keeps its tools' own names.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { ClientCapabilities, Tool } from '@modelcontextprotocol/sdk/types.js';
import { InvalidArgumentError } from '../core/errors.js';

/** One upstream MCP server: a command to spawn (stdio) or a Streamable HTTP URL. */
export type UpstreamSpec =
  | { readonly name?: string | undefined; readonly command: string; readonly args: readonly string[] }
  | { readonly name?: string | undefined; readonly url: string };

/** What an upstream name may be (as `mcpTools()`'s server names): a letter or digit, then letters, digits, `_` and `-`. */
const UPSTREAM_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$/;

/** The separator of server-qualified tool names (`github__create_issue`). */
export const QUALIFIER = '__';

/**
 * Parses the value of `--upstream`: `<url>`, `name=<url>` or `name=<command> [args...]` (a
 * command's words are split at spaces; use `-- <command> [args...]` for arguments with spaces).
 */
export function parseUpstream(value: string): UpstreamSpec {
  const named = /^([^=\s/:]+)=(.*)$/s.exec(value);
  const name = named?.[1];
  const target = (named ? named[2]! : value).trim();
  if (name !== undefined && !UPSTREAM_NAME.test(name)) {
    throw new InvalidArgumentError(
      'upstream',
      `upstream name "${name}" must start with a letter or digit and contain only letters, digits, "_" and "-" (at most 32), so that "${name}${QUALIFIER}tool" is a valid tool name`,
    );
  }
  if (target === '') throw new InvalidArgumentError('upstream', `"${value}" names no command or URL`);
  if (/^https?:\/\//i.test(target)) {
    try {
      new URL(target);
    } catch {
      throw new InvalidArgumentError('upstream', `"${target}" is not a valid URL`);
    }
    return { name, url: target };
  }
  const [command, ...args] = target.split(/\s+/);
  return { name, command: command!, args };
}

/** Checks a set of upstreams: several need distinct names; returns them unchanged. */
export function checkUpstreams(upstreams: readonly UpstreamSpec[]): readonly UpstreamSpec[] {
  if (upstreams.length === 0) {
    throw new InvalidArgumentError(
      'upstream',
      'no upstream MCP server: give its command after "--" (baton mcp template.json -- npx server) or --upstream <url>',
    );
  }
  if (upstreams.length > 1) {
    const names = new Set<string>();
    for (const upstream of upstreams) {
      if (upstream.name === undefined) {
        throw new InvalidArgumentError(
          'upstream',
          `with several upstreams each needs a name (--upstream name=<command or url>), so their tools can be told apart: "${describeUpstream(upstream)}" has none`,
        );
      }
      const problem = qualifierProblem(upstream.name);
      if (problem !== undefined) throw new InvalidArgumentError('upstream', problem);
      if (names.has(upstream.name))
        throw new InvalidArgumentError('upstream', `two upstreams are named "${upstream.name}"`);
      names.add(upstream.name);
    }
  }
  return upstreams;
}

/**
 * Why `name` cannot qualify tool names unambiguously, if it cannot. A qualified name must say
 * which upstream it belongs to: with `fs` and `fs__x` both upstreams, `fs__x__echo` is `fs`'s
 * tool `x__echo` as much as `fs__x`'s `echo` (and with `a` and `a_`, `a___b` is `a`'s `_b` or
 * `a_`'s `b`), and the first upstream would answer calls, prompts and completions meant for the
 * other. A name without `__` that does not end in `_` makes the first `__` of a qualified name
 * its end, so no two upstreams can claim one name.
 */
function qualifierProblem(name: string): string | undefined {
  if (!UPSTREAM_NAME.test(name)) {
    return `upstream name "${name}" must start with a letter or digit and contain only letters, digits, "_" and "-" (at most 32), so that "${name}${QUALIFIER}tool" is a valid tool name`;
  }
  if (name.includes(QUALIFIER) || name.endsWith('_')) {
    return `upstream name "${name}" may not contain "${QUALIFIER}" or end with "_": it qualifies its tools as "${name}${QUALIFIER}tool", which must not be read as another upstream's tool`;
  }
  return undefined;
}

/** The upstream as a person would recognize it in a message. */
export function describeUpstream(upstream: UpstreamSpec): string {
  const target = 'url' in upstream ? upstream.url : [upstream.command, ...upstream.args].join(' ');
  return upstream.name === undefined ? target : `${upstream.name}=${target}`;
}

/** A connected upstream. */
export interface UpstreamConnection {
  readonly spec: UpstreamSpec;
  readonly client: Client;
  /** The prefix of its tools' downstream names (`github__`), or '' for a single unnamed upstream. */
  readonly prefix: string;
  /** True while requests can be sent to it (its client is connected). */
  readonly available: boolean;
}

/** Options of {@link connectUpstream}. */
export interface ConnectUpstreamOptions {
  /** What the downstream client supports (roots, sampling, elicitation), declared upstream as ours. */
  capabilities?: ClientCapabilities | undefined;
  /**
   * Environment a spawned upstream starts from (default: this process's), without the variables
   * npm and npx set for the process they launch (see {@link upstreamEnvironment}).
   */
  env?: Readonly<Record<string, string | undefined>> | undefined;
  /** Give up connecting after this long (ms). */
  timeoutMs: number;
  /** Where the upstream's stderr goes (default: this process's stderr). */
  stderr?: 'inherit' | 'ignore' | undefined;
  /** Client version reported upstream. */
  version: string;
  /** Called before connecting, to install handlers of requests and notifications from the upstream. */
  prepare?: ((client: Client) => void) | undefined;
}

/** Connects to one upstream with the SDK's client; rejects with a message naming it. */
export async function connectUpstream(
  spec: UpstreamSpec,
  prefixed: boolean,
  options: ConnectUpstreamOptions,
): Promise<UpstreamConnection> {
  const client = new Client(
    { name: 'baton-mcp-gateway', version: options.version },
    { capabilities: options.capabilities ?? {} },
  );
  options.prepare?.(client);
  const transport =
    'url' in spec
      ? new StreamableHTTPClientTransport(new URL(spec.url))
      : new StdioClientTransport({
          command: spec.command,
          args: [...spec.args],
          env: upstreamEnvironment(options.env ?? process.env),
          stderr: options.stderr ?? 'inherit',
        });
  try {
    await client.connect(transport, { timeout: options.timeoutMs });
  } catch (error) {
    await client.close().catch(() => undefined);
    throw new UpstreamError(
      `could not connect to the upstream MCP server "${describeUpstream(spec)}": ${messageOf(error)}`,
    );
  }
  return {
    spec,
    client,
    prefix: prefixed ? `${spec.name}${QUALIFIER}` : '',
    get available() {
      return client.transport !== undefined;
    },
  };
}

/** Every tool of an upstream (all pages). */
export async function listUpstreamTools(upstream: UpstreamConnection, timeoutMs: number): Promise<Tool[]> {
  if (upstream.client.getServerCapabilities()?.tools === undefined) return [];
  const tools: Tool[] = [];
  let cursor: string | undefined;
  do {
    const page = await upstream.client.listTools(cursor === undefined ? {} : { cursor }, { timeout: timeoutMs });
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor !== undefined && tools.length < 10_000);
  return tools;
}

/** An upstream could not be reached or answered wrongly. */
export class UpstreamError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UpstreamError';
  }
}

/** The message of an error, or the value as text. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** What the names of the variables npm and npx set for the processes they launch begin with (always lower case). */
const LAUNCHER_PREFIX = 'npm_';

/**
 * The environment a spawned upstream gets from `env`: all of it (PATH, HOME, the user's own
 * variables) but the ones npm and npx set for the process they launch, which are lower-case
 * `npm_*` (`npm_config_*`, `npm_lifecycle_*`, `npm_package_*`, `npm_command`, `npm_execpath`…).
 * Those say how the gateway was launched, not how the upstream should be: an upstream started
 * with `npx` reads them as its own settings, and `npm_config_package=baton-agents`, left by
 * `npx -p baton-agents baton mcp … -- npx -y <server>`, makes the inner npx look for a program
 * named like the server instead of installing it. npm reads its settings from the environment
 * in any case, so a user's own `NPM_CONFIG_REGISTRY` (upper case, as people write them) still
 * reaches the upstream; so does anything the upstream command sets (`env npm_config_x=… npx …`).
 */
export function upstreamEnvironment(env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(env)) {
    if (value !== undefined && !key.startsWith(LAUNCHER_PREFIX)) out[key] = value;
  }
  return out;
}
