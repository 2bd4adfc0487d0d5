/**
 * The MCP gateway over Streamable HTTP (`baton mcp --http <port>`): `POST/GET/DELETE /mcp` with
 * `Mcp-Session-Id` sessions (the SDK's web-standard transport, mounted on a Hono app), one
 * gateway session per MCP session whose orchestration session has the same id. The app is
 * `createApp()`'s, so the API key, CORS, the refusal of other origins' writes and of other
 * `Host`s on loopback (on `/mcp` as on `/api`), the session routes (`GET /api/sessions/:id`,
 * `/api/sessions/:id/events`), the inspector at `/` (when the package's web build is there) and
 * the turn limiter's admission control are the ones `baton serve` has.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import type { ToolSet } from 'ai';
import { jsonSchema } from 'ai';
import { type Context, Hono } from 'hono';
import pino from 'pino';
import {
  type AppTelemetryOptions,
  createApp,
  DEFAULT_MAX_QUEUED_TURNS,
  DEFAULT_MAX_TURNS,
} from '../server/create-app.js';
import { errorResponse, HttpError } from '../server/http-errors.js';
import { listen, urlOf } from '../server/listen.js';
import { isLoopback, loopbackHostsOnly } from '../server/loopback.js';
import {
  answerErrors,
  apiKeyAuth,
  type CorsHeaders,
  corsFor,
  requestTelemetry,
  sameOriginWrites,
} from '../server/middleware.js';
import { createTurnLimiter } from '../server/turn-limiter.js';
import { McpGateway, type McpGatewayOptions } from './gateway.js';

/** What a browser MCP client sends and reads besides the standard headers (Streamable HTTP). */
const MCP_HEADERS: CorsHeaders = {
  send: ['mcp-session-id', 'mcp-protocol-version', 'last-event-id'],
  read: ['mcp-session-id'],
};

/** Default {@link ServeHttpOptions.sessionIdleMs}: 30 minutes. */
export const DEFAULT_SESSION_IDLE_MS = 30 * 60_000;
/** Default {@link ServeHttpOptions.maxSessions}. */
export const DEFAULT_MAX_SESSIONS = 256;

function notFound(c: Context): Response {
  const response = errorResponse(new HttpError('not-found', 'An MCP gateway has no chat API: call tools over /mcp.'));
  return c.json(response.body, response.status);
}

/** Options of {@link serveHttp}. */
export interface ServeHttpOptions extends McpGatewayOptions {
  port: number;
  host: string;
  /** Every request needs `Authorization: Bearer <apiKey>` when set. */
  apiKey?: string | undefined;
  /**
   * Origins whose pages may call `/mcp` and `/api` from a browser (`--cors`); a browser's write
   * for a page of any other origin is `403 cross-origin`, as for `baton serve`.
   */
  corsOrigins?: readonly string[] | undefined;
  /** Most tool calls running at once (default as `baton serve`'s turns). */
  maxTurns?: number | undefined;
  /** Calls that wait for a slot; more are refused. */
  maxQueuedTurns?: number | undefined;
  /**
   * An MCP session without a request for this long is closed, with its upstream connections
   * (default {@link DEFAULT_SESSION_IDLE_MS}): clients that never say goodbye do not pile up.
   */
  sessionIdleMs?: number | undefined;
  /** Most MCP sessions open at once (default {@link DEFAULT_MAX_SESSIONS}); a new one beyond is a 503. */
  maxSessions?: number | undefined;
  /**
   * OpenTelemetry (`baton mcp --otel`): every decision of the gateway's sessions is recorded as a
   * span event with `tracer` (as `createApp({ telemetry })` records a chat's), and every span of
   * a `/mcp` request names its session (the `Mcp-Session-Id`) and agent.
   */
  telemetry?: Pick<AppTelemetryOptions, 'tracer'> | undefined;
  signal?: AbortSignal | undefined;
  /** Where lines for people go (stderr). */
  say: (line: string) => void;
}

/** A running HTTP gateway. */
export interface HttpGateway {
  readonly url: string;
  readonly gateway: McpGateway;
  /** Resolves once the server stopped (after `close()` or the signal). */
  readonly closed: Promise<void>;
  close(): Promise<void>;
}

