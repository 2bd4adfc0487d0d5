/**
 * What a gateway session judges its tools by. Annotation selectors (`@readOnly`, `!@destructive`…)
 * trust what an upstream says of its tools; an upstream that could say something else mid-session
 * (a `tools/list_changed`, a restart) could widen the template as it pleased: re-declare a
 * writing tool `readOnlyHint: true` and a `@readOnly` template offers it and runs it. So a session
 * keeps what each tool declared when it first saw it, and takes a later declaration only when it
 * lets the template offer and allow the tool nothing more, anywhere (a tool that now says it
 * writes is judged so at once); the operator may choose to take every declaration
 * (`--trust-annotation-changes`).
 *
 * Pure: templates and annotations in, answers out.
 */
import type { AgentTemplate } from '../core/schema.js';
import { compileToolPattern, type ToolAnnotations } from '../core/tool-annotations.js';

/** The hints a selector reads, and nothing else of an MCP tool's annotations (its title, say). */
const HINTS = ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'] as const;

/** The hints of `annotations` a selector would read: booleans only (anything else says nothing). */
export function hintsOf(annotations: Readonly<Record<string, unknown>> | undefined): ToolAnnotations {
  const hints: ToolAnnotations = {};
  for (const key of HINTS) {
    const value = annotations?.[key];
    if (typeof value === 'boolean') hints[key] = value;
  }
  return hints;
}

/** True when `a` and `b` declare the same hints. */
export function sameHints(a: ToolAnnotations, b: ToolAnnotations): boolean {
  return HINTS.every((key) => a[key] === b[key]);
}

/**
 * `annotations` with the hints of `hints` instead of its own (the rest, a title say, kept): a
 * tool as the session offers it when it judges the tool by hints the upstream no longer declares.
 */
export function withHints<T extends Readonly<Record<string, unknown>>>(
  annotations: T | undefined,
  hints: ToolAnnotations,
): T & ToolAnnotations {
  const out: Record<string, unknown> = { ...annotations };
  for (const key of HINTS) delete out[key];
  return { ...out, ...hints } as T & ToolAnnotations;
}

/** One list of tool patterns in a template, and what matching it does for a tool. */
interface Place {
  /** Where it is, as validation names it (`orchestration.steps[1].availableTools.denied`). */
  readonly where: string;
  readonly patterns: readonly string[];
  /** True where a matching tool may do more (offered, allowed); false where it may do less (denied, ruled). */
  readonly grants: boolean;
}

/** Every list of tool patterns of `template` whose answer for a tool can depend on its annotations. */
function places(template: AgentTemplate): Place[] {
  const found: Place[] = [];
  const orchestration = template.orchestration;
  // With unlistedTools "allowed" every upstream tool is offered, whatever `tools` says of it.
  if (orchestration?.unlistedTools !== 'allowed')
    found.push({ where: 'tools', patterns: template.tools, grants: true });
  const rules = (list: readonly { tools: readonly string[] }[] | undefined, at: string) => {
    // deny, approve, allow (refused unless `when` holds) and limits all restrict what they name.
    (list ?? []).forEach((rule, i) => {
      found.push({ where: `${at}rules[${i}].tools`, patterns: rule.tools, grants: false });
    });
  };
  rules(orchestration?.rules, 'orchestration.');
  (orchestration?.steps ?? []).forEach((step, i) => {
    const at = `orchestration.steps[${i}].`;
    // An empty or absent `allowed` allows every tool: no tool's annotations change that.
    const allowed = step.availableTools?.allowed ?? [];
    if (allowed.length > 0) found.push({ where: `${at}availableTools.allowed`, patterns: allowed, grants: true });
    const denied = step.availableTools?.denied ?? [];
    if (denied.length > 0) found.push({ where: `${at}availableTools.denied`, patterns: denied, grants: false });
    rules(step.rules, at);
  });
  return found;
}

/** True when a pattern of `patterns` matches `tool` declaring `hints`. */
function matches(patterns: readonly string[], tool: string, hints: ToolAnnotations): boolean {
  const annotations = new Map([[tool, hints]]);
  return patterns.some((pattern) => compileToolPattern(pattern, annotations).test(tool));
}

/**
 * Where judging `tool` by `next` instead of `pinned` would let `template` offer or allow it
 * more: a list that grants (the template's `tools`, a step's `allowed`) would start to match
 * it, or one that restricts (a step's `denied`, a rule's `tools`) would stop. Undefined when
 * nowhere: the new declaration narrows what the tool may do, or changes nothing the template
 * reads. Each list is judged on its own, so a change that widens one place and narrows another
 * widens.
 */
export function widening(
  template: AgentTemplate,
  tool: string,
  pinned: ToolAnnotations,
  next: ToolAnnotations,
): string | undefined {
  for (const place of places(template)) {
    const before = matches(place.patterns, tool, pinned);
    const after = matches(place.patterns, tool, next);
    if (before !== after && after === place.grants) return place.where;
  }
  return undefined;
}
