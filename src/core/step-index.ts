/**
 * Step selection (SPEC section 3) without walking every step: the first conditional step, in
 * configuration order, whose conditions all hold. Each step is filed under the cheapest fact that
 * must be true for it to match, so a selection evaluates only the steps that can:
 *
 * - a built-in `sequence_match` holds only when the last tool used ends the step's sequence: the
 *   step is filed under those last tools;
 * - a built-in `tool_used` holds only when its tool is in the history: filed under that tool (read
 *   through the history while it is short; a long history evaluates those steps as before);
 * - a step whose conditions all read the message and nothing else has one answer per message:
 *   computed once per message object and kept beside it;
 * - any other step (custom conditions, `not_recently_used`) is evaluated every time.
 *
 * The answer is the plain walk's (a property test compares them).
 */
import type { CompiledStep } from './compiled-step.js';
import {
  builtinConditionType,
  type ConditionContext,
  type ConditionRegistry,
  type ConditionTest,
  type MessageInfo,
} from './conditions.js';

/** The first step whose conditions hold, as the walk over `steps` in order would find it. */
export type StepSelector = (history: readonly string[], message: MessageInfo | undefined) => CompiledStep | undefined;

/** Beyond this history length, `tool_used` steps are evaluated instead of looked up per history entry. */
const HISTORY_SCAN_LIMIT = 256;
/** Below this many conditional steps the plain walk is as fast as any index. */
const INDEX_FROM = 4;

/** The plain walk of SPEC section 3: every conditional step, in order. */
export function walkSteps(
  steps: readonly CompiledStep[],
  history: readonly string[],
  message: MessageInfo | undefined,
): CompiledStep | undefined {
  const context = { history, message, sequence: steps[0]?.sequenceSets ?? [] };
  for (let i = 0; i < steps.length; i++) {
    const step = steps[i]!;
    context.sequence = step.sequenceSets;
    if (holds(step, context)) return step;
  }
  return undefined;
}

function holds(step: CompiledStep, context: ConditionContext): boolean {
  return allHold(step.conditions, context);
}

function allHold(conditions: readonly ConditionTest[], context: ConditionContext): boolean {
  for (let j = 0; j < conditions.length; j++) if (!conditions[j]!(context)) return false;
  return true;
}

/**
 * A selector for `steps` (the plan's conditional steps). With `index: false` (or few steps) it
 * is the plain walk; otherwise it looks steps up as described above.
 */
export function stepSelector(
  steps: readonly CompiledStep[],
  registry: ConditionRegistry,
  options: { index?: boolean } = {},
): StepSelector {
  if (options.index === false || (options.index === undefined && steps.length < INDEX_FROM)) {
    return (history, message) => walkSteps(steps, history, message);
  }
  const always: number[] = [];
  const byLast = new Map<string, number[]>();
  const byUsed = new Map<string, number[]>();
  const usedSteps: number[] = [];
  const messageOnly: number[] = [];
  const file = (map: Map<string, number[]>, key: string, i: number) => {
    const list = map.get(key);
    if (list === undefined) map.set(key, [i]);
    else if (list[list.length - 1] !== i) list.push(i);
  };
  steps.forEach((step, i) => {
    const conditions = step.source.conditions ?? [];
    const last = step.sequence[step.sequence.length - 1];
    if (last !== undefined && conditions.some((c) => builtinConditionType(registry, c.type) === 'sequence_match')) {
      for (const tool of last.tools) file(byLast, tool, i);
      return;
    }
    const used = conditions.find((c) => builtinConditionType(registry, c.type) === 'tool_used');
    if (used !== undefined) {
      file(byUsed, used.value ?? '', i);
      usedSteps.push(i);
      return;
    }
    if (conditions.length > 0 && conditions.every((c) => registry.messageUse(c) === 'only')) {
      messageOnly.push(i);
      return;
    }
    always.push(i);
  });
  // Per message object: the message-only steps that hold for it, in order.
  const answers = new WeakMap<MessageInfo, readonly number[]>();
  let noMessage: readonly number[] | undefined;
  const context = { history: [] as readonly string[], message: undefined as MessageInfo | undefined, sequence: [] };
  const matching = (message: MessageInfo | undefined): readonly number[] => {
    const cached = message === undefined ? noMessage : answers.get(message);
    if (cached !== undefined) return cached;
    const probe = { history: [] as readonly string[], message, sequence: [] as readonly ReadonlySet<string>[] };
    const found = messageOnly.filter((i) => {
      probe.sequence = steps[i]!.sequenceSets;
      return holds(steps[i]!, probe);
    });
    if (message === undefined) noMessage = found;
    else answers.set(message, found);
    return found;
  };

  // Plain copies of what the plan keeps frozen, read on every selection: V8's optimized code reads
  // a frozen array's elements through a generic call.
  const stepAt = [...steps];
  const conditionsOf = steps.map((step) => [...step.conditions]);
  const sequenceOf = steps.map((step) => [...step.sequenceSets]);

  // Each list is in configuration order: the first of its steps that holds before `best`, else
  // `best`. Defined once, not per selection: a closure per call would be an allocation per turn.
  const scan = (list: readonly number[] | undefined, best: number): number => {
    if (list === undefined) return best;
    for (let k = 0; k < list.length; k++) {
      const i = list[k]!;
      if (i >= best) return best;
      (context as { sequence: readonly ReadonlySet<string>[] }).sequence = sequenceOf[i]!;
      if (allHold(conditionsOf[i]!, context)) return i;
    }
    return best;
  };

  return (history, message) => {
    context.history = history;
    context.message = message;
    let best = steps.length;
    const matched = messageOnly.length > 0 ? matching(message) : undefined;
    if (matched !== undefined && matched.length > 0) best = matched[0]!;
    best = scan(always, best);
    if (history.length > 0) best = scan(byLast.get(history[history.length - 1]!), best);
    if (byUsed.size > 0) {
      if (history.length <= HISTORY_SCAN_LIMIT) for (const tool of history) best = scan(byUsed.get(tool), best);
      else best = scan(usedSteps, best);
    }
    return best < stepAt.length ? stepAt[best] : undefined;
  };
}
