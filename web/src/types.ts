/**
 * Types the inspector shares between its files: the API shapes (type-only imports from the
 * server, never its code) and the UI message type of a chat with Baton's data parts.
 */
import type { UIMessage } from 'ai';
import type { AgentDetailResponse, OrchestrationSnapshot } from '../../src/server/api-types.js';

export type {
  AgentDetailResponse,
  AgentSummary,
  OrchestrationSnapshot,
  SequenceProgress,
  SessionResponse,
  ToolStatus,
} from '../../src/server/api-types.js';

/** The data parts Baton's chat stream carries: `data-orchestration`. */
// A type alias, not an interface: only aliases satisfy the SDK's `Record<string, unknown>` bound.
export type InspectorDataParts = {
  orchestration: OrchestrationSnapshot;
};

/** A chat message as useChat holds it. */
export type InspectorMessage = UIMessage<unknown, InspectorDataParts>;

/** The step graph of an agent, as `GET /api/agents/:agentId` returns it. */
export type StepGraph = AgentDetailResponse['graph'];

/** One entry of the turn timeline: the orchestration as it was before a model step. */
export interface TimelineEntry {
  /** Arrival order within the turn, for keys. */
  seq: number;
  snapshot: OrchestrationSnapshot;
}
