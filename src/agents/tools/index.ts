/**
 * The tool registry: maps the tool names of a template to AI SDK tool implementations.
 */
import type { ToolSet } from 'ai';
import { cognitiveTools } from './cognitive.js';
import { searchTool } from './search.js';

export {
  type BrainstormInput,
  type BrainstormOutput,
  brainstormTool,
  type CompareInput,
  type CompareOutput,
  type CritiqueInput,
  type CritiqueOutput,
  cognitiveTools,
  compareTool,
  critiqueTool,
  type DebateInput,
  type DebateOutput,
  debateTool,
  type ReflectInput,
  type ReflectOutput,
  reflectTool,
  splitPoints,
  splitSentences,
  structureBrainstorm,
  structureComparison,
  structureCritique,
  structureDebate,
  structureReflection,
  structureThought,
  type ThinkInput,
  type ThinkOutput,
  thinkTool,
} from './cognitive.js';
export { type CorpusDocument, corpus } from './corpus.js';
export {
  createSearchIndex,
  createSearchTool,
  DEFAULT_SEARCH_LIMIT,
  type SearchHit,
  type SearchInput,
  type SearchOutput,
  searchTool,
} from './search.js';

/** The tools Baton ships, by the names templates use for them (AgentDock's names). */
export const builtinTools = Object.freeze({ search: searchTool, ...cognitiveTools }) satisfies ToolSet;

/** What {@link resolveTools} found. */
export interface ResolvedTools {
  /** The implementations, keyed by the requested names, in the order requested. */
  tools: ToolSet;
  /** Requested names with no implementation, in the order requested, without repeats. */
  missing: string[];
}

/**
 * Maps tool names (a template's `tools`) to implementations: `extra` first, so an application can
 * replace a built-in (a real web search instead of the bundled one), then {@link builtinTools}.
 * Unknown names are returned in `missing`; whether that is an error is the caller's decision.
 */
export function resolveTools(names: readonly string[], extra: ToolSet = {}): ResolvedTools {
  const tools: ToolSet = {};
  const missing: string[] = [];
  for (const name of names) {
    if (Object.hasOwn(tools, name) || missing.includes(name)) continue;
    const implementation = Object.hasOwn(extra, name)
      ? extra[name]
      : Object.hasOwn(builtinTools, name)
        ? builtinTools[name as keyof typeof builtinTools]
        : undefined;
    if (implementation === undefined) missing.push(name);
    else tools[name] = implementation;
  }
  return { tools, missing };
}
