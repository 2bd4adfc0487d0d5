/**
 * `createApp()`: the Baton HTTP API as a Hono app. It never listens (the CLI does), so it runs
 * wherever Hono runs and its routes are tested with `app.request()`.
 *
 * This file only joins the parts: the middleware (`middleware.ts`), one route module per
 * resource (`routes/`), the session source that hides stored and stateless sessions
 * (`session-source.ts`), the turn limiter (`turn-limiter.ts`) and one error handler that maps
 * every error code to its status (`http-errors.ts`).
 */

import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ToolSet } from 'ai';
import { Hono } from 'hono';
import { type Logger, pino } from 'pino';
import type { AgentTelemetryOptions, CreateAgentOptions } from '../agents/create-agent.js';
import type { CompiledPolicy } from '../core/policy.js';
import type { AgentTemplate, Policy } from '../core/schema.js';
import {
  createOrchestrationManager,
  type EventListener,
  type OrchestrationManager,
} from '../orchestration/orchestration-manager.js';
import type { StoreSpec } from '../stores/resolve-store.js';
import { createTelemetry, type TelemetryTracer } from '../telemetry/otel.js';
import { approvalKeys, generateApprovalKey } from './approval-keys.js';
import { assertCreateAppOptions } from './check-app-options.js';
import { eventLoopPacer } from './event-loop.js';
import { errorResponse, HttpError } from './http-errors.js';
import {
  answerErrors,
  apiKeyAuth,
  bodySizeLimit,
  corsFor,
  requestLog,
  requestTelemetry,
  sameOriginWrites,
} from './middleware.js';
import { agentRoutes } from './routes/agents.js';
import { chatRoutes } from './routes/chat.js';
import { healthRoutes } from './routes/health.js';
import { sessionRoutes } from './routes/sessions.js';
import { staticRoutes } from './routes/static.js';
import { buildAgents, type ServedAgent } from './served-agents.js';
import { type SessionSource, type StatelessOptions, statelessSessions, storedSessions } from './session-source.js';
import { createTurnLimiter } from './turn-limiter.js';

export type { ServedAgent } from './served-agents.js';
export type { StatelessOptions } from './session-source.js';

/** Options of {@link createApp}. */
export interface CreateAppOptions {
  /** The agents to serve; their ids must be unique. */
  agents: readonly (AgentTemplate | ServedAgent)[];
  /** The manager whose store keeps sessions (the caller closes it). */
  manager?: OrchestrationManager;
  /** Where sessions live when no manager is given; the app owns it (`app.close()`). Default `memory:`. */
  store?: StoreSpec;
  /**
   * Decisions kept per session for `GET /api/sessions/:id/events` (the inspector's timeline)
   * when no manager is given (default {@link DEFAULT_EVENT_LOG}; 0 for none). A given manager
   * keeps its own `eventLog`.
   */
  eventLog?: number;
  /**
   * How long a reserved tool call keeps its place without being renewed, in milliseconds
   * (default 15,000), when no manager is given. A running call's process renews it every quarter
   * of the lease, so this bounds how long a dead process can hold a call's place, not how long a
   * tool may run.
   */
  leaseMs?: number;
  /**
   * The operator's policy (SPEC section 11), when no manager is given (give a manager its own
   * with `createOrchestrationManager({ policy })`): rules judged before every agent's, that no
   * template can loosen. Checked when the app is created. In stateless mode, limits that count
   * across sessions count within this process only.
   */
  policy?: Policy | CompiledPolicy;
  /**
   * Keep no state on the server: it travels in the `x-orchestration-state` header as a token
   * signed with the first key (the others still verify, for rotation); an older token of a
   * session is refused (see {@link StatelessOptions.replayStore}).
   */
  stateless?: StatelessOptions;
  /**
   * Keys that sign the tool approvals this app's turns ask for (the first signs, the others still
   * verify, for rotation); at least 32 bytes each. An approval a client sends back runs only if
   * one of them signed it for that agent, session, call, tool and input. Default: in stateless
   * mode the state keys; otherwise one random key made when the app is created, which only this
   * app knows: approvals asked for before a restart are then refused, and so are approvals asked
   * for by another process serving the same store (give every process the same keys).
   */
  approvalKeys?: readonly (string | Uint8Array)[];
  /** The model of agents that do not name their own (a spec such as `offline`, or a model). */
  model?: CreateAgentOptions['model'];
  /** Tool implementations by name, over the built-in ones. */
  tools?: ToolSet;
  /** Environment for model API keys (default `process.env`). */
  env?: Readonly<Record<string, string | undefined>>;
  /** When set, every `/api` request needs `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /**
   * Origins allowed to call `/api` from a browser (default: same origin only). A browser's request
   * that changes something (a chat turn, a reset, a delete) for a page of any other origin is
   * refused with `403 cross-origin`, also when the browser sends it without asking first.
   */
  corsOrigins?: readonly string[];
  /** Largest request body in bytes (default 1 MiB). */
  bodyLimit?: number;
  /** Most messages in one chat request (default 1,000). */
  maxMessages?: number;
  /**
   * Most characters of text in one message, its text parts together (default
   * {@link DEFAULT_MAX_MESSAGE_CHARS}); more is refused with `413 message-too-large`.
   */
  maxMessageChars?: number;
  /** Most chat turns that run at once in this process (default {@link DEFAULT_MAX_TURNS}). */
  maxTurns?: number;
  /**
   * Chat turns that run at once whatever the load (default {@link DEFAULT_MIN_TURNS}); between
   * this and `maxTurns`, a turn starts only while the event loop has time to spare.
   */
  minTurns?: number;
  /**
   * Chat turns that wait for a slot, in arrival order (default {@link DEFAULT_MAX_QUEUED_TURNS});
   * more are refused with `503 server-busy` and `Retry-After`.
   */
  maxQueuedTurns?: number;
  /**
   * Request and error log (a pino logger). Default: errors only (server faults, failed chat
   * streams, failed state writes), as JSON lines on stderr; pass `pino({ level: 'silent' })` for none.
   */
  logger?: Logger;
  /**
   * OpenTelemetry (see `docs/telemetry.md`). Given, the app records every orchestration decision
   * of its sessions as span events and names on every span of a request the session and agent it
   * served, and the route on the request's `SERVER` span. Whether given or not, the AI SDK's
   * spans of its agents' model calls (when an AI SDK telemetry integration is registered) carry
   * no message text, instructions, tool definitions, tool inputs or outputs unless
   * `recordContent` is true.
   */
  telemetry?: AppTelemetryOptions;
  /**
   * Folder of the built inspector to serve at `/`; `false` for none. Default: the package's
   * `dist/web`, when it was built.
   */
  webRoot?: string | false;
}

