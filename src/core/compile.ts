/**
 * Compiling an orchestration config once into an immutable plan: patterns and regexes
 * compiled, sequences as sets, steps looked up by name. Plans are cached by the identity
 * of the config object, so calls that pass the same object never recompile.
 */
import {
  type ConditionRegistry,
  type ConditionTest,
  defaultConditionRegistry,
  type MessageInfo,
} from './conditions.js';
import { type CompiledPattern, firstMatch } from './patterns.js';
import { type CompiledRule, compileRules } from './rules.js';
import type { OrchestrationConfig, OrchestrationStep, StepCondition } from './schema.js';
import type { PendingMessage } from './state.js';
import { type StepSelector, stepSelector } from './step-index.js';
import { formatPath, TemplateConfigError, type TemplateIssue } from './template-issues.js';
import { compileToolPattern, isSelectorSyntax, type ToolAnnotations } from './tool-annotations.js';
import { validateOrchestration } from './validate-template.js';

/** One position of a sequence. */
export interface SequenceSlot {
  /** The alternatives, as written. */
  readonly tools: readonly string[];
  readonly set: ReadonlySet<string>;
}

/** The tools of one agent tool list as one step sees them; cached per list. */
interface ToolView {
  readonly source: readonly string[];
  readonly permitted: readonly string[];
  readonly positions: (readonly string[] | undefined)[];
  /** Per sequence position, the transition's usual step decision for these tools (its cache). */
  readonly decisions: unknown[];
}

/** A compiled step. */
export interface CompiledStep {
  readonly name: string;
  readonly index: number;
  readonly source: OrchestrationStep;
  readonly description: string | undefined;
  readonly instructions: string | undefined;
  readonly conditions: readonly ConditionTest[];
  readonly sequence: readonly SequenceSlot[];
  readonly sequenceSets: readonly ReadonlySet<string>[];
  /** The sequence's positions as tool lists (shared by every view of the step). */
  readonly sequenceTools: readonly (readonly string[])[];
  /** `requireSequence`: while the sequence is unfinished, the model must call its next tool. */
  readonly requireSequence: boolean;
  /** The step's own `shadow` setting (the plan's applies when undefined). */
  readonly shadow: boolean | undefined;
  /** Tokens the session may spend while this step is active, if limited. */
  readonly tokenBudget: number | undefined;
  readonly allowed: readonly CompiledPattern[];
  readonly denied: readonly CompiledPattern[];
  readonly resetOnNewMessage: boolean;
  readonly resetOnOutOfSequence: boolean;
  /** Conditions that reset the sequence when they hold for a new user message. */
  readonly resetOnMessage: readonly ConditionTest[];
  /** Rules on calls that apply while this step is active. */
  readonly rules: readonly CompiledRule[];
  /** True when availableTools lets `tool` through (memoized). */
  permits(tool: string): boolean;
  /** The tools of `agentTools` this step permits, and per sequence position (cached per list). */
  view(agentTools: readonly string[]): ToolView;
}

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
}

