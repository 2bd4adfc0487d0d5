/**
 * Rules on calls (SPEC section 9), compiled once per template: each rule's tool patterns, its
 * CEL condition (`when`, parsed and type-checked when the template loads: see
 * `rule-expressions.ts`), and its effect or limit. Deciding a call asks `judgeRules`, in the
 * layer that decides calls (`call-rules.ts`), after the step's own rules (SPEC sections 4 and 5)
 * and budgets.
 *
 * A rule's expression is bounded where it compiles (`rule-expressions.ts`); what it reads of a
 * call is bounded here: a call's arguments are at most {@link MAX_ARGUMENT_NODES} values, lists of
 * at most {@link MAX_LIST_LENGTH}, nested {@link MAX_ARGUMENT_DEPTH} deep (a call with more is
 * refused, as a rule that fails to evaluate is). With at most {@link MAX_COMPREHENSION_NESTING}
 * macros nested, one evaluation visits at most MAX_LIST_LENGTH^2 elements.
 *
 * A rule that fails to evaluate (a missing key, a type error at run time, arguments too large)
 * refuses the call and says why: fail closed, as the AI SDK's policy packages do.
 */
import { type CompiledPattern, firstMatch } from './patterns.js';
import { RuleEvaluationError } from './rule-evaluation-error.js';
import { compileExpression } from './rule-expressions.js';
import { type LIMIT_SCOPES, MAX_FACT_VALUES, type PolicyRule, type Rule } from './schema.js';
import type { FactValue, OrchestrationState } from './state.js';
import { READS_NOTHING, type StateReads, stateReads } from './state-reads.js';
import { compileToolPattern, type ToolAnnotations } from './tool-annotations.js';

// The expression side, what it reads of the session and the error have files of their own;
// re-exported so that every import of them from here keeps working (call-rules.ts has one).
export { RuleEvaluationError } from './rule-evaluation-error.js';
export {
  expressionProblem,
  expressionProblemFor,
  MAX_AST_NODES,
  MAX_COMPREHENSION_NESTING,
  MAX_EXPRESSION_DEPTH,
  MAX_EXPRESSION_LENGTH,
} from './rule-expressions.js';
export type { StateReads } from './state-reads.js';

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

/** What a limit counts over (SPEC section 11): one session, or an operator's limit across sessions. */
export type LimitScope = (typeof LIMIT_SCOPES)[number];