/** Options of {@link CreateAppOptions.telemetry}. */
export interface AppTelemetryOptions extends AgentTelemetryOptions {
  /** The tracer of the decisions' spans and events. Default: the `baton` tracer of the global provider. */
  tracer?: TelemetryTracer;
}

/** The Hono app, plus what it owns. */
export type BatonApp = Hono & {
  /** The manager that keeps this app's sessions (absent in stateless mode). */
  readonly manager: OrchestrationManager | undefined;
  /** Closes what the app opened: the store it created, the replay guard's store. */
  close(): Promise<void>;
};

/** Default largest request body: 1 MiB. */
export const DEFAULT_BODY_LIMIT = 1024 * 1024;
/** Default decisions kept per session by the managers an app or `baton serve` creates. */
export const DEFAULT_EVENT_LOG = 100;
/** Default most messages per chat request. */
export const DEFAULT_MAX_MESSAGES = 1000;
/**
 * Default most characters of text per message: about 8,000 tokens, ten pages pasted into a
 * question. Every step of a turn reads the whole message (condition regexes, the model, its token
 * count), so its cost grows with it: a turn with 100,000 characters took 350 ms of CPU, which
 * every other turn of the process waits for.
 */
export const DEFAULT_MAX_MESSAGE_CHARS = 32_000;
/**
 * Default most chat turns in flight per process. A turn with a remote model mostly waits on the
 * network, so many can run at once; how many actually do follows the CPU (see {@link DEFAULT_MIN_TURNS}).
 */
export const DEFAULT_MAX_TURNS = 256;
/**
 * Default chat turns that run whatever the load. Beyond them a turn starts only while the event
 * loop comes round within 20 ms, one more per loop (see `eventLoopPacer`): a CPU-bound model (the
 * offline one) then runs a few turns at a time, each at full speed, instead of all at a crawl.
 */
export const DEFAULT_MIN_TURNS = 4;
/** Default chat turns waiting for a slot per process. */
export const DEFAULT_MAX_QUEUED_TURNS = 1024;

/**
 * The package's built inspector (`dist/web`, from `src/server` and `dist/server` alike), found
 * when an app is created, never when this module loads. A path rather than
 * `new URL('../../dist/web/', import.meta.url)`: bundlers (Next.js's Turbopack) resolve that
 * form as an asset the bundle must contain, and fail the build when the folder is not there.
 */
