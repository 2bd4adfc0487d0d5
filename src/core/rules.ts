/**
 * Rules on calls (SPEC section 9), compiled once per template: each rule's tool patterns, its
 * CEL condition (`when`, parsed and type-checked when the template loads), and its effect or
 * limit. Deciding a call asks {@link ruleDenial}, in the layer that decides calls
 * (`transition.ts`), after the step's own rules (SPEC sections 4 and 5) and budgets.
 *
 * CEL, not a language of our own: no loops, no side effects, type-checked, and what Kubernetes
 * admission policies, Envoy and Google IAM use for exactly this. The evaluator is
 * `@marcbachmann/cel-js`. Its cost is bounded three ways, so no input can make a decision slow:
 * an expression is at most {@link MAX_EXPRESSION_LENGTH} characters with at most
 * {@link MAX_AST_NODES} nodes, nesting depth {@link MAX_EXPRESSION_DEPTH} and
 * {@link MAX_COMPREHENSION_NESTING} nested macros (`all`, `exists`, `map`, `filter`: refused at
 * load beyond that); and a call's arguments are at most {@link MAX_ARGUMENT_NODES} values, lists
 * of at most {@link MAX_LIST_LENGTH}, nested {@link MAX_ARGUMENT_DEPTH} deep (a call with more is
 * refused, as a rule that fails to evaluate is). So one evaluation visits at most
 * MAX_LIST_LENGTH^2 elements. And `matches()` runs on RE2 (re2js, linear time, the syntax the CEL
 * spec gives it), not on the evaluator's JavaScript `RegExp`, whose backtracking a crafted input can
 * make take exponential time (`'^(a+)+$'` against forty `a`s and a `!`); its pattern is written in
 * the rule (a string literal, checked when the template loads), so no input chooses the regex.
 *
 * A rule that fails to evaluate (a missing key, a type error at run time, arguments too large)
 * refuses the call and says why: fail closed, as the AI SDK's policy packages do.
 */
import { Environment, type ObjectSchema } from '@marcbachmann/cel-js';
import { RE2JS } from 're2js';
import { type CompiledPattern, firstMatch } from './patterns.js';
import type { Rule } from './schema.js';
import type { OrchestrationState } from './state.js';
import { compileToolPattern, type ToolAnnotations } from './tool-annotations.js';

/** Longest `when` expression, in characters. */
export const MAX_EXPRESSION_LENGTH = 2_000;
/** Most AST nodes of one expression. */
export const MAX_AST_NODES = 400;
/** Deepest nesting of one expression. */
export const MAX_EXPRESSION_DEPTH = 24;
/** Most macros (`all`, `exists`, `exists_one`, `map`, `filter`) nested inside one another. */
export const MAX_COMPREHENSION_NESTING = 2;
/** Most values (scalars, lists, maps) in a call's arguments that rules will read. */
export const MAX_ARGUMENT_NODES = 10_000;
/** Longest list in a call's arguments that rules will read. */
export const MAX_LIST_LENGTH = 1_000;
/** Deepest nesting of a call's arguments that rules will read. */
export const MAX_ARGUMENT_DEPTH = 32;

/** What a limit counts over. */
export type LimitPeriod =
  | { readonly kind: 'turn' }
  | { readonly kind: 'step' }
  | { readonly kind: 'session' }
  | { readonly kind: 'window'; readonly ms: number };

/** A compiled rule. */
export interface CompiledRule {
  /** Where the rule is in its orchestration block: `rules[0]`, `steps[2].rules[1]`. */
  readonly id: string;
  /** The step whose rule it is (it applies while that step is active), or undefined for every step. */
  readonly step: string | undefined;
  /** The `when` expression as written, if any. */
  readonly when: string | undefined;
  readonly effect: 'deny' | 'approve' | 'allow' | undefined;
  readonly limit: { readonly max: number; readonly per: string; readonly period: LimitPeriod } | undefined;
  readonly reason: string;
  /** True when the rule names `tool`. */
  matches(tool: string): boolean;
  /** Evaluates `when` (true when there is none). Throws when it cannot be evaluated. */
  holds(variables: RuleVariables): boolean;
  /**
   * What of the session `when` reads (see {@link StateReads}): a running call's completion can
   * change its answer only through these, which is what tells a request that must wait for it.
   */
  readonly reads: StateReads;
}

