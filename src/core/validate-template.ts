/**
 * Validation of templates (SPEC section 1): every problem at once, each with a JSON path.
 * Structure comes from the zod schema; the rules that span fields are checked here on the
 * raw data, defensively, so that one broken part never hides the problems of another.
 */
import type { z } from 'zod/v4';
import {
  BUILTIN_EXTRA_KEYS,
  type ConditionDefinition,
  type ConditionRegistry,
  defaultConditionRegistry,
} from './conditions.js';
import { type CompiledPattern, compilePattern, firstMatch } from './patterns.js';
import { expressionProblem } from './rule-expressions.js';
import { limitPeriod } from './rules.js';
import {
  type AgentTemplate,
  agentTemplateSchema,
  availableToolsSchema,
  type OrchestrationConfig,
  orchestrationConfigSchema,
  orchestrationStepSchema,
  ruleLimitSchema,
  ruleSchema,
  stepConditionSchema,
} from './schema.js';
import { describeType } from './state.js';
import {
  TemplateIssueCode as Code,
  didYouMean,
  formatPath,
  TemplateConfigError,
  type TemplateIssue,
} from './template-issues.js';
import {
  compileToolPattern,
  isSelectorSyntax,
  parseSelector,
  type ToolAnnotations,
  unknownSelectorProblem,
} from './tool-annotations.js';

/** Options of template validation. */
export interface ValidateTemplateOptions {
  /**
   * The agent's tool names. Defaults to the template's own `tools` (or `nodes`); when no
   * list is known, the checks that a tool exists are skipped.
   */
  tools?: readonly string[];
  /** Condition types to accept (default: the built-ins plus registered custom types). */
  conditions?: ConditionRegistry;
  /**
   * What each tool declares (MCP annotations): with it, annotation selectors are judged
   * exactly (e.g. whether a sequence tool is permitted by `allowed: ["@readOnly"]`); without
   * it, a check that depends on a selector is skipped.
   */
  toolAnnotations?: ReadonlyMap<string, ToolAnnotations>;
}

/** Result of {@link validateTemplate}: never thrown, always returned. */
export type TemplateValidationResult =
  | { success: true; template: AgentTemplate; warnings: TemplateIssue[] }
  | { success: false; issues: TemplateIssue[] };

/** Result of {@link validateOrchestration}. */
export type OrchestrationValidationResult =
  | { success: true; config: OrchestrationConfig; warnings: TemplateIssue[] }
  | { success: false; issues: TemplateIssue[] };

type Path = readonly PropertyKey[];
type Raw = Record<string, unknown>;

const isObject = (v: unknown): v is Raw => typeof v === 'object' && v !== null && !Array.isArray(v);
const isString = (v: unknown): v is string => typeof v === 'string';

class IssueList {
  readonly items: TemplateIssue[] = [];
  add(severity: 'error' | 'warning', code: TemplateIssue['code'], path: Path, message: string, hint?: string) {
    const issue: TemplateIssue = { code, severity, path: formatPath(path), message };
    if (hint !== undefined) issue.hint = hint;
    this.items.push(issue);
  }
  error(code: TemplateIssue['code'], path: Path, message: string, hint?: string) {
    this.add('error', code, path, message, hint);
  }
  warn(code: TemplateIssue['code'], path: Path, message: string, hint?: string) {
    this.add('warning', code, path, message, hint);
  }
  sorted(): TemplateIssue[] {
    // Errors first, then in document order of discovery (stable sort).
    return this.items
      .map((issue, i) => ({ issue, i }))
      .sort((a, b) => (a.issue.severity === b.issue.severity ? a.i - b.i : a.issue.severity === 'error' ? -1 : 1))
      .map((x) => x.issue);
  }
  get hasErrors() {
    return this.items.some((i) => i.severity === 'error');
  }
}

/** Parses JSON text, or returns the value as is; a syntax error becomes an issue. */
function readJson(json: unknown, issues: IssueList): { ok: true; value: unknown } | { ok: false } {
  if (typeof json !== 'string') return { ok: true, value: json };
  try {
    return { ok: true, value: JSON.parse(json) };
  } catch (error) {
    issues.error(Code.InvalidJson, [], `not valid JSON: ${(error as Error).message}`);
    return { ok: false };
  }
}

