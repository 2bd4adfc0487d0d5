/**
 * The checks of rules on calls (SPEC section 9), in the orchestration block or a step: each rule
 * as a whole, its period, its CEL expression and its tool patterns. The expression is checked by
 * compiling it as a call would (`rule-expressions.ts`), so what loads is what runs.
 */
import { type IssueList, isObject, isString, type Path } from './issue-list.js';
import { firstMatch } from './patterns.js';
import { expressionProblem } from './rule-expressions.js';
import { limitPeriod } from './rules.js';
import { TemplateIssueCode as Code, didYouMean } from './template-issues.js';
import { isSelectorSyntax, type ToolAnnotations } from './tool-annotations.js';
import { compilePatterns, type ToolCatalog } from './tool-catalog.js';

/**
 * Rules on calls (SPEC section 9): an effect or a limit (not both, not neither), a period a
 * limit can count over, a `when` that compiles and type-checks, and tool patterns that compile
 * (naming a tool the agent does not have is only a warning: the rule can never apply).
 */
export function checkRules(
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
