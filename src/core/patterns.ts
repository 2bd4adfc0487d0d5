/**
 * Tool-name patterns of `availableTools` (SPEC section 4): a name without `*` matches
 * exactly; with `*`, it is a glob in which `*` matches any run of characters (including
 * `/` and `.`, which MCP-style tool names use).
 */
import picomatch from 'picomatch';

/** A pattern compiled once. */
export interface CompiledPattern {
  readonly pattern: string;
  readonly test: (toolName: string) => boolean;
}

// bash: a single `*` crosses `/`; dot: `*` also matches a leading `.`. Braces, extglobs and
// negation are switched off so that only `*` (and `?`, `[...]`, which tool names never
// contain) is special.
const GLOB_OPTIONS: picomatch.PicomatchOptions = {
  bash: true,
  dot: true,
  nobrace: true,
  noextglob: true,
  nonegate: true,
};

/** True when `pattern` contains a wildcard. */
export function isGlob(pattern: string): boolean {
  return pattern.includes('*');
}

/** Compiles `pattern`; throws if picomatch rejects it. */
export function compilePattern(pattern: string): CompiledPattern {
  if (!isGlob(pattern)) return { pattern, test: (toolName) => toolName === pattern };
  const matcher = picomatch(pattern, GLOB_OPTIONS);
  return { pattern, test: (toolName) => matcher(toolName) };
}

/** The first pattern that matches `toolName`, if any. */
export function firstMatch(patterns: readonly CompiledPattern[], toolName: string): CompiledPattern | undefined {
  for (const p of patterns) if (p.test(toolName)) return p;
  return undefined;
}
