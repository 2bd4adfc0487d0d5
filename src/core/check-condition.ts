/**
 * The checks of one step condition (in `conditions` or `resetSequenceOn`): a known type, the
 * fields that type reads and no others, a tool that exists, a window the history can hold, and
 * the type's own validator. And {@link implies}, which the orchestration check asks to find a
 * step that an earlier one shadows.
 */
import { BUILTIN_EXTRA_KEYS, type ConditionDefinition, type ConditionRegistry } from './conditions.js';
import { type IssueList, isString, type Path, type Raw } from './issue-list.js';
import { TemplateIssueCode as Code, didYouMean } from './template-issues.js';
import { isSelectorSyntax } from './tool-annotations.js';
import type { ToolCatalog } from './tool-catalog.js';

/** What the checks know of a step: where it is, its raw data, its name, conditions and whether it has a sequence. */
export interface StepInfo {
  index: number;
  raw: Raw;
  name: string | undefined;
  conditions: Raw[];
  hasSequence: boolean;
}

/** Checks one condition of `step`, at `path`, reporting to `issues`. */
export function checkCondition(
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
export function implies(b: Raw, a: Raw): boolean {
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
