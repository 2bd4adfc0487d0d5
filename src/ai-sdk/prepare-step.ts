/**
 * `prepareStepHook()`: the AI SDK's `prepareStep`. Before every model step it offers exactly the
 * tools the step decision allows (narrowed by the app's `activeTools`), forces the next tool of a
 * `requireSequence` step, tells the model where it stands (an `## Orchestration` block appended to
 * the instructions), and once a token budget is spent gives the step a stand-in model that says
 * so. The app's own `prepareStep` runs after it, and Baton's restrictions win.
 */
import type { Instructions, PrepareStepFunction, PrepareStepResult, ToolChoice, ToolSet } from 'ai';
import { toAIState } from '../core/state.js';
import type { StepDecision } from '../core/transition.js';
import { stepStartedNow } from '../orchestration/turn.js';
import { budgetSpentModel } from './budget-spent-model.js';
import type { RuntimeContext, StepInfo } from './orchestrate-types.js';
import type { TurnHooks } from './turn-hooks.js';

/** The `prepareStep` of the turn of `hooks`; `guarded` are its guarded tools. */
export function prepareStepHook<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext>(
  hooks: TurnHooks<TOOLS, RUNTIME_CONTEXT>,
  guarded: ToolSet,
): PrepareStepFunction<TOOLS, RUNTIME_CONTEXT> {
  const { options, turn, plan } = hooks;
  return async (step) => {
    if (hooks.unguarded) throw hooks.unguarded; // fail closed: the AI SDK call ends with this error
    if (hooks.pending.size > 0) await hooks.idle();
    // Under a durable engine the model call that follows is checkpointed: store the previous
    // step's decisions (refusals, completions, usage) first, so a replay never finds a model
    // answer whose premises Baton did not record.
    if (options.turnId !== undefined && turn.dirty) await hooks.flush();
    hooks.prepared++;
    hooks.awaitingApproval = false;
    hooks.approvedInStep = 0;
    // Steps whose onStepEnd never came (the app replaced it): their usage still counts.
    let missed = false;
    for (const s of step.steps) {
      if (hooks.recordedSteps.has(s.stepNumber)) continue;
      hooks.recordStep(s);
      missed = true;
    }
    if (missed && !hooks.onStepEndRan) hooks.noteMissingOnStepEnd();
    hooks.adoptMessages(step.initialMessages);
    // Decided locally or on a synchronous store: no promise hop.
    const started = stepStartedNow(turn, step.stepNumber);
    const { decision, state } = started instanceof Promise ? await started : started;
    hooks.projection.reset(state);
    // The turn's first model step: the request's history is known, and the turn has begun.
    if (!hooks.denialsNoted) hooks.noteDenials(step.initialMessages);
    const activeStep = plan.step(decision.activeStep);
    const app: PrepareStepResult<TOOLS, RUNTIME_CONTEXT> | undefined =
      options.prepareStep === undefined ? undefined : await options.prepareStep(step);
    const narrowing = app?.activeTools ?? options.activeTools ?? hooks.callActiveTools;
    const offeredNow = narrowing
      ? decision.allowedTools.filter((tool) => narrowing.includes(tool))
      : decision.allowedTools;
    const choice = combineToolChoice(
      decision.toolChoice,
      app?.toolChoice ?? options.toolChoice ?? (hooks.callToolChoice as ToolChoice<TOOLS> | undefined),
      offeredNow,
    );
    hooks.offered = offeredNow;
    const info: { -readonly [K in keyof StepInfo]: StepInfo[K] } = {
      stepNumber: step.stepNumber,
      activeStep: decision.activeStep,
      stepDescription: activeStep?.description,
      sequence: decision.sequence,
      allowedTools: offeredNow,
      toolChoice: offeredNow.length === 0 ? 'none' : decision.toolChoice,
      state: toAIState(state),
      shadow: decision.shadow,
    };
    // Assigned, not spread: this runs before every model step.
    if (decision.wouldOffer !== undefined) info.wouldOffer = decision.wouldOffer;
    if (decision.budget !== undefined) info.budget = decision.budget;
    if (state.facts !== undefined) info.facts = state.facts;
    if (state.labels !== undefined && state.labels.length > 0) info.labels = state.labels;
    hooks.last = info;
    if (options.onStep) {
      try {
        await options.onStep(info);
      } catch (error) {
        hooks.fail(error);
      }
    }
    // `system` is the AI SDK's deprecated name for `instructions`.
    const appInstructions = app?.instructions ?? app?.system;
    if (appInstructions !== undefined) hooks.carriedInstructions = appInstructions;
    const base = hooks.carriedInstructions ?? options.instructions ?? step.initialInstructions;
    // With no steps there is nothing to tell the model: leave the instructions alone.
    // No steps: nothing to say. Shadow mode: the model must behave as it would without the
    // template, or the rollout would change what it observes.
    const instructions =
      plan.steps.length === 0 || info.shadow
        ? base
        : withOrchestration(base, orchestrationBlock(decision, info, activeStep?.instructions));
    let result: PrepareStepResult<TOOLS, RUNTIME_CONTEXT>;
    const activeTools = offeredNow.filter((tool): tool is keyof TOOLS & string => Object.hasOwn(guarded, tool));
    if (app === undefined) {
      result = { activeTools, toolChoice: choice };
    } else {
      const { system: _system, ...rest } = app;
      result = { ...rest, activeTools, toolChoice: choice };
    }
    if (instructions !== undefined) result.instructions = instructions;
    // A spent budget: no further model call for the session, whatever the app's prepareStep chose.
    if (decision.budget !== undefined && !decision.shadow) result.model = budgetSpentModel(decision.budget);
    return result;
  };
}

