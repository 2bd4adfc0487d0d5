/**
 * The errors `orchestrate()` raises: a refused call inside a guarded tool's `execute`, and a
 * wiring mistake (the AI SDK call was not given what `orchestrate()` returned).
 */
import { BatonError, InvalidArgumentError } from '../core/errors.js';
import type { ToolDenial } from '../core/events.js';
import { rejectionMessage } from '../orchestration/rejection-message.js';

/** Thrown inside a guarded tool's `execute` when the call is refused; the model sees its message. */
export class ToolRejectedError extends BatonError {
  /** The tool that was refused. */
  readonly tool: string;
  /** Why it was refused. */
  readonly reason: ToolDenial;
  /** The tools the model may call instead. */
  readonly allowedTools: readonly string[];

  constructor(tool: string, reason: ToolDenial, allowedTools: readonly string[]) {
    super('tool-rejected', rejectionMessage(tool, reason, allowedTools));
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

/** What was wired wrong: see {@link OrchestrationWiringError}. */
export type WiringProblem = 'tools' | 'prepareStep' | 'toolApproval' | 'onStepEnd';

/**
 * The AI SDK call was not given what `orchestrate()` returned: tools that are not the guarded
 * ones, or a hook of the orchestration replaced by another (an option written after the
 * spread). The message says how to fix it.
 */
export class OrchestrationWiringError extends InvalidArgumentError {
  /** Which part of the orchestration is missing from the call. */
  readonly wiring: WiringProblem;

  constructor(wiring: WiringProblem, message: string) {
    super(wiring, message);
    this.name = 'OrchestrationWiringError';
    this.wiring = wiring;
  }

  /** True for an {@link OrchestrationWiringError} from any copy of the package. */
  static override isInstance(error: unknown): error is OrchestrationWiringError {
    return InvalidArgumentError.isInstance(error) && typeof (error as { wiring?: unknown }).wiring === 'string';
  }
}

/** How to wire the orchestration: said by every wiring error. */
export const SPREAD_LAST =
  'pass your own tools, prepareStep, toolApproval, onStepEnd, onEnd, activeTools and toolChoice to orchestrate() and spread its result last: streamText({ model, messages, ...orchestration })';
