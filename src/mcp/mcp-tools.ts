/**
 * `mcpTools()`: the tools of one or more MCP servers, as `@ai-sdk/mcp`'s `createMCPClient()`
 * gives them, made ready for `orchestrate()` in the app's own AI SDK loop: named by server,
 * filtered by the template's `tools` (names, globs and annotation selectors over those names;
 * tools it does not list are dropped unless `orchestration.unlistedTools` is `"allowed"`), and
 * with what each declares (`toolAnnotations`) so that `@readOnly`, `!@destructive` and friends
 * in steps and rules judge them.
 *
 * ```ts
 * import { createMCPClient } from '@ai-sdk/mcp';
 * import { StdioMCPTransport } from '@ai-sdk/mcp/mcp-stdio';
 * import { mcpTools } from 'baton-agents/mcp';
 *
 * const files = await createMCPClient({ transport: new StdioMCPTransport({ command: 'mcp-files' }) });
 * const mcp = await mcpTools({ files }, { template });
 * const orchestration = orchestrate({ manager, config: template, sessionId, ...mcp });
 * ```
 *
 * A tool orchestration refuses never reaches its server: `orchestrate()` guards every tool's
 * `execute`, and a dropped tool is not in the tool set at all. The MCP tools' own `execute`
 * still calls the server by the tool's own name, so renaming is invisible to the server.
 *
 * Only types come from `@ai-sdk/mcp` and `ai`: importing this module loads neither.
 */
import type { MCPClient } from '@ai-sdk/mcp';
import type { Tool, ToolSet } from 'ai';
import { readResultsWith } from '../ai-sdk/tool-results.js';
import { InvalidArgumentError } from '../core/errors.js';
import { type DeclaredTool, selectTools, type ToolAnnotations } from '../core/tool-annotations.js';
import { mcpResultValue } from './mcp-result.js';

/** One server's tools: an `@ai-sdk/mcp` client (its `tools()` is called), or the tool set `tools()` returned. */
export type McpToolSource = Pick<MCPClient, 'tools'> | ToolSet;

/** The template fields `mcpTools()` reads: `tools` and `orchestration.unlistedTools`. */
export interface McpToolsTemplate {
  /** Names, globs and annotation selectors over the qualified names (`files__read_file`, `files__*`, `@readOnly`). */
  tools?: readonly string[] | undefined;
  orchestration?: { unlistedTools?: 'hidden' | 'allowed' | undefined; [key: string]: unknown } | undefined;
}

/** Options of {@link mcpTools}. */
export interface McpToolsOptions {
  /**
   * The agent's template (the `config` you pass to `orchestrate()`): only the MCP tools its
   * `tools` list names are kept, unless `orchestration.unlistedTools` is `"allowed"`. Required,
   * so that forgetting it cannot hand the model every tool of a server: fail closed.
   */
  template: McpToolsTemplate;
  /**
   * Between the server's name and the tool's (default `"__"`: `files__read_file`). The names
   * reach the model provider as they are, and OpenAI's and Anthropic's APIs accept only
   * letters, digits, `_` and `-` in tool names, so the default uses neither `.` nor `/`.
   */
  separator?: string | undefined;
}

/**
 * What {@link mcpTools} returns: spread it into `orchestrate()`'s options (or merge `tools` with
 * yours). Each tool's `metadata` (from `@ai-sdk/mcp`) still says its server's client name and its
 * own `toolName`.
 */
export interface McpTools {
  /** The kept tools under their qualified names; each still calls its server by the tool's own name. */
  readonly tools: ToolSet;
  /** What each kept tool declares (MCP annotations), by qualified name: pass it to `orchestrate()`. */
  readonly toolAnnotations: ReadonlyMap<string, ToolAnnotations>;
}

/** Server names become part of tool names: keep them to what every model provider accepts. */
const SERVER_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$/;

/**
 * The tools of `clients` (by server name, or one client whose tools keep their own names),
 * qualified as `<server><separator><tool>`, filtered by the template, with their annotations.
 */
