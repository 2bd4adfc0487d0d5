/**
 * What the engine reports as data: the stateful shells dispatch these to `onEvent`.
 */

/** Why a tool is not allowed right now (shared by `explain` and `tool-rejected`). */
export type ToolDenial =
  | { code: 'denied'; message: string; pattern: string }
  | { code: 'not-allowed'; message: string; allowed: readonly string[] }
  | { code: 'sequence'; message: string; expected: readonly string[]; index: number; blocked: boolean }
  | { code: 'no-such-tool'; message: string }
  | { code: 'not-offered'; message: string; offered: readonly string[] }
  /** The toolCallId was already used: a call id authorizes at most one execution. */
  | { code: 'duplicate-call'; message: string; toolCallId: string }
  /**
   * Whether the call may run depends on calls still running in this session (`running`, their
   * tools). A shell waits for them and asks again; this is the final answer only when the wait
   * passed its bound (`wait-bound`, after `waitedMs`) or too much already waits on the session
   * (`queue-full`). Cause `running`: the answer of a pure decision (`transition`, `explain`) that
   * nobody waited for.
   */
  | {
      code: 'pending';
      message: string;
      running: readonly string[];
      cause: 'running' | 'wait-bound' | 'queue-full';
      waitedMs?: number;
    }
  /** A newer user message arrived in the session: this turn may not start tools any more. */
  | { code: 'superseded'; message: string }
  /** A token budget (the session's or the active step's) is spent. */
  | { code: 'budget'; message: string; scope: 'session' | 'step'; limit: number; used: number }
  /**
   * A rule on calls refused it (SPEC section 9): a `deny` whose condition holds, an `allow` whose
   * condition does not, or a rule that could not be evaluated (`effect` says which rule kind).
   */
  | {
      code: 'rule';
      message: string;
      rule: string;
      effect: 'deny' | 'allow' | 'approve' | 'limit';
      /**
       * Why the rule could not be evaluated, in the evaluator's words (also in `message`, for the
       * model): they may quote the call's input, so telemetry leaves them out. Absent when the
       * rule was evaluated and refused the call.
       */
      evaluationError?: string;
      /** The fact that made the rule unevaluable: unknown, or never set (SPEC section 11). */
      fact?: string;
    }
  /** A limit rule's count is reached (calls still running count). */
  | { code: 'limit'; message: string; rule: string; max: number; per: string; used: number }
  /** An `approve` rule holds and the call has no approval a person gave for it. */
  | { code: 'approval-required'; message: string; rule: string }
  /**
   * The call came with an approval that does not fit it: none was asked for this call id, it was
   * for other arguments, or the session moved on since it was asked.
   */
  | { code: 'approval-invalid'; message: string; rule: string };