/**
 * The parts of `state` an expression reads: the history (`recentlyUsedTools`), the sequence
 * position, the active step, token usage. An expression that uses `state` any other way (passes
 * it whole, indexes it with a computed key) reads all of them.
 */
export interface StateReads {
  readonly history: boolean;
  readonly sequence: boolean;
  readonly step: boolean;
}

const READS_NOTHING: StateReads = Object.freeze({ history: false, sequence: false, step: false });
const READS_ALL: StateReads = Object.freeze({ history: true, sequence: true, step: true });

/**
 * What of `state` an expression's AST reads. A comprehension variable that happens to be named
 * `state` counts as the session too: over-reading only makes a request wait, never run early.
 */
function stateReads(ast: unknown): StateReads {
  const found = { history: false, sequence: false, step: false, all: false };
  visitState(ast, undefined, found);
  if (found.all) return READS_ALL;
  if (!found.history && !found.sequence && !found.step) return READS_NOTHING;
  return Object.freeze({ history: found.history, sequence: found.sequence, step: found.step });
}

function visitState(
  node: unknown,
  parent: { op?: unknown; args?: unknown } | undefined,
  found: { history: boolean; sequence: boolean; step: boolean; all: boolean },
): void {
  if (Array.isArray(node)) {
    for (const item of node) visitState(item, parent, found);
    return;
  }
  if (typeof node !== 'object' || node === null) return;
  const current = node as { op?: unknown; args?: unknown };
  if (current.op === 'id' && current.args === 'state') {
    const args = Array.isArray(parent?.args) ? (parent.args as unknown[]) : [];
    let field: unknown;
    if (parent?.op === '.' && args[0] === node) field = args[1];
    else if (parent?.op === '[]' && args[0] === node) {
      const key = args[1] as { op?: unknown; args?: unknown } | undefined;
      if (key?.op === 'value') field = key.args;
    }
    if (field === 'recentlyUsedTools') found.history = true;
    else if (field === 'sequenceIndex') found.sequence = true;
    else if (field === 'activeStep') found.step = true;
    else if (field !== 'cumulativeTokenUsage') found.all = true;
    return;
  }
  visitState(current.args, current, found);
}

/** The variables a `when` expression reads (see {@link ruleVariables}). */
export interface RuleVariables {
  readonly tool: string;
  readonly args: unknown;
  readonly state: unknown;
  readonly context: unknown;
}

/** The CEL type of `state` in expressions: the session as the AI sees it. */
const STATE_SCHEMA = {
  activeStep: 'string',
  recentlyUsedTools: 'list<string>',
  sequenceIndex: 'int',
  cumulativeTokenUsage: { promptTokens: 'int', completionTokens: 'int', totalTokens: 'int' },
} as const;

const LIMITS = {
  maxAstNodes: MAX_AST_NODES,
  maxDepth: MAX_EXPRESSION_DEPTH,
  maxListElements: 100,
  maxMapEntries: 100,
  maxCallArguments: 8,
};

/** The variables every expression may read, `args` excepted (typed per tool when checked). */
const base = new Environment({ limits: LIMITS, homogeneousAggregateLiterals: false })
  .registerVariable('tool', 'string', { description: 'The name of the tool called' })
  .registerVariable('context', 'map', { description: 'What the caller passes with the turn' })
  .registerVariable({ name: 'state', schema: STATE_SCHEMA, description: "The session's orchestration state" });
/**
 * The method that `matches()` is evaluated as: the evaluator's own `matches` uses JavaScript's
 * backtracking `RegExp` and cannot be replaced, so a rule's expression is evaluated with its
 * `matches` calls renamed to this one (see {@link linearRegexes}).
 */
const LINEAR_MATCHES = 'matchesRe2';

/** The compiled patterns of `matches()`, by pattern (they are literals of templates: few, and kept). */
const patterns = new Map<string, RE2JS>();

