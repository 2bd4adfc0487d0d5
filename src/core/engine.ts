/**
 * The decision engine (SPEC sections 3 to 5) as pure functions
 * `(plan, state, input) -> {state, events}`: no I/O, no clock. The stateful classes in
 * `orchestration/` only load a state, call these, store the result and dispatch events.
 */
import type { OrchestrationPlan } from './compile.js';
import { type CompiledStep, positionTools } from './compiled-step.js';
import type { ConditionContext, MessageInfo } from './conditions.js';
import { NO_EVENTS, type OrchestrationEvent, type ToolDenial } from './events.js';
import { DEFAULT_HISTORY_LIMIT, type OrchestrationState } from './state.js';
import { describeSelector } from './tool-annotations.js';

// Budgets and token counting have files of their own; re-exported so that every import of them
// from here keeps working (judgement.ts, transition.ts and transition-types.ts have some).
export { type BudgetStatus, budgetDenial, budgetOf } from './budget-status.js';
export { addTokenUsage, normalizeUsage, type TokenUsageInput } from './token-usage.js';

/** A new state and what happened on the way. `state` is the input object when nothing changed. */
export interface EngineResult {
  readonly state: OrchestrationState;
  readonly events: readonly OrchestrationEvent[];
}

/** The active step of `state` in `plan`, if it still exists. */
export function activeStepOf(plan: OrchestrationPlan, state: OrchestrationState): CompiledStep | undefined {
  return plan.step(state.activeStep);
}

/** Which step should be active now (SPEC section 3), without changing anything. */
export function chooseStep(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  message: MessageInfo | undefined,
): CompiledStep | undefined {
  return plan.selectStep(state.recentlyUsedTools, message) ?? plan.step(state.activeStep) ?? plan.defaultStep;
}

/** Runs step selection and applies its result; changing step resets `sequenceIndex` to 0. */
export function selectStep(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  message: MessageInfo | undefined,
): EngineResult {
  const chosen = chooseStep(plan, state, message);
  if (chosen?.name === state.activeStep) return { state, events: NO_EVENTS };
  return changeStep(state, chosen?.name);
}

/** Makes `stepName` the active step (or none); the sequence restarts. No-op when already active. */
export function changeStep(state: OrchestrationState, stepName: string | undefined): EngineResult {
  if (stepName === state.activeStep) return { state, events: NO_EVENTS };
  const next: OrchestrationState = { ...state, sequenceIndex: 0, activeStep: stepName };
  return {
    state: next,
    events: [{ type: 'step-changed', sessionId: state.sessionId, from: state.activeStep, to: stepName }],
  };
}

/**
 * Handles the latest user message: when it is new, applies the active step's
 * `resetSequenceOn` rules and remembers it; then runs step selection. Safe to call before
 * every model step: an already handled message changes nothing but the selection.
 */
export function handleMessage(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  message: MessageInfo | undefined,
): EngineResult {
  return messageChange(plan, state, message) ?? { state, events: NO_EVENTS };
}

/**
 * {@link handleMessage}, or undefined when the message changes nothing: the usual case, a
 * message already handled and the same step chosen again, which then allocates no result (the
 * transition runs this for every turn's user message).
 */
export function messageChange(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  message: MessageInfo | undefined,
): EngineResult | undefined {
  // A seed turn handles its message twice on the same stored state (`getAllowedTools`, then
  // `processToolUsage`): the second finds the answer of the first here instead of selecting again.
  if (state === unchanged.state && message === unchanged.message && plan === unchanged.plan) return undefined;
  let current = state;
  let events: OrchestrationEvent[] | undefined;
  if (message !== undefined && message.key !== state.lastMessageKey) {
    current = { ...state, lastMessageKey: message.key };
    const step = activeStepOf(plan, current);
    if (step !== undefined && current.sequenceIndex > 0) {
      let reason: 'new_message' | 'message_condition' | undefined;
      if (step.resetOnNewMessage) reason = 'new_message';
      else if (step.resetOnMessage.length > 0) {
        const context: ConditionContext = { history: current.recentlyUsedTools, message, sequence: step.sequenceSets };
        if (step.resetOnMessage.some((test) => test(context))) reason = 'message_condition';
      }
      if (reason !== undefined) {
        events = [
          { type: 'sequence-reset', sessionId: state.sessionId, step: step.name, from: current.sequenceIndex, reason },
        ];
        current = { ...current, sequenceIndex: 0 };
      }
    }
  }
  const chosen = chooseStep(plan, current, message)?.name;
  if (chosen === current.activeStep) {
    if (current === state) {
      unchanged.plan = plan;
      unchanged.state = state;
      unchanged.message = message;
      return undefined;
    }
    return { state: current, events: events ?? NO_EVENTS };
  }
  const selected = changeStep(current, chosen);
  if (events === undefined) return selected;
  return { state: selected.state, events: [...events, ...selected.events] };
}

