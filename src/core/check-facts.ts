/**
 * The checks of facts and labels (SPEC section 11) that span fields: unique names, expressions
 * that compile over `result` (a fact's `value` may be any type; a `when` must be a boolean), tool
 * patterns that compile, and a `max` only where it counts (a union or a list).
 */
import { type IssueList, isObject, isString, type Path } from './issue-list.js';
import { type ExpressionKind, expressionProblem } from './rule-expressions.js';
import { TemplateIssueCode as Code } from './template-issues.js';
import type { ToolAnnotations } from './tool-annotations.js';
import { compilePatterns } from './tool-catalog.js';

const READS = 'it reads tool, args, result (what the call returned) and state';

/** Checks `facts` (`kind` `fact`) or `labels` (`kind` `label`) of an orchestration block. */
export function checkFactsOrLabels(
  raw: unknown,
  path: Path,
  kind: 'fact' | 'label',
  issues: IssueList,
  annotations: ReadonlyMap<string, ToolAnnotations> | undefined,
): void {
  if (!Array.isArray(raw)) return;
  const seen = new Map<string, number>();
  raw.forEach((entry, i) => {
    if (!isObject(entry)) return;
    const at = [...path, i];
    if (isString(entry.name)) {
      const first = seen.get(entry.name);
      if (first !== undefined) {
        issues.error(
          Code.DuplicateId,
          [...at, 'name'],
          `two ${kind}s are named "${entry.name}" (${kind}s[${first}] too)`,
          `give each ${kind} its own name`,
        );
      } else seen.set(entry.name, i);
    }
    compilePatterns(entry.tools, [...at, 'tools'], issues, annotations);
    const expression = (field: string, expressionKind: ExpressionKind, expected: string) => {
      const text = entry[field];
      if (!isString(text)) return;
      const problem = expressionProblem(text, expressionKind);
      if (problem !== undefined) {
        issues.error(
          Code.InvalidExpression,
          [...at, field],
          `invalid CEL expression: ${problem}`,
          `${READS}, and ${expected}`,
        );
      }
    };
    if (kind === 'fact') expression('value', 'result-value', 'its value is what the fact keeps');
    expression('when', 'result-condition', 'must be true or false');
    if (kind === 'fact' && entry.max !== undefined && (entry.keep ?? 'last') === 'last') {
      issues.warn(
        Code.IgnoredValue,
        [...at, 'max'],
        'a fact that keeps the last value holds one: max is ignored',
        'set "keep": "union" or "append", or remove max',
      );
    }
  });
}
