/**
 * The judgement: what a request, a model step and `explain()` are answered, each judged once on
 * the settled session (the pending log folded without its running calls, see `pending-log.ts`).
 * A request whose answer a running call could change (`dependence.ts`, and the limits of
 * `call-rules.ts`) is not judged: it waits for those calls. So every call that runs was allowed
 * on the session a serial run of the reservations would have reached, and `explain()`, the offers
 * of a model step and the decisions all come from the same judgement of the same session.
 *
 * Order (SPEC sections 4, 5, 9): a preset reason (the turn was superseded, the tool was not
 * offered), else the step's own rules (denied, not allowed, sequence), else a spent budget, else
 * the rules on calls. In shadow mode the call runs all the same, and enforcement's answer is
 * reported (`wouldBlock`).
 */
import { type CallFacts, judgeRules, RuleInputs } from './call-rules.js';
import type { OrchestrationPlan } from './compile.js';
import { duplicateCall, noSuchTool, notOffered, pendingDenial, SUPERSEDED, unknownToAgent } from './denials.js';
import { dependsOn } from './dependence.js';
import { activeStepOf, allowedTools, budgetDenial, budgetOf, denialOf, viewStep } from './engine.js';
import type { OrchestrationEvent, ToolDenial } from './events.js';
import { expireLeases } from './leases.js';
import { firstMatch } from './patterns.js';
import { hasSeen, isSuperseded, type SettledView, settledView, shadowOf } from './pending-log.js';
import type { CompiledRule } from './rules.js';
import type { OrchestrationState } from './state.js';
import {
  type ExplainedRule,
  type Explanation,
  MAX_PENDING_ENTRIES,
  type StepDecision,
  type ToolCallRequest,
  type ToolDecision,
  type ToolExplanation,
  type TransitionContext,
} from './transition-types.js';

/** A tool judged on the settled session. */
interface Judged {
  /** Why enforcement refuses a call of it, if it does. */
  readonly denial: ToolDenial | undefined;
  /** The running calls the answer depends on: not judged until they end (empty: judged). */
  readonly waitFor: readonly string[];
  /** The step is in shadow mode: a call runs whatever `denial` says. */
  readonly shadow: boolean;
  /** Limit rules that count the call when it commits. */
  readonly limits: readonly string[];
  /** Rules whose condition needs the call's input, which `explain` cannot judge. */
  readonly conditional: readonly CompiledRule[];
}

const NONE: readonly string[] = Object.freeze([]);
const NO_RULES: readonly CompiledRule[] = Object.freeze([]);

/** Judges `tool` on `view` (see the module comment); `inputs` undefined: the input is unknown. */
function judgeTool(
  plan: OrchestrationPlan,
  view: SettledView,
  tool: string,
  agentTools: readonly string[],
  preset: ToolDenial | undefined,
  inputs: RuleInputs | undefined,
  context: TransitionContext,
): Judged {
  const state = view.state;
  const shadow = shadowOf(plan, state);
  if (preset !== undefined) return { denial: preset, waitFor: NONE, shadow, limits: NONE, conditional: NO_RULES };
  const rules = plan.hasRules ? plan.rulesFor(activeStepOf(plan, state), tool) : NO_RULES;
  const approved = inputs?.facts.approved === true;
  const waitFor = dependsOn(plan, view, tool, rules, approved, context);
  if (waitFor.length > 0) return { denial: undefined, waitFor, shadow, limits: NONE, conditional: NO_RULES };
  let denial = denialOf(plan, state, tool, agentTools);
  if (denial === undefined) {
    const budget = budgetOf(plan, state);
    if (budget !== undefined) denial = budgetDenial(budget);
  }
  if (denial !== undefined || rules.length === 0) {
    return { denial, waitFor: NONE, shadow, limits: NONE, conditional: NO_RULES };
  }
  const verdict = judgeRules(plan, state, tool, inputs, context.message, context.now, view.running, view.places);
  const { denial: refused, waitFor: after, limits, conditional } = verdict;
  return { denial: refused, waitFor: after, shadow, limits, conditional };
}

