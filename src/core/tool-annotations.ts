/**
 * What MCP tools declare about themselves (`annotations` of the MCP spec's `Tool`), and the
 * annotation selectors that tool pattern lists accept besides names and globs: `@readOnly`,
 * `@destructive`, `@idempotent`, `@openWorld`, each negatable as `!@readOnly`.
 *
 * A selector judges a tool by its hints with the MCP spec's defaults applied, because that is
 * what the spec tells a client to assume of a tool that says nothing: it may write
 * (readOnlyHint false), destroy (destructiveHint true), not be safe to repeat (idempotentHint
 * false) and reach the outside world (openWorldHint true). So `denied: ["@destructive"]` also
 * denies a tool that declares nothing: fail closed. The spec says destructiveHint and
 * idempotentHint mean something only when readOnlyHint is false; a read-only tool changes
 * nothing, so it is never destructive and always idempotent.
 *
 * Pure: no MCP SDK import here, so core stays free of optional peers.
 */
import { InvalidArgumentError } from './errors.js';
import { type CompiledPattern, compilePattern, firstMatch } from './patterns.js';
import { didYouMean, TemplateConfigError, TemplateIssueCode } from './template-issues.js';

/**
 * MCP tool annotation hints (MCP spec defaults apply when absent: readOnly false,
 * destructive true, idempotent false, openWorld true).
 */
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

/** The annotation selectors: the kind of tool each selects, and the rule (for messages and docs). */
export const ANNOTATION_SELECTORS = {
  '@readOnly': { tools: 'read-only', rule: 'readOnlyHint true' },
  '@destructive': { tools: 'destructive', rule: 'destructiveHint true or absent, readOnlyHint not true' },
  '@idempotent': { tools: 'idempotent', rule: 'idempotentHint true, or readOnlyHint true' },
  '@openWorld': { tools: 'open-world', rule: 'openWorldHint true or absent' },
} as const;

/** One of {@link ANNOTATION_SELECTORS}' names. */
export type AnnotationSelectorName = keyof typeof ANNOTATION_SELECTORS;

/** A parsed selector: which hint, and whether it is negated (`!@readOnly`). */
export interface AnnotationSelector {
  readonly name: AnnotationSelectorName;
  readonly negated: boolean;
}

/** Every selector as it may be written, negated forms included (for "did you mean" hints). */
export const SELECTOR_SPELLINGS: readonly string[] = Object.freeze(
  Object.keys(ANNOTATION_SELECTORS).flatMap((name) => [name, `!${name}`]),
);

/**
 * True when `pattern` is written as a selector (starts with `@` or `!`), valid or not. MCP tool
 * names cannot contain `@` or `!`, so no real tool name is mistaken for one.
 */
export function isSelectorSyntax(pattern: string): boolean {
  return pattern.startsWith('@') || pattern.startsWith('!');
}

/** The selector `pattern` spells, or undefined when it is not a valid selector. */
export function parseSelector(pattern: string): AnnotationSelector | undefined {
  const negated = pattern.startsWith('!');
  const name = negated ? pattern.slice(1) : pattern;
  return Object.hasOwn(ANNOTATION_SELECTORS, name) ? { name: name as AnnotationSelectorName, negated } : undefined;
}

/** What is wrong with `pattern`, written as a selector but none (`@readonly`), and the likely fix. */
export function unknownSelectorProblem(pattern: string): { message: string; hint: string | undefined } {
  const names = Object.keys(ANNOTATION_SELECTORS).join(', ');
  return {
    message: `unknown annotation selector "${pattern}" (selectors: ${names}, each negatable with "!")`,
    hint: didYouMean(pattern, SELECTOR_SPELLINGS),
  };
}

/** True when a tool with `annotations` (undefined: it declares none) has the hint `name` names, MCP defaults applied. */
export function hasAnnotation(name: AnnotationSelectorName, annotations: ToolAnnotations | undefined): boolean {
  const readOnly = hint(annotations?.readOnlyHint, false);
  switch (name) {
    case '@readOnly':
      return readOnly;
    case '@destructive':
      return !readOnly && hint(annotations?.destructiveHint, true);
    case '@idempotent':
      return readOnly || hint(annotations?.idempotentHint, false);
    case '@openWorld':
      return hint(annotations?.openWorldHint, true);
  }
}