/** Plans by registry, then by annotation map (or {@link NO_ANNOTATIONS}), then by config object. */
const planCache = new WeakMap<ConditionRegistry, WeakMap<object, WeakMap<object, OrchestrationPlan>>>();
const NO_ANNOTATIONS: ReadonlyMap<string, ToolAnnotations> = new Map();
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
  let byConfig = byAnnotations.get(annotations);
  if (byConfig === undefined) {
    byConfig = new WeakMap();
    byAnnotations.set(annotations, byConfig);
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
  const plan = buildPlan(result.config, registry, result.warnings, options.toolAnnotations);
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
  const rules = compileRules(config.rules, undefined, annotations);
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

/** The plan's message-only conditions, numbered as they compile, and whether it needs texts. */
interface MessageConditions {
  readonly tests: ConditionTest[];
  keepsText: boolean;
}

/**
 * Compiles a condition; a message-only one is numbered, and answers from a kept message's
 * `matches` when it has them (a message replayed from behind a running call has no text).
 */
function compileCondition(
  condition: StepCondition,
  registry: ConditionRegistry,
  messages: MessageConditions,
): ConditionTest {
  const test = registry.compile(condition);
  const use = registry.messageUse(condition);
  if (use === 'mixed') messages.keepsText = true;
  if (use !== 'only') return test;
  const index = messages.tests.push(test) - 1;
  return (context) => {
    const matches = context.message?.matches;
    return matches === undefined ? test(context) : matches.has(index);
  };
}

const PERMIT_CACHE_LIMIT = 10_000;

function buildStep(
  step: OrchestrationStep,
  index: number,
  registry: ConditionRegistry,
  messages: MessageConditions,
  annotations: ReadonlyMap<string, ToolAnnotations> | undefined,
): CompiledStep {
  const sequence: SequenceSlot[] = (step.sequence ?? []).map((position) => {
    const tools = Object.freeze(typeof position === 'string' ? [position] : [...position]);
    return Object.freeze({ tools, set: new Set(tools) });
  });
  const allowed = (step.availableTools?.allowed ?? []).map((p) => compileToolPattern(p, annotations));
  const denied = (step.availableTools?.denied ?? []).map((p) => compileToolPattern(p, annotations));
  const resets = step.resetSequenceOn ?? [];
  const resetOnMessage: ConditionTest[] = [];
  for (const rule of resets) {
    if (typeof rule === 'object') resetOnMessage.push(compileCondition(rule, registry, messages));
    else if (rule !== 'new_message' && rule !== 'out_of_sequence') {
      // A bare message condition type: this step's own conditions of that type.
      for (const c of step.conditions ?? []) {
        if (c.type === rule) resetOnMessage.push(compileCondition(c, registry, messages));
      }
    }
  }
  const permitCache = new Map<string, boolean>();
  const permits = (tool: string): boolean => {
    const hit = permitCache.get(tool);
    if (hit !== undefined) return hit;
    const ok =
      (allowed.length === 0 || firstMatch(allowed, tool) !== undefined) && firstMatch(denied, tool) === undefined;
    if (permitCache.size < PERMIT_CACHE_LIMIT) permitCache.set(tool, ok);
    return ok;
  };
  const views = new WeakMap<readonly string[], ToolView>();
  let lastView: ToolView | undefined;
  const instructions = Array.isArray(step.instructions) ? step.instructions.join('\n') : step.instructions;
  return Object.freeze({
    name: step.name,
    index,
    source: step,
    description: step.description,
    instructions,
    conditions: Object.freeze((step.conditions ?? []).map((c) => compileCondition(c, registry, messages))),
    sequence: Object.freeze(sequence),
    sequenceSets: Object.freeze(sequence.map((s) => s.set)),
    sequenceTools: Object.freeze(sequence.map((s) => s.tools)),
    requireSequence: step.requireSequence === true && sequence.length > 0,
    shadow: step.shadow,
    tokenBudget: step.budget?.totalTokens,
    allowed: Object.freeze(allowed),
    denied: Object.freeze(denied),
    resetOnNewMessage: resets.includes('new_message'),
    resetOnOutOfSequence: resets.includes('out_of_sequence'),
    resetOnMessage: Object.freeze(resetOnMessage),
    rules: Object.freeze(compileRules(step.rules, { name: step.name, index }, annotations)),
    permits,
    view(agentTools: readonly string[]): ToolView {
      // Most callers pass the same tools again and again, often as a new array each turn
      // (`Object.keys(tools)`): the last view is compared by content first, so its cached
      // positions and decisions outlive the array.
      const recent = lastView;
      if (recent !== undefined && sameList(recent.source, agentTools)) return recent;
      const hit = views.get(agentTools);
      // The list may have been mutated since it was cached: compare before trusting the cache.
      if (hit !== undefined && sameList(hit.source, agentTools)) {
        lastView = hit;
        return hit;
      }
      const view: ToolView = {
        source: agentTools.slice(),
        permitted: Object.freeze(agentTools.filter(permits)),
        positions: new Array(sequence.length),
        decisions: [],
      };
      views.set(agentTools, view);
      lastView = view;
      return view;
    },
  });
}

/** The permitted tools of `view` that fill sequence position `index` (cached in the view). */
export function positionTools(step: CompiledStep, view: ToolView, index: number): readonly string[] {
  let tools = view.positions[index];
  if (tools === undefined) {
    const slot = step.sequence[index]!;
    tools = Object.freeze(view.permitted.filter((t) => slot.set.has(t)));
    view.positions[index] = tools;
  }
  return tools;
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Formats a step's location for messages, e.g. `steps[2] "Research"`. */
export function describeStep(step: CompiledStep): string {
  return `${formatPath(['steps', step.index])} "${step.name}"`;
}
