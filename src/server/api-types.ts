/**
 * The JSON shapes of the HTTP API, shared by the server, its tests and the web inspector
 * (which imports these types only, never server code).
 */
import type { OrchestrationSnapshot, OrchestrationUIMessage } from '../ai-sdk/orchestration-snapshot.js';
import type { ToolDenial } from '../core/events.js';
import type { TemplateGraph } from '../core/template-graph.js';
import type { TemplateIssue } from '../core/template-issues.js';

/** Every error response: `{ error: { code, message, path? } }`. */
export interface ApiErrorBody {
  error: {
    /** Stable, kebab-case: `invalid-json`, `unknown-agent`, `store-unavailable`, ... */
    code: string;
    message: string;
    /** Where in the request the problem is: `body.messages[2].parts`, `header.x-orchestration-state`. */
    path?: string;
  };
}

/** One agent in `GET /api/agents`. */
export interface AgentSummary {
  id: string;
  name: string;
  description: string;
  tools: string[];
  /** The step names, in configuration order. */
  steps: string[];
  defaultStep: string | null;
}

/** `GET /api/agents`. */
export interface AgentListResponse {
  agents: AgentSummary[];
}

/** A step as `GET /api/agents/:agentId` describes it. */
export interface StepSummary {
  name: string;
  description: string | null;
  isDefault: boolean;
  /** The conditions as configured (type, value, ...). */
  conditions: Record<string, unknown>[];
  availableTools: { allowed: string[]; denied: string[] } | null;
  /** Positions of the required sequence; each position lists its alternative tools. */
  sequence: string[][];
  resetSequenceOn: unknown[];
}

/** `GET /api/agents/:agentId`. */
export interface AgentDetailResponse extends AgentSummary {
  /** The template as loaded (JSON). */
  template: Record<string, unknown>;
  /** Validation warnings of the template (errors would have stopped it from loading). */
  issues: TemplateIssue[];
  stepDetails: StepSummary[];
  graph: TemplateGraph;
  /** The same graph as Mermaid `flowchart` source. */
  mermaid: string;
}

export type {
  OrchestrationSnapshot,
  SequenceIncompleteSummary,
  SequenceProgress,
} from '../ai-sdk/orchestration-snapshot.js';

/** One tool in a session view: allowed now, or why not. */
export interface ToolStatus {
  tool: string;
  allowed: boolean;
  reason?: ToolDenial;
  /**
   * Rules on calls whose condition depends on a call's input, so that they may still refuse a
   * call of the tool or ask a person to approve it (`effect`: `deny`, `allow`, `approve`, `limit`),
   * with the facts (`facts`, by name) and labels (`labels: true`) the condition reads.
   */
  rules?: { rule: string; effect: string; reason: string; facts?: string[]; labels?: true }[];
}

/** `GET /api/sessions/:sessionId` and `POST /api/sessions/:sessionId/reset`. */
export interface SessionResponse {
  sessionId: string;
  agentId: string;
  state: OrchestrationSnapshot;
  tools: ToolStatus[];
  createdAt: number;
  lastAccessed: number;
}

/**
 * One decision of a session's event log (`GET /api/sessions/:sessionId/events`): the event, and
 * where the session stood right after it, with every tool allowed then or why not.
 */
export interface SessionEventEntry {
  /** Position in the session's log: 1 for its first event, one more for each next. */
  seq: number;
  /** When it happened, in milliseconds since the epoch. */
  at: number;
  /** The user turn it belongs to: 1 for the session's first user message, one more for each new one. */
  turn: number;
  /** The event as `onEvent` receives it, without its `sessionId` (`type` says which). */
  event: { type: string } & Record<string, unknown>;
  /** The session right after the event (`stepNumber` null, `final` false). */
  state: OrchestrationSnapshot;
  /** Every tool of the agent at that point: allowed, or why not. */
  tools: ToolStatus[];
}

/** `GET /api/sessions/:sessionId/events?after=<seq>&limit=<n>`. */
export interface SessionEventsResponse {
  sessionId: string;
  agentId: string;
  /** Most events the session keeps; the oldest go first. */
  capacity: number;
  /** Events dropped so far to stay within `capacity` (their seqs are 1 to `dropped`). */
  dropped: number;
  /** The seq to pass as `after` to fetch the events after these (unchanged when there are none). */
  nextAfter: number;
  /** In order, oldest first: at most `limit`, every one with a seq over `after`. */
  events: SessionEventEntry[];
}

/** `GET /healthz`. */
export interface HealthResponse {
  ok: boolean;
  store: string;
  agents: number;
  error?: string;
}

/** The chat's UI message type: metadata names the session, and `data-orchestration` parts carry snapshots. */
export type BatonUIMessage = OrchestrationUIMessage<{ sessionId: string; agentId: string }>;
