/**
 * The contract every session store implements. Its core is one atomic read-modify-write,
 * `update(sessionId, fn)`, so that two changes to one session, from one process or from
 * many sharing a store, never lose either one (SPEC section 6).
 */
import type { SessionLogEntry } from '../core/session-log.js';
import type { OrchestrationState } from '../core/state.js';

/**
 * Computes the next state from the current one (`undefined` when the session does not
 * exist or has expired). Return:
 * - a new state object to store it;
 * - `current` itself (the same reference) to change nothing: nothing is written and the TTL is
 *   not renewed (TTLs ride on writes, so a read never costs a write);
 * - `undefined` to change nothing and create nothing.
 *
 * Optimistic stores call it again when another writer got in first, so it must be pure:
 * no I/O, no side effects, the same answer for the same input.
 */
export type StateUpdater = (current: OrchestrationState | undefined) => OrchestrationState | undefined;

/** A place to keep session states. Implementations: memory, SQLite, Redis, PostgreSQL. */
export interface SessionStore {
  /** Short name used in errors and logs, e.g. `memory`, `redis`. */
  readonly name: string;
  /** The session's state, or `undefined` if there is none or it expired. Renews nothing. */
  get(sessionId: string): Promise<OrchestrationState | undefined>;
  /**
   * Atomically replaces the session's state with `fn(current)` and resolves to the state now
   * stored (or `undefined` when none exists). The store sets `version` to the previous
   * version plus one on every write, and the sliding expiry to now plus `state.ttl`
   * (a `ttl` of 0 never expires).
   */
  update(sessionId: string, fn: StateUpdater): Promise<OrchestrationState | undefined>;
  /**
   * Optional synchronous form of {@link update}, for in-process stores. When present, the
   * manager uses it to skip promise round trips on its hot path; same contract otherwise.
   * `at` is the current time on the store's own clock when the caller has just read it (the
   * state manager does, for the memory store it created on its clock), saving a second read.
   */
  updateSync?(sessionId: string, fn: StateUpdater, at?: number): OrchestrationState | undefined;
  /**
   * The session's event log, oldest first, or `[]` when it has none (see
   * `src/core/session-log.ts`). A store that implements it appends the entries
   * `logEntriesOf(next)` of every state `next` it writes, in the same atomic write (entries of
   * an attempt that lost a compare-and-set are never appended); keeps the newest
   * `next.log.capacity` of them; and removes them with the session (delete, expiry, eviction).
   * A store without it keeps no event log: the manager's `eventLog` then records nothing.
   */
  readLog?(sessionId: string): Promise<SessionLogEntry[]>;
  /**
   * Optional: the session's state as this store instance last saw it, without any I/O, or
   * undefined when it does not know it. It may be stale (another process may have written since):
   * use it only where a stale answer is harmless, as for what a model step is offered, never for
   * what runs (updates decide that). Turns use it to begin without a store round trip. `null`
   * says the store knows there is no such session (an in-process store, which is never stale):
   * a new session then begins without a round trip too.
   */
  peek?(sessionId: string): OrchestrationState | null | undefined;
  /** Removes the session; resolves to whether it existed. */
  delete(sessionId: string): Promise<boolean>;
  /** Removes expired sessions now and resolves to how many were removed. */
  sweep(): Promise<number>;
  /** Releases connections and timers. The store must not be used afterwards. */
  close(): Promise<void>;
}

/** Options that every built-in store accepts. */
export interface StoreOptions {
  /**
   * Evict the least recently used sessions beyond this many (default: unlimited).
   */
  maxSessions?: number;
  /** The clock used for expiry, in milliseconds since the epoch (default `Date.now`). */
  now?: () => number;
}
