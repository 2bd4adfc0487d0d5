/**
 * One table from error codes to HTTP statuses, and one function from any thrown value to the
 * response it deserves, so that every route and every layer answers a failure the same way:
 * `{ error: { code, message, path? } }` with the status of its code (as tRPC's
 * `getHTTPStatusCode` does for its codes). A store closed, out of date or down is the same
 * status whichever store it is, because the status depends on the code alone.
 */
import { AISDKError, TypeValidationError } from 'ai';
import { BatonError, type BatonErrorCode } from '../core/errors.js';
import type { ApiErrorBody } from './api-types.js';

/** HTTP statuses this server answers errors with. */
export type ErrorStatus = 400 | 401 | 403 | 404 | 405 | 409 | 413 | 429 | 500 | 503;

/**
 * The status of every {@link BatonErrorCode}. Typed by the union, so adding a code without a
 * status does not compile.
 */
export const HTTP_STATUS_BY_CODE: Readonly<Record<BatonErrorCode, ErrorStatus>> = Object.freeze({
  'invalid-json': 400,
  'invalid-body': 400,
  'body-too-deep': 400,
  'invalid-messages': 400,
  'invalid-history': 400,
  'no-user-message': 400,
  'too-many-messages': 400,
  'invalid-session-id': 400,
  'session-mismatch': 400,
  'invalid-argument': 400,
  unauthorized: 401,
  'invalid-state-token': 401,
  'state-token': 401,
  'missing-state-token': 401,
  // A browser page of another origin than the server's own or its allowed ones (`corsOrigins`).
  'cross-origin': 403,
  'unknown-agent': 404,
  'session-not-found': 404,
  'not-found': 404,
  'method-not-allowed': 405,
  'session-of-another-agent': 409,
  'session-without-agent': 409,
  // The client sent a token that a newer one has replaced: a conflict with the current state.
  'stale-state-token': 409,
  // A feature this server's configuration leaves out: asking again will not help.
  'not-available': 409,
  'body-too-large': 413,
  'message-too-large': 413,
  // Too much waits behind the calls running in this session: the same request succeeds later.
  'session-busy': 429,
  // Conditions of the server that pass: a retry (later, or on another process) may succeed.
  'store-unavailable': 503,
  'store-conflict': 503,
  'store-closed': 503,
  // An old process meeting a database a newer Baton migrated, as during a rolling upgrade: a
  // retry may reach an upgraded process. SQLite reports it as store-unavailable, also a 503.
  'store-schema-mismatch': 503,
  'server-busy': 503,
  // Faults of the server or its configuration: logged with their stack, never detailed to clients.
  'store-failed': 500,
  'template-config': 500,
  'missing-api-key': 500,
  'serve-setup': 500,
  'missing-dependency': 500,
  'unsupported-runtime': 500,
  'tool-rejected': 500,
  'lease-lost': 500,
  'internal-error': 500,
});

/** The HTTP status of an error code. */
export function httpStatusOf(code: BatonErrorCode): ErrorStatus {
  return HTTP_STATUS_BY_CODE[code];
}

/** Seconds a client should wait before retrying a 429 or 503, per code (default 1). */
const RETRY_AFTER_SECONDS: Partial<Record<BatonErrorCode, number>> = {
  'store-unavailable': 2,
  'store-closed': 2,
  'store-schema-mismatch': 5,
};

/**
 * What a client is told when a store cannot be reached: that, and to retry. The error's own
 * message carries the driver's words (`connect ECONNREFUSED 10.0.3.7:6379`, a host name, SQL),
 * which tell a client about the server's network: they go to the log instead.
 */
const STORE_UNAVAILABLE_MESSAGE = 'The session store is unavailable; try again shortly.';

/** A failure a route decided on: a code (which fixes the status) and where in the request it was. */
export class HttpError extends BatonError {
  /** Where in the request: `body.messages[0].parts`, `header.x-orchestration-state`, `path.agentId`. */
  readonly path: string | undefined;
  /** Extra response headers (e.g. `Allow`, `Retry-After`). */
  readonly headers: Readonly<Record<string, string>>;

  constructor(
    code: BatonErrorCode,
    message: string,
    options: { path?: string; cause?: unknown; headers?: Record<string, string> } = {},
  ) {
    super(code, message, options.cause === undefined ? {} : { cause: options.cause });
    this.name = 'HttpError';
    this.path = options.path;
    this.headers = options.headers ?? {};
  }

  /** The status of this error's code. */
  get status(): ErrorStatus {
    return httpStatusOf(this.code);
  }
}

/** The response parts for an error: status, JSON body and headers. */
export interface ErrorResponse {
  status: ErrorStatus;
  body: ApiErrorBody;
  headers: Record<string, string>;
  /**
   * True when the server or what it depends on failed, not the client (logged with their stack):
   * its faults (500) and a store it cannot reach (503).
   */
  serverFault: boolean;
}

/**
 * Maps any thrown value to the response it deserves. A Baton error answers with its own code
 * and that code's status; a message the AI SDK refused is `invalid-messages`; anything else is
 * a bug: a 500 with no details (they go to the log).
 */
export function errorResponse(error: unknown): ErrorResponse {
  if (BatonError.isInstance(error)) {
    const status = httpStatusOf(error.code);
    if (status === 500) return internalError();
    // Only errors raised about the request carry a request path; a library error's `path`
    // names an argument of a function, which would mislead a client.
    const path = error instanceof HttpError ? error.path : undefined;
    const headers: Record<string, string> = error instanceof HttpError ? { ...error.headers } : {};
    if ((status === 503 || status === 429) && headers['retry-after'] === undefined) {
      headers['retry-after'] = String(RETRY_AFTER_SECONDS[error.code] ?? 1);
    }
    if (error.code === 'store-unavailable') {
      // Logged, with the driver's words; the client hears only that it may retry.
      return { ...respond(status, error.code, STORE_UNAVAILABLE_MESSAGE, path, headers), serverFault: true };
    }
    return respond(status, error.code, error.message, path, headers);
  }
  if (AISDKError.isInstance(error) && MESSAGE_ERROR_NAMES.has(error.name)) {
    // convertToModelMessages / validateUIMessages refusing what the client sent.
    return respond(400, 'invalid-messages', error.message, messagePath(error), {});
  }
  return internalError();
}

/** Where in the body the AI SDK found a problem, when it says (`messages[2].parts[0].input`). */
export function messagePath(error: unknown): string {
  const field = TypeValidationError.isInstance(error) ? error.context?.field : undefined;
  return typeof field === 'string' && field.startsWith('messages') ? `body.${field}` : 'body.messages';
}

function internalError(): ErrorResponse {
  return {
    status: 500,
    body: { error: { code: 'internal-error', message: 'The server failed; the error is in its log.' } },
    headers: {},
    serverFault: true,
  };
}

function respond(
  status: ErrorStatus,
  code: BatonErrorCode,
  message: string,
  path: string | undefined,
  headers: Record<string, string>,
): ErrorResponse {
  const body: ApiErrorBody = { error: path === undefined ? { code, message } : { code, message, path } };
  return { status, body, headers, serverFault: false };
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