function linearMatches(text: string, pattern: string): boolean {
  let regex = patterns.get(pattern);
  if (regex === undefined) {
    try {
      regex = RE2JS.compile(pattern);
    } catch (error) {
      throw new RuleEvaluationError(`invalid regular expression ${JSON.stringify(pattern)}: ${firstLine(error)}`);
    }
    if (patterns.size < 10_000) patterns.set(pattern, regex);
  }
  // A search, as CEL's matches() is: the pattern may match any part of the text.
  return regex.test(text);
}

/** Expressions are evaluated here: `args` is any map (checked per tool schema where one is known). */
const environment = base
  .clone()
  .registerVariable('args', 'map', { description: "The call's input" })
  .registerFunction(`string.${LINEAR_MATCHES}(string): bool`, linearMatches, {
    description: 'matches() on RE2 (linear time)',
  });

/** One compiled expression of the evaluator. */
type Program = ReturnType<Environment['parse']>;

/** What is wrong with `expression` as a rule's `when`, or undefined when nothing is. */
export function expressionProblem(expression: string): string | undefined {
  return compileExpression(expression).problem;
}

function compileExpression(expression: string): { program?: Program; problem?: string } {
  if (expression.length > MAX_EXPRESSION_LENGTH) {
    return { problem: `the expression is ${expression.length} characters; the limit is ${MAX_EXPRESSION_LENGTH}` };
  }
  let program: Program;
  try {
    program = environment.parse(expression);
  } catch (error) {
    return { problem: firstLine(error) };
  }
  const nesting = comprehensionNesting(program.ast);
  if (nesting > MAX_COMPREHENSION_NESTING) {
    return {
      problem: `macros (all, exists, map, filter) are nested ${nesting} deep; at most ${MAX_COMPREHENSION_NESTING} are allowed, so that no input can make the rule slow`,
    };
  }
  const checked = program.check();
  if (!checked.valid) return { problem: firstLine(checked.error) };
  if (checked.type !== 'bool' && checked.type !== 'dyn') {
    return { problem: `the expression is of type ${checked.type}; a rule needs a boolean (true or false)` };
  }
  return linearRegexes(expression, program);
}

/** A `matches()` call in an expression's AST: where its method name is, and its pattern. */
interface MatchesCall {
  /** Where the text between the receiver and the pattern starts and ends. */
  readonly from: number;
  readonly to: number;
  readonly pattern: unknown;
}

/**
 * `program` with every `matches()` evaluated on RE2 (see the module comment): the expression is
 * parsed again with the calls renamed. A pattern that is not a string literal, or not valid RE2,
 * is a problem of the template.
 */
function linearRegexes(expression: string, program: Program): { program?: Program; problem?: string } {
  const calls: MatchesCall[] = [];
  findMatchesCalls(program.ast, calls);
  if (calls.length === 0) return { program };
  let source = expression;
  // From the last call to the first, so the positions of the earlier ones still hold.
  calls.sort((a, b) => b.from - a.from);
  for (const call of calls) {
    const pattern = call.pattern as { op?: unknown; args?: unknown } | undefined;
    if (pattern?.op !== 'value' || typeof pattern.args !== 'string') {
      return {
        problem:
          'the pattern of matches() must be a string written in the rule, so that no input chooses the regular expression',
      };
    }
    try {
      RE2JS.compile(pattern.args);
    } catch (error) {
      return { problem: `matches() takes an RE2 pattern: ${firstLine(error)}` };
    }
    const gap = source.slice(call.from, call.to);
    const at = gap.search(/\bmatches\b/);
    if (at >= 0) {
      const start = call.from + at;
      source = `${source.slice(0, start)}${LINEAR_MATCHES}${source.slice(start + 'matches'.length)}`;
    }
  }
  let linear: Program;
  try {
    linear = environment.parse(source);
  } catch (error) {
    return { problem: firstLine(error) };
  }
  // Never evaluated with the backtracking matches(): refused if a call could not be renamed.
  const left: MatchesCall[] = [];
  findMatchesCalls(linear.ast, left, 'matches');
  if (left.length > 0) return { problem: 'write matches() as text.matches("pattern")' };
  return { program: linear };
}

