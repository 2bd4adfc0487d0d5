/**
 * Where the server's sessions come from, so that routes never ask which: stored sessions live
 * in the manager's store (shared by every process using it); stateless sessions travel with
 * the client as signed tokens, and each turn runs on one working copy in this process's
 * memory, seeded from the token and dropped when the turn ends, however it ends.
 */

import { maxHeaderSize } from 'node:http';
import type { OrchestrationSource } from '../core/compile.js';
import { InvalidArgumentError, SessionRefusedError } from '../core/errors.js';
import type { ChatMessage } from '../core/messages.js';
import type { CompiledPolicy } from '../core/policy.js';
import type { Policy } from '../core/schema.js';
import { createState, DEFAULT_SESSION_TTL_MS, type OrchestrationState } from '../core/state.js';
import {
  createOrchestrationManager,
  type EventListener,
  type OrchestrationManager,
} from '../orchestration/orchestration-manager.js';
import { Turn } from '../orchestration/turn.js';
import { memoryStore } from '../stores/memory.js';
import type { StoreSpec } from '../stores/resolve-store.js';
import { decodeStateToken, encodeStateToken, StateTokenError } from '../stores/state-token.js';
import { HttpError } from './http-errors.js';
import { createReplayGuard, noReplayGuard, type ReplayClaim, type ReplayGuard } from './replay-guard.js';
import type { SessionField } from './request-schemas.js';

/** The header that carries a stateless session's state token. */
export const STATE_HEADER = 'x-orchestration-state';

/**
 * Room a stateless server leaves in a request's headers for the ones beside the state token
 * (host, user agent, content type, authorization, cookies): a browser's chat request sends well
 * under 1 KiB of them without cookies.
 */
export const STATE_HEADER_ROOM = 2048;

/**
 * Longest state token a stateless server issues, in characters: Node's limit on a request's
 * headers (`--max-http-header-size`, 16 KiB unless raised) less {@link STATE_HEADER_ROOM}, so
 * 14,336 by default. The token comes back in the {@link STATE_HEADER} header, and Node answers a
 * request whose headers are over its limit with a bare `431` before any route sees it; so a longer
 * token is refused when it would be issued, with an error that says why and what to do instead.
 * A session's state keeps the ids of its latest 256 tool calls; the token's payload is deflated,
 * so with hosted providers' ids (`call_` and 24 random characters) they take about 7,100
 * characters, and with 16 approvals waiting and 8 calls running the whole state about 9,400.
 * Random 64-character ids still take about 16,200 alone: such long sessions need a store.
 */
export const MAX_STATE_TOKEN_LENGTH = maxHeaderSize - STATE_HEADER_ROOM;

/** Options of stateless mode (`createApp({ stateless })`). */
export interface StatelessOptions {
  /** Signing keys; the first signs, the others still verify (rotation). At least 32 bytes each. */
  keys: readonly string[];
  /** Lifetime of a token in milliseconds (default 24 hours). */
  ttl?: number;
  /**
   * Where the replay guard keeps each session's high-water mark (see `replay-guard.ts`): a
   * store every process shares (`redis://…`, `postgres://…`, `sqlite:…` or a store object), so
   * that an older token is refused by all of them. Default: this process's memory, which
   * guards only the requests this process serves. `false` accepts any validly signed token.
   */
  replayStore?: StoreSpec | false;
  /**
   * Receives every orchestration event of this server's turns (as a manager's `onEvent`), for
   * telemetry: a stateless app has no manager of its own to subscribe to.
   */
  onEvent?: EventListener;
  /** The lease of a reserved tool call in milliseconds (see `createApp({ leaseMs })`). */
  leaseMs?: number;
  /** The operator's policy (see `createApp({ policy })`). */
  policy?: Policy | CompiledPolicy;
}

/** What a chat request names: the agent, and the session it continues, if any. */
export interface TurnRequest {
  agentId: string;
  /** `body.sessionId`, else `body.id` (useChat's chat id). */
  sessionId: string | undefined;
  /** The field that named the session, for the errors about it (default `body.sessionId`). */
  sessionField?: SessionField;
  /** The `x-orchestration-state` header. */
  token: string | undefined;
  /** The agent's template, whose plan handles the turn's user message. */
  config: OrchestrationSource;
  /** The conversation: its latest user message begins the turn. */
  messages: readonly ChatMessage[];
}

