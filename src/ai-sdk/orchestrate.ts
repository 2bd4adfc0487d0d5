/**
 * `orchestrate()`: orchestration for one turn of an AI SDK 7 tool loop. It returns what to
 * spread into `streamText`, `generateText` or `ToolLoopAgent`: a `prepareStep` that offers
 * exactly the allowed tools before every model step, tools whose `execute` enforces SPEC
 * section 7 (a tool that is not allowed never runs, whatever the model does), and an
 * `onStepEnd` that adds each step's token usage to the session.
 */
import {
  type Instructions,
  type ModelMessage,
  NoSuchToolError,
  type PrepareStepFunction,
  type StepResult,
  type ToolSet,
} from 'ai';
import type { OrchestrationSource } from '../core/compile.js';
import type { StepView } from '../core/engine.js';
import { BatonError } from '../core/errors.js';
import type { ToolDenial } from '../core/events.js';
import type { ChatMessage } from '../core/messages.js';
import type { AIOrchestrationState } from '../core/state.js';
import { toAIState } from '../core/state.js';
import type { OrchestrationManager } from '../orchestration/orchestration-manager.js';
import { Turn } from '../orchestration/turn.js';

/** What the orchestration looks like before one model step. */
export interface StepInfo {
  /** The AI SDK's step number (0 for the first model call of the turn). */
  readonly stepNumber: number;
  readonly activeStep: string | undefined;
  readonly stepDescription: string | undefined;
  readonly sequence: StepView['sequence'];
  /** The tools offered to the model for this step. */
  readonly allowedTools: readonly string[];
  readonly state: AIOrchestrationState;
}

/** Options of {@link orchestrate}. */
export interface OrchestrateOptions<TOOLS extends ToolSet> {
  manager: OrchestrationManager;
  /** The template, or its `orchestration` block (the same object every turn, so its plan is reused). */
  config: OrchestrationSource;
  sessionId: string;
  /** Every tool of the agent; the ones not allowed are hidden and refused. */
  tools: TOOLS;
  /**
   * The conversation, for message conditions. Default: the `initialMessages` the AI SDK passes
   * to `prepareStep` (the messages of the call).
   */
  messages?: readonly ChatMessage[] | readonly ModelMessage[];
  /** Called before every model step with the step's orchestration (for UIs and logs). */
  onStep?: (info: StepInfo) => void | PromiseLike<void>;
  /**
   * Receives failures that the AI SDK would otherwise swallow (a store write in `onStepEnd`,
   * an `onStep` callback that threw). Default: `console.error`. They are also kept, and
   * {@link Orchestration.settled} rejects with the first one.
   */
  onError?: (error: unknown) => void;
}

/** What {@link orchestrate} returns: spread it into the AI SDK call. */
export interface Orchestration<TOOLS extends ToolSet> {
  /** The agent's tools, each guarded by the orchestration. */
  readonly tools: TOOLS;
  readonly prepareStep: PrepareStepFunction<TOOLS>;
  readonly onStepEnd: (step: StepResult<TOOLS>) => Promise<void>;
  /**
   * Writes what the turn still holds (the last tool's completion, the last step's usage).
   * Spread it as the AI SDK's `onEnd`, or call {@link settled} after the stream.
   */
  readonly onEnd: () => Promise<void>;
  /** The orchestration of the latest model step, once one has started. */
  lastStep(): StepInfo | undefined;
  /** Resolves when every state write of the turn has finished; rejects with the first failure. */
  settled(): Promise<void>;
}

/** Thrown inside a guarded tool's `execute` when the call is refused; the model sees its message. */
export class ToolRejectedError extends BatonError {
  /** The tool that was refused. */
  readonly tool: string;
  /** Why it was refused. */
  readonly reason: ToolDenial;
  /** The tools the model may call instead. */
  readonly allowedTools: readonly string[];

  constructor(tool: string, reason: ToolDenial, allowedTools: readonly string[]) {
    const instead = allowedTools.length
      ? `Allowed tools now: ${allowedTools.join(', ')}.`
      : 'No tool is allowed now; answer without tools.';
    super('tool-rejected', `Tool "${tool}" was not run: ${reason.message}. ${instead}`);
    this.name = 'ToolRejectedError';
    this.tool = tool;
    this.reason = reason;
    this.allowedTools = allowedTools;
  }

  /** True for a {@link ToolRejectedError} from any copy of the package. */
  static override isInstance(error: unknown): error is ToolRejectedError {
    return BatonError.isInstance(error) && error.code === 'tool-rejected';
  }
}