/**
 * The latest state that {@link messageChange} found unchanged by `message` under `plan`. Sound
 * because plans and the fields it reads (`lastMessageKey`, `sequenceIndex`, `activeStep`,
 * `recentlyUsedTools`) never change in a state once made, and conditions are pure. It keeps one
 * state alive until the next message is handled.
 */
const unchanged: {
  plan: OrchestrationPlan | undefined;
  state: OrchestrationState | undefined;
  message: MessageInfo | undefined;
} = { plan: undefined, state: undefined, message: undefined };

/** Input of {@link recordToolUse}. */
export interface ToolUseInput {
  /** Name of the tool that completed. */
  readonly tool: string;
  /** The latest user message, for the step selection that follows. */
  readonly message?: MessageInfo | undefined;
  /** Bound of `recentlyUsedTools` (the plan's `historyLimit` wins when it sets one). */
  readonly historyLimit?: number | undefined;
  /**
   * The call was authorized and reserved before it ran. If a newer user message moved the
   * session meanwhile and the tool no longer fills the current position, it only joins the
   * history: it was allowed when it was reserved, so it is no violation.
   */
  readonly reserved?: boolean | undefined;
}

/**
 * Commits a completed tool use (SPEC section 5): appends it to the history (trimmed from
 * the front), advances the active sequence when the tool fills its current position (or
 * reports a violation and applies `out_of_sequence`), then runs step selection again so a
 * completed sequence switches step within the same turn. Shells reach it through
 * `transition`, which decides when a call commits.
 */
export function recordToolUse(plan: OrchestrationPlan, state: OrchestrationState, input: ToolUseInput): EngineResult {
  const events: OrchestrationEvent[] = [];
  const next = commitToolUse(
    plan,
    state,
    input.tool,
    input.message,
    input.historyLimit,
    input.reserved === true,
    events,
  );
  return { state: next, events: events.length === 0 ? NO_EVENTS : events };
}

/**
 * {@link recordToolUse} with its input as arguments, pushing its events to `events`: the
 * transition's form, which commits a tool on every seed turn without an input object, a result
 * object or an event list of its own.
 */
export function commitToolUse(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  tool: string,
  message: MessageInfo | undefined,
  historyLimit: number | undefined,
  reserved: boolean,
  events: OrchestrationEvent[],
): OrchestrationState {
  const limit = plan.historyLimit ?? historyLimit ?? DEFAULT_HISTORY_LIMIT;
  const recentlyUsedTools = appendBounded(state.recentlyUsedTools, tool, limit);
  const next: OrchestrationState = { ...state, recentlyUsedTools };
  // Counted for approvals (see `fingerprint`), which only templates with rules ask for: other
  // sessions keep the state they always had.
  if (plan.hasRules) next.toolUses = (state.toolUses ?? 0) + 1;
  const step = activeStepOf(plan, state);
  const length = step?.sequence.length ?? 0;
  if (step !== undefined && state.sequenceIndex < length) {
    const index = state.sequenceIndex;
    const slot = step.sequence[index]!;
    if (slot.set.has(tool)) {
      next.sequenceIndex = index + 1;
      events.push({
        type: 'sequence-advanced',
        sessionId: state.sessionId,
        step: step.name,
        tool,
        index: index + 1,
        length,
      });
      if (index + 1 === length)
        events.push({ type: 'sequence-completed', sessionId: state.sessionId, step: step.name });
    } else if (!reserved) {
      events.push({
        type: 'sequence-violation',
        sessionId: state.sessionId,
        step: step.name,
        tool,
        expected: slot.tools,
        index,
      });
      if (step.resetOnOutOfSequence && index > 0) {
        next.sequenceIndex = 0;
        events.push({
          type: 'sequence-reset',
          sessionId: state.sessionId,
          step: step.name,
          from: index,
          reason: 'out_of_sequence',
        });
      }
    }
  }
  // `next` is this call's own new object: the step change is written into it rather than
  // copied again (changeStep's copy would be a second state per recorded tool).
  const chosen = chooseStep(plan, next, message)?.name;
  if (chosen !== next.activeStep) {
    events.push({ type: 'step-changed', sessionId: state.sessionId, from: next.activeStep, to: chosen });
    next.activeStep = chosen;
    next.sequenceIndex = 0;
  }
  return next;
}

/**
 * `history` plus `item`, trimmed from the front to `limit`, copied once into an array of
 * exactly the right size (spreading reserves spare capacity that every idle session would
 * keep).
 */
