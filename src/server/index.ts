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
  DEFAULT_MAX_QUEUED_TURNS,
  DEFAULT_MAX_TURNS,
  type ServedAgent,
  type StatelessOptions,
} from './create-app.js';
export {
  type ErrorResponse,
  type ErrorStatus,
  errorResponse,
  HTTP_STATUS_BY_CODE,
  HttpError,
  httpStatusOf,
} from './http-errors.js';
export { SESSION_ID_PATTERN } from './request-schemas.js';
