/**
 * The inspector's HTTP client for the Baton API. Every failure becomes an {@link ApiError}
 * carrying the server's `{error: {code, message, path?}}`, so the UI can show it as it is.
 *
 * Every URL is relative to the page (`api/agents`, not `/api/agents`), so the inspector works
 * wherever it is served: at `/`, or under a prefix such as `/baton/` behind a proxy or mounted in
 * another app, where it talks to `/baton/api/...`.
 */
import type {
  AgentDetailResponse,
  AgentListResponse,
  ApiErrorBody,
  SessionEventsResponse,
  SessionResponse,
} from '../../src/server/api-types.js';

/** An error answer of the API (or a network failure, with code `network`). */
export class ApiError extends Error {
  readonly code: string;
  readonly status: number;
  readonly path: string | undefined;

  constructor(code: string, message: string, status: number, path?: string) {
    super(message);
    this.name = 'ApiError';
    this.code = code;
    this.status = status;
    this.path = path;
  }
}

function isErrorBody(value: unknown): value is ApiErrorBody {
  if (typeof value !== 'object' || value === null || !('error' in value)) return false;
  const error = (value as { error: unknown }).error;
  return (
    typeof error === 'object' &&
    error !== null &&
    typeof (error as { code?: unknown }).code === 'string' &&
    typeof (error as { message?: unknown }).message === 'string'
  );
}

/** Turns a response body (JSON error or anything else) and status into an {@link ApiError}. */
export function apiErrorFromBody(text: string, status: number): ApiError {
  try {
    const parsed: unknown = JSON.parse(text);
    if (isErrorBody(parsed)) return new ApiError(parsed.error.code, parsed.error.message, status, parsed.error.path);
  } catch {
    // Not JSON (a proxy's HTML page, a plain-text error): show it as it is, below.
  }
  return new ApiError(`http-${status}`, text.trim() || `HTTP ${status}`, status);
}

/** Turns anything thrown (by fetch, by useChat's transport) into an {@link ApiError}. */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof Error) {
    // useChat's transport throws an APICallError whose message is the response body.
    const status = (error as { statusCode?: unknown }).statusCode;
    if (typeof status === 'number') return apiErrorFromBody(error.message, status);
    const fromJson = apiErrorFromBody(error.message, 0);
    if (!fromJson.code.startsWith('http-')) return fromJson;
    return new ApiError('network', error.message, 0);
  }
  return new ApiError('unknown', String(error), 0);
}

/** Header carrying a session's signed state when the server is stateless (`baton serve --stateless`). */
export const STATE_HEADER = 'x-orchestration-state';

/** A response body with the state token the server sent back, if any. */
export interface WithToken<T> {
  data: T;
  stateToken: string | undefined;
}

async function request<T>(path: string, init: RequestInit = {}, stateToken?: string): Promise<WithToken<T>> {
  const headers = new Headers(init.headers);
  headers.set('accept', 'application/json');
  if (stateToken) headers.set(STATE_HEADER, stateToken);
  let response: Response;
  try {
    response = await fetch(path, { ...init, headers });
  } catch (error) {
    throw new ApiError(
      'network',
      `Cannot reach the server: ${error instanceof Error ? error.message : String(error)}`,
      0,
    );
  }
  if (!response.ok) throw apiErrorFromBody(await response.text(), response.status);
  const data = (response.status === 204 ? undefined : await response.json()) as T;
  return { data, stateToken: response.headers.get(STATE_HEADER) ?? undefined };
}

/**
 * True when the server is stateless (`GET /healthz` reports store `stateless`): its sessions can
 * only be read with the state token a turn's final part brings. False when it cannot tell.
 */
export async function isStatelessServer(): Promise<boolean> {
  try {
    const response = await fetch('healthz', { headers: { accept: 'application/json' } });
    const health = (await response.json()) as { store?: unknown };
    return health.store === 'stateless';
  } catch {
    return false;
  }
}

/** `GET /api/agents`. */
export async function listAgents(): Promise<AgentListResponse> {
  return (await request<AgentListResponse>('api/agents')).data;
}

/** `GET /api/agents/:agentId`. */
export async function getAgent(agentId: string): Promise<AgentDetailResponse> {
  return (await request<AgentDetailResponse>(`api/agents/${encodeURIComponent(agentId)}`)).data;
}

/** `GET /api/sessions/:sessionId`; `stateToken` is needed (only) by a stateless server. */
export async function getSession(sessionId: string, stateToken?: string): Promise<SessionResponse> {
  return (await request<SessionResponse>(`api/sessions/${encodeURIComponent(sessionId)}`, {}, stateToken)).data;
}

/** `POST /api/sessions/:sessionId/reset`; a stateless server answers with the new token. */
export function resetSession(sessionId: string, stateToken?: string): Promise<WithToken<SessionResponse>> {
  return request(`api/sessions/${encodeURIComponent(sessionId)}/reset`, { method: 'POST' }, stateToken);
}

/** `DELETE /api/sessions/:sessionId`. */
export async function deleteSession(sessionId: string, stateToken?: string): Promise<void> {
  await request<undefined>(`api/sessions/${encodeURIComponent(sessionId)}`, { method: 'DELETE' }, stateToken);
}

/**
 * `GET /api/sessions/:sessionId/events`: the session's logged decisions after seq `after`, at
 * most `limit`. A server that keeps no event log answers 409 `not-available`.
 */
export async function getSessionEvents(
  sessionId: string,
  after: number,
  limit: number,
  stateToken?: string,
): Promise<SessionEventsResponse> {
  const query = new URLSearchParams({ after: String(after), limit: String(limit) });
  const path = `api/sessions/${encodeURIComponent(sessionId)}/events?${query}`;
  return (await request<SessionEventsResponse>(path, {}, stateToken)).data;
}
