/**
 * Compiling an orchestration config once into an immutable plan: the config validated, its
 * steps compiled (`compiled-step.ts`), its rules compiled, steps looked up by name, and the
 * plan-wide answers a decision asks for cached. Plans are cached by the identity of the config
 * object, so calls that pass the same object never recompile.
 */
import { buildStep, type CompiledStep, type MessageConditions, sameList } from './compiled-step.js';
import { type ConditionRegistry, defaultConditionRegistry, type MessageInfo } from './conditions.js';
import { type CompiledFact, type CompiledLabel, compileFacts, compileLabels } from './facts.js';
import { type CompiledRule, compileRules } from './rules.js';
import type { OrchestrationConfig, OrchestrationStep, StepCondition } from './schema.js';
import type { PendingMessage } from './state.js';
import { type StepSelector, stepSelector } from './step-index.js';
import { TemplateConfigError, type TemplateIssue } from './template-issues.js';
import { isSelectorSyntax, type ToolAnnotations } from './tool-annotations.js';
import { validateOrchestration } from './validate-template.js';

// A compiled step has a file of its own; re-exported so that every import of it from here keeps
// working.
export { type CompiledStep, describeStep, positionTools, type SequenceSlot } from './compiled-step.js';

/** An immutable, compiled orchestration config. */
export interface OrchestrationPlan {
  readonly config: OrchestrationConfig;
  readonly steps: readonly CompiledStep[];
  /** Steps with at least one condition, in configuration order: the candidates of step selection. */
  readonly conditionalSteps: readonly CompiledStep[];
  /** The first of `conditionalSteps` whose conditions hold (indexed: see step-index.ts). */
  readonly selectStep: StepSelector;
  readonly defaultStep: CompiledStep | undefined;
  /** `historyLimit` of the config, if it sets one. */
  readonly historyLimit: number | undefined;
  /** Shadow mode of the config: decisions computed and recorded, nothing enforced. */
  readonly shadow: boolean;
  /** Tokens one session may spend, if limited. */
  readonly tokenBudget: number | undefined;
  /** What happens to MCP tools the template's `tools` does not name (default `hidden`). */
  readonly unlistedTools: 'hidden' | 'allowed';
  /** True when the config or a step sets a token budget. */
  readonly hasBudgets: boolean;
  /** True when some condition reads the user message. */
  readonly readsMessages: boolean;
  /** Facts completed calls' results set (SPEC section 11). */
  readonly facts: readonly CompiledFact[];
  /** Labels completed calls' results raise (SPEC section 11). */
  readonly labels: readonly CompiledLabel[];
  /** Rules on calls that apply in every step. */
  readonly rules: readonly CompiledRule[];
  /** True when the config or a step has rules on calls. */
  readonly hasRules: boolean;
  /** The rule with this id (`rules[0]`, `steps[2].rules[1]`), if the plan has it. */
  rule(id: string): CompiledRule | undefined;
  /** The rules that apply to a call of `tool` while `step` is active: the plan's, then the step's (cached). */
  rulesFor(step: CompiledStep | undefined, tool: string): readonly CompiledRule[];
  /** Tool names the config mentions by exact name (sequences, conditions, allowed). */
  readonly referencedTools: readonly string[];
  /** Warnings found when the config was validated. */
  readonly warnings: readonly TemplateIssue[];
  /** The step called `name`. */
  step(name: string | undefined): CompiledStep | undefined;
  /** `agentTools` as a frozen list, cached (the answer when no step is active). */
  allTools(agentTools: readonly string[]): readonly string[];
  /**
   * What a session keeps of a user message that waits behind a running call: its key and the
   * indexes of the plan's message-only conditions that hold, so the state does not grow with
   * the text; or the text itself when some message condition of the plan reads more than the
   * message (a custom one that is not `messageOnly`).
   */
  pendingMessage(message: MessageInfo): PendingMessage;
}

/** Options of {@link compileOrchestration}. */
export interface CompileOptions {
  /** Condition types (default: built-ins plus registered types). */
  conditions?: ConditionRegistry;
  /** The agent's tools, for the checks that tools exist. */
  tools?: readonly string[];
  /** Shown in errors. */
  file?: string;
  /**
   * What each tool declares (MCP annotations), by tool name: annotation selectors (`@readOnly`,
   * `!@destructive`) resolve against it when the plan compiles. Without it, or for a tool it does
   * not know, a selector judges the tool as declaring nothing (MCP defaults). Pass the same map
   * object each time so the plan is reused.
   */
  toolAnnotations?: ReadonlyMap<string, ToolAnnotations> | undefined;
  /**
   * The operator's rules (SPEC section 11, `compilePolicy`), judged before the template's in every
   * step. Pass the same array each time so the plan is reused.
   */
  policyRules?: readonly CompiledRule[] | undefined;
}

