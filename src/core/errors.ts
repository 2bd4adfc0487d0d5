/**
 * Errors thrown by Baton. A denial (a tool that is not allowed) is a result, never an
 * exception; these are faults: bad configuration, bad input, an unreachable store.
 */

const BATON_ERROR_MARKER = Symbol.for('baton.error');

/** Options accepted by every {@link BatonError}. */
export interface BatonErrorOptions {
  /** The underlying error, kept so nothing is lost when a fault is wrapped. */
  cause?: unknown;
}

/** Base class of every error Baton throws; `code` is stable and machine-readable. */
export class BatonError extends Error {
  /** Stable machine-readable code, e.g. `template-config`, `store-unavailable`. */
  readonly code: string;
  readonly [BATON_ERROR_MARKER] = true;

  constructor(code: string, message: string, options: BatonErrorOptions = {}) {
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
