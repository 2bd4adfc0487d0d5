/**
 * Types the inspector shares between its files: the API shapes (type-only imports from the
 * server, never its code) and the UI message type of a chat with Baton's data parts.
 */
import type { AgentDetailResponse, BatonUIMessage, OrchestrationSnapshot } from '../../src/server/api-types.js';

export type { LoggedEvent } from '../../src/core/session-log.js';
export type {
  AgentDetailResponse,
  AgentSummary,
  OrchestrationSnapshot,
  SequenceProgress,
  SessionEventEntry,
  SessionEventsResponse,
  SessionResponse,
  ToolStatus,
} from '../../src/server/api-types.js';

/** A chat message as useChat holds it: metadata names the session, data parts carry snapshots. */
export type InspectorMessage = BatonUIMessage;

/** The step graph of an agent, as `GET /api/agents/:agentId` returns it. */
export type StepGraph = AgentDetailResponse['graph'];

/** One entry of the turn timeline: the orchestration as it was before a model step. */
export interface TimelineEntry {
  /** Arrival order within the turn, for keys. */
  seq: number;
  snapshot: OrchestrationSnapshot;
}