/** Plans by registry, then by annotation map (or {@link NO_ANNOTATIONS}), then by policy, then by config object. */
const planCache = new WeakMap<
  ConditionRegistry,
  WeakMap<object, WeakMap<readonly CompiledRule[], WeakMap<object, OrchestrationPlan>>>
>();
const NO_ANNOTATIONS: ReadonlyMap<string, ToolAnnotations> = new Map();
const NO_POLICY: readonly CompiledRule[] = Object.freeze([]);
const stepCache = new WeakMap<object, CompiledStep>();

/**
 * A template, or its `orchestration` block: the manager accepts either. `orchestration` may be
 * `undefined` explicitly so that an app built with `exactOptionalPropertyTypes` can pass
 * its template (whose optional fields zod types as `T | undefined`) where a source is expected.
 */
export type OrchestrationSource =
  | OrchestrationConfig
  | { orchestration?: OrchestrationConfig | undefined; [key: string]: unknown };

/**
 * Compiles (or returns the cached plan of) an orchestration config. Accepts the
 * `orchestration` block or a whole template. Throws {@link TemplateConfigError} when invalid.
 */
export function compileOrchestration(source: OrchestrationSource, options: CompileOptions = {}): OrchestrationPlan {
  const registry = options.conditions ?? defaultConditionRegistry;
  const annotations = options.toolAnnotations ?? NO_ANNOTATIONS;
  let byAnnotations = planCache.get(registry);
  if (byAnnotations === undefined) {
    byAnnotations = new WeakMap();
    planCache.set(registry, byAnnotations);
  }
  let byPolicy = byAnnotations.get(annotations);
  if (byPolicy === undefined) {
    byPolicy = new WeakMap();
    byAnnotations.set(annotations, byPolicy);
  }
  const policyRules = options.policyRules ?? NO_POLICY;
  let byConfig = byPolicy.get(policyRules);
  if (byConfig === undefined) {
    byConfig = new WeakMap();
    byPolicy.set(policyRules, byConfig);
  }
  const cached = options.tools === undefined ? byConfig.get(source) : undefined;
  if (cached !== undefined) return cached;

  // A template may keep any unknown top-level key, even "steps"; an orchestration block is
  // strict, so an object is one only when it has "steps" and nothing but orchestration keys.
  const isTemplate = !isOrchestrationBlock(source);
  const config: unknown = isTemplate
    ? ((source as { orchestration?: unknown }).orchestration ?? { steps: [] })
    : source;
  const result = validateOrchestration(config, {
    conditions: registry,
    path: isTemplate ? ['orchestration'] : [],
    ...(options.tools ? { tools: options.tools } : {}),
    ...(options.toolAnnotations ? { toolAnnotations: options.toolAnnotations } : {}),
  });
  if (!result.success) throw new TemplateConfigError(result.issues, options.file);
  const plan = buildPlan(result.config, registry, result.warnings, options.toolAnnotations, policyRules);
  if (options.tools === undefined) byConfig.set(source, plan);
  return plan;
}

const ORCHESTRATION_KEYS = new Set([
  'description',
  'defaultStep',
  'historyLimit',
  'shadow',
  'budget',
  'rules',
  'facts',
  'labels',
  'unlistedTools',
  'steps',
]);

function isOrchestrationBlock(source: unknown): boolean {
  if (typeof source !== 'object' || source === null || !('steps' in source)) return false;
  for (const key in source) if (!ORCHESTRATION_KEYS.has(key)) return false;
  return true;
}

/** Compiles a single step (for the seed `StepSequencer`, which receives steps, not configs). Cached per object. */
export function compileStep(
  step: OrchestrationStep,
  conditions: ConditionRegistry = defaultConditionRegistry,
): CompiledStep {
  const cached = stepCache.get(step);
  if (cached !== undefined) return cached;
  const plan = compileOrchestration({ steps: [step] }, { conditions });
  const compiled = plan.steps[0]!;
  stepCache.set(step, compiled);
  return compiled;
}