/** A session claimed for one chat turn. */
export interface SessionTurn {
  readonly sessionId: string;
  /** The manager the turn runs on. */
  readonly manager: OrchestrationManager;
  /**
   * The session as the turn's first write left it: claimed for the agent, the user message
   * handled. The model loop starts from it (`sessionState`) without another store round trip.
   */
  readonly state: OrchestrationState;
  /**
   * The state once the turn's writes are done, and in stateless mode the token to continue
   * with. Ends the turn: call it once, whether the turn completed, failed or was aborted.
   * `held`: the final state as the turn itself last wrote it, which spares a store read.
   */
  finish(held?: OrchestrationState): Promise<{ state: OrchestrationState; stateToken?: string }>;
  /** Undoes the claim of a turn that failed before it started. */
  abandon(): Promise<void>;
}

/** A session as the session routes see it. */
export interface SessionRead {
  state: OrchestrationState;
  /** Stateless mode: the manager to explain the state with. */
  manager: OrchestrationManager;
}

/** Stored or stateless sessions behind one interface; see the module comment. */
export interface SessionSource {
  /** The manager agents are built on (stateless: the one that runs the working copies). */
  readonly manager: OrchestrationManager;
  /** True when sessions travel as tokens. */
  readonly stateless: boolean;
  /**
   * The session a chat request continues, read from the request alone (nothing is claimed):
   * undefined when it starts a new one. Stateless: the token's session (an invalid token is
   * refused as `startTurn` would refuse it).
   */
  sessionOf(request: Pick<TurnRequest, 'sessionId' | 'sessionField' | 'token'>): string | undefined;
  /**
   * The session as it is before the request's turn, without claiming it (a store read;
   * stateless: the token's state); null when there is none.
   */
  stateBefore(request: Pick<TurnRequest, 'sessionId' | 'sessionField' | 'token'>): Promise<OrchestrationState | null>;
  /** Claims (or creates) the session of a chat turn for its agent. */
  startTurn(request: TurnRequest): Promise<SessionTurn>;
  /** The session named in a session route; a 404 when there is none. */
  read(sessionId: string, token: string | undefined): Promise<OrchestrationState>;
  /** Resets the session's progress; stateless: with the token to continue with. */
  reset(sessionId: string, token: string | undefined): Promise<{ state: OrchestrationState; stateToken?: string }>;
  /** Deletes the session (read first); stateless: spends its token, so that it is refused from then on. */
  remove(sessionId: string, token: string | undefined): Promise<void>;
  /** Reads through the store: its name, and why it failed when it did not answer. */
  health(): Promise<{ store: string; error?: unknown }>;
  /** Closes what the source opened. */
  close(): Promise<void>;
}

/** Sessions in a manager's store. `owned`: close its store with the app. */
export function storedSessions(manager: OrchestrationManager, owned: boolean): SessionSource {
  const states = manager.getStateManager();
  return {
    manager,
    stateless: false,
    sessionOf: (request) => request.sessionId,
    async stateBefore(request) {
      return request.sessionId === undefined ? null : states.getState(request.sessionId);
    },
    async startTurn({ agentId, sessionId: requested, sessionField = 'body.sessionId', config, messages }) {
      const sessionId = requested ?? crypto.randomUUID();
      const state = await beginTurn(
        manager,
        sessionId,
        agentId,
        config,
        messages,
        sessionField,
        requested === undefined,
      );
      return {
        sessionId,
        manager,
        state,
        async finish(held) {
          if (held !== undefined) return { state: held };
          // The session exists (claimed above) unless it was deleted during the turn.
          return { state: (await states.getState(sessionId)) ?? createState(sessionId, Date.now()) };
        },
        abandon: async () => undefined,
      };
    },
    async read(sessionId) {
      const state = await states.getState(sessionId);
      if (state === null) throw sessionNotFound(sessionId);
      return state;
    },
    async reset(sessionId) {
      const state = await states.resetState(sessionId);
      if (state === null) throw sessionNotFound(sessionId);
      return { state };
    },
    async remove(sessionId) {
      await manager.removeSession(sessionId);
    },
    async health() {
      let store = 'unknown';
      try {
        const opened = await states.store();
        store = opened.name;
        await opened.get('baton-healthz');
        return { store };
      } catch (error) {
        return { store, error };
      }
    },
    async close() {
      if (owned) await manager.close();
    },
  };
}

