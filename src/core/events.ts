/**
 * What the engine reports as data: the stateful shells dispatch these to `onEvent`.
 */

/** Why a tool is not allowed right now (shared by `explain` and `tool-rejected`). */
export type ToolDenial =
  | { code: 'denied'; message: string; pattern: string }
  | { code: 'not-allowed'; message: string; allowed: readonly string[] }
  | { code: 'sequence'; message: string; expected: readonly string[]; index: number; blocked: boolean }
  | { code: 'no-such-tool'; message: string }
  | { code: 'not-offered'; message: string; offered: readonly string[] };

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
    };

/** The `type` of every {@link OrchestrationEvent}. */
export type OrchestrationEventType = OrchestrationEvent['type'];

/** Shared empty list, so that the common case allocates nothing. */
export const NO_EVENTS: readonly OrchestrationEvent[] = Object.freeze([]);