function defaultWebRoot(): string {
  return join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist', 'web');
}

/** Builds the app; see the module comment and `docs/http-api.md`. */
export function createApp(options: CreateAppOptions): BatonApp {
  assertCreateAppOptions(options);
  // A fault answers the client "see the server's log": there must be one, even when the app
  // was given no logger.
  const logger = options.logger ?? pino({ level: 'error' }, process.stderr);
  // Checked first: a key that is too short fails here, before a store is opened.
  const approvals = options.approvalKeys
    ? approvalKeys(options.approvalKeys, 'approvalKeys')
    : options.stateless
      ? approvalKeys(options.stateless.keys, 'stateless.keys')
      : approvalKeys([generateApprovalKey()], 'approvalKeys');
  const decisions = options.telemetry
    ? createTelemetry(options.telemetry.tracer ? { tracer: options.telemetry.tracer } : {})
    : undefined;
  const sessions: SessionSource = options.stateless
    ? statelessSessions({
        ...(decisions ? withListener(options.stateless, decisions.listener) : options.stateless),
        ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
        ...(options.policy !== undefined ? { policy: options.policy } : {}),
      })
    : storedSessions(
        options.manager ??
          createOrchestrationManager({
            store: options.store ?? 'memory:',
            eventLog: options.eventLog ?? DEFAULT_EVENT_LOG,
            ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
            ...(options.policy !== undefined ? { policy: options.policy } : {}),
          }),
        options.manager === undefined,
      );
  // A stateless app's working copies report to the listener given above instead.
  const stopRecording = decisions && !sessions.stateless ? decisions.instrument(sessions.manager) : undefined;
  const agents = buildAgents(options.agents, sessions.manager, {
    telemetry: { recordContent: options.telemetry?.recordContent ?? false },
    ...(options.model !== undefined ? { model: options.model } : {}),
    ...(options.tools ? { tools: options.tools } : {}),
    ...(options.env ? { env: options.env } : {}),
  });
  const maxTurns = options.maxTurns ?? DEFAULT_MAX_TURNS;
  const limiter = createTurnLimiter({
    maxTurns,
    maxQueued: options.maxQueuedTurns ?? DEFAULT_MAX_QUEUED_TURNS,
    minTurns: options.minTurns ?? Math.min(maxTurns, DEFAULT_MIN_TURNS),
    pacer: eventLoopPacer(),
  });

  const app = new Hono();
  app.onError(answerErrors(logger));
  app.notFound((c) => {
    const response = errorResponse(new HttpError('not-found', `No route for ${c.req.method} ${c.req.path}.`));
    return c.json(response.body, response.status);
  });

  app.use(requestLog(logger));
  if (options.telemetry) app.use(requestTelemetry());
  if (options.corsOrigins?.length) app.use('/api/*', corsFor(options.corsOrigins));
  app.use('/api/*', sameOriginWrites(options.corsOrigins ?? []));
  if (options.apiKey) app.use('/api/*', apiKeyAuth(options.apiKey));
  app.use('/api/*', bodySizeLimit(options.bodyLimit ?? DEFAULT_BODY_LIMIT));

  app.route('/healthz', healthRoutes(sessions, agents.all.length, logger));
  app.route('/api/agents', agentRoutes(agents));
  app.route(
    '/api/chat',
    chatRoutes({
      agents,
      sessions,
      approvals,
      limiter,
      maxMessages: options.maxMessages ?? DEFAULT_MAX_MESSAGES,
      maxMessageChars: options.maxMessageChars ?? DEFAULT_MAX_MESSAGE_CHARS,
      logger,
    }),
  );
  app.route('/api/sessions', sessionRoutes(agents, sessions));
  const webRoot = options.webRoot === undefined ? defaultWebRoot() : options.webRoot;
  if (webRoot !== false && existsSync(webRoot)) app.route('/', staticRoutes(webRoot));

  return Object.assign(app, {
    manager: sessions.stateless ? undefined : sessions.manager,
    close: () => {
      stopRecording?.();
      return sessions.close();
    },
  });
}

/** Stateless options whose `onEvent` also calls `listener`. */
function withListener(stateless: StatelessOptions, listener: EventListener): StatelessOptions {
  const own = stateless.onEvent;
  return {
    ...stateless,
    onEvent: own
      ? (event) => {
          listener(event);
          own(event);
        }
      : listener,
  };
}