/** Sessions that travel as signed tokens; see the module comment and `replay-guard.ts`. */
export function statelessSessions(options: StatelessOptions): SessionSource {
  if (options.keys.length === 0) {
    throw new InvalidArgumentError(
      'stateless.keys',
      'stateless mode needs at least one signing key (BATON_STATE_KEYS)',
    );
  }
  const keys = [...options.keys];
  const ttl = options.ttl;
  // One store for every turn's working copy, with no sweep timer: a copy lives exactly as long
  // as its turn, and is deleted when the turn ends.
  const manager = createOrchestrationManager({
    store: memoryStore({ sweepIntervalMs: 0 }),
    ...(options.onEvent ? { onEvent: options.onEvent } : {}),
    ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
    ...(options.policy !== undefined ? { policy: options.policy } : {}),
  });
  const states = manager.getStateManager();
  const guard: ReplayGuard =
    options.replayStore === false
      ? noReplayGuard()
      : createReplayGuard({
          ...(options.replayStore !== undefined ? { store: options.replayStore } : {}),
          tokenTtl: ttl ?? DEFAULT_SESSION_TTL_MS,
        });
  // Sessions with a working copy in this process: a second turn for one would share it.
  const running = new Set<string>();

  const decode = (token: string, sessionId: string | undefined, path: string): OrchestrationState => {
    let state: OrchestrationState;
    try {
      state = decodeStateToken(token, { keys });
    } catch (error) {
      if (!StateTokenError.isInstance(error)) throw error;
      throw new HttpError('invalid-state-token', error.message, { path: `header.${STATE_HEADER}`, cause: error });
    }
    if (sessionId !== undefined && sessionId !== state.sessionId) {
      throw new HttpError(
        'session-mismatch',
        `The state token is for session "${state.sessionId}", not "${sessionId}".`,
        { path },
      );
    }
    return state;
  };
  const required = (token: string | undefined): string => {
    if (token !== undefined) return token;
    throw new HttpError(
      'missing-state-token',
      `This server is stateless: send the session's state in the ${STATE_HEADER} header.`,
      { path: `header.${STATE_HEADER}` },
    );
  };
  const sign = (state: OrchestrationState): string => {
    const token = encodeStateToken(state, { keys, ...(ttl !== undefined ? { ttl } : {}) });
    if (token.length > MAX_STATE_TOKEN_LENGTH) throw tokenTooLarge(state.sessionId, token.length);
    return token;
  };

  /**
   * Claims the session and seeds its working copy; `work` runs on it. The copy's versions
   * restart at 1, so the state signed at the end carries the token's version plus the copy's:
   * always above the version claimed, and growing along the session's chain of tokens.
   */
  const withWorkingCopy = async <T>(
    sessionId: string,
    carried: OrchestrationState | undefined,
    work: (claim: ReplayClaim, base: number) => Promise<T>,
  ): Promise<T> => {
    if (running.has(sessionId)) {
      throw stale(`A turn of session "${sessionId}" is already running; continue with the token it ends with.`);
    }
    // Taken before the claim's await, not after it: otherwise two requests arriving together
    // (with `replayStore: false`, or a replay store that admits both) would both pass the check
    // above and share one working copy, each dropping it under the other's running turn.
    running.add(sessionId);
    let claim: ReplayClaim | undefined;
    try {
      claim = await guard.claim(sessionId, carried?.version);
    } catch (error) {
      running.delete(sessionId);
      throw error;
    }
    if (claim === undefined) {
      running.delete(sessionId);
      throw stale(
        carried === undefined
          ? `Session "${sessionId}" exists: continue it with its latest state token, or start a new session without a sessionId.`
          : `This state token of session "${sessionId}" was already used, and a newer one replaces it; send the latest token (the stateToken of the last turn's final data-orchestration part).`,
      );
    }
    try {
      if (carried) await states.modify(sessionId, () => carried);
      return await work(claim, carried?.version ?? 0);
    } catch (error) {
      running.delete(sessionId);
      await states.cleanupSession(sessionId).catch(() => undefined);
      await claim.release().catch(() => undefined);
      throw error;
    }
  };
  const signed = (state: OrchestrationState, base: number): string => sign({ ...state, version: base + state.version });
  const drop = async (sessionId: string) => {
    running.delete(sessionId);
    await states.cleanupSession(sessionId);
  };

  return {
    manager,
    stateless: true,
    sessionOf({ sessionId, sessionField = 'body.sessionId', token }) {
      return token === undefined ? sessionId : decode(token, sessionId, sessionField).sessionId;
    },
    async stateBefore({ sessionId, sessionField = 'body.sessionId', token }) {
      // Without a token there is no state to continue: the turn would start a session afresh.
      return token === undefined ? null : decode(token, sessionId, sessionField);
    },
    async startTurn({ agentId, sessionId: requested, sessionField = 'body.sessionId', token, config, messages }) {
      const carried = token === undefined ? undefined : decode(token, requested, sessionField);
      const sessionId = carried?.sessionId ?? requested ?? crypto.randomUUID();
      return withWorkingCopy(sessionId, carried, async (claim, base) => {
        const state = await beginTurn(manager, sessionId, agentId, config, messages, sessionField, false);
        let ended: Promise<{ state: OrchestrationState; stateToken: string }> | undefined;
        return {
          sessionId,
          manager,
          state,
          // The working copy is in memory: reading it back costs nothing, so `held` is not needed.
          finish() {
            ended ??= (async () => {
              try {
                const state = (await states.getState(sessionId)) ?? createState(sessionId, Date.now());
                return { state, stateToken: signed(state, base) };
              } finally {
                await drop(sessionId);
              }
            })();
            return ended;
          },
          async abandon() {
            if (ended) return;
            await drop(sessionId);
            await claim.release();
          },
        };
      });
    },
    async read(sessionId, token) {
      // A read changes nothing and shows only what the token holds, so any valid token will do.
      return decode(required(token), sessionId, 'path.sessionId');
    },
    async reset(sessionId, token) {
      const carried = decode(required(token), sessionId, 'path.sessionId');
      return withWorkingCopy(sessionId, carried, async (_claim, base) => {
        try {
          const state = (await states.resetState(sessionId)) ?? carried;
          return { state, stateToken: signed(state, base) };
        } finally {
          await drop(sessionId);
        }
      });
    },
    async remove(sessionId, token) {
      const carried = decode(required(token), sessionId, 'path.sessionId');
      // Nothing is kept here to delete: claiming spends the token, so it is refused from now on.
      await withWorkingCopy(sessionId, carried, async () => {
        await drop(sessionId);
      });
    },
    async health() {
      try {
        await guard.ping();
        return { store: 'stateless' };
      } catch (error) {
        return { store: 'stateless', error };
      }
    },
    async close() {
      await guard.close();
      await manager.close();
    },
  };
}

