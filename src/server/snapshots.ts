/**
 * Orchestration snapshots: what the chat stream's `data-orchestration` part and the session
 * routes report, built from the engine's own views so the two never disagree.
 */
import type { StepInfo } from '../ai-sdk/orchestrate.js';
import type { OrchestrationPlan } from '../core/compile.js';
import type { Explanation } from '../core/engine.js';
import { type SessionLogEntry, stateAtEntry } from '../core/session-log.js';
import type { AIOrchestrationState, OrchestrationState } from '../core/state.js';
import { budgetOf, shadowOf } from '../core/transition.js';
import type {
  OrchestrationSnapshot,
  SequenceProgress,
  SessionEventEntry,
  SessionEventsResponse,
  SessionResponse,
  ToolStatus,
} from './api-types.js';

function sequenceProgress(sequence: Explanation['sequence']): SequenceProgress | null {
  if (sequence === undefined) return null;
  return {
    tools: sequence.tools.map((position) => [...position]),
    index: sequence.index,
    length: sequence.length,
    completed: sequence.completed,
    blocked: sequence.blocked,
  };
}

/** The snapshot sent before a model step, from what the model loop reported for it. */
export function stepSnapshot(agentId: string, info: StepInfo): OrchestrationSnapshot {
  return {
    sessionId: info.state.sessionId,
    agentId,
    stepNumber: info.stepNumber,
    activeStep: info.activeStep ?? null,
    stepDescription: info.stepDescription ?? null,
    sequence: sequenceProgress(info.sequence),
    allowedTools: [...info.allowedTools],
    recentlyUsedTools: [...info.state.recentlyUsedTools],
    tokenUsage: { ...info.state.cumulativeTokenUsage },
    final: false,
    ...(info.shadow ? { shadow: { wouldOffer: [...(info.wouldOffer ?? [])] } } : {}),
    ...(info.budget ? { budget: { ...info.budget, step: info.budget.step ?? null } } : {}),
  };
}

/** The snapshot of a session at rest (after a turn, or for the session routes). */
export function restingSnapshot(
  agentId: string,
  state: OrchestrationState | AIOrchestrationState,
  explanation: Explanation,
  final: boolean,
): OrchestrationSnapshot {
  return {
    sessionId: state.sessionId,
    agentId,
    stepNumber: null,
    activeStep: explanation.activeStep ?? null,
    stepDescription: explanation.stepDescription ?? null,
    sequence: sequenceProgress(explanation.sequence),
    allowedTools: [...explanation.allowedTools],
    recentlyUsedTools: [...state.recentlyUsedTools],
    tokenUsage: { ...state.cumulativeTokenUsage },
    final,
  };
}

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

function toolStatuses(explanation: Explanation): ToolStatus[] {
  return explanation.tools.map((tool) =>
    tool.reason ? { tool: tool.tool, allowed: tool.allowed, reason: tool.reason } : { tool: tool.tool, allowed: true },
  );
}

/**
 * The body of `GET /api/sessions/:id/events`: the session's log `entries` (as its store keeps
 * them, oldest first) after seq `after` (at most `limit`), each with the state it left and every
 * tool allowed then or why not, explained by `explain` (the same explanation as the session
 * routes').
 */
export function sessionEventsResponse(
  agentId: string,
  plan: OrchestrationPlan,
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
    const snapshot = restingSnapshot(agentId, at, explanation, false);
    if (shadowOf(plan, at)) snapshot.shadow = { wouldOffer: [...explanation.allowedTools] };
    const budget = budgetOf(plan, at);
    if (budget) snapshot.budget = { ...budget, step: budget.step ?? null };
    events.push({
      seq: entry.seq,
      at: entry.at,
      turn: entry.turn,
      event: { ...entry.event },
      state: snapshot,
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
