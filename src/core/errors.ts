/**
 * Errors thrown by Baton. A denial (a tool that is not allowed) is a result, never an
 * exception; these are faults: bad configuration, bad input, an unreachable store.
 */

const BATON_ERROR_MARKER = Symbol.for('baton.error');

/**
 * Every code a {@link BatonError} can carry, in one union so that each layer (the library, the
 * HTTP server, the CLI) names faults the same way and `baton-agents/server` can map every one of them
 * to exactly one HTTP status (its table is typed by this union, so a new code cannot be
 * forgotten there).
 */
export type BatonErrorCode =
  // Configuration and arguments of the library.
  | 'template-config'
  | 'invalid-argument'
  | 'missing-api-key'
  | 'serve-setup'
  // The environment: an optional package that is not installed, a Node.js that is too old.
  | 'missing-dependency'
  | 'unsupported-runtime'
  // Session stores.
  | 'store-unavailable'
  | 'store-conflict'
  | 'store-closed'
  | 'store-schema-mismatch'
  | 'store-failed'
  // Orchestration.
  | 'tool-rejected'
  | 'state-token'
  | 'session-busy'
  | 'lease-lost'
  // Requests to the HTTP API: the body and its messages.
  | 'invalid-json'
  | 'invalid-body'
  | 'body-too-deep'
  | 'body-too-large'
  | 'message-too-large'
  | 'invalid-messages'
  | 'invalid-history'
  | 'no-user-message'
  | 'too-many-messages'
  | 'invalid-session-id'
  | 'session-mismatch'
  // Requests to the HTTP API: credentials and state tokens.
  | 'unauthorized'
  | 'invalid-state-token'
  | 'missing-state-token'
  | 'stale-state-token'
  | 'cross-origin'
  // Requests to the HTTP API: what they name.
  | 'unknown-agent'
  | 'session-not-found'
  | 'not-found'
  | 'method-not-allowed'
  | 'session-of-another-agent'
  | 'session-without-agent'
  // A feature this server was started without (the session event log in stateless mode).
  | 'not-available'
  // The server itself.
  | 'server-busy'
  | 'internal-error';

/** Options accepted by every {@link BatonError}. */
export interface BatonErrorOptions {
  /** The underlying error, kept so nothing is lost when a fault is wrapped. */
  cause?: unknown;
}

/** Base class of every error Baton throws; `code` is stable and machine-readable. */
export class BatonError extends Error {
  /** Stable machine-readable code, e.g. `template-config`, `store-unavailable`. */
  readonly code: BatonErrorCode;
  readonly [BATON_ERROR_MARKER] = true;

  constructor(code: BatonErrorCode, message: string, options: BatonErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.name = 'BatonError';
  }

  /**
   * True for any Baton error, even one thrown by a second copy of the package
   * (where `instanceof` would fail because the classes differ).
   */
  static isInstance(error: unknown): error is BatonError {
    return typeof error === 'object' && error !== null && BATON_ERROR_MARKER in error;
  }
}

/** Bad input to an API call (a wrong argument type, an empty session id, a bad state patch). */
export class InvalidArgumentError extends BatonError {
  /** Where the bad value was, e.g. `sessionId` or `partialState.sequenceIndex`. */
  readonly path: string;

  constructor(path: string, message: string, options: BatonErrorOptions = {}) {
    super('invalid-argument', `Invalid ${path}: ${message}`, options);
    this.name = 'InvalidArgumentError';
    this.path = path;
  }

  /** True for an {@link InvalidArgumentError} from any copy of the package. */
  static override isInstance(error: unknown): error is InvalidArgumentError {
    return BatonError.isInstance(error) && error.code === 'invalid-argument';
  }
}

/** A session store could not be reached or failed; the state was not changed. */
export class StoreUnavailableError extends BatonError {
  /** Name of the store that failed, e.g. `redis`. */
  readonly store: string;

  constructor(store: string, message: string, options: BatonErrorOptions = {}) {
    super('store-unavailable', `Session store "${store}" is unavailable: ${message}`, options);
    this.name = 'StoreUnavailableError';
    this.store = store;
  }

  /** True for a {@link StoreUnavailableError} from any copy of the package. */
  static override isInstance(error: unknown): error is StoreUnavailableError {
    return BatonError.isInstance(error) && error.code === 'store-unavailable';
  }
}

/** A compare-and-set store gave up after too many conflicting concurrent writers. */
export class StoreConflictError extends BatonError {
  /** Name of the store, e.g. `redis`. */
  readonly store: string;

  constructor(store: string, message: string, options: BatonErrorOptions = {}) {
    super('store-conflict', `Session store "${store}": ${message}`, options);
    this.name = 'StoreConflictError';
    this.store = store;
  }

  /** True for a {@link StoreConflictError} from any copy of the package. */
  static override isInstance(error: unknown): error is StoreConflictError {
    return BatonError.isInstance(error) && error.code === 'store-conflict';
  }
}

/**
 * A session store was used after it was closed (the process is shutting down, or its owner
 * closed it): a condition of the server, not of the request, so a retry elsewhere may succeed.
 */
