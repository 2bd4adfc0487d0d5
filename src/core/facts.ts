/**
 * Facts and labels (SPEC section 11): what completed calls' results leave for later rules. A fact
 * keeps a value computed from a result (`value`, CEL over `tool`, `args`, `result`, `state`): the
 * latest (`keep: last`), a set (`union`) or a list (`append`, oldest dropped past `max`). A label is
 * raised by a condition on a result and never lowered within a session. Rules read them as
 * `state.facts.<name>` and `state.labels`.
 *
 * What a result sets is computed when its call completes ({@link resultWrites}: the result is at
 * hand only then) and applied when the call commits, in reservation order ({@link applyWrites}),
 * in the same atomic update. A value that cannot be computed, or that passes its bounds, makes the
 * fact unknown, and a rule that reads an unknown fact refuses (fail closed). A label whose
 * condition cannot be evaluated is raised: a label marks what a session must keep in.
 */
import type { OrchestrationPlan } from './compile.js';
import type { OrchestrationEvent } from './events.js';
import { type CompiledPattern, firstMatch } from './patterns.js';
import { compileExpression } from './rule-expressions.js';
import { celState, celValue, jsonValue, MAX_RESULT_NODES } from './rules.js';
import type { Fact, Label } from './schema.js';
import type { FactValue, OrchestrationState, ResultWrites } from './state.js';
import { compileToolPattern, type ToolAnnotations } from './tool-annotations.js';

/** Default `max` of a `union` or `append` fact. */
export const DEFAULT_FACT_MAX = 1_000;
/** Longest a fact's value may be, as JSON, in characters: beyond, the fact is unknown. */
export const MAX_FACT_CHARACTERS = 65_536;

type Program = NonNullable<ReturnType<typeof compileExpression>['program']>;

/** A compiled fact. */
export interface CompiledFact {
  readonly name: string;
  readonly keep: 'last' | 'union' | 'append';
  readonly max: number;
  matches(tool: string): boolean;
  readonly value: Program;
  readonly when: Program | undefined;
}

/** A compiled label. */
export interface CompiledLabel {
  readonly name: string;
  readonly clearOnReset: boolean;
  matches(tool: string): boolean;
  readonly when: Program | undefined;
}

function matcher(patterns: readonly CompiledPattern[]): (tool: string) => boolean {
  const seen = new Map<string, boolean>();
  return (tool) => {
    let hit = seen.get(tool);
    if (hit === undefined) {
      hit = firstMatch(patterns, tool) !== undefined;
      if (seen.size < 10_000) seen.set(tool, hit);
    }
    return hit;
  };
}

function program(expression: string, kind: 'result-value' | 'result-condition'): Program {
  const compiled = compileExpression(expression, kind);
  // Validation compiled it already: a problem here is a defect, not a template's mistake.
  if (compiled.program === undefined) throw new Error(`invalid expression passed validation: ${compiled.problem}`);
  return compiled.program;
}

/** Compiles the facts of an orchestration block (they are valid: validation ran). */
export function compileFacts(
  facts: readonly Fact[] | undefined,
  annotations?: ReadonlyMap<string, ToolAnnotations>,
): CompiledFact[] {
  return (facts ?? []).map((fact) =>
    Object.freeze({
      name: fact.name,
      keep: fact.keep ?? 'last',
      max: fact.max ?? DEFAULT_FACT_MAX,
      matches: matcher(fact.tools.map((pattern) => compileToolPattern(pattern, annotations))),
      value: program(fact.value, 'result-value'),
      when: fact.when === undefined ? undefined : program(fact.when, 'result-condition'),
    }),
  );
}

/** Compiles the labels of an orchestration block (they are valid: validation ran). */
export function compileLabels(
  labels: readonly Label[] | undefined,
  annotations?: ReadonlyMap<string, ToolAnnotations>,
): CompiledLabel[] {
  return (labels ?? []).map((label) =>
    Object.freeze({
      name: label.name,
      clearOnReset: label.clearOnReset === true,
      matches: matcher(label.tools.map((pattern) => compileToolPattern(pattern, annotations))),
      when: label.when === undefined ? undefined : program(label.when, 'result-condition'),
    }),
  );
}

/**
 * What the result of a completed call of `tool` sets, judged on `state()` (the session as the call
 * completes, read only when some fact or label names the tool): undefined when none does.
 */
export function resultWrites(
  plan: OrchestrationPlan,
  tool: string,
  args: unknown,
  result: unknown,
  state: () => OrchestrationState,
): ResultWrites | undefined {
  const facts = plan.facts.filter((fact) => fact.matches(tool));
  const labels = plan.labels.filter((label) => label.matches(tool));
  if (facts.length === 0 && labels.length === 0) return undefined;
  let variables: Record<string, unknown> | undefined;
  let failure: string | undefined;
  try {
    variables = {
      tool,
      args: celValue(args ?? {}),
      result: celValue(result ?? null, 'the result', MAX_RESULT_NODES),
      state: celState(state()),
    };
  } catch (error) {
    failure = messageOf(error);
  }
  const factWrites: NonNullable<ResultWrites['facts']> = [];
  for (const fact of facts) {
    const written = factWrite(fact, variables, failure);
    if (written !== undefined) factWrites.push(written);
  }
  const raised: string[] = [];
  for (const label of labels) {
    // Raised when its condition holds, or cannot be told: a label marks what must be kept in.
    if (variables === undefined || label.when === undefined || holdsOrFails(label.when, variables))
      raised.push(label.name);
  }
  if (factWrites.length === 0 && raised.length === 0) return undefined;
  const writes: ResultWrites = {};
  if (factWrites.length > 0) writes.facts = factWrites;
  if (raised.length > 0) writes.labels = raised;
  return writes;
}