/** Serves the gateway over Streamable HTTP at `/mcp`; resolves once it listens. */
export async function serveHttp(options: ServeHttpOptions): Promise<HttpGateway> {
  const limiter = createTurnLimiter({
    maxTurns: options.maxTurns ?? DEFAULT_MAX_TURNS,
    maxQueued: options.maxQueuedTurns ?? DEFAULT_MAX_QUEUED_TURNS,
  });
  const gateway = new McpGateway({ ...options, limiter });
  // Fail at start, not at the first client: the upstreams answer and the template selects from them.
  const probe = await gateway.probe();
  // The session routes explain a session by its agent: the template, its tools the upstream ones
  // it selects, each a declaration without `execute` (nothing runs through the app; calls go
  // through /mcp).
  const declarations: ToolSet = {};
  for (const tool of probe.offered) {
    declarations[tool.name] = {
      description: tool.description,
      inputSchema: jsonSchema(tool.inputSchema as Parameters<typeof jsonSchema>[0]),
    };
  }
  const logger = pino({ level: 'error' }, process.stderr);
  const origins = options.corsOrigins ?? [];
  const api = createApp({
    agents: [{ ...options.template, tools: probe.offered.map((tool) => tool.name) }],
    manager: options.manager,
    model: 'offline',
    tools: declarations,
    corsOrigins: origins,
    ...(options.apiKey ? { apiKey: options.apiKey } : {}),
    // The app instruments the manager the gateway decides with: one listener for both.
    ...(options.telemetry ? { telemetry: { ...options.telemetry, recordContent: false } } : {}),
    logger,
  });
  const app = new Hono();
  // The checks below throw in the API's error shape; answered as the API answers them.
  app.onError(answerErrors(logger));
  // A gateway serves MCP and the session routes, no chat: its sessions' turns are MCP calls.
  app.all('/api/chat', notFound);
  app.all('/api/chat/*', notFound);
  // First, so that a refused request's span names its session too.
  if (options.telemetry) {
    app.use('/mcp', requestTelemetry({ sessionHeader: 'mcp-session-id', agentId: gateway.agentId, route: '/mcp' }));
  }
  // /mcp is behind the checks /api is behind, so a page of another site can no more call a tool
  // than run a chat turn: CORS for the --cors origins, the refusal of every other origin's
  // writes (a page may POST without asking first; the SDK's strict media-type check is no
  // guard to lean on), then the API key. The Host check (DNS rebinding) wraps the whole app.
  if (origins.length > 0) app.use('/mcp', corsFor(origins, MCP_HEADERS));
  app.use('/mcp', sameOriginWrites(origins));
  if (options.apiKey) app.use('/mcp', apiKeyAuth(options.apiKey));
  const transports = new Map<string, WebStandardStreamableHTTPServerTransport>();
  /** When each session was last asked something. */
  const seen = new Map<WebStandardStreamableHTTPServerTransport, number>();
  const idleMs = options.sessionIdleMs ?? DEFAULT_SESSION_IDLE_MS;
  const maxSessions = options.maxSessions ?? DEFAULT_MAX_SESSIONS;
  const sweeper = setInterval(
    () => {
      const cutoff = Date.now() - idleMs;
      for (const [transport, at] of seen) if (at < cutoff) void transport.close();
    },
    Math.max(1_000, Math.min(60_000, Math.floor(idleMs / 4))),
  );
  sweeper.unref();
  app.all('/mcp', async (c) => {
    const id = c.req.header('mcp-session-id');
    const transport = id === undefined ? undefined : transports.get(id);
    if (transport === undefined) {
      if (id !== undefined) {
        return c.json({ jsonrpc: '2.0', error: { code: -32001, message: `Session "${id}" not found` }, id: null }, 404);
      }
      if (gateway.sessions.size >= maxSessions) {
        const response = errorResponse(
          new HttpError('server-busy', `${maxSessions} MCP sessions are open (--max-sessions); try again later.`),
        );
        return c.json(response.body, response.status, response.headers);
      }
      const created = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sessionId) => {
          transports.set(sessionId, created);
        },
        onsessionclosed: (sessionId) => {
          transports.delete(sessionId);
        },
      });
      await gateway.connect(created, {
        onClosed: () => {
          seen.delete(created);
          if (created.sessionId !== undefined) transports.delete(created.sessionId);
        },
      });
      try {
        return await created.handleRequest(c.req.raw);
      } finally {
        // A request without a session that was not an `initialize` (a probe, junk, a client
        // that skipped the handshake) was answered with an error and opened no session: its
        // gateway session goes now, not at --session-idle, or a burst of such requests would
        // hold every --max-sessions slot and lock real clients out.
        if (created.sessionId === undefined) await created.close().catch(() => undefined);
        else seen.set(created, Date.now());
      }
    }
    seen.set(transport, Date.now());
    return transport.handleRequest(c.req.raw);
  });
  app.route('/', api);

  let resolveClosed: () => void = () => undefined;
  const closed = new Promise<void>((resolve) => {
    resolveClosed = resolve;
  });
  // On loopback only, answered only for loopback names: see loopbackHostsOnly (DNS rebinding).
  const server = createAdaptorServer({
    fetch: isLoopback(options.host) ? loopbackHostsOnly(app.fetch) : app.fetch,
    hostname: options.host,
  });
  try {
    // As `baton serve` listens: a port in use is one line that names --http, not a stack.
    await listen(server, { port: options.port, host: options.host, portFlag: '--http' });
  } catch (error) {
    clearInterval(sweeper);
    await api.close();
    throw error;
  }
  const url = urlOf(server.address() as AddressInfo);
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      clearInterval(sweeper);
      await gateway.close();
      await api.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      resolveClosed();
    })();
    return closing;
  };
  options.signal?.addEventListener('abort', () => void close(), { once: true });
  options.say(`Baton MCP gateway listening on ${url}/mcp`);
  // Counted on the list the upstreams gave now: sessions list them again, and see what changed since.
  options.say(
    `Tools in the upstreams' first list: ${probe.offered.length} offered by the template at most, ${probe.hidden.length} hidden`,
  );
  return { url, gateway, closed, close };
}
