/**
 * What the session routes report: a session at rest as the chat stream's final part shows it
 * (`ai-sdk/orchestration-snapshot.ts` builds both), with every tool allowed or why not.
 */
import { restingSnapshot } from '../ai-sdk/orchestration-snapshot.js';
import { type SessionLogEntry, stateAtEntry } from '../core/session-log.js';
import type { OrchestrationState } from '../core/state.js';
import type { Explanation } from '../core/transition.js';
import type { SessionEventEntry, SessionEventsResponse, SessionResponse, ToolStatus } from './api-types.js';

/** The body of the session routes. */
export function sessionResponse(agentId: string, state: OrchestrationState, explanation: Explanation): SessionResponse {
  return {
    sessionId: state.sessionId,
    agentId,
    state: restingSnapshot(agentId, state, explanation, true),
    tools: toolStatuses(explanation),
    createdAt: state.createdAt,
    lastAccessed: state.lastAccessed,
  };
}

/**
 * Every tool as enforcement decides it (in shadow mode too: its reasons are what enforcement
 * would refuse; a spent budget refuses every tool the step would allow).
 */
function toolStatuses(explanation: Explanation): ToolStatus[] {
  return explanation.tools.map((tool) => {
    const status: ToolStatus = tool.reason
      ? { tool: tool.tool, allowed: tool.allowed, reason: tool.reason }
      : { tool: tool.tool, allowed: true };
    if (tool.rules !== undefined) {
      status.rules = tool.rules.map(({ facts, ...rule }) =>
        facts === undefined ? rule : { ...rule, facts: [...facts] },
      );
    }
    return status;
  });
}

/**
 * The body of `GET /api/sessions/:id/events`: the session's log `entries` (as its store keeps
 * them, oldest first) after seq `after` (at most `limit`), each with the state it left and every
 * tool allowed then or why not, explained by `explain` (the same explanation as the session
 * routes').
 */
export function sessionEventsResponse(
  agentId: string,
  state: OrchestrationState,
  entries: readonly SessionLogEntry[],
  explain: (state: OrchestrationState) => Explanation,
  page: { after: number; limit: number },
): SessionEventsResponse {
  const events: SessionEventEntry[] = [];
  for (const entry of entries) {
    if (entry.seq <= page.after) continue;
    if (events.length === page.limit) break;
    const at = stateAtEntry(state, entry);
    const explanation = explain(at);
    events.push({
      seq: entry.seq,
      at: entry.at,
      turn: entry.turn,
      event: { ...entry.event },
      // The entry's own facts: a value it left out shows as left out, not as unknown.
      state: restingSnapshot(agentId, at, explanation, false, entry.facts),
      tools: toolStatuses(explanation),
    });
  }
  const first = entries[0]?.seq;
  return {
    sessionId: state.sessionId,
    agentId,
    capacity: state.log?.capacity ?? 0,
    // Every entry before the oldest kept was dropped (all of them, when none is kept).
    dropped: first === undefined ? (state.log?.seq ?? 0) : first - 1,
    nextAfter: events.at(-1)?.seq ?? page.after,
    events,
  };
}