/** What a request tells the rules about its call. */
function callFacts(call: ToolCallRequest, context: TransitionContext): CallFacts {
  return {
    toolCallId: call.toolCallId,
    args: call.args,
    argsDigest: call.argsDigest,
    approved: call.approved === true,
    context: context.ruleContext,
  };
}

/** The inputs of a request under a plan without rules: never read (no rule judges them). */
const NO_INPUTS = new RuleInputs({
  toolCallId: '',
  args: undefined,
  argsDigest: undefined,
  approved: false,
  context: undefined,
});

/** A refusal of `call` for `reason`, with what the model may call instead. */
export function refusal(call: ToolCallRequest, reason: ToolDenial, allowedTools: readonly string[]): ToolDecision {
  return { type: 'tool', tool: call.tool, toolCallId: call.toolCallId, allowed: false, reason, allowedTools };
}

/** Tool names of the running calls `ids`, in log order. */
function runningNames(view: SettledView, ids: readonly string[]): string[] {
  return view.running.filter((call) => ids.includes(call.id)).map((call) => call.tool);
}

/** True when the log is at its bound: nothing more may join it until a running call ends. */
function isFull(state: OrchestrationState): boolean {
  return state.pending !== undefined && state.pending.length >= MAX_PENDING_ENTRIES;
}

/**
 * Decides `call` on `state` (leases already expired), whose settled session is `view`. The ids
 * of the limit rules that count the call, if it runs, are pushed to `limits`. `again`: a durable
 * turn's replay of a call it recorded, whose id may be seen already.
 */
export function decideCall(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  view: SettledView,
  call: ToolCallRequest,
  context: TransitionContext,
  limits: string[],
  again: boolean,
): ToolDecision {
  const { tool, toolCallId, agentTools } = call;
  const instead = () => offers(plan, view, agentTools, isSuperseded(state, context), context).offered;
  if (hasSeen(state, toolCallId) && !(again && state.replay?.calls.some((c) => c.id === toolCallId))) {
    return refusal(call, duplicateCall(toolCallId), instead());
  }
  if (!agentTools.includes(tool)) return refusal(call, noSuchTool(tool), instead());
  if (isFull(state)) {
    const head = view.running[0];
    const names = view.running.map((running) => running.tool);
    const reason = pendingDenial(tool, names, call.waited, true);
    if (call.waited !== undefined || head === undefined) return refusal(call, reason, instead());
    return { ...(refusal(call, reason, NONE) as Extract<ToolDecision, { allowed: false }>), waitFor: [head.id] };
  }
  let preset: ToolDenial | undefined;
  let alternatives: readonly string[] | undefined;
  if (isSuperseded(state, context)) {
    preset = SUPERSEDED;
    alternatives = NONE;
  } else if (call.offered !== undefined && !call.offered.includes(tool)) {
    preset = notOffered(tool, call.offered);
    alternatives = call.offered;
  }
  // What rules read of the call; nothing to read without rules (most templates: no allocation).
  const inputs = plan.hasRules ? new RuleInputs(callFacts(call, context)) : NO_INPUTS;
  const judged = judgeTool(plan, view, tool, agentTools, preset, inputs, context);
  if (judged.waitFor.length > 0) {
    const reason = pendingDenial(tool, runningNames(view, judged.waitFor), call.waited);
    if (call.waited !== undefined) return refusal(call, reason, alternatives ?? instead());
    return { ...(refusal(call, reason, NONE) as Extract<ToolDecision, { allowed: false }>), waitFor: judged.waitFor };
  }
  limits.push(...judged.limits);
  if (judged.denial === undefined) return { type: 'tool', tool, toolCallId, allowed: true };
  // Shadow mode: it runs, and enforcement's answer is reported.
  if (judged.shadow) return { type: 'tool', tool, toolCallId, allowed: true, wouldBlock: judged.denial };
  return refusal(call, judged.denial, alternatives ?? instead());
}

/**
 * The tools a model step is offered (those a call of would run on the settled session) and, for
 * shadow mode, those enforcement would offer. `blocked`: the turn is superseded.
 */