/**
 * The turn's first write, before anything streams: the user message handled and, on first use,
 * the session stamped with its agent, in one atomic update (`Turn.begin`). A session that
 * another agent owns is refused (its steps and sequence position mean nothing to a different
 * template), and so is one with too much waiting behind its running calls (429, Retry-After).
 */
async function beginTurn(
  manager: OrchestrationManager,
  sessionId: string,
  agentId: string,
  config: OrchestrationSource,
  messages: readonly ChatMessage[],
  path: SessionField,
  fresh: boolean,
): Promise<OrchestrationState> {
  // A new session (an id made up here), or one the store knows without a round trip, begins
  // locally; its message and claim ride on the turn's first write (see Turn.begin).
  const turn = new Turn({ manager, config, sessionId, agentId, messages, agentTools: [], fresh });
  try {
    return await turn.begin();
  } catch (error) {
    if (!SessionRefusedError.isInstance(error)) throw error;
    throw new HttpError(error.code, error.message, { path, cause: error });
  }
}

function sessionNotFound(sessionId: string): HttpError {
  return new HttpError('session-not-found', `No session "${sessionId}" (it may have expired).`, {
    path: 'path.sessionId',
  });
}

/**
 * The state of a session has outgrown what a request header carries (see
 * {@link MAX_STATE_TOKEN_LENGTH}). A 409, as `not-available`: this server's configuration cannot
 * carry the session on, and asking again will not help. Issuing the token anyway would only move
 * the failure to the next request, as a `431` from Node that names nothing.
 */
function tokenTooLarge(sessionId: string, length: number): HttpError {
  return new HttpError(
    'not-available',
    `The state of session "${sessionId}" no longer fits in a state token: the token would be ${length} characters long, and this stateless server issues at most ${MAX_STATE_TOKEN_LENGTH}, so that the ${STATE_HEADER} header fits in Node's ${maxHeaderSize}-byte limit on a request's headers (the state keeps the ids of the session's latest 256 tool calls, its running calls and its pending approvals). No token was issued, so the session cannot continue on this server: start a new session. For sessions this long, serve with a store (\`baton serve --store redis://…\` or \`postgres://…\`), or raise the limit on every server process and any proxy in front (NODE_OPTIONS=--max-http-header-size=65536).`,
  );
}

function stale(message: string): HttpError {
  return new HttpError('stale-state-token', message, { path: `header.${STATE_HEADER}` });
}