/** The agent's tool names as a template declares them: `tools`, else the non-`llm.*` `nodes`. */
export function templateTools(template: Raw): string[] | undefined {
  if (Array.isArray(template.tools)) return template.tools.filter(isString);
  if (Array.isArray(template.nodes))
    return template.nodes.filter((n): n is string => isString(n) && !n.startsWith('llm.'));
  return undefined;
}

/**
 * Validates an agent template (an object or JSON text). Never throws: returns the template
 * with its warnings, or every issue found.
 */
export function validateTemplate(json: unknown, options: ValidateTemplateOptions = {}): TemplateValidationResult {
  const issues = new IssueList();
  const read = readJson(json, issues);
  if (!read.ok) return { success: false, issues: issues.sorted() };
  const data = read.value;
  if (!isObject(data)) {
    issues.error(Code.InvalidType, [], `a template must be a JSON object, got ${describeType(data)}`);
    return { success: false, issues: issues.sorted() };
  }
  const parsed = agentTemplateSchema.safeParse(data, { reportInput: true });
  if (!parsed.success) addZodIssues(parsed.error.issues, [], issues);
  if (!isString(data.id) && !isString(data.agentId)) {
    issues.error(
      Code.MissingId,
      ['id'],
      'the template has no "id" (or AgentDock\'s "agentId")',
      'add "id": "my-agent"',
    );
  }
  for (const { key, message, hint } of misspeltOrchestrationKeys(data))
    issues.error(Code.UnknownKey, [key], message, hint);
  const tools = options.tools ?? templateTools(data);
  if (Array.isArray(data.tools)) compilePatterns(data.tools, ['tools'], issues);
  if (isObject(data.orchestration)) {
    checkOrchestration(
      data.orchestration,
      ['orchestration'],
      tools,
      options.conditions ?? defaultConditionRegistry,
      issues,
      options.toolAnnotations,
    );
  }
  if (issues.hasErrors || !parsed.success) return { success: false, issues: issues.sorted() };
  const template = {
    ...parsed.data,
    id: (data.id ?? data.agentId) as string,
    tools: tools ? [...tools] : [],
  } as AgentTemplate;
  return { success: true, template, warnings: issues.sorted() };
}

/**
 * A template may carry any other top-level key (AgentDock's have many), so an unknown key is no
 * error in itself; but one that is a misspelling of `orchestration`, in a template without
 * `orchestration`, would leave the agent with no orchestration at all: every tool allowed,
 * nothing enforced, and no word about it. Those keys, as errors at their path.
 */
export function misspeltOrchestrationIssues(template: object): TemplateIssue[] {
  return misspeltOrchestrationKeys(template).map(({ key, message, hint }) => ({
    code: Code.UnknownKey,
    severity: 'error',
    path: formatPath([key]),
    message,
    hint,
  }));
}

function misspeltOrchestrationKeys(template: object): { key: string; message: string; hint: string }[] {
  if ('orchestration' in template) return [];
  return Object.keys(template).flatMap((key) => {
    const hint = didYouMean(key, ['orchestration']);
    if (hint === undefined) return [];
    return [
      { key, message: `unknown key "${key}": the template has no "orchestration", so nothing would be enforced`, hint },
    ];
  });
}

/** Validates an `orchestration` block on its own. Never throws. */
export function validateOrchestration(
  config: unknown,
  options: ValidateTemplateOptions & { path?: Path } = {},
): OrchestrationValidationResult {
  const issues = new IssueList();
  const path = options.path ?? [];
  if (!isObject(config)) {
    issues.error(Code.InvalidType, path, `an orchestration config must be an object, got ${describeType(config)}`);
    return { success: false, issues: issues.sorted() };
  }
  const parsed = orchestrationConfigSchema.safeParse(config, { reportInput: true });
  if (!parsed.success) addZodIssues(parsed.error.issues, path, issues);
  checkOrchestration(
    config,
    path,
    options.tools,
    options.conditions ?? defaultConditionRegistry,
    issues,
    options.toolAnnotations,
  );
  if (issues.hasErrors || !parsed.success) return { success: false, issues: issues.sorted() };
  return { success: true, config: parsed.data, warnings: issues.sorted() };
}