export function appendBounded(history: readonly string[], item: string, limit: number): string[] {
  const start = Math.max(0, history.length + 1 - limit);
  const out = new Array<string>(history.length - start + 1);
  for (let i = start; i < history.length; i++) out[i - start] = history[i]!;
  out[out.length - 1] = item;
  return out;
}

/** Result of {@link allowedTools}. */
export interface AllowedToolsResult {
  /** The allowed tools, in the order of the agent's tools. Frozen; shared between calls. */
  readonly tools: readonly string[];
  readonly events: readonly OrchestrationEvent[];
}

/** The tools allowed now (SPEC section 4), in the order of `agentTools`. */
export function allowedTools(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  agentTools: readonly string[],
): AllowedToolsResult {
  const step = activeStepOf(plan, state);
  if (step === undefined) return { tools: plan.allTools(agentTools), events: NO_EVENTS };
  const view = step.view(agentTools);
  const index = state.sequenceIndex;
  if (index >= step.sequence.length) return { tools: view.permitted, events: NO_EVENTS };
  const tools = positionTools(step, view, index);
  if (tools.length > 0) return { tools, events: NO_EVENTS };
  return {
    tools,
    events: [
      {
        type: 'sequence-blocked',
        sessionId: state.sessionId,
        step: step.name,
        expected: step.sequence[index]!.tools,
        index,
      },
    ],
  };
}

/** Why `tool` is not allowed now, or undefined when it is. */
export function denialOf(
  plan: OrchestrationPlan,
  state: OrchestrationState,
  tool: string,
  agentTools: readonly string[],
): ToolDenial | undefined {
  if (!agentTools.includes(tool)) {
    return { code: 'no-such-tool', message: `"${tool}" is not one of the agent's tools` };
  }
  const step = activeStepOf(plan, state);
  if (step === undefined) return undefined;
  const deniedBy = step.denied.find((p) => p.test(tool));
  if (deniedBy) {
    const by =
      deniedBy.selector === undefined
        ? `pattern "${deniedBy.pattern}"`
        : `selector ${describeSelector(deniedBy.selector)}`;
    return { code: 'denied', pattern: deniedBy.pattern, message: `step "${step.name}" denies "${tool}" (${by})` };
  }
  if (!step.permits(tool)) {
    const allowed = step.allowed.map((p) => p.pattern);
    const listed = step.allowed.map((p) => (p.selector === undefined ? p.pattern : describeSelector(p.selector)));
    return { code: 'not-allowed', allowed, message: `step "${step.name}" allows only ${listed.join(', ')}` };
  }
  const index = state.sequenceIndex;
  if (index < step.sequence.length) {
    const slot = step.sequence[index]!;
    if (slot.set.has(tool)) return undefined;
    const available = positionTools(step, step.view(agentTools), index);
    const expected = slot.tools.join(' or ');
    return {
      code: 'sequence',
      expected: slot.tools,
      index,
      blocked: available.length === 0,
      message:
        available.length === 0
          ? `step "${step.name}" is blocked: its sequence expects ${expected} (position ${index + 1} of ${step.sequence.length}), which the agent cannot use`
          : `step "${step.name}" expects ${expected} next (position ${index + 1} of ${step.sequence.length})`,
    };
  }
  return undefined;
}

/** The active step's sequence and where the session stands in it. */
export type SequenceView =
  | {
      readonly tools: readonly (readonly string[])[];
      readonly index: number;
      readonly length: number;
      readonly expected: readonly string[] | undefined;
      readonly completed: boolean;
      readonly blocked: boolean;
    }
  | undefined;

/** Where the session stands: the active step, its sequence and the allowed tools. */
export interface StepView {
  readonly activeStep: CompiledStep | undefined;
  readonly sequence: SequenceView;
  readonly allowedTools: readonly string[];
}

/** The active step, its sequence progress and the allowed tools, in one pass. */
export function viewStep(plan: OrchestrationPlan, state: OrchestrationState, agentTools: readonly string[]): StepView {
  const step = activeStepOf(plan, state);
  const allowed = allowedTools(plan, state, agentTools).tools;
  return { activeStep: step, sequence: sequenceOf(step, state, allowed), allowedTools: allowed };
}

function sequenceOf(
  step: CompiledStep | undefined,
  state: OrchestrationState,
  allowed: readonly string[],
): SequenceView {
  if (step === undefined || step.sequence.length === 0) return undefined;
  const index = state.sequenceIndex;
  const completed = index >= step.sequence.length;
  return {
    tools: step.sequenceTools,
    index,
    length: step.sequence.length,
    expected: completed ? undefined : step.sequence[index]!.tools,
    completed,
    blocked: !completed && allowed.length === 0,
  };
}