/** A fact's write for one result; undefined when its `when` does not hold. */
function factWrite(
  fact: CompiledFact,
  variables: Record<string, unknown> | undefined,
  failure: string | undefined,
): { name: string; value?: unknown; unknown?: string } | undefined {
  if (variables === undefined) return { name: fact.name, unknown: failure ?? 'the result could not be read' };
  try {
    if (fact.when !== undefined && fact.when(variables) !== true) return undefined;
    const value = jsonValue(fact.value(variables));
    const size = JSON.stringify(value)?.length ?? 0;
    if (size > MAX_FACT_CHARACTERS) {
      return { name: fact.name, unknown: `its value is ${size} characters of JSON (at most ${MAX_FACT_CHARACTERS})` };
    }
    const count = fact.keep === 'last' ? 0 : Array.isArray(value) ? value.length : 1;
    if (fact.keep === 'union' && count > fact.max) {
      return { name: fact.name, unknown: `a result gave ${count} values, more than its max of ${fact.max}` };
    }
    return { name: fact.name, value };
  } catch (error) {
    return { name: fact.name, unknown: `its value could not be computed (${messageOf(error)})` };
  }
}

function holdsOrFails(condition: Program, variables: Record<string, unknown>): boolean {
  try {
    return condition(variables) === true;
  } catch {
    return true;
  }
}

/**
 * `state` with what a committing call's result set applied: each fact merged as it keeps it,
 * each label raised. The events say what changed (`fact-set`, `label-raised`).
 */
export function applyWrites(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  writes: ResultWrites,
  call: { tool: string; toolCallId: string },
  events: OrchestrationEvent[],
): OrchestrationState {
  let facts = state.facts;
  for (const write of writes.facts ?? []) {
    const fact = plan.facts.find((candidate) => candidate.name === write.name);
    if (fact === undefined) continue; // a fact the template no longer declares
    const next = merged(fact, facts?.[write.name], write);
    facts = { ...facts, [write.name]: next };
    const unknown = 'unknown' in next ? next.unknown : undefined;
    events.push({
      type: 'fact-set',
      sessionId: state.sessionId,
      fact: write.name,
      tool: call.tool,
      toolCallId: call.toolCallId,
      ...(unknown === undefined ? {} : { unknown }),
    });
  }
  let labels = state.labels;
  let resetLabels = state.resetLabels;
  for (const name of writes.labels ?? []) {
    if (labels?.includes(name)) continue;
    labels = [...(labels ?? []), name];
    if (plan.labels.some((label) => label.name === name && label.clearOnReset))
      resetLabels = [...(resetLabels ?? []), name];
    events.push({
      type: 'label-raised',
      sessionId: state.sessionId,
      label: name,
      tool: call.tool,
      toolCallId: call.toolCallId,
    });
  }
  if (facts === state.facts && labels === state.labels) return state;
  return resetLabels === state.resetLabels ? { ...state, facts, labels } : { ...state, facts, labels, resetLabels };
}

/** A fact after one more write, as it keeps its values. */
function merged(
  fact: CompiledFact,
  current: FactValue | undefined,
  write: { value?: unknown; unknown?: string },
): FactValue {
  if (write.unknown !== undefined) return { unknown: write.unknown };
  if (fact.keep === 'last') return { value: write.value };
  // A union or a list that became unknown stays so: what it lost cannot be told apart.
  if (current !== undefined && 'unknown' in current) return current;
  const before = current === undefined ? [] : (current.value as unknown[]);
  const added = Array.isArray(write.value) ? write.value : [write.value];
  if (fact.keep === 'append') return { value: [...before, ...added].slice(-fact.max) };
  const seen = new UnionKeys();
  for (const value of before) seen.fresh(value);
  const union = [...before];
  for (const value of added) if (seen.fresh(value)) union.push(value);
  if (union.length > fact.max)
    return { unknown: `it would hold ${union.length} values, more than its max of ${fact.max}` };
  return { value: union };
}

/**
 * The values a union holds, told apart by their JSON. Strings by their own text, in a set of their
 * own (a string is never another value's JSON look-alike there): `JSON.stringify` of each id,
 * again at every merge, was most of the cost of merging a listing into a union.
 */
class UnionKeys {
  readonly #strings = new Set<string>();
  readonly #others = new Set<string | undefined>();

  /** Whether `value` was not seen before (it is seen from now on). */
  fresh(value: unknown): boolean {
    const set = typeof value === 'string' ? this.#strings : this.#others;
    const key = typeof value === 'string' ? value : JSON.stringify(value);
    if (set.has(key)) return false;
    set.add(key);
    return true;
  }
}

/**
 * What a session reset keeps of the facts and labels: no facts (they are the session's progress),
 * and every label but those whose template says `clearOnReset` (labels only rise otherwise).
 */
export function keptByReset(state: OrchestrationState): Pick<OrchestrationState, 'labels'> {
  const reset = state.resetLabels;
  const kept = reset === undefined ? state.labels : state.labels?.filter((name) => !reset.includes(name));
  return kept === undefined || kept.length === 0 ? {} : { labels: kept };
}

function messageOf(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0]!.trim();
}
