/**
 * Orchestration snapshots: what the chat stream's `data-orchestration` part and the session
 * routes report, built from the engine's own views so the two never disagree.
 */
import type { StepInfo } from '../ai-sdk/orchestrate.js';
import type { OrchestrationPlan } from '../core/compile.js';
import type { Explanation } from '../core/engine.js';
import { type SessionLogEntry, stateAtEntry } from '../core/session-log.js';
import type { OrchestrationState } from '../core/state.js';
import { type BudgetStatus, shadowOf } from '../core/transition.js';
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

/** What a session at rest needs besides its explanation: the agent's plan and tools. */
export interface RestingContext {
  plan: OrchestrationPlan;
  /** The agent's tool names, as the explanation got them. */
  agentTools: readonly string[];
}

/**
 * Shadow mode and a spent budget of a session at rest, as the next step decision would see them
 * (`decideStep`): a spent budget offers no tool, shadow mode offers every agent tool and reports
 * what enforcement would offer. Without this a turn's final part, and the session routes, said
 * "enforced" where the stream's parts had said "shadow", and "every tool" where they had said
 * "budget spent, none".
 */
function restingDecision(
  state: OrchestrationState,
  explanation: Explanation,
  { plan, agentTools }: RestingContext,
): { allowedTools: string[]; shadow: boolean; budget: BudgetStatus | undefined } {
  // The explanation chose the step for this state (as a new model step would): judge by that one.
  const shadow = shadowOf(plan, { ...state, activeStep: explanation.activeStep });
  // The explanation already offers nothing while a budget is spent (engine's explainTools).
  return { allowedTools: shadow ? [...agentTools] : [...explanation.allowedTools], shadow, budget: explanation.budget };
}

/** The snapshot of a session at rest (after a turn, in the session routes and the event log). */
export function restingSnapshot(
  agentId: string,
  state: OrchestrationState,
  explanation: Explanation,
  final: boolean,
  context: RestingContext,
): OrchestrationSnapshot {
  const decision = restingDecision(state, explanation, context);
  const snapshot: OrchestrationSnapshot = {
    sessionId: state.sessionId,
    agentId,
    stepNumber: null,
    activeStep: explanation.activeStep ?? null,
    stepDescription: explanation.stepDescription ?? null,
    sequence: sequenceProgress(explanation.sequence),
    allowedTools: decision.allowedTools,
    recentlyUsedTools: [...state.recentlyUsedTools],
    tokenUsage: { ...state.cumulativeTokenUsage },
    final,
  };
  if (decision.shadow) {
    snapshot.shadow = { wouldOffer: decision.budget === undefined ? [...explanation.allowedTools] : [] };
  }
  if (decision.budget) snapshot.budget = { ...decision.budget, step: decision.budget.step ?? null };
  return snapshot;
}

/** The body of the session routes. */
export function sessionResponse(
  agentId: string,
  state: OrchestrationState,
  explanation: Explanation,
  context: RestingContext,
): SessionResponse {
  return {
    sessionId: state.sessionId,
    agentId,
    state: restingSnapshot(agentId, state, explanation, true, context),
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
  context: RestingContext,
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
      state: restingSnapshot(agentId, at, explanation, false, context),
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