/** The calls of `matches()` (and of {@link LINEAR_MATCHES}, unless `only` names one) in an AST. */
function findMatchesCalls(node: unknown, out: MatchesCall[], only?: string): void {
  if (Array.isArray(node)) {
    for (const item of node) findMatchesCalls(item, out, only);
    return;
  }
  if (typeof node !== 'object' || node === null) return;
  const { op, args } = node as { op?: unknown; args?: unknown };
  if (op === 'rcall' && Array.isArray(args)) {
    const [name, receiver, callArgs] = args as [unknown, { end?: unknown } | undefined, unknown];
    const named = only === undefined ? name === 'matches' || name === LINEAR_MATCHES : name === only;
    if (named && Array.isArray(callArgs)) {
      const pattern = callArgs[0] as { start?: unknown } | undefined;
      const from = typeof receiver?.end === 'number' ? receiver.end : 0;
      const to = typeof pattern?.start === 'number' ? pattern.start : from;
      out.push({ from, to, pattern });
    }
  }
  findMatchesCalls(args, out, only);
}

/**
 * What is wrong with `expression` for a call of a tool whose input has the JSON Schema
 * `inputSchema` (its properties' names and types), or undefined when nothing is: a typo in a
 * field name, or a field used as another type, is found when the app starts, not at a call.
 */
export function expressionProblemFor(expression: string, inputSchema: unknown): string | undefined {
  const schema = celSchema(inputSchema, 0);
  if (typeof schema !== 'object') return undefined; // an input that is not an object: nothing to check
  try {
    const typed = base.clone().registerVariable({ name: 'args', schema });
    const checked = typed.check(expression);
    return checked.valid ? undefined : firstLine(checked.error);
  } catch (error) {
    // A schema the evaluator cannot express (an unusual JSON Schema): checked as any map.
    return error instanceof Error && /schema|type/i.test(error.message) ? undefined : firstLine(error);
  }
}

/** A JSON Schema as the evaluator's schema: object properties by name, scalars by CEL type. */
function celSchema(schema: unknown, depth: number): ObjectSchema | string {
  if (typeof schema !== 'object' || schema === null || depth > 8) return 'dyn';
  const s = schema as Record<string, unknown>;
  switch (s.type) {
    case 'string':
      return 'string';
    case 'boolean':
      return 'bool';
    case 'integer':
      return 'int';
    case 'array': {
      const items = celSchema(s.items, depth + 1);
      return typeof items === 'string' ? `list<${items}>` : 'list<map>';
    }
    case 'object': {
      const properties = s.properties;
      if (typeof properties !== 'object' || properties === null) return 'map';
      const out: ObjectSchema = {};
      for (const [name, property] of Object.entries(properties)) out[name] = celSchema(property, depth + 1);
      return Object.keys(out).length === 0 ? 'map' : out;
    }
    default:
      // A JSON number may be an integer or not; unions and the rest are dynamic.
      return 'dyn';
  }
}

const MACROS = new Set(['all', 'exists', 'exists_one', 'map', 'filter']);

/** How deep macros are nested in an expression's AST. */
function comprehensionNesting(node: unknown): number {
  if (Array.isArray(node)) {
    let deepest = 0;
    for (const item of node) deepest = Math.max(deepest, comprehensionNesting(item));
    return deepest;
  }
  if (typeof node !== 'object' || node === null) return 0;
  const { op, args } = node as { op?: unknown; args?: unknown };
  const inner = comprehensionNesting(args);
  const isMacro = op === 'rcall' && Array.isArray(args) && typeof args[0] === 'string' && MACROS.has(args[0]);
  return isMacro ? inner + 1 : inner;
}

function firstLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split('\n')[0]!.trim();
}

const DURATION = /^(\d+)(s|m|h|d)$/;
const UNIT_MS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** The period of `limit.per`, or undefined when it is not one (validation reports it). */
export function limitPeriod(per: string): LimitPeriod | undefined {
  if (per === 'turn' || per === 'step' || per === 'session') return { kind: per };
  const match = DURATION.exec(per);
  if (match === null) return undefined;
  const ms = Number(match[1]) * UNIT_MS[match[2]!]!;
  return ms > 0 && Number.isSafeInteger(ms) ? { kind: 'window', ms } : undefined;
}

