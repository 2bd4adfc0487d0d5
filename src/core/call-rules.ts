/**
 * Rules on calls in the layer that decides calls (SPEC section 9): which rule refuses a call on
 * the session a decision is judged on, how limit rules count committed calls, and how an approval
 * a person gave is bound to its call. The judgement (`judgement.ts`) asks these once per request,
 * after the step's own rules and budgets, so shadow mode, `explain()` and the serial-order
 * guarantee cover rules like every other decision.
 *
 * Order (SPEC section 9): a matching `deny` refuses; then a failing `allow` refuses; then a limit
 * whose count is reached refuses; then a matching `approve` asks for approval. A rule that cannot
 * be evaluated refuses. Running calls count for a limit when they complete or are abandoned, but
 * not when they fail: a limit that the committed count leaves room under and the running calls
 * could fill depends on them, and the request waits for them (`waitFor`).
 */

import type { OrchestrationPlan } from './compile.js';
import type { MessageInfo } from './conditions.js';
import { activeStepOf } from './engine.js';
import type { ToolDenial } from './events.js';
import type { CallEntry, CallPlace } from './pending-log.js';
import { type CompiledRule, celState, celValue, RuleEvaluationError, type RuleVariables } from './rules.js';
import { APPROVALS_LIMIT, type OrchestrationState } from './state.js';

/** What a request tells the rules about its call, besides the tool. */
export interface CallFacts {
  readonly toolCallId: string;
  /** The call's input. */
  readonly args: unknown;
  /** A digest of the input (the shell computes it), for binding approvals. */
  readonly argsDigest: string | undefined;
  /** The call comes with a person's approval (an approved call resumed from the history). */
  readonly approved: boolean;
  /** What the caller passes with the turn (`context` in expressions). */
  readonly context: Readonly<Record<string, unknown>> | undefined;
}

/** A request's facts as rules read them, converted once per request. */
export class RuleInputs {
  readonly #facts: CallFacts;
  #args: unknown;
  #context: unknown;
  #error: string | undefined;
  #converted = false;

  constructor(facts: CallFacts) {
    this.#facts = facts;
  }

  get facts(): CallFacts {
    return this.#facts;
  }