/** A compiled rule. */
export interface CompiledRule {
  /** Where the rule is in its orchestration block: `rules[0]`, `steps[2].rules[1]`. */
  readonly id: string;
  /** The step whose rule it is (it applies while that step is active), or undefined for every step. */
  readonly step: string | undefined;
  /** The `when` expression as written, if any. */
  readonly when: string | undefined;
  readonly effect: 'deny' | 'approve' | 'allow' | undefined;
  readonly limit:
    | {
        readonly max: number;
        readonly per: string;
        readonly period: LimitPeriod;
        /** What it counts over: one session, or (an operator's limit) across sessions. */
        readonly scope: LimitScope;
      }
    | undefined;
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

/** The variables a `when` expression reads (see {@link ruleVariables}). */
export interface RuleVariables {
  readonly tool: string;
  readonly args: unknown;
  readonly state: unknown;
  readonly context: unknown;
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
  rules: readonly (Rule | PolicyRule)[] | undefined,
  step: { name: string; index: number } | undefined,
  annotations?: ReadonlyMap<string, ToolAnnotations>,
  /** Before every id: `policy.` for the operator's policy. */
  prefix = '',
): CompiledRule[] {
  if (rules === undefined) return [];
  return rules.map((rule, index) => {
    const patterns: CompiledPattern[] = rule.tools.map((pattern) => compileToolPattern(pattern, annotations));
    const program = rule.when === undefined ? undefined : compileExpression(rule.when).program;
    const reads = program === undefined ? READS_NOTHING : stateReads(program.ast);
    const matched = new Map<string, boolean>();
    const period = rule.limit === undefined ? undefined : limitPeriod(rule.limit.per);
    return Object.freeze({
      id: step === undefined ? `${prefix}rules[${index}]` : `steps[${step.index}].rules[${index}]`,
      step: step?.name,
      when: rule.when,
      effect: rule.effect,
      limit:
        rule.limit && period
          ? Object.freeze({
              max: rule.limit.max,
              per: rule.limit.per,
              period,
              scope: ('scope' in rule.limit ? rule.limit.scope : undefined) ?? 'session',
            })
          : undefined,
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

/**
 * A call's input as rules read it: JSON values with integers as CEL ints (`args.amount > 100`
 * works however the number was written) and objects as Maps (so no key reaches a prototype). Throws a
 * {@link RuleEvaluationError} when it is larger than the bounds in the module comment.
 */
export function celValue(
  value: unknown,
  what = 'the arguments',
  nodes = MAX_ARGUMENT_NODES,
  longest = MAX_LIST_LENGTH,
): unknown {
  const budget = { nodes, limit: nodes, what, longest };
  return convert(value, 0, budget);
}

/** Most values of a completed call's result that facts and labels read (see {@link celValue}). */
export const MAX_RESULT_NODES = 100_000;

function convert(
  value: unknown,
  depth: number,
  budget: { nodes: number; limit: number; what: string; longest: number },
): unknown {
  if (--budget.nodes < 0) {
    throw new RuleEvaluationError(`${budget.what} hold more than ${budget.limit} values`);
  }
  if (depth > MAX_ARGUMENT_DEPTH) {
    throw new RuleEvaluationError(`${budget.what} are nested more than ${MAX_ARGUMENT_DEPTH} deep`);
  }
  if (typeof value === 'number') return Number.isSafeInteger(value) ? BigInt(value) : value;
  if (value === undefined) return null;
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) {
    if (value.length > budget.longest) {
      throw new RuleEvaluationError(`a list in ${budget.what} has ${value.length} items (at most ${budget.longest})`);
    }
    return value.map((item) => convert(item, depth + 1, budget));
  }
  // A Map: the evaluator reads only its entries (never a prototype), and accepts any key.
  const out = new Map<string, unknown>();
  for (const key of Object.keys(value))
    out.set(key, convert((value as Record<string, unknown>)[key], depth + 1, budget));
  return out;
}

/**
 * A value an expression computed, as JSON: CEL ints as numbers (as strings beyond the safe
 * integers), maps as objects. What facts keep in the state.
 */
export function jsonValue(value: unknown): unknown {
  if (typeof value === 'bigint') {
    return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER)
      ? Number(value)
      : value.toString();
  }
  if (Array.isArray(value)) return value.map(jsonValue);
  if (value instanceof Map) {
    const out: Record<string, unknown> = {};
    for (const [key, item] of value) {
      // Defined as own data properties: a key such as "__proto__" stays a key.
      Object.defineProperty(out, String(key), {
        value: jsonValue(item),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  }
  if (value instanceof Uint8Array) return btoa(String.fromCharCode(...value));
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value)) {
      const item = jsonValue((value as Record<string, unknown>)[key]);
      Object.defineProperty(out, key, { value: item, enumerable: true, writable: true, configurable: true });
    }
    return out;
  }
  return value;
}

const stateValues = new WeakMap<OrchestrationState, unknown>();
/**
 * Each fact's value as rules read it, by the fact's entry in the state. Every commit and every
 * reservation makes a new state object, but one that keeps the entries of the facts it did not
 * write (states are never mutated, only replaced): a union of 1,000 ids took 18 µs to convert
 * again on every decision of a session through the memory store.
 */
const factValues = new WeakMap<FactValue, unknown>();

/** The session as rules read it (`state`), built once per state object. */
export function celState(state: OrchestrationState): unknown {
  let value = stateValues.get(state);
  if (value === undefined) {
    const usage = state.cumulativeTokenUsage;
    // Only known facts: a rule that reads an unknown one is refused before it runs (call-rules).
    const facts = new Map<string, unknown>();
    for (const [name, fact] of Object.entries(state.facts ?? {})) {
      if (!('value' in fact)) continue;
      let converted = factValues.get(fact);
      if (converted === undefined) {
        converted = celValue(fact.value, `fact "${name}"`, MAX_RESULT_NODES, MAX_FACT_VALUES);
        factValues.set(fact, converted);
      }
      facts.set(name, converted);
    }
    value = {
      activeStep: state.activeStep ?? '',
      recentlyUsedTools: state.recentlyUsedTools,
      sequenceIndex: BigInt(state.sequenceIndex),
      cumulativeTokenUsage: {
        promptTokens: BigInt(usage.promptTokens),
        completionTokens: BigInt(usage.completionTokens),
        totalTokens: BigInt(usage.totalTokens),
      },
      facts,
      labels: state.labels ?? [],
    };
    stateValues.set(state, value);
  }
  return value;
}
