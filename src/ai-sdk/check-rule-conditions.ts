/**
 * `ruleConditionIssues()`: the conditions of a template's rules on calls, type-checked against
 * the input schema of each tool they apply to, when the app gives its tools (`orchestrate()`
 * checks at creation). A typo in a field name (`args.amout`) or a field used as another type is
 * then an issue of the `TemplateConfigError` `orchestrate()` throws when created, naming the rule's path, never a call refused
 * at run time because its rule could not be evaluated.
 */
import { asSchema, type ToolSet } from 'ai';
import type { OrchestrationPlan } from '../core/compile.js';
import { expressionProblemFor } from '../core/rule-expressions.js';
import { type TemplateIssue, TemplateIssueCode } from '../core/template-issues.js';

const checked = new WeakMap<OrchestrationPlan, WeakMap<object, readonly TemplateIssue[]>>();

/**
 * The problems of `plan`'s rule conditions for `tools` (cached per plan and tool set), with paths
 * under `base` (`orchestration` for a template, empty for an orchestration block).
 */
export function ruleConditionIssues(
  plan: OrchestrationPlan,
  tools: ToolSet,
  base = 'orchestration',
): readonly TemplateIssue[] {
  if (!plan.hasRules) return [];
  let byTools = checked.get(plan);
  if (byTools === undefined) {
    byTools = new WeakMap();
    checked.set(plan, byTools);
  }
  const cached = byTools.get(tools);
  if (cached !== undefined) return cached;
  const issues: TemplateIssue[] = [];
  const rules = [...plan.rules, ...plan.steps.flatMap((step) => step.rules)];
  for (const rule of rules) {
    if (rule.when === undefined || !rule.when.includes('args')) continue;
    for (const [name, tool] of Object.entries(tools)) {
      if (!rule.matches(name) || tool.inputSchema === undefined) continue;
      const schema = asSchema(tool.inputSchema).jsonSchema;
      // A schema that resolves later (a promise) is checked when calls are made.
      if (typeof (schema as { then?: unknown }).then === 'function') continue;
      const problem = expressionProblemFor(rule.when, schema);
      if (problem === undefined) continue;
      issues.push({
        code: TemplateIssueCode.InvalidExpression,
        severity: 'error',
        path: `${base ? `${base}.` : ''}${rule.id}.when`,
        message: `for tool "${name}": ${problem}`,
        hint: `the input of "${name}" has ${Object.keys((schema as { properties?: object }).properties ?? {}).join(', ') || 'no named fields'}`,
      });
    }
  }
  byTools.set(tools, issues);
  return issues;
}