  /** The variables of an expression in `state`; throws when the arguments are beyond the bounds. */
  variables(tool: string, state: OrchestrationState): RuleVariables {
    if (!this.#converted) {
      this.#converted = true;
      try {
        this.#args = celValue(this.#facts.args ?? {});
        // Converted for each request, never cached by object: a caller may pass the same
        // context object again after changing it (a user whose role was taken away), and a
        // rule must judge what the context says now, not what it said the first time.
        this.#context = celValue(this.#facts.context ?? {});
      } catch (error) {
        this.#error = error instanceof Error ? error.message : String(error);
      }
    }
    if (this.#error !== undefined) throw new RuleEvaluationError(this.#error);
    return { tool, args: this.#args, state: celState(state), context: this.#context };
  }
}

/** What the rules made of a call. */
export interface RuleVerdict {
  /** Why it is refused, if it is. */
  readonly denial: ToolDenial | undefined;
  /**
   * The running calls a limit's answer depends on (their completion would reach it, their
   * failure would not): the call is not decided until they end. Empty when it is decided.
   */
  readonly waitFor: readonly string[];
  /** Limit rules that count the call when it commits. */
  readonly limits: readonly string[];
  /** Rules with a condition that could not be judged without the call's input (`explain`). */
  readonly conditional: readonly CompiledRule[];
}

const NO_VERDICT: RuleVerdict = Object.freeze({ denial: undefined, waitFor: [], limits: [], conditional: [] });

/**
 * The rules' verdict on a call of `tool` in `state` (the session as a decision sees it, running
 * calls left out; `running` lists them). `inputs` undefined: the input is unknown (`explain`), so
 * rules with a condition are only listed, not judged. Each rule's condition is evaluated at most
 * once.
 */
export function judgeRules(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  tool: string,
  inputs: RuleInputs | undefined,
  message: MessageInfo | undefined,
  now: number,
  running: readonly CallEntry[] = NO_RUNNING,
  places?: ReadonlyMap<string, CallPlace>,
): RuleVerdict {
  if (!plan.hasRules) return NO_VERDICT;
  const rules = plan.rulesFor(activeStepOf(plan, state), tool);
  if (rules.length === 0) return NO_VERDICT;
  // No closures here: this runs for every request, and stays allocation-light.
  const judging: Judging = { state, tool, inputs, variables: undefined, conditional: [], limits: [] };
  let current: CompiledRule | undefined;
  let denial: ToolDenial | undefined;
  let waitFor: string[] | undefined;
  try {
    for (let i = 0; i < rules.length && denial === undefined; i++) {
      const rule = rules[i]!;
      current = rule;
      if (rule.effect === 'deny' && holds(rule, judging) === true) {
        denial = { code: 'rule', rule: rule.id, effect: 'deny', message: rule.reason };
      }
    }
    for (let i = 0; i < rules.length && denial === undefined; i++) {
      const rule = rules[i]!;
      current = rule;
      if (rule.effect === 'allow' && holds(rule, judging) === false) {
        denial = { code: 'rule', rule: rule.id, effect: 'allow', message: rule.reason };
      }
    }
    // Every limit is judged: one that refuses whatever the running calls do wins over a wait.
    for (let i = 0; i < rules.length && denial === undefined; i++) {
      const rule = rules[i]!;
      current = rule;
      const limit = rule.limit;
      if (limit === undefined || holds(rule, judging) !== true) continue;
      const used = usedCount(rule, state, message, now);
      const maybe =
        running.length === 0 || used >= limit.max ? NO_IDS : countedIfRun(rule, running, places, state, message);
      if (used + maybe.length >= limit.max && maybe.length > 0) waitFor = union(waitFor, maybe);
      else if (used >= limit.max) {
        denial = {
          code: 'limit',
          rule: rule.id,
          max: limit.max,
          per: limit.per,
          used,
          message: `${rule.reason} (at most ${limit.max} per ${limit.per}; ${used} used)`,
        };
      } else judging.limits.push(rule.id);
    }
    for (let i = 0; i < rules.length && denial === undefined && waitFor === undefined; i++) {
      const rule = rules[i]!;
      current = rule;
      if (rule.effect !== 'approve' || holds(rule, judging) !== true) continue;
      const problem = approvalProblem(state, tool, inputs);
      if (problem === undefined) continue;
      denial =
        problem === 'none'
          ? { code: 'approval-required', rule: rule.id, message: `${rule.reason}: a person must approve this call` }
          : { code: 'approval-invalid', rule: rule.id, message: `${rule.reason}: ${problem}` };
    }
  } catch (error) {
    // Fail closed: a rule that cannot be evaluated refuses the call, and says why. One that reads
    // a fact that is unknown, or that no call has set, says which fact.
    const rule = current!;
    const fact = error instanceof UnknownFactError ? error.fact : absentFactOf(rule, state);
    const why =
      error instanceof UnknownFactError
        ? error.message
        : fact !== undefined
          ? `it reads fact "${fact}", which no completed call has set`
          : error instanceof Error
            ? error.message.split('\n')[0]!.trim()
            : String(error);
    denial = {
      code: 'rule',
      rule: rule.id,
      effect: rule.effect ?? 'limit',
      message: unevaluatedRuleMessage(rule.id, why),
      evaluationError: why,
      ...(fact === undefined ? {} : { fact }),
    };
  }
  if (denial !== undefined) waitFor = undefined;
  const { limits, conditional } = judging;
  if (denial === undefined && waitFor === undefined && limits.length === 0 && conditional.length === 0) {
    return NO_VERDICT;
  }
  return { denial, waitFor: waitFor ?? NO_IDS, limits, conditional };
}

const NO_RUNNING: readonly CallEntry[] = Object.freeze([]);

function union(into: string[] | undefined, ids: readonly string[]): string[] {
  const out = into ?? [];
  for (const id of ids) if (!out.includes(id)) out.push(id);
  return out;
}
const NO_IDS: readonly string[] = Object.freeze([]);

/**
 * The running calls limit `rule` would count if they completed: those whose reservation it
 * counted, in the turn a per-turn limit counts now, and for a step's rule while its step is
 * active where they commit.
 */
function countedIfRun(
  rule: CompiledRule,
  running: readonly CallEntry[],
  places: ReadonlyMap<string, CallPlace> | undefined,
  state: OrchestrationState,
  message: MessageInfo | undefined,
): readonly string[] {
  const period = rule.limit?.period.kind;
  const turn = period === 'turn' ? turnKey(state, message) : undefined;
  let out: string[] | undefined;
  for (const call of running) {
    if (call.limits === undefined || !call.limits.includes(rule.id)) continue;
    const place = places?.get(call.id);
    if (turn !== undefined && place?.turn !== turn) continue;
    if (rule.step !== undefined && rule.step !== place?.step) continue;
    out ??= [];
    out.push(call.id);
  }
  return out ?? NO_IDS;
}

/** What one {@link judgeRules} call judges, and what it found so far. */
interface Judging {
  readonly state: OrchestrationState;
  readonly tool: string;
  readonly inputs: RuleInputs | undefined;
  /** The expressions' variables, built once for all the rules judged. */
  variables: RuleVariables | undefined;
  readonly conditional: CompiledRule[];
  readonly limits: string[];
}

/** Whether `rule`'s condition holds: undefined when it cannot be known without the call's input. */
function holds(rule: CompiledRule, judging: Judging): boolean | undefined {
  if (rule.when === undefined) return true;
  if (judging.inputs === undefined) {
    judging.conditional.push(rule);
    return undefined;
  }
  const facts = rule.reads.facts;
  if (facts.length > 0 && judging.state.facts !== undefined) {
    // An unknown fact is never read: what it would say cannot be known (fail closed).
    const names = facts === 'all' ? Object.keys(judging.state.facts) : facts;
    for (const name of names) {
      const fact = judging.state.facts[name];
      if (fact !== undefined && 'unknown' in fact) throw new UnknownFactError(name, fact.unknown);
    }
  }
  judging.variables ??= judging.inputs.variables(judging.tool, judging.state);
  return rule.holds(judging.variables);
}

/** A rule reads a fact that is unknown: the call is refused, naming the fact. */
class UnknownFactError extends Error {
  constructor(
    readonly fact: string,
    why: string,
  ) {
    super(`it reads fact "${fact}", which is unknown (${why})`);
  }
}

/** A fact `rule` names that the session has not set (the likely cause of its evaluation error). */
function absentFactOf(rule: CompiledRule, state: OrchestrationState): string | undefined {
  const facts = rule.reads.facts;
  if (facts === 'all') return undefined;
  return facts.find((name) => state.facts?.[name] === undefined);
}

/** Why the call's approval does not count: `none` when it has none, else what is wrong; undefined when valid. */
function approvalProblem(state: OrchestrationState, tool: string, inputs: RuleInputs | undefined): string | undefined {
  if (inputs === undefined || !inputs.facts.approved) return 'none';
  const { toolCallId, argsDigest } = inputs.facts;
  const asked = state.approvals?.find((approval) => approval.id === toolCallId);
  // One the app's own policy asked for (no rule) is the app's: a rule asks a person itself.
  if (asked?.rule === undefined) return `no approval was asked for call "${toolCallId}"`;
  if (asked.tool !== tool) return `the approval was asked for "${asked.tool}", not "${tool}"`;
  if (argsDigest === undefined || asked.digest !== argsDigest) {
    return 'the approval was given for other arguments';
  }
  if (asked.at !== fingerprint(state)) {
    return 'the session moved on since the approval was asked; the call must be approved again';
  }
  return undefined;
}

/** Calls `rule` has counted in `state` for the period in effect now. */
export function usedCount(
  rule: CompiledRule,
  state: OrchestrationState,
  message: MessageInfo | undefined,
  now: number,
): number {
  const count = state.counts?.[rule.id];
  const period = rule.limit?.period;
  if (count === undefined || period === undefined) return 0;
  switch (period.kind) {
    case 'turn':
      // The same key as `countCall` writes: without any user message the calls share one turn
      // (key ''), so a per-turn limit still holds; comparing with undefined would never match,
      // and every such call would find the count at 0.
      return count.key === turnKey(state, message) ? count.n : 0;
    case 'window': {
      // Each bucket counts while the time its calls are counted as made (`at`) is in the window.
      const at = count.at ?? [];
      let n = 0;
      for (let i = 0; i < at.length; i++) if (at[i]! > now - period.ms) n += count.calls?.[i] ?? 1;
      return n;
    }
    default:
      return count.n;
  }
}

/** The turn a per-turn count belongs to: the user message in effect, '' when there never was one. */
export function turnKey(state: OrchestrationState, message: MessageInfo | undefined): string {
  return message?.key ?? state.lastMessageKey ?? '';
}

/**
 * `state` with a committing call counted by the limit rules `ids` (those of a step count only
 * while their step is active, as the call commits).
 */
export function countCall(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  ids: readonly string[],
  message: MessageInfo | undefined,
  now: number,
): OrchestrationState {
  let counts: NonNullable<OrchestrationState['counts']> | undefined;
  for (const id of ids) {
    const rule = plan.rule(id);
    const limit = rule?.limit;
    if (rule === undefined || limit === undefined) continue;
    if (rule.step !== undefined && rule.step !== state.activeStep) continue;
    counts ??= { ...state.counts };
    const previous = counts[id];
    const period = limit.period;
    if (period.kind === 'turn') {
      const key = turnKey(state, message);
      counts[id] = { n: previous?.key === key ? previous.n + 1 : 1, key };
    } else if (period.kind === 'window') {
      counts[id] = windowCount(previous, now, period.ms);
    } else {
      counts[id] = { n: (previous?.n ?? 0) + 1 };
    }
  }
  return counts === undefined ? state : { ...state, counts };
}

/**
 * How many buckets a rolling window's count is kept in. The state keeps at most one more (see
 * {@link windowCount}), so its size does not depend on the limit's `max` nor on how many calls
 * the session made.
 */
export const WINDOW_BUCKETS = 60;

/**
 * A rolling window's count of `ms` with one more call made at `now`: the calls of the window,
 * in buckets of 1/{@link WINDOW_BUCKETS} of it (at least 1 ms), on slots of that width counted
 * from the epoch. A bucket's `at` is the last millisecond of its slot: its calls are counted as
 * made then, at most one bucket's width after they were, never before, so a call counts for at
 * least as long as the window says and no window ever holds more than `max` calls. How long a
 * call counts depends on its own time only (not on the other calls of its bucket), so a call
 * that commits later never counts for a shorter time.
 *
 * `previous` may be of a state stored before the buckets (`at` the exact time of each call, no
 * `calls`): each time falls in its slot like a new call, so such a count carries over, and is
 * bucketed on its first new call.
 */
function windowCount(
  previous: NonNullable<OrchestrationState['counts']>[string] | undefined,
  now: number,
  ms: number,
): { n: number; at: number[]; calls: number[] } {
  const width = Math.max(1, Math.ceil(ms / WINDOW_BUCKETS));
  // Bucket ends by slot; a window has at most WINDOW_BUCKETS + 1 slots with calls in it.
  const buckets = new Map<number, number>();
  const add = (time: number, calls: number) => {
    const end = (Math.floor(time / width) + 1) * width - 1;
    buckets.set(end, (buckets.get(end) ?? 0) + calls);
  };
  const kept = previous?.at ?? [];
  for (let i = 0; i < kept.length; i++) {
    // Already rounded up, or an exact time of the old format: rounding again only rounds up.
    if (kept[i]! > now - ms) add(kept[i]!, previous?.calls?.[i] ?? 1);
  }
  add(now, 1);
  const ends = [...buckets.keys()].sort((a, b) => a - b);
  const calls = ends.map((end) => buckets.get(end)!);
  // More buckets than a window holds only when clocks went back or the template's window
  // changed: the oldest bucket's calls join the next one, counted as made later (never earlier).
  while (ends.length > WINDOW_BUCKETS + 1) {
    ends.shift();
    calls[1]! += calls[0]!;
    calls.shift();
  }
  let n = 0;
  for (const c of calls) n += c;
  return { n, at: ends, calls };
}

/** `after` without the counts of per-step limits when its active step is not `before`'s. */
export function resetStepCounts(
  plan: OrchestrationPlan,
  before: OrchestrationState,
  after: OrchestrationState,
): OrchestrationState {
  if (after.counts === undefined || before.activeStep === after.activeStep) return after;
  let counts: NonNullable<OrchestrationState['counts']> | undefined;
  for (const id of Object.keys(after.counts)) {
    if (plan.rule(id)?.limit?.period.kind !== 'step') continue;
    counts ??= { ...after.counts };
    delete counts[id];
  }
  if (counts === undefined) return after;
  return { ...after, counts: Object.keys(counts).length === 0 ? undefined : counts };
}

/**
 * `state` with an approval asked for `toolCallId`, bound to its input and to the session (`at`,
 * its {@link fingerprint}); `rule`: the `approve` rule that asked, absent when the app's policy did.
 */
export function askApproval(
  state: OrchestrationState,
  approval: { toolCallId: string; tool: string; argsDigest: string; rule?: string | undefined },
  at: string,
): OrchestrationState {
  const kept = (state.approvals ?? []).filter((asked) => asked.id !== approval.toolCallId);
  const asked: NonNullable<OrchestrationState['approvals']>[number] = {
    id: approval.toolCallId,
    tool: approval.tool,
    digest: approval.argsDigest,
    at,
  };
  if (approval.rule !== undefined) asked.rule = approval.rule;
  kept.push(asked);
  return { ...state, approvals: kept.slice(-APPROVALS_LIMIT) };
}

/** `state` without the approval of `toolCallId` (its call was decided: run, refused or denied). */
export function spendApproval(state: OrchestrationState, toolCallId: string): OrchestrationState {
  const approvals = state.approvals;
  if (approvals === undefined || !approvals.some((asked) => asked.id === toolCallId)) return state;
  const kept = approvals.filter((asked) => asked.id !== toolCallId);
  return { ...state, approvals: kept.length === 0 ? undefined : kept };
}

/**
 * The message of a call refused because rule `ruleId` could not be evaluated, with the
 * evaluator's reason (`why`) when given: the model reads it with the reason; telemetry, where a
 * call's input never goes unasked, without (the reason may quote the input).
 */
export function unevaluatedRuleMessage(ruleId: string, why?: string): string {
  return `rule ${ruleId} could not be evaluated${why === undefined ? '' : ` (${why})`}, so the call is refused`;
}

/**
 * The session as decisions see it, in a few characters: active step, sequence position, history
 * and the count of committed tool uses (of one outcome of the running calls, as rules judge it).
 * An approval records it when asked, and counts only while it is unchanged: token usage or an
 * event log entry do not move the session on; a tool use or a step change do. The count is what
 * tells a tool use apart when the history is at its bound and holds one tool only (it reads the
 * same after one more use of it). A state without a count reads as before it was kept, so an
 * approval asked before stays good until the next tool use.
 */
export function fingerprint(state: OrchestrationState): string {
  const uses = state.toolUses === undefined ? '' : `\u0002${state.toolUses}`;
  const text = `${state.activeStep ?? ''}\u0000${state.sequenceIndex}\u0000${state.recentlyUsedTools.join('\u0001')}${uses}`;
  // Two FNV-1a hashes with different offsets: 64 bits, enough to tell states of one session apart.
  let a = 0x811c9dc5;
  let b = 0x01000193 ^ text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
  }
  return `${(a >>> 0).toString(36)}.${(b >>> 0).toString(36)}`;
}
