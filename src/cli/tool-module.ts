/**
 * `--tools <module>`: the app's own tools for `baton serve` and `baton chat`, from a module whose
 * named exports are AI SDK tools, each under the name templates use for it:
 *
 * ```ts
 * // tools.ts (or tools.js)
 * import { tool } from 'ai';
 * import { z } from 'zod';
 * export const web_search = tool({ inputSchema: z.object({ query: z.string() }), execute: async ({ query }) => ... });
 * ```
 *
 * A template naming a tool that neither the module nor Baton's built-in tools provide stops the
 * command before it starts, with one line naming the tools and this way to give them.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ToolSet } from 'ai';
import { builtinTools, resolveTools } from '../agents/tools/index.js';
import { BatonError } from '../core/errors.js';
import type { AgentTemplate } from '../core/schema.js';
import { didYouMean } from '../core/template-issues.js';

/** A `--tools` module that cannot be used, or templates naming tools nobody provides. */
export class ToolModuleError extends BatonError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('serve-setup', message, options);
    this.name = 'ToolModuleError';
  }
}

/** How to give tools, as the errors say it. */
export const TOOLS_HINT =
  'give them with --tools <module>, a module whose named exports are AI SDK tools (export const web_search = tool({ ... }))';

/** True for what `tool()` (or a provider) makes: an object with an input schema. */
function isTool(value: unknown): boolean {
  return typeof value === 'object' && value !== null && 'inputSchema' in value;
}

/** Imports the module at `path` (relative to `cwd`) and returns its tools, by export name. */
export async function loadToolModule(path: string, cwd = process.cwd()): Promise<ToolSet> {
  const absolute = resolve(cwd, path);
  if (!existsSync(absolute)) throw new ToolModuleError(`--tools ${path}: no such file (looked for ${absolute})`);
  let exports: Record<string, unknown>;
  try {
    exports = (await import(pathToFileURL(absolute).href)) as Record<string, unknown>;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason =
      code === 'ERR_UNKNOWN_FILE_EXTENSION' && /\.[cm]?ts$/.test(absolute)
        ? `Node.js ${process.versions.node} cannot run TypeScript: use a .js module, or Node.js 22.18 or newer`
        : error instanceof Error
          ? error.message
          : String(error);
    throw new ToolModuleError(`--tools ${path}: cannot load it: ${reason}`, { cause: error });
  }
  const tools: ToolSet = {};
  for (const [name, value] of Object.entries(exports)) {
    if (name !== 'default' && isTool(value)) tools[name] = value as ToolSet[string];
  }
  if (Object.keys(tools).length === 0) {
    throw new ToolModuleError(
      `--tools ${path} exports no AI SDK tools: export each under the name your templates use (export const web_search = tool({ ... }))`,
    );
  }
  return tools;
}

/**
 * Throws {@link ToolModuleError} when a template names tools that neither `tools` nor Baton's
 * built-in tools provide: one line naming them, per agent, and how to give them.
 */
export function assertToolsProvided(templates: readonly AgentTemplate[], tools: ToolSet, toolsPath?: string): void {
  const missing = templates
    .map((template) => ({ id: template.id, names: resolveTools(template.tools, tools).missing }))
    .filter(({ names }) => names.length > 0);
  if (missing.length === 0) return;
  const list = missing
    .map(({ id, names }) => `agent "${id}" names tools that have no implementation: ${names.join(', ')}`)
    .join('; ');
  const builtIn = Object.keys(builtinTools).join(', ');
  // A name one edit away from a tool the module or Baton has is most likely a typo on one side.
  const known = [...new Set([...Object.keys(tools), ...Object.keys(builtinTools)])];
  const typos = [...new Set(missing.flatMap(({ names }) => names))].flatMap((name) => {
    const hint = didYouMean(name, known);
    return hint ? [`for "${name}", ${hint}`] : [];
  });
  const typoHint = typos.length > 0 ? ` (${typos.join('; ')})` : '';
  throw new ToolModuleError(
    toolsPath
      ? `${list} (neither ${toolsPath} nor Baton's built-in tools have them: ${builtIn}); export them from ${toolsPath}${typoHint}`
      : `${list} (Baton's built-in tools: ${builtIn}); ${TOOLS_HINT}${typoHint}`,
  );
}