/** Orchestrates one turn of an AI SDK tool loop (see the module comment). */
export function orchestrate<TOOLS extends ToolSet>(options: OrchestrateOptions<TOOLS>): Orchestration<TOOLS> {
  const { manager, sessionId } = options;
  const toolNames = Object.keys(options.tools);
  const turn = new Turn({
    manager,
    config: options.config,
    sessionId,
    agentTools: toolNames,
    messages: options.messages as readonly ChatMessage[] | undefined,
  });
  const report = options.onError ?? ((error: unknown) => console.error('[baton] orchestration failure:', error));
  const failures: unknown[] = [];
  const fail = (error: unknown) => {
    failures.push(error);
    report(error);
  };
  let offered: readonly string[] = [];
  let last: StepInfo | undefined;
  // Tool calls of one step run one after another, in the order the model emitted them, so
  // each is decided on the state the previous one left: deterministic, whatever the SDK's
  // tool concurrency.
  let queue: Promise<unknown> = Promise.resolve();
  const pending = new Set<Promise<unknown>>();
  const track = <T>(promise: Promise<T>): Promise<T> => {
    pending.add(promise);
    promise.then(
      () => pending.delete(promise),
      () => pending.delete(promise),
    );
    return promise;
  };
  const serial = <T>(task: () => Promise<T>): Promise<T> => {
    const run = queue.then(task);
    queue = run.catch(() => undefined);
    return track(run);
  };
  const flush = () =>
    track(turn.flush()).then(
      () => undefined,
      (error: unknown) => fail(error),
    );

  const guarded = {} as Record<string, unknown>;
  for (const [name, original] of Object.entries(options.tools)) {
    const execute = original.execute;
    if (typeof execute !== 'function') {
      guarded[name] = original; // a client-side tool: the loop stops at it, nothing runs here
      continue;
    }
    guarded[name] = {
      ...original,
      execute: (input: unknown, execution: { toolCallId: string }) =>
        serial(async () => {
          // Decided and reserved in one atomic update: a concurrent turn sees the reservation.
          const decision = await turn.request(name, execution.toolCallId, offered);
          if (!decision.allowed) throw new ToolRejectedError(name, decision.reason, decision.allowedTools);
          let output: unknown;
          try {
            output = await execute.call(original, input as never, execution as never);
          } catch (error) {
            // A tool that throws is not recorded: its reservation is released.
            turn.failed(execution.toolCallId);
            throw error;
          }
          turn.completed(execution.toolCallId);
          return output;
        }),
    };
  }

  const prepareStep = (async (step: {
    stepNumber: number;
    initialInstructions: Instructions | undefined;
    initialMessages: ModelMessage[];
  }) => {
    if (pending.size > 0) await Promise.allSettled([...pending]);
    turn.useMessages(step.initialMessages as readonly ChatMessage[]);
    const { decision, state } = await turn.stepStarted();
    const activeStep = turn.plan.step(decision.activeStep);
    offered = decision.allowedTools;
    last = {
      stepNumber: step.stepNumber,
      activeStep: decision.activeStep,
      stepDescription: activeStep?.description,
      sequence: decision.sequence,
      allowedTools: decision.allowedTools,
      state: toAIState(state),
    };
    if (options.onStep) {
      try {
        await options.onStep(last);
      } catch (error) {
        fail(error);
      }
    }
    // With no steps there is nothing to tell the model: leave the caller's instructions alone.
    const instructions =
      turn.plan.steps.length === 0
        ? step.initialInstructions
        : withOrchestration(step.initialInstructions, last, activeStep?.instructions);
    return decision.allowedTools.length === 0
      ? { activeTools: [], toolChoice: 'none' as const, instructions }
      : { activeTools: [...decision.allowedTools], instructions };
  }) as unknown as PrepareStepFunction<TOOLS>;

  const onStepEnd = async (step: StepResult<TOOLS>) => {
    // Calls the SDK refused before execute (not active, unknown, bad input) never reached our
    // guard; report them as rejections all the same.
    for (const call of step.toolCalls) {
      const invalid = call as { invalid?: boolean; error?: unknown; toolName: string; toolCallId: string };
      if (invalid.invalid && NoSuchToolError.isInstance(invalid.error)) {
        const known = toolNames.includes(invalid.toolName);
        const reason: ToolDenial = known
          ? { code: 'not-offered', offered, message: `"${invalid.toolName}" was not offered for this model step` }
          : { code: 'no-such-tool', message: `"${invalid.toolName}" is not one of the agent's tools` };
        manager.emit({
          type: 'tool-rejected',
          sessionId,
          tool: invalid.toolName,
          toolCallId: invalid.toolCallId,
          step: last?.activeStep,
          allowedTools: offered,
          reason,
        });
      }
    }
    if (pending.size > 0) await Promise.allSettled([...pending]);
    if (step.usage) turn.usage(step.usage);
    // A step without tool calls ends the turn: write what waits. Otherwise it rides on the
    // next step's first tool request (or on onEnd / settled()).
    if (step.toolCalls.length === 0) await flush();
  };

  return {
    tools: guarded as TOOLS,
    prepareStep,
    onStepEnd,
    onEnd: flush,
    lastStep: () => last,
    async settled() {
      await Promise.allSettled([...pending]);
      if (turn.dirty) await flush();
      if (failures.length > 0) throw failures[0];
    },
  };
}

/** The caller's instructions plus what the model needs to know about the active step. */
function withOrchestration(
  base: Instructions | undefined,
  info: StepInfo,
  stepInstructions: string | undefined,
): Instructions {
  const lines: string[] = ['## Orchestration'];
  if (info.activeStep !== undefined) {
    lines.push(`Active step: ${info.activeStep}${info.stepDescription ? ` (${info.stepDescription})` : ''}`);
    if (stepInstructions) lines.push(stepInstructions);
  }
  const seq = info.sequence;
  if (seq !== undefined) {
    const path = seq.tools.map((t) => t.join(' or ')).join(' -> ');
    lines.push(
      seq.completed ? `Sequence ${path}: complete.` : `Sequence ${path}: position ${seq.index + 1} of ${seq.length}.`,
    );
    if (seq.expected && !seq.blocked) lines.push(`Next required tool: ${seq.expected.join(' or ')}`);
  }
  lines.push(
    info.allowedTools.length
      ? `Allowed tools now: ${info.allowedTools.join(', ')}`
      : 'No tools are available in this step: answer directly.',
  );
  const block = lines.join('\n');
  if (base === undefined) return block;
  if (typeof base === 'string') return `${base}\n\n${block}`;
  // Structured instructions (system messages): append ours as one more system message.
  const list = Array.isArray(base) ? base : [base];
  return [...list, { role: 'system' as const, content: block }];
}
