/**
 * A rule's `when` expression (SPEC section 9): CEL, parsed and type-checked when the template
 * loads, and compiled once into a program of the evaluator that `rules.ts` runs per call.
 *
 * CEL, not a language of our own: no loops, no side effects, type-checked, and what Kubernetes
 * admission policies, Envoy and Google IAM use for exactly this. The evaluator is
 * `@marcbachmann/cel-js`. An expression's cost is bounded when it loads, so no expression can make
 * a decision slow: it is at most {@link MAX_EXPRESSION_LENGTH} characters with at most
 * {@link MAX_AST_NODES} nodes, nesting depth {@link MAX_EXPRESSION_DEPTH} and
 * {@link MAX_COMPREHENSION_NESTING} nested macros (`all`, `exists`, `map`, `filter`: refused at
 * load beyond that); what it reads of a call is bounded in `rules.ts`. And `matches()` runs on RE2
 * (re2js, linear time, the syntax the CEL spec gives it), not on the evaluator's JavaScript
 * `RegExp`, whose backtracking a crafted input can make take exponential time (`'^(a+)+$'`
 * against forty `a`s and a `!`); its pattern is written in the rule (a string literal, checked
 * when the template loads), so no input chooses the regex. Paths have two functions of their
 * own, `normalizePath()` and `isWithinPath(folder)` (`rule-paths.ts`): comparing a path's text
 * lets `..` through.
 */
import { Environment, type ObjectSchema } from '@marcbachmann/cel-js';
import { RE2JS } from 're2js';
import { RuleEvaluationError } from './rule-evaluation-error.js';
import { isPathWithin, normalizePath } from './rule-paths.js';

/** Longest `when` expression, in characters. */
export const MAX_EXPRESSION_LENGTH = 2_000;
/** Most AST nodes of one expression. */
export const MAX_AST_NODES = 400;
/** Deepest nesting of one expression. */
export const MAX_EXPRESSION_DEPTH = 24;
/** Most macros (`all`, `exists`, `exists_one`, `map`, `filter`) nested inside one another. */
export const MAX_COMPREHENSION_NESTING = 2;

/**
 * The CEL type of `state` in expressions: the session as the AI sees it, with the facts and
 * labels its completed calls' results set (SPEC section 11).
 */
const STATE_SCHEMA = {
  activeStep: 'string',
  recentlyUsedTools: 'list<string>',
  sequenceIndex: 'int',
  cumulativeTokenUsage: { promptTokens: 'int', completionTokens: 'int', totalTokens: 'int' },
  facts: 'map',
  labels: 'list<string>',
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
// Paths as a filesystem reads them (see `rule-paths.ts`): on `base`, so that the check against a
// tool's input schema knows them as well as the evaluation does.
base
  .registerFunction('string.normalizePath(): string', normalizePath, {
    description: 'The path with `.`, `..` and repeated `/` resolved (POSIX, lexical: no symlinks)',
  })
  .registerFunction('string.isWithinPath(string): bool', isPathWithin, {
    description: 'Whether the path, normalised, is the folder or inside it',
  });
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

/**
 * A fact's `value` and a label's `when` are evaluated here: they read the completed call's
 * `result` too.
 */
const resultEnvironment = environment.clone().registerVariable('result', 'dyn', {
  description: 'What the completed call returned',
});

/** One compiled expression of the evaluator. */
type Program = ReturnType<Environment['parse']>;

/** What an expression is for: a rule's condition (a boolean), or a fact's value or a label's condition over a result. */
export type ExpressionKind = 'condition' | 'result-value' | 'result-condition';

/** What is wrong with `expression` as a rule's `when` (or as `kind`), or undefined when nothing is. */
export function expressionProblem(expression: string, kind: ExpressionKind = 'condition'): string | undefined {
  return compileExpression(expression, kind).problem;
}

/** `expression` compiled to a program of the evaluator, or what is wrong with it. */
export function compileExpression(
  expression: string,
  kind: ExpressionKind = 'condition',
): { program?: Program; problem?: string } {
  if (expression.length > MAX_EXPRESSION_LENGTH) {
    return { problem: `the expression is ${expression.length} characters; the limit is ${MAX_EXPRESSION_LENGTH}` };
  }
  const parser = kind === 'condition' ? environment : resultEnvironment;
  let program: Program;
  try {
    program = parser.parse(expression);
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
  if (kind !== 'result-value' && checked.type !== 'bool' && checked.type !== 'dyn') {
    return {
      problem: `the expression is of type ${checked.type}; a ${kind === 'condition' ? 'rule' : 'condition'} needs a boolean (true or false)`,
    };
  }
  return linearRegexes(expression, program, parser);
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
function linearRegexes(
  expression: string,
  program: Program,
  parser: Environment = environment,
): { program?: Program; problem?: string } {
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
    linear = parser.parse(source);
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
