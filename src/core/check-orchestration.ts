/**
 * The rules of an orchestration block that span fields (SPEC section 1), which the zod schema
 * cannot check: unique step names, one default, tools that exist and that a step permits, reset
 * rules that can be evaluated, steps that can become active and steps that no earlier one
 * shadows. Checked on the raw data, defensively, so that one broken part never hides the
 * problems of another; rules and conditions are checked by their own modules.
 */
import { checkCondition, implies, type StepInfo } from './check-condition.js';
import { checkFactsOrLabels } from './check-facts.js';
import { checkRules } from './check-rules.js';
import type { ConditionRegistry } from './conditions.js';
import { type IssueList, isObject, isString, type Path, type Raw } from './issue-list.js';
import { TemplateIssueCode as Code, didYouMean } from './template-issues.js';
import { isSelectorSyntax, type ToolAnnotations } from './tool-annotations.js';
import { compilePatterns, toolCatalog } from './tool-catalog.js';

/** Checks an orchestration block at `base` (with the agent's tools when known), reporting to `issues`. */
export function checkOrchestration(
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
  checkFactsOrLabels(config.facts, [...base, 'facts'], 'fact', issues, annotations);
  checkFactsOrLabels(config.labels, [...base, 'labels'], 'label', issues, annotations);
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