/** A hint's value; anything but a boolean (a server may send garbage) says nothing, so the default applies. */
function hint(value: unknown, fallback: boolean): boolean {
  return typeof value === 'boolean' ? value : fallback;
}

/** True when `selector` (negation included) holds for a tool with `annotations`. */
export function selectorMatches(selector: AnnotationSelector, annotations: ToolAnnotations | undefined): boolean {
  return hasAnnotation(selector.name, annotations) !== selector.negated;
}

/** What `selector` selects, e.g. `"@readOnly" (read-only tools: readOnlyHint true)`. */
export function describeSelector(selector: AnnotationSelector): string {
  const { tools, rule } = ANNOTATION_SELECTORS[selector.name];
  return selector.negated
    ? `"!${selector.name}" (every tool but the ${tools} ones: ${rule})`
    : `"${selector.name}" (${tools} tools: ${rule})`;
}

/**
 * Compiles one tool pattern: a selector (resolved against `annotations` at compile time into a
 * set of names, so deciding is one set lookup; a tool the map does not know counts as
 * declaring nothing), else a name or glob ({@link compilePattern}). Assumes a valid pattern:
 * an invalid selector throws (validation reports it first, with a path).
 */
export function compileToolPattern(
  pattern: string,
  annotations?: ReadonlyMap<string, ToolAnnotations> | undefined,
): CompiledPattern {
  if (!isSelectorSyntax(pattern)) return compilePattern(pattern);
  const selector = parseSelector(pattern);
  if (selector === undefined) throw new InvalidArgumentError('pattern', unknownSelectorProblem(pattern).message);
  const unknownMatches = selectorMatches(selector, undefined);
  if (annotations === undefined || annotations.size === 0) return { pattern, selector, test: () => unknownMatches };
  const matching = new Set<string>();
  for (const [name, declared] of annotations) if (selectorMatches(selector, declared)) matching.add(name);
  return {
    pattern,
    selector,
    test: (toolName) => matching.has(toolName) || (unknownMatches && !annotations.has(toolName)),
  };
}

/**
 * The upstream tools a template's `tools` list names (names, globs, `@selectors`), honoring
 * `orchestration.unlistedTools` ("hidden", the default, or "allowed"). In the upstream's order.
 *
 * With no `tools` list and `unlistedTools` "hidden", nothing is selected: fail closed.
 */
export function selectTools(
  template: {
    tools?: readonly string[] | undefined;
    orchestration?: { unlistedTools?: 'hidden' | 'allowed' | undefined; [key: string]: unknown } | undefined;
  },
  declared: readonly DeclaredTool[],
): string[] {
  if (template.orchestration?.unlistedTools === 'allowed') return declared.map((tool) => tool.name);
  // A template that was not validated may reach here: say what is wrong, as validation would.
  const invalid = (template.tools ?? []).flatMap((pattern, i) =>
    isSelectorSyntax(pattern) && parseSelector(pattern) === undefined ? [{ pattern, i }] : [],
  );
  if (invalid.length > 0) {
    throw new TemplateConfigError(
      invalid.map(({ pattern, i }) => {
        const { message, hint } = unknownSelectorProblem(pattern);
        return {
          code: TemplateIssueCode.UnknownSelector,
          severity: 'error' as const,
          path: `tools[${i}]`,
          message,
          ...(hint === undefined ? {} : { hint }),
        };
      }),
    );
  }
  const annotations = new Map(declared.map((tool) => [tool.name, tool.annotations ?? {}]));
  const patterns = (template.tools ?? []).map((pattern) => compileToolPattern(pattern, annotations));
  return declared.filter((tool) => firstMatch(patterns, tool.name) !== undefined).map((tool) => tool.name);
}
