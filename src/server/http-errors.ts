/**
 * One table from errors to HTTP responses, so that every route answers a failure the same
 * way: `{ error: { code, message, path? } }` with the status the error deserves.
 */
import { AISDKError } from 'ai';
import { BatonError, InvalidArgumentError, StoreConflictError, StoreUnavailableError } from '../core/errors.js';
import { StateTokenError } from '../stores/state-token.js';
import type { ApiErrorBody } from './api-types.js';

/** HTTP statuses this server answers errors with. */
export type ErrorStatus = 400 | 401 | 403 | 404 | 405 | 409 | 413 | 415 | 500 | 503;

/** A failure a route decided on: its status, a stable code and where in the request it was. */
export class HttpError extends BatonError {
  readonly status: ErrorStatus;
  /** Where in the request: `body.messages[0].parts`, `header.x-orchestration-state`, `path.agentId`. */
  readonly path: string | undefined;
  /** Extra response headers (e.g. `Allow`, `Retry-After`). */
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    status: ErrorStatus,
    code: string,
    message: string,
    options: { path?: string; cause?: unknown; headers?: Record<string, string> } = {},
  ) {
    super(code, message, options.cause === undefined ? {} : { cause: options.cause });
    this.name = 'HttpError';
    this.status = status;
    this.path = options.path;
    this.headers = options.headers ?? {};
  }
}

/** How long a client should wait before retrying when the store is down, in seconds. */
export const STORE_RETRY_AFTER_SECONDS = 2;

/** The response parts for `error`: status, JSON body and headers. */
export interface ErrorResponse {
  status: ErrorStatus;
  body: ApiErrorBody;
  headers: Record<string, string>;
  /** True when the server, not the client, is at fault (these are logged with their stack). */
  serverFault: boolean;
}

/** Maps any thrown value to the response it deserves. Unknown errors are a 500 with no details. */
export function errorResponse(error: unknown): ErrorResponse {
  if (error instanceof HttpError) {
    return respond(error.status, error.code, error.message, error.path, { ...error.headers });
  }
  if (StoreUnavailableError.isInstance(error) && error.code === 'store-unavailable') {
    return respond(503, 'store-unavailable', error.message, undefined, {
      'retry-after': String(STORE_RETRY_AFTER_SECONDS),
    });
  }
  if (error instanceof StoreConflictError) {
    // Optimistic retries ran out under contention: the client may simply try again.
    return respond(503, 'store-busy', error.message, undefined, { 'retry-after': '1' });
  }
  if (error instanceof StateTokenError) {
    return respond(401, 'invalid-state-token', error.message, 'header.x-orchestration-state', {});
  }
  if (error instanceof InvalidArgumentError) {
    return respond(400, 'invalid-argument', error.message, error.path, {});
  }
  if (AISDKError.isInstance(error) && isMessageError(error)) {
    // convertToModelMessages / validateUIMessages refusing what the client sent.
    return respond(400, 'invalid-messages', error.message, 'body.messages', {});
  }
  return {
    status: 500,
    body: { error: { code: 'internal-error', message: 'The server failed; the error is in its log.' } },
    headers: {},
    serverFault: true,
  };
}

function respond(
  status: ErrorStatus,
  code: string,
  message: string,
  path: string | undefined,
  headers: Record<string, string>,
): ErrorResponse {
  const body: ApiErrorBody = { error: path === undefined ? { code, message } : { code, message, path } };
  return { status, body, headers, serverFault: status >= 500 && status !== 503 };
}

const MESSAGE_ERROR_NAMES = new Set([
  'AI_InvalidArgumentError',
  'AI_TypeValidationError',
  'AI_MessageConversionError',
  'AI_InvalidMessageRoleError',
  'AI_InvalidPromptError',
  'AI_InvalidDataContentError',
  'AI_MissingToolResultsError',
  'AI_InvalidToolApprovalError',
  'AI_UIMessageStreamError',
]);

function isMessageError(error: AISDKError): boolean {
  return MESSAGE_ERROR_NAMES.has(error.name);
}