/** Parses and validates a template (object or JSON text); throws a {@link TemplateConfigError} listing every error. */
export function parseTemplate(json: unknown, options: ValidateTemplateOptions & { file?: string } = {}): AgentTemplate {
  const result = validateTemplate(json, options);
  if (!result.success) throw new TemplateConfigError(result.issues, options.file);
  return result.template;
}

// ---------------------------------------------------------------------------------------
// zod issues -> template issues

const KNOWN_KEYS = {
  orchestration: Object.keys(orchestrationConfigSchema.shape),
  step: Object.keys(orchestrationStepSchema.shape),
  condition: Object.keys(stepConditionSchema.shape),
  availableTools: Object.keys(availableToolsSchema.shape),
  rule: Object.keys(ruleSchema.shape),
  limit: Object.keys(ruleLimitSchema.shape),
};

function knownKeysAt(path: Path): readonly string[] {
  const last = path[path.length - 1];
  const parent = path[path.length - 2];
  if (last === 'orchestration') return KNOWN_KEYS.orchestration;
  if (last === 'availableTools') return KNOWN_KEYS.availableTools;
  if (last === 'limit') return KNOWN_KEYS.limit;
  if (typeof last === 'number' && parent === 'rules') return KNOWN_KEYS.rule;
  if (typeof last === 'number' && parent === 'steps') return KNOWN_KEYS.step;
  if (typeof last === 'number' && (parent === 'conditions' || parent === 'resetSequenceOn'))
    return KNOWN_KEYS.condition;
  return [];
}

function addZodIssues(zodIssues: readonly z.core.$ZodIssue[], base: Path, issues: IssueList) {
  for (const issue of zodIssues) {
    const path = [...base, ...issue.path];
    switch (issue.code) {
      case 'unrecognized_keys': {
        const known = knownKeysAt(path);
        for (const key of issue.keys) {
          issues.error(
            Code.UnknownKey,
            [...path, key],
            `unknown key "${key}"${known.length ? ` (known keys: ${known.join(', ')})` : ''}`,
            didYouMean(key, known),
          );
        }
        break;
      }
      case 'invalid_union': {
        const branches = issue.errors;
        const typeOnly = branches.every(
          (b) => b.length === 1 && b[0]!.code === 'invalid_type' && b[0]!.path.length === 0,
        );
        if (typeOnly) {
          const expected = branches.map((b) => describeExpected(b[0] as z.core.$ZodIssueInvalidType));
          issues.error(
            Code.InvalidType,
            path,
            `expected ${[...new Set(expected)].join(' or ')}, got ${describeType(issue.input)}`,
          );
        } else {
          // The branch whose type matched has the specific problems; report those.
          const specific = branches.find(
            (b) => !(b.length === 1 && b[0]!.code === 'invalid_type' && b[0]!.path.length === 0),
          );
          addZodIssues(specific ?? branches[0] ?? [], path, issues);
        }
        break;
      }
      case 'invalid_type':
        issues.error(Code.InvalidType, path, `expected ${describeExpected(issue)}, got ${describeType(issue.input)}`);
        break;
      case 'too_small':
        issues.error(Code.InvalidValue, path, tooSmallMessage(issue));
        break;
      default:
        issues.error(Code.InvalidValue, path, issue.message);
    }
  }
}

function describeExpected(issue: z.core.$ZodIssueInvalidType): string {
  const e = issue.expected;
  if (e === 'array') return 'an array';
  if (e === 'object') return 'an object';
  if (e === 'int') return 'an integer';
  return `a ${e}`;
}

function tooSmallMessage(issue: z.core.$ZodIssueTooSmall): string {
  if (issue.origin === 'string') return 'must not be empty';
  if (issue.origin === 'array') return `needs at least ${issue.minimum} entr${issue.minimum === 1 ? 'y' : 'ies'}`;
  return `must be ${issue.inclusive ? 'at least' : 'more than'} ${issue.minimum}`;
}

// ---------------------------------------------------------------------------------------
// rules that span fields

interface StepInfo {
  index: number;
  raw: Raw;
  name: string | undefined;
  conditions: Raw[];
  hasSequence: boolean;
}