export async function mcpTools(
  clients: Pick<MCPClient, 'tools'> | Readonly<Record<string, McpToolSource>>,
  options: McpToolsOptions,
): Promise<McpTools> {
  const template = (options as Partial<McpToolsOptions> | undefined)?.template;
  if (typeof template !== 'object' || template === null) {
    throw new InvalidArgumentError(
      'template',
      'mcpTools() keeps the MCP tools your template lists: pass it as mcpTools(clients, { template }) (its "tools" names them, e.g. "files__*" or "@readOnly"; orchestration.unlistedTools "allowed" keeps every tool)',
    );
  }
  const separator = options.separator ?? '__';
  if (typeof separator !== 'string' || separator === '') {
    throw new InvalidArgumentError('separator', 'expected a non-empty string such as "__"');
  }
  const servers: [string | undefined, McpToolSource][] = isClient(clients)
    ? [[undefined, clients]]
    : Object.entries(checkSources(clients));
  for (const [server] of servers) {
    if (server !== undefined && (!SERVER_NAME.test(server) || server.includes(separator))) {
      throw new InvalidArgumentError(
        'clients',
        `server name "${server}" may hold only letters, digits, "_" and "-" (at most 32, not "${separator}"), since it becomes part of tool names such as "${server}${separator}tool"`,
      );
    }
  }
  const sets = await Promise.all(servers.map(([, source]) => (isClient(source) ? source.tools() : source)));
  // Without a prototype: a server may name a tool "__proto__" or "constructor".
  const all: Record<string, Tool> = Object.create(null);
  const origins = new Map<string, { server: string; tool: string }>();
  const declared: DeclaredTool[] = [];
  servers.forEach(([server], i) => {
    for (const [name, tool] of Object.entries(sets[i] as ToolSet)) {
      const qualified = server === undefined ? name : `${server}${separator}${name}`;
      const previous = origins.get(qualified);
      if (previous !== undefined) {
        throw new InvalidArgumentError(
          'clients',
          `two tools are both named "${qualified}" (server "${previous.server}" tool "${previous.tool}", and server "${server ?? ''}" tool "${name}"); rename a server`,
        );
      }
      origins.set(qualified, { server: server ?? '', tool: name });
      all[qualified] = tool;
      declared.push({ name: qualified, annotations: annotationsOf(tool) });
    }
  });
  const kept = selectTools(template, declared);
  const tools: ToolSet = Object.create(null);
  const toolAnnotations = new Map<string, ToolAnnotations>();
  const declaredBy = new Map(declared.map((t) => [t.name, t.annotations]));
  for (const name of kept) {
    const tool = all[name]!;
    tools[name] = tool;
    toolAnnotations.set(name, declaredBy.get(name) ?? {});
    // Facts and labels read an MCP result as the gateway does, not as a raw CallToolResult.
    readResultsWith(tool, mcpResultValue);
  }
  return { tools, toolAnnotations: interned(toolAnnotations) };
}

/** Annotation maps already handed out, by their content (most recent last). */
const handedOut = new Map<string, ReadonlyMap<string, ToolAnnotations>>();
const HANDED_OUT_LIMIT = 64;

/**
 * The map handed out before for the same content, else `map`: plans are cached by the map's
 * identity, so an app that calls `mcpTools()` every turn keeps one compiled plan until a server's
 * tools really change, instead of compiling the template again each turn.
 */
function interned(map: ReadonlyMap<string, ToolAnnotations>): ReadonlyMap<string, ToolAnnotations> {
  const key = JSON.stringify([...map]);
  const previous = handedOut.get(key);
  if (previous !== undefined) {
    handedOut.delete(key);
    handedOut.set(key, previous);
    return previous;
  }
  handedOut.set(key, map);
  if (handedOut.size > HANDED_OUT_LIMIT) handedOut.delete(handedOut.keys().next().value!);
  return map;
}

function isClient(value: unknown): value is Pick<MCPClient, 'tools'> {
  return typeof value === 'object' && value !== null && typeof (value as { tools?: unknown }).tools === 'function';
}

function checkSources(clients: unknown): Readonly<Record<string, McpToolSource>> {
  if (typeof clients !== 'object' || clients === null || Array.isArray(clients)) {
    throw new InvalidArgumentError(
      'clients',
      'expected an @ai-sdk/mcp client, or an object of them by server name: mcpTools({ files: client })',
    );
  }
  for (const [server, source] of Object.entries(clients)) {
    if (typeof source !== 'object' || source === null) {
      throw new InvalidArgumentError(
        'clients',
        `server "${server}": expected an @ai-sdk/mcp client (createMCPClient()) or the tool set its tools() returned`,
      );
    }
  }
  return clients as Readonly<Record<string, McpToolSource>>;
}

/** The hints `@ai-sdk/mcp` copies from the server's tool definition into the tool's `metadata.annotations`. */
function annotationsOf(tool: Tool): ToolAnnotations | undefined {
  const annotations = (tool as { metadata?: { annotations?: unknown } }).metadata?.annotations;
  if (typeof annotations !== 'object' || annotations === null) return undefined;
  const hints: ToolAnnotations = {};
  for (const key of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'] as const) {
    const value = (annotations as Record<string, unknown>)[key];
    // A hint that is not a boolean says nothing: the MCP default applies, as for an absent one.
    if (typeof value === 'boolean') hints[key] = value;
  }
  return hints;
}
