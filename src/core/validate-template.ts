/**
 * Validation of templates (SPEC section 1): every problem at once, each with a JSON path.
 * Structure comes from the zod schema, whose issues are translated here; the rules that span
 * fields are checked on the raw data, defensively, so that one broken part never hides the
 * problems of another (`check-orchestration.ts`, with `check-rules.ts` and
 * `check-condition.ts`).
 */
import type { z } from 'zod/v4';
import { checkOrchestration } from './check-orchestration.js';
import { type ConditionRegistry, defaultConditionRegistry } from './conditions.js';
import { IssueList, isObject, isString, type Path, type Raw } from './issue-list.js';
import {
  type AgentTemplate,
  agentTemplateSchema,
  availableToolsSchema,
  factSchema,
  labelSchema,
  type OrchestrationConfig,
  orchestrationConfigSchema,
  orchestrationStepSchema,
  ruleLimitSchema,
  ruleSchema,
  stepConditionSchema,
} from './schema.js';
import { describeType } from './state-check.js';
import {
  TemplateIssueCode as Code,
  didYouMean,
  formatPath,
  TemplateConfigError,
  type TemplateIssue,
} from './template-issues.js';
import type { ToolAnnotations } from './tool-annotations.js';
import { compilePatterns } from './tool-catalog.js';

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
  fact: Object.keys(factSchema.shape),
  label: Object.keys(labelSchema.shape),
};

function knownKeysAt(path: Path): readonly string[] {
  const last = path[path.length - 1];
  const parent = path[path.length - 2];
  if (last === 'orchestration') return KNOWN_KEYS.orchestration;
  if (last === 'availableTools') return KNOWN_KEYS.availableTools;
  if (last === 'limit') return KNOWN_KEYS.limit;
  if (typeof last === 'number' && parent === 'rules') return KNOWN_KEYS.rule;
  if (typeof last === 'number' && parent === 'facts') return KNOWN_KEYS.fact;
  if (typeof last === 'number' && parent === 'labels') return KNOWN_KEYS.label;
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