export function offers(
  plan: OrchestrationPlan,
  view: SettledView,
  agentTools: readonly string[],
  blocked: boolean,
  context: TransitionContext,
): { offered: readonly string[]; enforced: readonly string[] } {
  const state = view.state;
  let allowed = blocked || budgetOf(plan, state) !== undefined ? NONE : allowedTools(plan, state, agentTools).tools;
  if (plan.hasRules && allowed.length > 0) allowed = allowedByRules(plan, state, allowed, context);
  const offered = shadowOf(plan, state) ? plan.allTools(agentTools) : allowed;
  return { offered, enforced: allowed };
}

/**
 * The tools of `tools` that the rules on calls let a model be offered in `state`: those no
 * unconditional rule refuses (a spent limit, a `deny` without condition). A tool an `approve`
 * rule guards is offered: a person is asked when it is called.
 */
function allowedByRules(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  tools: readonly string[],
  context: TransitionContext,
): readonly string[] {
  let out: string[] | undefined;
  for (let i = 0; i < tools.length; i++) {
    const tool = tools[i]!;
    const denial = judgeRules(plan, state, tool, undefined, context.message, context.now).denial;
    const offered = denial === undefined || denial.code === 'approval-required';
    if (!offered && out === undefined) out = tools.slice(0, i);
    else if (offered && out !== undefined) out.push(tool);
  }
  return out ?? tools;
}

/** What a model step is offered and why (`step-started`), on `state` (leases already expired). */
export function decideStep(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  agentTools: readonly string[],
  context: TransitionContext,
  events: OrchestrationEvent[],
  view?: SettledView,
): StepDecision {
  // The usual step (no running calls, rules, budgets or shadow mode, a turn not superseded)
  // depends only on the active step, the sequence position and the agent's tools: its decision is
  // computed once per position and shared (frozen), as this runs every model step.
  if (state.pending === undefined && !plan.hasRules && !plan.hasBudgets && !isSuperseded(state, context)) {
    const step = activeStepOf(plan, state);
    if (step !== undefined && !(step.shadow ?? plan.shadow)) {
      const cached = step.view(agentTools);
      const index = state.sequenceIndex;
      let decision = cached.decisions[index] as StepDecision | undefined;
      if (decision === undefined) {
        decision = Object.freeze(
          computeStep(plan, state, settledView(plan, state, context), agentTools, context, events),
        );
        cached.decisions[index] = decision;
      } else if (decision.sequence?.blocked) {
        events.push(...allowedTools(plan, state, agentTools).events);
      }
      return decision;
    }
  }
  return computeStep(plan, state, view ?? settledView(plan, state, context), agentTools, context, events);
}

function computeStep(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  view: SettledView,
  agentTools: readonly string[],
  context: TransitionContext,
  events: OrchestrationEvent[],
): StepDecision {
  const known = view.state;
  const step = viewStep(plan, known, agentTools);
  if (step.sequence?.blocked) events.push(...allowedTools(plan, known, agentTools).events);
  const running = view.running.length === 0 ? NONE : view.running.map((call) => call.tool);
  const budget = budgetOf(plan, known);
  const shadow = shadowOf(plan, known);
  if (budget !== undefined) events.push({ type: 'budget-exceeded', sessionId: state.sessionId, ...budget, shadow });
  const blocked = isSuperseded(state, context);
  // No rules, no budget, no shadow: what is offered is the view's allowed tools, already computed.
  const { offered, enforced } =
    !plan.hasRules && budget === undefined && !shadow
      ? { offered: blocked ? NONE : step.allowedTools, enforced: blocked ? NONE : step.allowedTools }
      : offers(plan, view, agentTools, blocked, context);
  const sequence = step.sequence;
  let toolChoice: StepDecision['toolChoice'] = offered.length === 0 ? 'none' : 'auto';
  // Forced only while every offered tool fills the next position: never force a tool that
  // would not advance the sequence (nor in shadow mode, which must not change what the model does).
  if (
    toolChoice === 'auto' &&
    !shadow &&
    step.activeStep?.requireSequence === true &&
    sequence?.expected !== undefined &&
    offered.every((tool) => sequence.expected?.includes(tool))
  ) {
    toolChoice = 'required';
  }
  const decision: StepDecision = {
    type: 'step',
    activeStep: step.activeStep?.name,
    sequence,
    allowedTools: offered,
    toolChoice,
    running,
    shadow,
  };
  // The usual decision is built without spreading empty objects into it (this runs every step).
  if (!shadow && budget === undefined) return decision;
  return { ...decision, ...(shadow ? { wouldOffer: enforced } : {}), ...(budget === undefined ? {} : { budget }) };
}

