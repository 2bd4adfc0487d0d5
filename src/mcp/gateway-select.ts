/**
 * TEMPORARY shim of `selectTools` (src/core/tool-annotations.ts, built on another branch): the
 * same signature, names and globs only, no annotation selectors. Deleted when that branch is
 * merged; the gateway then imports the real one.
 */
import { compilePattern, firstMatch } from '../core/patterns.js';

/** MCP tool annotation hints. */
export interface ToolAnnotations {
  readOnlyHint?: boolean | undefined;
  destructiveHint?: boolean | undefined;
  idempotentHint?: boolean | undefined;
  openWorldHint?: boolean | undefined;
}

/** A tool as an upstream declares it. */
export interface DeclaredTool {
  name: string;
  annotations?: ToolAnnotations | undefined;
}

/**
 * The upstream tools a template's `tools` list names, honoring `orchestration.unlistedTools`
 * (`hidden`, the default, or `allowed`), in the upstream's order.
 */
export function selectTools(
  template: {
    tools?: readonly string[] | undefined;
    orchestration?: { unlistedTools?: 'hidden' | 'allowed' | undefined } | undefined;
  },
  declared: readonly DeclaredTool[],
): string[] {
  if (template.orchestration?.unlistedTools === 'allowed') return declared.map((tool) => tool.name);
  const patterns = (template.tools ?? []).map(compilePattern);
  return declared.filter((tool) => firstMatch(patterns, tool.name) !== undefined).map((tool) => tool.name);
}
