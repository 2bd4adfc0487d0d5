/**
 * Every refusal the decision core writes, each by one constructor, so a kind of denial says the
 * same thing wherever it is made (the transition, a turn, the gateway). The denials of rules on
 * calls (`rule`, `limit`, `approval-*`) are written where rules are judged (`call-rules.ts`), the
 * step's own (`denied`, `not-allowed`, `sequence`) where steps are (`engine.ts`), and a spent
 * budget's in `budget-status.ts`.
 */
import type { ToolDenial } from './events.js';
import type { MessageRefusal, WaitEnd } from './transition-types.js';

/** The kind of repeat a `duplicate-call` refusal is about. */
export type RepeatKind =
  /** The id was used before in this session (reserved, refused or recorded). */
  | 'session'
  /** A durable turn's replay reuses a recorded id for another tool or other input. */
  | 'other-call'
  /** A durable turn's replay of a call that was refused the first time. */
  | 'refused';

/** The call id was used before: a call id authorizes at most one execution. */
export function duplicateCall(toolCallId: string, kind: RepeatKind = 'session'): ToolDenial {
  const message =
    kind === 'session'
      ? `tool call id "${toolCallId}" was already used in this session; a call id runs at most once`
      : kind === 'other-call'
        ? `tool call id "${toolCallId}" was already used in this turn for another tool or input; a call id runs at most once`
        : `tool call id "${toolCallId}" was refused before`;
  return { code: 'duplicate-call', toolCallId, message };
}

/** The record of an unenforced tool use whose id the session has seen. */
export function duplicateRecord(toolCallId: string): { readonly code: 'duplicate-call'; readonly message: string } {
  return { code: 'duplicate-call', message: `tool call id "${toolCallId}" was already recorded in this session` };
}

/** The agent has no tool of this name. */
export function noSuchTool(tool: string): ToolDenial {
  return { code: 'no-such-tool', message: `"${tool}" is not one of the agent's tools` };
}

/** The orchestration names a tool the agent does not have (`explain`). */
export function unknownToAgent(tool: string): ToolDenial {
  return { code: 'no-such-tool', message: `the orchestration names "${tool}", but the agent has no such tool` };
}

/** The model called a tool it was not shown for this model step. */
export function notOffered(tool: string, offered: readonly string[]): ToolDenial {
  return { code: 'not-offered', offered, message: `"${tool}" was not offered for this model step` };
}

/** A newer user message took the session over: this turn starts no more tools. */
export const SUPERSEDED: ToolDenial = Object.freeze({
  code: 'superseded',
  message: 'a newer user message arrived in this session, so this turn may not start tools; answer without tools',
});

/**
 * The call's answer depends on calls still running in the session (`running`, their tools). With
 * `waited`, the final answer of a shell that stopped waiting; without, a pure decision's.
 */
export function pendingDenial(tool: string, running: readonly string[], waited?: WaitEnd, logFull = false): ToolDenial {
  const names = running.length === 0 ? 'a call' : running.join(', ');
  const them = running.length === 1 ? 'it finishes' : 'they finish';
  const why = logFull
    ? `this session's log of running calls is full (${running.length} running)`
    : `whether "${tool}" may run depends on ${names}, still running in this session`;
  if (waited === undefined) {
    return { code: 'pending', cause: 'running', running, message: `${why}; try again when ${them}` };
  }
  if (waited.cause === 'wait-bound') {
    return {
      code: 'pending',
      cause: 'wait-bound',
      waitedMs: waited.waitedMs,
      running,
      message: `${why}, and did not finish within ${waited.waitedMs} ms; try again when ${them}`,
    };
  }
  return {
    code: 'pending',
    cause: 'queue-full',
    running,
    message: `${why}, and ${waited.queued} calls already wait on this session; try again when ${them}`,
  };
}

/** Too much waits behind the session's running calls to take a user message (or an unenforced record). */
export function sessionBusy(queued: number, limit: number): Extract<MessageRefusal, { code: 'session-busy' }> {
  return {
    code: 'session-busy',
    queued,
    limit,
    message: `${queued} calls and messages already wait behind the calls running in this session (at most ${limit}); try again when they finish`,
  };
}

/** The session belongs to another agent. */
export function sessionOfAnotherAgent(
  sessionId: string,
  owner: string,
  agentId: string,
): Extract<MessageRefusal, { code: 'session-of-another-agent' }> {
  return {
    code: 'session-of-another-agent',
    owner,
    message: `session "${sessionId}" belongs to agent "${owner}"; start a new session for "${agentId}"`,
  };
}