export class StoreClosedError extends BatonError {
  /** Name of the store, e.g. `redis`. */
  readonly store: string;

  constructor(store: string, options: BatonErrorOptions = {}) {
    super('store-closed', `Session store "${store}" was closed; it cannot be used any more.`, options);
    this.name = 'StoreClosedError';
    this.store = store;
  }

  /** True for a {@link StoreClosedError} from any copy of the package. */
  static override isInstance(error: unknown): error is StoreClosedError {
    return BatonError.isInstance(error) && error.code === 'store-closed';
  }
}

/**
 * An optional package that a chosen feature needs (ioredis for the Redis store, pg for the
 * PostgreSQL store, a provider SDK for a model) is not installed. Raised when the store or model
 * is created, so a misconfigured app fails at startup rather than at its first request.
 */
export class MissingDependencyError extends BatonError {
  /** The npm package to install, e.g. `ioredis`. */
  readonly packageName: string;

  /**
   * `installed: true` when the package is there but failed to load (a broken or partial
   * install); the message then says so, and `cause` says why.
   */
  constructor(packageName: string, feature: string, options: BatonErrorOptions & { installed?: boolean } = {}) {
    super(
      'missing-dependency',
      options.installed
        ? `${feature} needs the package "${packageName}", which is installed but failed to load (${options.cause instanceof Error ? options.cause.message : String(options.cause)}): reinstall it with \`npm install ${packageName}\`.`
        : `${feature} needs the package "${packageName}", which is not installed: run \`npm install ${packageName}\` in your app.`,
      options,
    );
    this.name = 'MissingDependencyError';
    this.packageName = packageName;
  }

  /** True for a {@link MissingDependencyError} from any copy of the package. */
  static override isInstance(error: unknown): error is MissingDependencyError {
    return BatonError.isInstance(error) && error.code === 'missing-dependency';
  }
}

/** The running Node.js lacks something Baton needs (e.g. `node:sqlite`, which came in Node 22.13). */
export class UnsupportedRuntimeError extends BatonError {
  /** What is missing, e.g. `node:sqlite`. */
  readonly feature: string;

  constructor(feature: string, message: string, options: BatonErrorOptions = {}) {
    super('unsupported-runtime', message, options);
    this.name = 'UnsupportedRuntimeError';
    this.feature = feature;
  }

  /** True for an {@link UnsupportedRuntimeError} from any copy of the package. */
  static override isInstance(error: unknown): error is UnsupportedRuntimeError {
    return BatonError.isInstance(error) && error.code === 'unsupported-runtime';
  }
}

/**
 * A session did not take a turn's user message: it belongs to another agent
 * (`session-of-another-agent`: its steps and sequence mean nothing to this one), or too much
 * already waits behind its running calls (`session-busy`: try again when they finish). Nothing
 * was written.
 */
export class SessionRefusedError extends BatonError {
  /** The session that refused. */
  readonly sessionId: string;

  constructor(
    code: 'session-busy' | 'session-of-another-agent',
    sessionId: string,
    message: string,
    options: BatonErrorOptions = {},
  ) {
    super(code, message, options);
    this.name = 'SessionRefusedError';
    this.sessionId = sessionId;
  }

  /** True for a {@link SessionRefusedError} from any copy of the package. */
  static override isInstance(error: unknown): error is SessionRefusedError {
    return BatonError.isInstance(error) && (error.code === 'session-busy' || error.code === 'session-of-another-agent');
  }
}

/**
 * A tool call ran, but its reservation had already ended (its lease expired, as when the process
 * stalled longer than the lease, or the session was reset), so another call may have taken its
 * place: it is not recorded in the history. Reported so that nothing is lost silently.
 */
export class LeaseLostError extends BatonError {
  /** The session of the call. */
  readonly sessionId: string;
  /** The call whose reservation ended before it finished. */
  readonly toolCallId: string;

  constructor(sessionId: string, toolCallId: string, message: string, options: BatonErrorOptions = {}) {
    super('lease-lost', message, options);
    this.name = 'LeaseLostError';
    this.sessionId = sessionId;
    this.toolCallId = toolCallId;
  }

  /** True for a {@link LeaseLostError} from any copy of the package. */
  static override isInstance(error: unknown): error is LeaseLostError {
    return BatonError.isInstance(error) && error.code === 'lease-lost';
  }
}

/**
 * The session a turn writes to was deleted while the turn ran. The turn's later writes (a
 * completion, the end of the turn) create nothing, so a deleted session stays deleted; what the
 * turn did after the deletion is not stored.
 */
export class SessionDeletedError extends BatonError {
  /** The deleted session. */
  readonly sessionId: string;

  constructor(sessionId: string, options: BatonErrorOptions = {}) {
    super(
      'session-not-found',
      `Session "${sessionId}" was deleted while its turn ran; nothing more of the turn is stored.`,
      options,
    );
    this.name = 'SessionDeletedError';
    this.sessionId = sessionId;
  }
}
