/**
 * The operator's policy (SPEC section 11): rules on calls that apply to every agent and session,
 * judged before any template's, that no template can loosen (a template's `allow` is one more
 * way to refuse, never a grant; the policy's `deny`, `limit` and `approve` always apply). Its
 * limits may count across sessions: `scope: "principal"` (everything one caller does),
 * `"agent"` (every session of an agent) or `"global"`.
 *
 * A policy compiles into the rules every session judges (its effects and per-session limits,
 * ids `policy.rules[i]`, prepended to each template's plan), and one plan per cross-session
 * scope: a scope's counts live in a record of their own in the shared store (a session named
 * after the scope and its key), judged and reserved with the same transition as any session, so
 * they are atomic, leased and waited for like a session's calls (see `policy-scopes.ts`).
 */

import { checkRules } from './check-rules.js';
import { compileOrchestration, type OrchestrationPlan } from './compile.js';
import { IssueList, isObject } from './issue-list.js';
import { type CompiledRule, compileRules, type LimitScope } from './rules.js';
import { type Policy, policySchema } from './schema.js';
import { TemplateConfigError, type TemplateIssue, TemplateIssueCode } from './template-issues.js';

/** A scope of limits that count across sessions. */
export type CrossSessionScope = Exclude<LimitScope, 'session'>;

/** One cross-session scope of a policy: its limits, and the plan its records are judged with. */
export interface PolicyScope {
  readonly scope: CrossSessionScope;
  readonly rules: readonly CompiledRule[];
  readonly plan: OrchestrationPlan;
}

/** A compiled operator's policy. */
export interface CompiledPolicy {
  readonly source: Policy;
  /** The rules every session judges before its template's: effects, and limits that count per session. */
  readonly sessionRules: readonly CompiledRule[];
  /** The limits that count across sessions, by scope (only the scopes the policy uses). */
  readonly scopes: readonly PolicyScope[];
}

/** What {@link validatePolicy} returns. */
export type PolicyValidationResult =
  | { readonly success: true; readonly policy: Policy; readonly warnings: readonly TemplateIssue[] }
  | { readonly success: false; readonly issues: readonly TemplateIssue[] };

/** Checks a policy (JSON already parsed): every issue, each with its path (`policy.rules[2].when`). */
export function validatePolicy(json: unknown): PolicyValidationResult {
  const issues = new IssueList();
  const parsed = policySchema.safeParse(json);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      issues.error(TemplateIssueCode.InvalidRule, ['policy', ...issue.path], issue.message);
    }
  }
  // On the data as written, so that a malformed rule hides no other rule's problems.
  const raw = isObject(json) ? json.rules : undefined;
  checkRules(raw, ['policy', 'rules'], undefined, undefined, issues, undefined);
  if (!parsed.success || issues.hasErrors) return { success: false, issues: issues.sorted() };
  return { success: true, policy: parsed.data, warnings: issues.sorted() };
}

/** A policy (JSON already parsed) compiled; throws one {@link TemplateConfigError} listing every issue. */
export function parsePolicy(json: unknown, file?: string): CompiledPolicy {
  const result = validatePolicy(json);
  if (!result.success) throw new TemplateConfigError(result.issues, file);
  return compilePolicy(result.policy);
}

/** Compiles a valid policy (see {@link validatePolicy}). */
export function compilePolicy(policy: Policy): CompiledPolicy {
  const rules = compileRules(policy.rules, undefined, undefined, 'policy.');
  const scopeOf = (rule: CompiledRule) => rule.limit?.scope ?? 'session';
  const sessionRules = Object.freeze(rules.filter((rule) => scopeOf(rule) === 'session'));
  const scopes: PolicyScope[] = [];
  for (const scope of ['principal', 'agent', 'global'] as const) {
    const scoped = Object.freeze(rules.filter((rule) => scopeOf(rule) === scope));
    if (scoped.length === 0) continue;
    scopes.push(
      Object.freeze({ scope, rules: scoped, plan: compileOrchestration({ steps: [] }, { policyRules: scoped }) }),
    );
  }
  return Object.freeze({ source: policy, sessionRules, scopes: Object.freeze(scopes) });
}

/** True for a compiled policy (what {@link compilePolicy} returns), as against a policy's JSON. */
export function isCompiledPolicy(value: unknown): value is CompiledPolicy {
  return (
    typeof value === 'object' && value !== null && 'sessionRules' in value && 'scopes' in value && 'source' in value
  );
}
