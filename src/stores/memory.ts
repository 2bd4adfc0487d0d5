/**
 * The in-process store: the library's default. Atomic because `update` reads, computes and
 * writes without yielding to the event loop.
 */
import { InvalidArgumentError, StoreClosedError } from '../core/errors.js';
import { optionIssues, optionNames, throwOnErrors } from '../core/option-issues.js';
import { logEntriesOf, type SessionLogEntry } from '../core/session-log.js';
import type { OrchestrationState } from '../core/state.js';
import { assertSessionId, assertState } from '../core/state-check.js';
import type { SessionStore, StateUpdater, StoreOptions } from './types.js';

/** Options of {@link memoryStore}. */
export interface MemoryStoreOptions extends StoreOptions {
  /**
   * How often expired sessions are swept, in milliseconds (default 60,000; 0 disables the
   * timer, expired sessions are then dropped when touched or by `sweep()`). The timer is
   * `unref`ed, so it never keeps the process alive.
   */
  sweepIntervalMs?: number;
  /**
   * Ignored: the namespace `testStore()` gives each test. An in-process store shares nothing
   * between instances, so `create: (options) => memoryStore(options)` may pass it on as it is.
   */
  namespace?: string;
}

/** The option names {@link memoryStore} takes, to refuse others with a did-you-mean. */
const MEMORY_STORE_OPTIONS = optionNames<MemoryStoreOptions>({
  maxSessions: true,
  now: true,
  sweepIntervalMs: true,
  namespace: true,
});

/** Longest delay a Node.js timer takes; a longer one fires after 1 ms instead, with a warning. */
const MAX_TIMER_MS = 2_147_483_647;

interface Entry {
  state: OrchestrationState;
  /**
   * When the session expires, in milliseconds since the epoch (`Infinity`: never), or undefined
   * when its state says it: written at its own `lastAccessed` time (as the state manager writes),
   * it expires `ttl` after that. Undefined, the usual case, costs no boxed number per session.
   */
  expiresAt: number | undefined;
  /** The session's event log, oldest first: it goes with the entry (delete, expiry, eviction). */
  log?: SessionLogEntry[];
}

/**
 * Creates an in-memory {@link SessionStore} with sliding TTL and LRU eviction.
 * Its options are checked now: an unknown one is a `TemplateConfigError` naming it (with a
 * did-you-mean when one is close), a value of the wrong type an `InvalidArgumentError`.
 */
export function memoryStore(options: MemoryStoreOptions = {}): SessionStore {
  // A misspelt option would otherwise be ignored without a word (`sweepIntervalMS: 0` leaves the
  // timer on). Only here: the state manager's own store gets options it built itself.
  throwOnErrors(optionIssues(MEMORY_STORE_OPTIONS, options), 'memoryStore() options');
  // A clock that is not a function would fail only at the first request, as a TypeError. (The
  // state manager's own store gets its `clock`, which is the manager's to check.)
  if (options.now !== undefined && typeof options.now !== 'function') {
    throw new InvalidArgumentError('now', `expected a function returning milliseconds, got ${typeof options.now}`);
  }
  return ownedMemoryStore(options).store;
}

/**
 * Writes, synchronously, a state the engine computed from the session's stored state (validated
 * when it was stored) and from checked inputs, without validating it again. Only for the state
 * manager that created the store, whose transition results on the default clock are such states.
 */
export type EngineUpdate = (sessionId: string, fn: StateUpdater, at: number) => OrchestrationState | undefined;

/**
 * A memory store and its {@link EngineUpdate}, for the state manager that creates its own store:
 * the only holder of the unvalidated write (the store itself validates every state it is given).
 */