/**
 * The step's tool choice: the orchestration's forced choice wins; the app's choice is kept
 * where the offered tools allow it.
 */
function combineToolChoice<TOOLS extends ToolSet>(
  orchestration: 'auto' | 'none' | 'required',
  app: ToolChoice<TOOLS> | undefined,
  offered: readonly string[],
): ToolChoice<TOOLS> {
  if (offered.length === 0) return 'none';
  const forcesOffered = typeof app === 'object' && offered.includes(app.toolName);
  if (orchestration === 'required') {
    if (forcesOffered) return app;
    const only = offered.length === 1 ? offered[0] : undefined;
    return only === undefined ? 'required' : { type: 'tool', toolName: only as Extract<keyof TOOLS, string> };
  }
  if (app === undefined || typeof app === 'string') return app ?? 'auto';
  return forcesOffered ? app : 'auto';
}

/** The sequence line's path (`a -> b or c`), per sequence of the plan (built once, not per step). */
const sequencePaths = new WeakMap<readonly (readonly string[])[], string>();

function sequencePath(tools: readonly (readonly string[])[]): string {
  let path = sequencePaths.get(tools);
  if (path === undefined) {
    path = tools.map((t) => t.join(' or ')).join(' -> ');
    sequencePaths.set(tools, path);
  }
  return path;
}

/**
 * The block of a step decision the transition shares between turns (see `decideStep`), when the
 * step offers what it decided: it says the same every time, so it is built once.
 */
const sharedBlocks = new WeakMap<StepDecision, string>();

/** What the model needs to know about the active step (`## Orchestration` and its lines). */
function orchestrationBlock(decision: StepDecision, info: StepInfo, stepInstructions: string | undefined): string {
  const shared = Object.isFrozen(decision) && info.allowedTools === decision.allowedTools && info.budget === undefined;
  if (!shared) return buildBlock(info, stepInstructions);
  let block = sharedBlocks.get(decision);
  if (block === undefined) {
    block = buildBlock(info, stepInstructions);
    sharedBlocks.set(decision, block);
  }
  return block;
}

function buildBlock(info: StepInfo, stepInstructions: string | undefined): string {
  // Built by concatenation: this runs before every model step that is not shared.
  let block = '## Orchestration';
  if (info.activeStep !== undefined) {
    block += `\nActive step: ${info.activeStep}${info.stepDescription ? ` (${info.stepDescription})` : ''}`;
    if (stepInstructions) block += `\n${stepInstructions}`;
  }
  const seq = info.sequence;
  if (seq !== undefined) {
    const path = sequencePath(seq.tools);
    block += seq.completed
      ? `\nSequence ${path}: complete.`
      : `\nSequence ${path}: position ${seq.index + 1} of ${seq.length}.`;
    if (seq.expected && !seq.blocked) block += `\nNext required tool: ${seq.expected.join(' or ')}`;
  }
  const budget = info.budget;
  if (budget !== undefined && !info.shadow) {
    const whose = budget.scope === 'session' ? 'this conversation' : `step "${budget.step}"`;
    block += `\nThe token budget of ${whose} is spent (${budget.used} of ${budget.limit} tokens): answer now, briefly, without tools, and say that the budget is spent.`;
  } else {
    block += info.allowedTools.length
      ? `\nAllowed tools now: ${info.allowedTools.join(', ')}`
      : '\nNo tools are available in this step: answer directly.';
  }
  return block;
}

/** The caller's instructions with the orchestration's block appended. */
function withOrchestration(base: Instructions | undefined, block: string): Instructions {
  if (base === undefined) return block;
  if (typeof base === 'string') return `${base}\n\n${block}`;
  // Structured instructions (system messages): append ours as one more system message.
  const list = Array.isArray(base) ? base : [base];
  return [...list, { role: 'system' as const, content: block }];
}
