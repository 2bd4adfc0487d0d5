/**
 * The replay guard of stateless mode. A state token is signed, so a client cannot forge one,
 * but it could keep an older one and send it again: rolling its session back to re-run a tool
 * that is cooling down, undo sequence progress or reset its token usage. The guard keeps, per
 * session, a high-water mark: the lowest state version still accepted. A request that changes
 * the session (a chat turn, a reset, a delete) claims the session with its token's version:
 *
 * - refused when the version is below the mark (an older token) or the session already has a
 *   mark and the request brings no token (a "new" session under an existing id);
 * - otherwise the mark becomes version + 1, atomically. The token sent is thereby spent: a
 *   second request with it, even a concurrent one, is refused, and the token the server issues
 *   next has a higher version (the server makes sure of it), so it is accepted.
 *
 * State versions only grow along a session's chain of tokens, so a process that has not seen
 * the newest token never refuses it: per-process marks stay correct behind a load balancer,
 * they only miss replays sent to a process that has not seen the newer token.
 *
 * Marks are kept in any session store, so SQLite, Redis or PostgreSQL can share them
 * between processes and a memory store keeps them per process.
 */
import { createState, type OrchestrationState } from '../core/state.js';
import { resolveStore, type StoreSpec } from '../stores/resolve-store.js';

/** A successful claim: the session's mark was raised for one request. */
export interface ReplayClaim {
  /** Lowers the mark again, for a request that failed before it changed anything. */
  release(): Promise<void>;
}

/** Keeps stateless sessions from being rolled back; see the module comment. */
export interface ReplayGuard {
  /**
   * Claims the session for a request carrying a token of state `version` (undefined: no token,
   * a new session). Resolves to undefined when the token is stale.
   */
  claim(sessionId: string, version: number | undefined): Promise<ReplayClaim | undefined>;
  /** Reads through the store, to report its health; resolves to its name. */
  ping(): Promise<string>;
  /** Closes the store when the guard opened it. */
  close(): Promise<void>;
}

/** Options of {@link createReplayGuard}. */
export interface ReplayGuardOptions {
  /** Where marks live: a store shared by every process, or a URL; default a memory store of this process. */
  store?: StoreSpec;
  /** Lifetime of the tokens in milliseconds: a mark must outlive every token it guards. */
  tokenTtl: number;
}

// Marks share a store with nothing else by default, but a shared database may also hold
// sessions: a `/` cannot occur in a session id the server accepts, so the keys never collide.
const KEY_PREFIX = 'stateless-mark/';

// A mark is renewed at every claim and outlives the tokens issued after it: those are signed
// when their turn ends, so the margin covers the longest turn.
const TURN_MARGIN_MS = 60 * 60 * 1000;

/** A replay guard over a store; see the module comment. */
export function createReplayGuard(options: ReplayGuardOptions): ReplayGuard {
  const ownsStore = typeof options.store !== 'object';
  // One store per app, never per request: its sweep timer (memory) or connection is shared.
  const opened = resolveStore(options.store ?? 'memory:');
  // An unhandled rejection here would crash the process before any request asked for it.
  opened.catch(() => undefined);
  const ttl = options.tokenTtl + TURN_MARGIN_MS;

  // A mark record is a minimal session state. Its `version` is the store's own write counter,
  // so the mark itself is kept in `sequenceIndex`, a non-negative integer every store keeps.
  const markOf = (record: OrchestrationState | undefined): number | undefined => record?.sequenceIndex;
  const withMark = (record: OrchestrationState | undefined, key: string, mark: number): OrchestrationState => ({
    ...(record ?? createState(key, Date.now(), ttl)),
    sequenceIndex: mark,
    lastAccessed: Date.now(),
  });

  return {
    async claim(sessionId, version) {
      const store = await opened;
      const key = `${KEY_PREFIX}${sessionId}`;
      const claimed = (version ?? 0) + 1;
      // Optimistic stores may run the updater again; the last run is the one stored.
      let admitted = false;
      await store.update(key, (current) => {
        const mark = markOf(current);
        // No token: only a session no token was ever issued for (0: a claim that was released).
        // A token: any version at or above the mark; with no mark, the mark expired with every
        // token older than this one, or this process never saw the session.
        admitted = version === undefined ? mark === undefined || mark === 0 : mark === undefined || version >= mark;
        return admitted ? withMark(current, key, claimed) : current;
      });
      if (!admitted) return undefined;
      return {
        async release() {
          await store.update(key, (current) =>
            markOf(current) === claimed ? withMark(current, key, version ?? 0) : current,
          );
        },
      };
    },
    async ping() {
      const store = await opened;
      await store.get(`${KEY_PREFIX}healthz`);
      return store.name;
    },
    async close() {
      if (ownsStore) await (await opened).close();
    },
  };
}

/** A guard that admits every validly signed token (`stateless.replayStore: false`). */
export function noReplayGuard(): ReplayGuard {
  const claim: ReplayClaim = { release: async () => undefined };
  return {
    claim: async () => claim,
    ping: async () => 'none',
    close: async () => undefined,
  };
}
