/**
 * How template checks read tools: the agent's tool list (the catalog a tool a template names is
 * looked up in) and the tool patterns a template writes (compiled, with a misspelt selector or a
 * bad glob reported at its path). The orchestration, rule and condition checks all need both.
 */
import { type IssueList, isString, type Path } from './issue-list.js';
import { type CompiledPattern, compilePattern, firstMatch } from './patterns.js';
import { TemplateIssueCode as Code } from './template-issues.js';
import {
  compileToolPattern,
  isSelectorSyntax,
  parseSelector,
  type ToolAnnotations,
  unknownSelectorProblem,
} from './tool-annotations.js';

/**
 * The agent's tools as validation sees them: a list of names, or (for MCP tools) a list that
 * may hold globs and selectors, which names a tool only if some entry could match it.
 */
export interface ToolCatalog {
  has(tool: string): boolean;
  /** The entries as written. */
  readonly names: readonly string[];
  /** True when every entry is a plain name. */
  readonly exact: boolean;
}

/** The catalog of `agentTools`: exact when every entry is a plain name. */
export function toolCatalog(agentTools: readonly string[]): ToolCatalog {
  const exact = agentTools.every((tool) => !tool.includes('*') && !isSelectorSyntax(tool));
  if (exact) {
    const set = new Set(agentTools);
    return { has: (tool) => set.has(tool), names: agentTools, exact };
  }
  // A selector may match any tool whose annotations are unknown here: then nothing is unknown.
  if (agentTools.some(isSelectorSyntax)) return { has: () => true, names: agentTools, exact };
  const patterns = agentTools.map((tool) => compilePattern(tool));
  return { has: (tool) => firstMatch(patterns, tool) !== undefined, names: agentTools, exact };
}

/** Compiles a list of tool patterns; a misspelt selector or a bad glob is an issue at its path. */
export function compilePatterns(
  raw: unknown,
  path: Path,
  issues: IssueList,
  annotations?: ReadonlyMap<string, ToolAnnotations>,
): CompiledPattern[] {
  if (!Array.isArray(raw)) return [];
  return raw.flatMap((pattern, i) => {
    if (!isString(pattern) || pattern === '') return [];
    if (isSelectorSyntax(pattern) && parseSelector(pattern) === undefined) {
      const { message, hint } = unknownSelectorProblem(pattern);
      issues.error(Code.UnknownSelector, [...path, i], message, hint);
      return [];
    }
    try {
      return [compileToolPattern(pattern, annotations)];
    } catch (error) {
      issues.error(Code.InvalidPattern, [...path, i], `invalid tool pattern "${pattern}": ${(error as Error).message}`);
      return [];
    }
  });
}