function buildPlan(
  config: OrchestrationConfig,
  registry: ConditionRegistry,
  warnings: TemplateIssue[],
  annotations: ReadonlyMap<string, ToolAnnotations> | undefined,
  policyRules: readonly CompiledRule[],
): OrchestrationPlan {
  const messages: MessageConditions = { tests: [], keepsText: false };
  const steps = config.steps.map((step, index) => buildStep(step, index, registry, messages, annotations));
  const byName = new Map(steps.map((s) => [s.name, s]));
  const defaultStep =
    config.defaultStep !== undefined ? byName.get(config.defaultStep) : steps.find((s) => s.source.isDefault === true);
  const readsMessages = config.steps.some((s) =>
    [...(s.conditions ?? []), ...(s.resetSequenceOn ?? []).filter((r) => typeof r === 'object')].some(
      (c) => registry.get((c as StepCondition).type)?.usesMessage === true,
    ),
  );
  const referenced = new Set<string>();
  for (const s of config.steps) {
    for (const p of s.sequence ?? []) for (const t of typeof p === 'string' ? [p] : p) referenced.add(t);
    for (const c of s.conditions ?? []) if (registry.get(c.type)?.valueIsTool && c.value) referenced.add(c.value);
    for (const a of s.availableTools?.allowed ?? []) if (!a.includes('*') && !isSelectorSyntax(a)) referenced.add(a);
  }
  const allToolsCache = new WeakMap<readonly string[], readonly string[]>();
  let lastAllTools: readonly string[] | undefined;
  let lastKeptFor: MessageInfo | undefined;
  let lastKept: PendingMessage | undefined;
  // The operator's rules come first: judged before the template's, which cannot undo them.
  const rules = [...policyRules, ...compileRules(config.rules, undefined, annotations)];
  const facts = compileFacts(config.facts, annotations);
  const labels = compileLabels(config.labels, annotations);
  const ruleById = new Map<string, CompiledRule>();
  for (const rule of [...rules, ...steps.flatMap((step) => step.rules)]) ruleById.set(rule.id, rule);
  const rulesByStep = new Map<string | undefined, Map<string, readonly CompiledRule[]>>();
  const conditionalSteps = Object.freeze(steps.filter((s) => s.conditions.length > 0));
  let lastName: string | undefined;
  let lastStep: CompiledStep | undefined;
  return Object.freeze({
    config,
    steps: Object.freeze(steps),
    conditionalSteps,
    selectStep: stepSelector(conditionalSteps, registry),
    defaultStep,
    historyLimit: config.historyLimit,
    shadow: config.shadow === true,
    tokenBudget: config.budget?.totalTokens,
    unlistedTools: config.unlistedTools ?? 'hidden',
    hasBudgets: config.budget !== undefined || steps.some((s) => s.tokenBudget !== undefined),
    readsMessages,
    facts: Object.freeze(facts),
    labels: Object.freeze(labels),
    rules: Object.freeze(rules),
    hasRules: ruleById.size > 0,
    rule: (id: string) => ruleById.get(id),
    rulesFor(step: CompiledStep | undefined, tool: string): readonly CompiledRule[] {
      let byTool = rulesByStep.get(step?.name);
      if (byTool === undefined) {
        byTool = new Map();
        rulesByStep.set(step?.name, byTool);
      }
      let list = byTool.get(tool);
      if (list === undefined) {
        list = Object.freeze([...rules, ...(step?.rules ?? [])].filter((rule) => rule.matches(tool)));
        if (byTool.size < 10_000) byTool.set(tool, list);
      }
      return list;
    },
    referencedTools: Object.freeze([...referenced]),
    warnings: Object.freeze(warnings),
    step(name: string | undefined): CompiledStep | undefined {
      // A turn looks the active step up several times: the last answer is kept.
      if (name === lastName) return lastStep;
      const step = name === undefined ? undefined : byName.get(name);
      lastName = name;
      lastStep = step;
      return step;
    },
    allTools(agentTools: readonly string[]) {
      // As `view`: the same tools often come as a new array each turn.
      if (lastAllTools !== undefined && sameList(lastAllTools, agentTools)) return lastAllTools;
      const hit = allToolsCache.get(agentTools);
      if (hit !== undefined && sameList(hit, agentTools)) {
        lastAllTools = hit;
        return hit;
      }
      const copy = Object.freeze(agentTools.slice());
      allToolsCache.set(agentTools, copy);
      lastAllTools = copy;
      return copy;
    },
    pendingMessage(message: MessageInfo): PendingMessage {
      // Each call of a turn keeps the turn's message: the last one's form is shared (the object
      // frozen), so its conditions are run once, and the transition's reading of it is cached once.
      if (message === lastKeptFor && lastKept !== undefined) return lastKept;
      let kept: PendingMessage;
      if (messages.keepsText) kept = { key: message.key, text: message.text };
      else {
        const matches: number[] = [];
        const context = { history: NO_TOOLS, message, sequence: NO_SETS };
        for (let i = 0; i < messages.tests.length; i++) if (messages.tests[i]!(context)) matches.push(i);
        // Not frozen: V8 reads a frozen array's elements through a generic call, and every store
        // write checks these. Shared all the same: nothing writes to a kept message's list.
        kept = { key: message.key, matches };
      }
      lastKeptFor = message;
      lastKept = Object.freeze(kept);
      return lastKept;
    },
  });
}

const NO_TOOLS: readonly string[] = Object.freeze([]);
const NO_SETS: readonly ReadonlySet<string>[] = Object.freeze([]);
