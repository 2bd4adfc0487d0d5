/**
 * `baton-agents/server`: the HTTP API as a Hono app, and the shapes of what it answers.
 */
export type {
  AgentDetailResponse,
  AgentListResponse,
  AgentSummary,
  ApiErrorBody,
  BatonUIMessage,
  HealthResponse,
  OrchestrationSnapshot,
  SequenceProgress,
  SessionResponse,
  StepSummary,
  ToolStatus,
} from './api-types.js';
export {
  type BatonApp,
  type CreateAppOptions,
  createApp,
  DEFAULT_BODY_LIMIT,
  DEFAULT_MAX_MESSAGES,
  type ServedAgent,
} from './create-app.js';
export { type ErrorResponse, errorResponse, HttpError } from './http-errors.js';
export { SESSION_ID_PATTERN } from './request-schemas.js';
