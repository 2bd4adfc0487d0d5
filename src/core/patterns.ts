/**
 * Tool-name patterns of `availableTools` (SPEC section 4): `*` matches any run of
 * characters (including `/` and `.`, which MCP-style tool names use) and every other
 * character matches itself. A pattern compiles once to a linear-time RE2 regex, so even a
 * pattern like `*a*a*a*a*b` cannot make matching slow.
 */
import { RE2JS } from 're2js';
import type { AnnotationSelector } from './tool-annotations.js';

/** A pattern compiled once. */
export interface CompiledPattern {
  readonly pattern: string;
  /** Set when the pattern is an annotation selector (`@readOnly`, `!@destructive`). */
  readonly selector?: AnnotationSelector;
  readonly test: (toolName: string) => boolean;
}

/** True when `pattern` contains a wildcard. */
export function isGlob(pattern: string): boolean {
  return pattern.includes('*');
}

/** Compiles `pattern`: exact comparison without `*`, an anchored RE2 regex with it. */
export function compilePattern(pattern: string): CompiledPattern {
  if (!isGlob(pattern)) return { pattern, test: (toolName) => toolName === pattern };
  // Quote every literal run so `.`, `|`, `(` and friends mean themselves; DOTALL lets `*`
  // cross newlines too, so it really is "any run of characters".
  const source = `^${pattern.split('*').map(RE2JS.quote).join('.*')}$`;
  const regex = RE2JS.compile(source, RE2JS.DOTALL);
  return { pattern, test: (toolName) => regex.test(toolName) };
}

/** The first pattern that matches `toolName`, if any. */
export function firstMatch(patterns: readonly CompiledPattern[], toolName: string): CompiledPattern | undefined {
  for (const p of patterns) if (p.test(toolName)) return p;
  return undefined;
}
