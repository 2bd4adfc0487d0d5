/**
 * One step of a plan, compiled (SPEC sections 3 to 5): its conditions as tests, its sequence as
 * sets, its tool patterns, its rules, and the caches a decision reads per call (whether a tool is
 * permitted, and the tools of an agent's tool list per sequence position). Built once per step
 * when a plan compiles (`compile.ts`); immutable afterwards but for those caches.
 */
import type { ConditionRegistry, ConditionTest } from './conditions.js';
import { type CompiledPattern, firstMatch } from './patterns.js';
import { type CompiledRule, compileRules } from './rules.js';
import type { OrchestrationStep, StepCondition } from './schema.js';
import { formatPath } from './template-issues.js';
import { compileToolPattern, type ToolAnnotations } from './tool-annotations.js';

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

/** The plan's message-only conditions, numbered as they compile, and whether it needs texts. */
export interface MessageConditions {
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

/** Compiles `step`, the `index`th of its plan; its message-only conditions are numbered in `messages`. */
export function buildStep(
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

/** True when two tool lists hold the same names in the same order. */
export function sameList(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Formats a step's location for messages, e.g. `steps[2] "Research"`. */
export function describeStep(step: CompiledStep): string {
  return `${formatPath(['steps', step.index])} "${step.name}"`;
}