/** Events emitted by the engine. */
export type OrchestrationEvent =
  | { type: 'step-changed'; sessionId: string; from: string | undefined; to: string | undefined }
  | { type: 'sequence-advanced'; sessionId: string; step: string; tool: string; index: number; length: number }
  | { type: 'sequence-completed'; sessionId: string; step: string }
  | {
      type: 'sequence-violation';
      sessionId: string;
      step: string;
      tool: string;
      expected: readonly string[];
      index: number;
    }
  | { type: 'sequence-blocked'; sessionId: string; step: string; expected: readonly string[]; index: number }
  /**
   * A turn ended with the active step's sequence unfinished: the model answered (or the loop
   * stopped) before the sequence's last tool. `required` when the step has `requireSequence`;
   * `awaitingApproval` when the turn stopped for a person to approve a tool call.
   */
  | {
      type: 'sequence-incomplete';
      sessionId: string;
      step: string;
      index: number;
      length: number;
      expected: readonly string[];
      required: boolean;
      awaitingApproval: boolean;
    }
  | {
      type: 'sequence-reset';
      sessionId: string;
      step: string;
      from: number;
      reason: 'new_message' | 'out_of_sequence' | 'message_condition';
    }
  | {
      type: 'tool-rejected';
      sessionId: string;
      tool: string;
      step: string | undefined;
      allowedTools: readonly string[];
      reason: ToolDenial;
      /** The refused call's id, when it had one. */
      toolCallId?: string;
    }
  /**
   * A turn decided a step (before each model step): the step chosen and the tools offered (what
   * the step decision allowed; the app may narrow it further). `sequence` is the position of
   * the active step's sequence, when it has one; in shadow mode `wouldOffer` is what
   * enforcement would have offered instead.
   */
  | {
      type: 'tools-offered';
      sessionId: string;
      step: string | undefined;
      tools: readonly string[];
      toolChoice: 'auto' | 'none' | 'required';
      sequence?: { index: number; length: number; expected: readonly string[] | undefined };
      shadow?: true;
      wouldOffer?: readonly string[];
    }
  /**
   * Shadow mode: the call would have been refused for `reason`, and runs because nothing is
   * enforced. Teams read these to see what a template would change before enforcing it.
   */
  | {
      type: 'tool-would-block';
      sessionId: string;
      tool: string;
      toolCallId: string;
      step: string | undefined;
      reason: ToolDenial;
    }
  /** A token budget is spent: no tool is offered (unless in shadow mode, where this is only reported). */
  | {
      type: 'budget-exceeded';
      sessionId: string;
      scope: 'session' | 'step';
      step: string | undefined;
      limit: number;
      used: number;
      shadow: boolean;
    }
  /** A call was authorized and reserved; it runs next. */
  | { type: 'tool-reserved'; sessionId: string; tool: string; toolCallId: string; step: string | undefined }
  /**
   * A reservation ended without a record: the tool threw (`failed`), its outcome is unknown
   * (`abandoned`: cancelled after it was sent, or its answer never came), its lease ran out
   * (`expired`: its process died or it ran too long), or it completed after its lease ended
   * (`late`), when its place may already have gone to another call. Limit rules count an
   * abandoned or expired call: it may have run.
   */
  | {
      type: 'tool-released';
      sessionId: string;
      tool: string | undefined;
      toolCallId: string;
      reason: 'failed' | 'abandoned' | 'expired' | 'late';
    }
  /**
   * A committed call's result set a fact (SPEC section 11); `unknown` says why it is unknown now,
   * when it is (rules that read it refuse).
   */
  | { type: 'fact-set'; sessionId: string; fact: string; tool: string; toolCallId: string; unknown?: string }
  /** A committed call's result raised a label (SPEC section 11): it stays raised in the session. */
  | { type: 'label-raised'; sessionId: string; label: string; tool: string; toolCallId: string }
  /**
   * An `approve` rule holds for a call: a person is asked. The approval is bound to the call id,
   * a digest of its input and the session as it stands now (`rule` says which rule asked).
   */
  | {
      type: 'approval-requested';
      sessionId: string;
      tool: string;
      toolCallId: string;
      step: string | undefined;
      rule: string;
      reason: string;
    }
  /**
   * A person declined a call whose approval the session asked for (an `approve` rule's, or the
   * app's own policy's): the call does not run, and the same call cannot come back approved. A
   * refusal by the template or the operator's policy is `tool-rejected` instead. `rule` names the
   * rule that asked, when one did. The person is whoever the session's client asked (a chat's
   * user, an MCP client's through elicitation); Baton knows no more of them.
   */
  | {
      type: 'approval-declined';
      sessionId: string;
      tool: string;
      toolCallId: string;
      step: string | undefined;
      rule?: string;
    };

/** The `type` of every {@link OrchestrationEvent}. */
export type OrchestrationEventType = OrchestrationEvent['type'];

/** Shared empty list, so that the common case allocates nothing. */
export const NO_EVENTS: readonly OrchestrationEvent[] = Object.freeze([]);

/** `first` then `then`, as one list: either one as it is when the other is empty (most are). */
export function joinEvents(
  first: readonly OrchestrationEvent[],
  then: readonly OrchestrationEvent[],
): readonly OrchestrationEvent[] {
  if (then.length === 0) return first;
  return first.length === 0 ? then : [...first, ...then];
}
