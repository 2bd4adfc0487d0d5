/**
 * The dependence table (SPEC section 7): which running calls a request's answer may depend on,
 * so that a request nothing running can change is decided at once, and one that something can
 * change waits for it instead of being refused.
 *
 * A running call's completion changes the session in a few ways only: it joins the history, it
 * may advance the active step's sequence, it may change the active step (when a step's
 * conditions read the history), it counts for the limit rules that counted its reservation, and
 * its result may set the facts and raise the labels that name its tool.
 * A request's judgement reads a few things only: the active step (its tools, its sequence
 * position, its rules, its budget), and what its rules' conditions read of `state`. Compiled
 * once per plan from the steps' conditions (which tools' completions can change the step), and
 * per rule from its expression (`CompiledRule.reads`); checked per request against the running
 * calls in one pass. Limit counts are checked where limits are judged (`call-rules.ts`): a count
 * that running calls can push over the limit, and not the committed one alone, waits for them.
 *
 * What cannot be analysed (a condition type registered in code, a message or an unenforced
 * record waiting behind a running call) counts as depending on every running call: a gap costs
 * concurrency, never safety.
 */
import type { OrchestrationPlan } from './compile.js';
import { activeStepOf, chooseStep } from './engine.js';
import type { CompiledFact, CompiledLabel } from './facts.js';
import type { SettledView } from './pending-log.js';
import type { CompiledRule } from './rules.js';
import { DEFAULT_HISTORY_LIMIT } from './state.js';
import type { TransitionContext } from './transition-types.js';

/** What a plan's steps let a completion change, compiled once per plan. */
export interface DependenceTable {
  /**
   * The tools whose completion may change which step is active: those a `tool_used` condition
   * names; `any` when a condition reads the history otherwise (`not_recently_used`,
   * `sequence_match`, a custom type).
   */
  readonly stepChangedBy: ReadonlySet<string> | 'any';
  /** A step condition asks whether a tool is in the history: one that drops out at its bound changes it. */
  readonly readsPresence: boolean;
}

/** Condition types that read only the user message: no completion changes their answer. */
const MESSAGE_ONLY = new Set(['message_contains', 'message_regex']);

const tables = new WeakMap<OrchestrationPlan, DependenceTable>();

/** The plan's dependence table (compiled on first use, then kept with the plan). */
export function dependenceOf(plan: OrchestrationPlan): DependenceTable {
  let table = tables.get(plan);
  if (table === undefined) {
    table = compileDependence(plan);
    tables.set(plan, table);
  }
  return table;
}

function compileDependence(plan: OrchestrationPlan): DependenceTable {
  const named = new Set<string>();
  let any = false;
  for (const step of plan.conditionalSteps) {
    for (const condition of step.source.conditions ?? []) {
      if (MESSAGE_ONLY.has(condition.type)) continue;
      if (condition.type === 'tool_used' && typeof condition.value === 'string') named.add(condition.value);
      else any = true;
    }
  }
  return Object.freeze({ stepChangedBy: any ? 'any' : named, readsPresence: named.size > 0 });
}

const NONE: readonly string[] = Object.freeze([]);

/**
 * The running calls of `view` whose outcome may change the answer to a request of `tool` judged
 * under `rules` (those that apply to it in the view's step); empty when the request can be
 * decided now. `approved`: the call comes with an approval, which is bound to the session as
 * it stands (its history included).
 */
export function dependsOn(
  plan: OrchestrationPlan,
  view: SettledView,
  _tool: string,
  rules: readonly CompiledRule[],
  approved: boolean,
  context: TransitionContext,
): readonly string[] {
  const running = view.running;
  if (running.length === 0) return NONE;
  const table = dependenceOf(plan);
  if (view.tangled || table.stepChangedBy === 'any' || readsHistory(rules, approved)) return idsOf(running);
  const state = view.state;
  // A history at its bound drops its oldest tool with each completion, whichever tool completes.
  const bound = plan.historyLimit ?? context.historyLimit ?? DEFAULT_HISTORY_LIMIT;
  if (table.readsPresence && state.recentlyUsedTools.length + running.length >= bound) return idsOf(running);
  // A step the session holds that selection would not choose now (set by hand, say): the next
  // commit selects again, whichever tool it is.
  if (chooseStep(plan, state, view.message)?.name !== state.activeStep) return idsOf(running);
  const step = activeStepOf(plan, state);
  const sequence = step !== undefined && state.sequenceIndex < step.sequence.length ? step.sequenceSets : undefined;
  const results = resultReads(plan, rules);
  // Nothing a completion can change is read: no call to look at (the usual independent request).
  if (table.stepChangedBy.size === 0 && sequence === undefined && results === undefined) return NONE;
  let out: string[] | undefined;
  for (const call of running) {
    const changesStep = table.stepChangedBy.has(call.tool);
    if (
      changesStep ||
      sequence?.some((slot) => slot.has(call.tool)) ||
      (results !== undefined && writesRead(results, call.tool))
    ) {
      out ??= [];
      out.push(call.id);
    }
  }
  return out ?? NONE;
}

/** The facts and labels `rules` read, as the plan declares them; undefined when they read none. */
function resultReads(
  plan: OrchestrationPlan,
  rules: readonly CompiledRule[],
): { facts: readonly CompiledFact[]; labels: readonly CompiledLabel[] } | undefined {
  if (plan.facts.length + plan.labels.length === 0) return undefined;
  const facts: CompiledFact[] = [];
  let labels = false;
  for (const rule of rules) {
    const read = rule.reads.facts;
    for (const fact of plan.facts) {
      if ((read === 'all' || read.includes(fact.name)) && !facts.includes(fact)) facts.push(fact);
    }
    labels ||= rule.reads.labels;
  }
  if (facts.length === 0 && !labels) return undefined;
  return { facts, labels: labels ? plan.labels : [] };
}

/** True when a completed call of `tool` may write one of the facts or labels read. */
function writesRead(read: { facts: readonly CompiledFact[]; labels: readonly CompiledLabel[] }, tool: string): boolean {
  return read.facts.some((fact) => fact.matches(tool)) || read.labels.some((label) => label.matches(tool));
}

/** True when a rule reads the history, or an approval binds the call to it. */
function readsHistory(rules: readonly CompiledRule[], approved: boolean): boolean {
  for (const rule of rules) {
    if (rule.reads.history) return true;
    if (approved && rule.effect === 'approve') return true;
  }
  return false;
}

function idsOf(running: SettledView['running']): readonly string[] {
  return running.map((call) => call.id);
}