function checkOrchestration(
  config: Raw,
  base: Path,
  agentTools: readonly string[] | undefined,
  registry: ConditionRegistry,
  issues: IssueList,
  annotations: ReadonlyMap<string, ToolAnnotations> | undefined,
) {
  const rawSteps = Array.isArray(config.steps) ? config.steps : [];
  const steps: StepInfo[] = rawSteps.flatMap((raw, index) =>
    isObject(raw)
      ? [
          {
            index,
            raw,
            name: isString(raw.name) ? raw.name : undefined,
            conditions: Array.isArray(raw.conditions) ? raw.conditions.filter(isObject) : [],
            hasSequence: Array.isArray(raw.sequence) && raw.sequence.length > 0,
          },
        ]
      : [],
  );
  const stepPath = (s: StepInfo, ...rest: PropertyKey[]) => [...base, 'steps', s.index, ...rest];
  const names = steps.flatMap((s) => (s.name === undefined ? [] : [s.name]));
  const toolSet = agentTools ? toolCatalog(agentTools) : undefined;
  const historyLimit = typeof config.historyLimit === 'number' ? config.historyLimit : 50;

  // Duplicate names.
  const firstByName = new Map<string, StepInfo>();
  for (const s of steps) {
    if (s.name === undefined) continue;
    const first = firstByName.get(s.name);
    if (first) {
      issues.error(
        Code.DuplicateStep,
        stepPath(s, 'name'),
        `duplicate step name "${s.name}" (first used by steps[${first.index}])`,
        'step names must be unique; rename one of them',
      );
    } else firstByName.set(s.name, s);
  }

  // Defaults.
  const defaults = steps.filter((s) => s.raw.isDefault === true);
  for (const extra of defaults.slice(1)) {
    issues.error(
      Code.MultipleDefaults,
      stepPath(extra, 'isDefault'),
      `more than one default step: "${extra.name}" and "${defaults[0]!.name}" both have isDefault`,
      'keep isDefault on one step only',
    );
  }
  if (isString(config.defaultStep)) {
    if (!firstByName.has(config.defaultStep)) {
      issues.error(
        Code.UnknownDefaultStep,
        [...base, 'defaultStep'],
        `defaultStep "${config.defaultStep}" names no step`,
        didYouMean(config.defaultStep, names) ?? `steps are: ${names.join(', ')}`,
      );
    }
    const other = defaults.find((d) => d.name !== config.defaultStep);
    if (other) {
      issues.error(
        Code.MultipleDefaults,
        stepPath(other, 'isDefault'),
        `two defaults: defaultStep is "${config.defaultStep}" but step "${other.name}" has isDefault`,
        'use either defaultStep or isDefault, naming the same step',
      );
    }
  }
  const defaultName = isString(config.defaultStep) ? config.defaultStep : defaults[0]?.name;

  checkRules(config.rules, [...base, 'rules'], toolSet, agentTools, issues, annotations);
  for (const s of steps) checkRules(s.raw.rules, stepPath(s, 'rules'), toolSet, agentTools, issues, annotations);

  for (const s of steps) {
    const available = isObject(s.raw.availableTools) ? s.raw.availableTools : undefined;
    const allowed = compilePatterns(available?.allowed, stepPath(s, 'availableTools', 'allowed'), issues, annotations);
    const denied = compilePatterns(available?.denied, stepPath(s, 'availableTools', 'denied'), issues, annotations);
    // A misspelt tool name in allowed or denied matches nothing: an allowed list that allows
    // less than meant, or a denied tool that stays allowed. Warned, as a rule's unknown tool is.
    if (toolSet) {
      for (const list of ['allowed', 'denied'] as const) {
        const names = available?.[list];
        if (!Array.isArray(names)) continue;
        names.forEach((tool, i) => {
          if (!isString(tool) || tool.includes('*') || isSelectorSyntax(tool) || toolSet.has(tool)) return;
          issues.warn(
            Code.UnknownTool,
            stepPath(s, 'availableTools', list, i),
            `${list} tool "${tool}" is not one of the agent's tools, so it ${list === 'allowed' ? 'allows' : 'denies'} nothing`,
            didYouMean(tool, agentTools ?? []) ?? `the agent's tools are: ${(agentTools ?? []).join(', ') || '(none)'}`,
          );
        });
      }
    }
    // Without annotations a selector's answer is unknown: assume the one that reports nothing.
    const judged = annotations !== undefined;
    const permits = (tool: string) =>
      (allowed.length === 0 || allowed.some((p) => (p.selector !== undefined && !judged) || p.test(tool))) &&
      !denied.some((p) => (p.selector === undefined || judged) && p.test(tool));

    // Sequence tools: permitted by availableTools, and known to the agent.
    if (Array.isArray(s.raw.sequence)) {
      s.raw.sequence.forEach((position, i) => {
        const alternatives = isString(position) ? [position] : Array.isArray(position) ? position.filter(isString) : [];
        alternatives.forEach((tool, j) => {
          const path = isString(position) ? stepPath(s, 'sequence', i) : stepPath(s, 'sequence', i, j);
          if (isSelectorSyntax(tool)) {
            issues.error(
              Code.SelectorNotAllowed,
              path,
              `a sequence names concrete tools, but "${tool}" is an annotation selector`,
              'name the tool itself here, and use the selector in availableTools or a rule',
            );
            return;
          }
          if (!permits(tool)) {
            issues.error(
              Code.SequenceToolNotPermitted,
              path,
              `sequence tool "${tool}" is not permitted by the step's availableTools`,
              `add "${tool}" to availableTools.allowed (or remove it from denied)`,
            );
          }
          if (toolSet && !toolSet.has(tool)) {
            issues.error(
              Code.UnknownTool,
              path,
              `sequence tool "${tool}" is not one of the agent's tools`,
              didYouMean(tool, agentTools ?? []) ??
                `the agent's tools are: ${(agentTools ?? []).join(', ') || '(none)'}`,
            );
          }
        });
      });
      if (s.conditions.some((c) => c.type === 'sequence_match') && s.raw.sequence.length > historyLimit) {
        issues.warn(
          Code.HistoryTooShort,
          stepPath(s, 'sequence'),
          `the sequence has ${s.raw.sequence.length} positions but historyLimit is ${historyLimit}, so sequence_match can never hold`,
          'raise orchestration.historyLimit',
        );
      }
    }

    if (s.raw.requireSequence === true && !s.hasSequence) {
      issues.warn(
        Code.IgnoredValue,
        stepPath(s, 'requireSequence'),
        'requireSequence has no effect: the step has no sequence',
        'add a "sequence" to the step, or remove requireSequence',
      );
    }

    // Conditions.
    if (Array.isArray(s.raw.conditions)) {
      s.raw.conditions.forEach((c, i) => {
        if (isObject(c))
          checkCondition(c, s, stepPath(s, 'conditions', i), registry, toolSet, agentTools, historyLimit, issues);
      });
    }

    // resetSequenceOn.
    if (Array.isArray(s.raw.resetSequenceOn)) {
      s.raw.resetSequenceOn.forEach((rule, i) => {
        const path = stepPath(s, 'resetSequenceOn', i);
        if (isObject(rule)) {
          checkCondition(rule, s, path, registry, toolSet, agentTools, historyLimit, issues);
          return;
        }
        if (!isString(rule) || rule === 'new_message' || rule === 'out_of_sequence') return;
        const definition = registry.get(rule);
        if (definition?.usesMessage) {
          if (!s.conditions.some((c) => c.type === rule)) {
            issues.error(
              Code.InvalidResetRule,
              path,
              `resetSequenceOn names "${rule}" but the step has no "${rule}" condition to evaluate`,
              `add a ${rule} condition to the step, or use a condition object here`,
            );
          }
          return;
        }
        const messageTypes = registry.types().filter((t) => registry.get(t)?.usesMessage);
        const options = ['new_message', 'out_of_sequence', ...messageTypes];
        issues.error(
          Code.InvalidResetRule,
          path,
          definition
            ? `"${rule}" does not read the user message, so it cannot be a reset rule by name; use a condition object`
            : `unknown reset rule "${rule}" (use ${options.join(', ')}, or a condition object)`,
          didYouMean(rule, options),
        );
      });
    }

    // Reachability.
    if (s.conditions.length === 0 && s.raw.isDefault !== true && s.name !== defaultName && s.name !== undefined) {
      issues.warn(
        Code.UnreachableStep,
        stepPath(s),
        `step "${s.name}" can never become active: it has no conditions and is not the default`,
        'add conditions, make it the default, or activate it in code with updateState',
      );
    }
  }

  // Shadowing: a later step whose conditions imply an earlier step's is never chosen by them.
  const conditional = steps.filter((s) => s.conditions.length > 0);
  for (const [i, later] of conditional.entries()) {
    const earlier = conditional
      .slice(0, i)
      .find((e) => e.conditions.every((a) => later.conditions.some((b) => implies(b, a))));
    if (earlier) {
      issues.warn(
        Code.ShadowedStep,
        stepPath(later),
        `step "${later.name}" is shadowed by steps[${earlier.index}] "${earlier.name}": whenever its conditions hold, so do those of the earlier step, which is chosen first`,
        'reorder the steps or make the conditions more specific',
      );
    }
  }
}