/** Compiles the rules of one block (`step`: the step they belong to); the rules are valid (validation ran). */
export function compileRules(
  rules: readonly Rule[] | undefined,
  step: { name: string; index: number } | undefined,
  annotations?: ReadonlyMap<string, ToolAnnotations>,
): CompiledRule[] {
  if (rules === undefined) return [];
  return rules.map((rule, index) => {
    const patterns: CompiledPattern[] = rule.tools.map((pattern) => compileToolPattern(pattern, annotations));
    const program = rule.when === undefined ? undefined : compileExpression(rule.when).program;
    const reads = program === undefined ? READS_NOTHING : stateReads(program.ast);
    const matched = new Map<string, boolean>();
    const period = rule.limit === undefined ? undefined : limitPeriod(rule.limit.per);
    return Object.freeze({
      id: step === undefined ? `rules[${index}]` : `steps[${step.index}].rules[${index}]`,
      step: step?.name,
      when: rule.when,
      effect: rule.effect,
      limit: rule.limit && period ? Object.freeze({ max: rule.limit.max, per: rule.limit.per, period }) : undefined,
      reason: rule.reason,
      reads,
      matches(tool: string): boolean {
        let hit = matched.get(tool);
        if (hit === undefined) {
          hit = firstMatch(patterns, tool) !== undefined;
          if (matched.size < 10_000) matched.set(tool, hit);
        }
        return hit;
      },
      holds(variables: RuleVariables): boolean {
        if (program === undefined) return true;
        const value = program(variables as unknown as Record<string, unknown>);
        if (typeof value !== 'boolean') {
          throw new RuleEvaluationError(`it evaluated to ${typeof value}, not to true or false`);
        }
        return value;
      },
    });
  });
}

/** A rule could not be evaluated for a call; the call is refused with this message. */
export class RuleEvaluationError extends Error {
  override readonly name = 'RuleEvaluationError';
}

/**
 * A call's input as rules read it: JSON values with integers as CEL ints (`args.amount > 100`
 * works however the number was written) and objects as Maps (so no key reaches a prototype). Throws a
 * {@link RuleEvaluationError} when it is larger than the bounds in the module comment.
 */
export function celValue(value: unknown): unknown {
  const budget = { nodes: MAX_ARGUMENT_NODES };
  return convert(value, 0, budget);
}

function convert(value: unknown, depth: number, budget: { nodes: number }): unknown {
  if (--budget.nodes < 0) {
    throw new RuleEvaluationError(`the arguments hold more than ${MAX_ARGUMENT_NODES} values`);
  }
  if (depth > MAX_ARGUMENT_DEPTH) {
    throw new RuleEvaluationError(`the arguments are nested more than ${MAX_ARGUMENT_DEPTH} deep`);
  }
  if (typeof value === 'number') return Number.isSafeInteger(value) ? BigInt(value) : value;
  if (value === undefined) return null;
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) {
    if (value.length > MAX_LIST_LENGTH) {
      throw new RuleEvaluationError(`a list in the arguments has ${value.length} items (at most ${MAX_LIST_LENGTH})`);
    }
    return value.map((item) => convert(item, depth + 1, budget));
  }
  // A Map: the evaluator reads only its entries (never a prototype), and accepts any key.
  const out = new Map<string, unknown>();
  for (const key of Object.keys(value))
    out.set(key, convert((value as Record<string, unknown>)[key], depth + 1, budget));
  return out;
}

const stateValues = new WeakMap<OrchestrationState, unknown>();

/** The session as rules read it (`state`), built once per state object. */
export function celState(state: OrchestrationState): unknown {
  let value = stateValues.get(state);
  if (value === undefined) {
    const usage = state.cumulativeTokenUsage;
    value = {
      activeStep: state.activeStep ?? '',
      recentlyUsedTools: state.recentlyUsedTools,
      sequenceIndex: BigInt(state.sequenceIndex),
      cumulativeTokenUsage: {
        promptTokens: BigInt(usage.promptTokens),
        completionTokens: BigInt(usage.completionTokens),
        totalTokens: BigInt(usage.totalTokens),
      },
    };
    stateValues.set(state, value);
  }
  return value;
}