export function ownedMemoryStore(options: MemoryStoreOptions = {}): {
  store: SessionStore;
  engineUpdate: EngineUpdate;
} {
  const now = options.now ?? Date.now;
  const maxSessions = options.maxSessions ?? Number.POSITIVE_INFINITY;
  if (!(maxSessions >= 1)) {
    throw new InvalidArgumentError('maxSessions', `expected a number >= 1, got ${String(options.maxSessions)}`);
  }
  const interval = options.sweepIntervalMs ?? 60_000;
  // NaN would silently disable the sweep, and a delay past Node's limit would sweep every
  // millisecond.
  if (!(typeof interval === 'number' && interval >= 0 && interval <= MAX_TIMER_MS)) {
    throw new InvalidArgumentError(
      'sweepIntervalMs',
      `expected milliseconds from 0 (no timer) to ${MAX_TIMER_MS}, got ${typeof interval === 'string' ? JSON.stringify(interval) : String(interval)}`,
    );
  }
  // A Map iterates in insertion order; re-inserting on every access keeps the least
  // recently used entry first, so eviction is O(1).
  const entries = new Map<string, Entry>();
  let closed = false;

  const expiryOf = (state: OrchestrationState, at: number) =>
    state.ttl > 0 ? at + state.ttl : Number.POSITIVE_INFINITY;
  /** `Entry.expiresAt` of `state` written at `at`. */
  const storedExpiry = (state: OrchestrationState, at: number) =>
    state.lastAccessed === at ? undefined : expiryOf(state, at);
  const expiryOfEntry = (entry: Entry) => entry.expiresAt ?? expiryOf(entry.state, entry.state.lastAccessed);

  // The entry of the session looked up last: a seed turn looks its session up twice in a row
  // (`getAllowedTools`, then `processToolUsage`), and the second finds it here instead of in the
  // Map. Every removal from `entries` goes through `remove`, which forgets it.
  let lastId: string | undefined;
  let lastEntry: Entry | undefined;

  function remove(sessionId: string): boolean {
    if (sessionId === lastId) {
      lastId = undefined;
      lastEntry = undefined;
    }
    return entries.delete(sessionId);
  }

  function live(sessionId: string, at: number): Entry | undefined {
    let entry: Entry | undefined;
    if (sessionId === lastId) entry = lastEntry!;
    else {
      entry = entries.get(sessionId);
      if (entry === undefined) return undefined;
      lastId = sessionId;
      lastEntry = entry;
    }
    if (expiryOfEntry(entry) <= at) {
      remove(sessionId);
      return undefined;
    }
    return entry;
  }

  const bounded = Number.isFinite(maxSessions);
  function touch(sessionId: string, entry: Entry, at: number) {
    entry.expiresAt = storedExpiry(entry.state, at);
    // Re-inserting keeps LRU order, but churns the Map's storage; only eviction needs it.
    if (bounded) {
      entries.delete(sessionId);
      entries.set(sessionId, entry);
    }
  }

  function checkOpen() {
    if (closed) throw new StoreClosedError('memory');
  }

  function sweepNow(): number {
    const at = now();
    let removed = 0;
    for (const [id, entry] of entries) {
      if (expiryOfEntry(entry) <= at) {
        remove(id);
        removed++;
      }
    }
    return removed;
  }

  const timer = interval > 0 ? setInterval(sweepNow, interval) : undefined;
  timer?.unref?.();

  function updateSync(
    sessionId: string,
    fn: StateUpdater,
    time?: number,
    engineMade = false,
  ): OrchestrationState | undefined {
    assertSessionId(sessionId);
    checkOpen();
    const at = time ?? now();
    const entry = live(sessionId, at);
    const current = entry?.state;
    const next = fn(current);
    // Nothing to write: no renewal either, as in every store (TTLs ride on writes).
    if (next === undefined || next === current) return current;
    // Refused as every store refuses it: a state the durable stores could not keep must not
    // work in memory and fail only once the app moves to SQLite or Redis. (An engine result made
    // from a state checked here is well formed by construction: see EngineUpdate.)
    if (!engineMade) assertState(next, 'state');
    const version = (current?.version ?? 0) + 1;
    // Entries to append come only with a state that has an event log (appendToLog sets it).
    const appended = next.log === undefined ? undefined : logEntriesOf(next);
    // An updater may already have stamped the version (the state manager does, in the copy it
    // makes anyway): that object is stored as it is, saving a copy of the state per write. Not
    // one carrying log entries to append: those stay attached to it, and a later copy of the
    // stored state would carry them again.
    const stored: OrchestrationState = next.version === version && appended === undefined ? next : { ...next, version };
    if (entry !== undefined) {
      entry.state = stored;
      if (appended) entry.log = appendBounded(entry.log, appended, stored);
      touch(sessionId, entry, at);
      return stored;
    }
    const created: Entry = { state: stored, expiresAt: storedExpiry(stored, at) };
    if (appended) created.log = appendBounded(undefined, appended, stored);
    entries.set(sessionId, created);
    if (entries.size > maxSessions) {
      // Evict the least recently used (first in iteration order).
      for (const id of entries.keys()) {
        if (entries.size <= maxSessions) break;
        remove(id);
      }
    }
    return stored;
  }

  const store: SessionStore = {
    name: 'memory',
    updateSync: (sessionId, fn, time) => updateSync(sessionId, fn, time),
    peek(sessionId) {
      // In-process: the state itself, never stale, so an absent session is known absent (null).
      return closed ? undefined : (live(sessionId, now())?.state ?? null);
    },
    async get(sessionId) {
      assertSessionId(sessionId);
      checkOpen();
      const at = now();
      return live(sessionId, at)?.state;
    },
    async update(sessionId: string, fn: StateUpdater) {
      // Atomic: updateSync reads, computes and writes without yielding to the event loop.
      return updateSync(sessionId, fn);
    },
    async readLog(sessionId) {
      assertSessionId(sessionId);
      checkOpen();
      return live(sessionId, now())?.log?.slice() ?? [];
    },
    async delete(sessionId) {
      assertSessionId(sessionId);
      checkOpen();
      return remove(sessionId);
    },
    async sweep() {
      checkOpen();
      return sweepNow();
    },
    async close() {
      closed = true;
      if (timer !== undefined) clearInterval(timer);
      entries.clear();
      lastId = undefined;
      lastEntry = undefined;
    },
  };
  return { store, engineUpdate: (sessionId, fn, at) => updateSync(sessionId, fn, at, true) };
}

/** `log` with `added` appended, keeping the newest `state.log.capacity` entries. */
function appendBounded(
  log: SessionLogEntry[] | undefined,
  added: readonly SessionLogEntry[],
  state: OrchestrationState,
): SessionLogEntry[] {
  const next = log ?? [];
  next.push(...added);
  const excess = next.length - (state.log?.capacity ?? next.length);
  if (excess > 0) next.splice(0, excess);
  return next;
}