/**
 * Rules on calls (SPEC section 9): an effect or a limit (not both, not neither), a period a
 * limit can count over, a `when` that compiles and type-checks, and tool patterns that compile
 * (naming a tool the agent does not have is only a warning: the rule can never apply).
 */
function checkRules(
  raw: unknown,
  path: Path,
  toolSet: ToolCatalog | undefined,
  agentTools: readonly string[] | undefined,
  issues: IssueList,
  annotations: ReadonlyMap<string, ToolAnnotations> | undefined,
): void {
  if (!Array.isArray(raw)) return;
  raw.forEach((rule, i) => {
    if (!isObject(rule)) return;
    const at = [...path, i];
    const hasEffect = rule.effect !== undefined;
    const hasLimit = rule.limit !== undefined;
    if (hasEffect === hasLimit) {
      issues.error(
        Code.InvalidRule,
        at,
        hasEffect ? 'a rule has either an effect or a limit, not both' : 'a rule needs an effect or a limit',
        hasEffect
          ? 'split it into two rules'
          : 'add "effect": "deny" | "approve" | "allow", or "limit": { "max": 5, "per": "turn" }',
      );
    }
    if (isObject(rule.limit) && isString(rule.limit.per) && limitPeriod(rule.limit.per) === undefined) {
      issues.error(
        Code.InvalidRule,
        [...at, 'limit', 'per'],
        `"${rule.limit.per}" is not a period a limit can count over`,
        'use "turn", "step", "session", or a window such as "30s", "10m", "1h", "1d"',
      );
    }
    if (isString(rule.when)) {
      const problem = expressionProblem(rule.when);
      if (problem !== undefined) {
        issues.error(
          Code.InvalidExpression,
          [...at, 'when'],
          `invalid CEL expression: ${problem}`,
          'it reads tool, args, state (activeStep, recentlyUsedTools, sequenceIndex, cumulativeTokenUsage) and context, and must be true or false',
        );
      }
    }
    const patterns = compilePatterns(rule.tools, [...at, 'tools'], issues, annotations);
    if (toolSet && Array.isArray(rule.tools)) {
      rule.tools.forEach((tool, j) => {
        if (!isString(tool) || tool.includes('*') || isSelectorSyntax(tool) || toolSet.has(tool)) return;
        issues.warn(
          Code.UnknownTool,
          [...at, 'tools', j],
          `rule tool "${tool}" is not one of the agent's tools, so the rule never applies to it`,
          didYouMean(tool, agentTools ?? []) ?? `the agent's tools are: ${(agentTools ?? []).join(', ') || '(none)'}`,
        );
      });
    }
    const judgeable = toolSet?.exact === true && patterns.every((p) => p.selector === undefined || annotations);
    if (judgeable && patterns.length > 0 && !toolSet.names.some((tool) => firstMatch(patterns, tool) !== undefined)) {
      issues.warn(Code.UnknownTool, [...at, 'tools'], "the rule's patterns match none of the agent's tools");
    }
  });
}