/**
 * Explains, for every tool, whether a call of it would be allowed now and why not, with the
 * step decision a model step would get: the same judgement of the same session as
 * `tool-requested` and `step-started`, so a view never disagrees with a decision (running
 * calls, shadow mode and budgets included). Pure: nothing is written, no event is kept.
 */
export function explain(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  agentTools: readonly string[],
  context: TransitionContext,
): Explanation {
  const current = expireLeases(plan, state, context, []);
  const view = settledView(plan, current, context);
  const { type: _type, ...step } = decideStep(plan, current, agentTools, context, [], view);
  const preset = isSuperseded(current, context) ? SUPERSEDED : undefined;
  const full = isFull(current);
  const active = plan.step(step.activeStep);
  const tools: ToolExplanation[] = agentTools.map((tool) => {
    if (full) return { tool, allowed: false, reason: pendingDenial(tool, step.running, undefined, true) };
    const judged = judgeTool(plan, view, tool, agentTools, preset, undefined, context);
    const rules =
      judged.conditional.length === 0 ? {} : { rules: judged.conditional.map((rule) => explainedRule(plan, rule)) };
    if (judged.waitFor.length > 0) {
      return { tool, allowed: false, reason: pendingDenial(tool, runningNames(view, judged.waitFor)), ...rules };
    }
    if (judged.denial === undefined) {
      const by = active === undefined || active.allowed.length === 0 ? undefined : firstMatch(active.allowed, tool);
      return by === undefined
        ? { tool, allowed: true, ...rules }
        : { tool, allowed: true, allowedBy: by.pattern, ...rules };
    }
    return { tool, allowed: false, reason: judged.denial, ...rules };
  });
  const known = new Set(agentTools);
  for (const tool of plan.referencedTools) {
    if (!known.has(tool)) tools.push({ tool, allowed: false, reason: unknownToAgent(tool) });
  }
  return { ...step, sessionId: current.sessionId, stepDescription: plan.step(step.activeStep)?.description, tools };
}

/**
 * A rule as `explain()` lists it: with the facts and labels its condition reads, which is what a
 * completed call's result can change about its answer (and a fact not set, or unknown, refuses).
 */
function explainedRule(plan: OrchestrationPlan, rule: CompiledRule): ExplainedRule {
  const reads = rule.reads;
  const explained: { -readonly [K in keyof ExplainedRule]: ExplainedRule[K] } = {
    rule: rule.id,
    effect: rule.effect ?? 'limit',
    reason: rule.reason,
  };
  // A condition that reads the facts whole (`state.facts[name]` with a computed name) may read
  // any of them: every fact the template declares.
  const facts = reads.facts === 'all' ? plan.facts.map((fact) => fact.name) : reads.facts;
  if (facts.length > 0) explained.facts = [...facts];
  if (reads.labels) explained.labels = true;
  return explained;
}

/** The `sequence-incomplete` event for the session as known for sure, if its sequence is unfinished. */
export function incompleteSequence(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  awaitingApproval: boolean,
  context: TransitionContext,
): OrchestrationEvent | undefined {
  const known = settledView(plan, state, context).state;
  const step = activeStepOf(plan, known);
  if (step === undefined || step.sequence.length === 0) return undefined;
  const index = known.sequenceIndex;
  if (index >= step.sequence.length) return undefined;
  return {
    type: 'sequence-incomplete',
    sessionId: state.sessionId,
    step: step.name,
    index,
    length: step.sequence.length,
    expected: step.sequence[index]!.tools,
    required: step.requireSequence,
    awaitingApproval,
  };
}