/**
 * The agent's tools as validation sees them: a list of names, or (for MCP tools) a list that
 * may hold globs and selectors, which names a tool only if some entry could match it.
 */
interface ToolCatalog {
  has(tool: string): boolean;
  /** The entries as written. */
  readonly names: readonly string[];
  /** True when every entry is a plain name. */
  readonly exact: boolean;
}

function toolCatalog(agentTools: readonly string[]): ToolCatalog {
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
function compilePatterns(
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

function checkCondition(
  c: Raw,
  step: StepInfo,
  path: Path,
  registry: ConditionRegistry,
  toolSet: ToolCatalog | undefined,
  agentTools: readonly string[] | undefined,
  historyLimit: number,
  issues: IssueList,
) {
  if (!isString(c.type)) return; // reported by the schema
  const definition = registry.get(c.type);
  if (!definition) {
    const types = registry.types();
    issues.error(
      Code.UnknownConditionType,
      [...path, 'type'],
      `unknown condition type "${c.type}" (known types: ${types.join(', ')})`,
      didYouMean(c.type, types) ?? 'custom types must be registered in code with registerConditionType()',
    );
    return;
  }
  if (BUILTIN_TYPES.has(c.type)) {
    const extras = BUILTIN_EXTRA_KEYS[c.type] ?? [];
    for (const key of ['window', 'flags', 'params']) {
      if (c[key] !== undefined && !extras.includes(key)) {
        issues.error(Code.UnexpectedField, [...path, key], `"${key}" has no meaning for a ${c.type} condition`);
      }
    }
  }
  if (definition.requiresValue && (c.value === undefined || c.value === '')) {
    issues.error(
      Code.MissingValue,
      [...path, 'value'],
      `a ${c.type} condition needs a "value"`,
      definition.valueIsTool ? 'set "value" to a tool name' : 'set "value" to the text to look for',
    );
    return;
  }
  if (c.type === 'sequence_match') {
    if (!step.hasSequence) {
      issues.error(
        Code.SequenceMatchWithoutSequence,
        [...path, 'type'],
        `sequence_match is used on step "${step.name}", which has no sequence`,
        'add a "sequence" to the step, or use tool_used',
      );
      return;
    }
    if (c.value !== undefined) issues.warn(Code.IgnoredValue, [...path, 'value'], 'sequence_match ignores "value"');
  }
  if (c.type === 'not_recently_used' && typeof c.window === 'number' && c.window > historyLimit) {
    issues.warn(
      Code.HistoryTooShort,
      [...path, 'window'],
      `window ${c.window} is larger than historyLimit ${historyLimit}; only ${historyLimit} tool uses are kept`,
    );
  }
  if (definition.valueIsTool && isString(c.value) && isSelectorSyntax(c.value)) {
    issues.error(
      Code.SelectorNotAllowed,
      [...path, 'value'],
      `a ${c.type} condition names one tool, but "${c.value}" is an annotation selector`,
      'name the tool itself',
    );
    return;
  }
  if (definition.valueIsTool && isString(c.value) && toolSet && !toolSet.has(c.value)) {
    issues.error(
      Code.UnknownTool,
      [...path, 'value'],
      `condition tool "${c.value}" is not one of the agent's tools`,
      didYouMean(c.value, agentTools ?? []) ?? `the agent's tools are: ${(agentTools ?? []).join(', ') || '(none)'}`,
    );
  }
  if (definition.validate && (c.value === undefined || isString(c.value))) {
    const problem = safeValidate(definition.validate, c, step.raw);
    if (problem) {
      issues.error(
        c.type === 'message_regex' ? Code.InvalidRegex : Code.InvalidCondition,
        [...path, c.type === 'message_regex' ? 'value' : 'type'],
        problem,
      );
    }
  }
}

const BUILTIN_TYPES = new Set([
  'tool_used',
  'sequence_match',
  'message_contains',
  'message_regex',
  'not_recently_used',
]);

function safeValidate(
  validate: NonNullable<ConditionDefinition['validate']>,
  condition: Raw,
  step: Raw,
): string | undefined {
  try {
    // The raw objects may be malformed elsewhere; a custom validator must not crash validation.
    return validate(condition as never, step as never);
  } catch (error) {
    return `the condition's validator failed: ${(error as Error).message}`;
  }
}

/** True when condition `b` holding guarantees that condition `a` holds. */
function implies(b: Raw, a: Raw): boolean {
  if (a.type === b.type) {
    if (a.type === 'message_contains' && isString(a.value) && isString(b.value)) {
      return b.value.toLowerCase().includes(a.value.toLowerCase());
    }
    if (a.type === 'not_recently_used') {
      return a.value === b.value && ((b.window as number | undefined) ?? 5) >= ((a.window as number | undefined) ?? 5);
    }
    if (a.type === 'sequence_match') return false; // depends on each step's own sequence
    return a.value === b.value && a.flags === b.flags && JSON.stringify(a.params) === JSON.stringify(b.params);
  }
  return false;
}
