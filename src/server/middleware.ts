/**
 * What every `/api` request goes through before its route: the request log, the request's
 * telemetry, CORS, the refusal of other origins' writes, the bearer key and the body size limit,
 * each Hono's own middleware where Hono has one; and how an error any of them (or a route)
 * throws is answered. The MCP gateway's `/mcp` goes through the same CORS, origin and key checks.
 */
import type { ErrorHandler, MiddlewareHandler } from 'hono';
import { bearerAuth } from 'hono/bearer-auth';
import { bodyLimit } from 'hono/body-limit';
import { cors } from 'hono/cors';
import { HTTPException } from 'hono/http-exception';
import { routePath } from 'hono/route';
import type { Logger } from 'pino';
import type { TelemetryAttributes } from '../telemetry/otel.js';
import { agentAttributes, sessionAttributes, setHttpRoute, startRequestScope } from '../telemetry/request-scope.js';
import { errorResponse, HttpError } from './http-errors.js';
import { STATE_HEADER } from './session-source.js';

/** The response header that names the session of a chat turn. */
export const SESSION_HEADER = 'x-session-id';

/** The status nginx and other proxies log for a request its client abandoned. */
const CLIENT_CLOSED_REQUEST = 499;

/**
 * Answers an error a middleware or route threw in the API's error shape (`errorResponse`), and
 * logs it with its stack when it is the server's fault. An app whose own middleware throws
 * (`sameOriginWrites`, say) needs it as its `onError`, or Hono answers a bare 500.
 */
export function answerErrors(logger: Logger): ErrorHandler {
  return (error, c) => {
    // Hono's own middleware (bearer auth) throws these with a finished response.
    if (error instanceof HTTPException) return error.getResponse();
    // The client left (mid-body, or while its turn waited): nobody reads an answer, and it is
    // no fault of the server. 499 is the status proxies log for it.
    if (c.req.raw.signal.aborted) return new Response(null, { status: CLIENT_CLOSED_REQUEST });
    const response = errorResponse(error);
    if (response.serverFault) logger.error({ err: error, path: c.req.path }, 'request failed');
    return c.json(response.body, response.status, response.headers);
  };
}

/** One line per request: method, path, status, time, and the session when there is one. */
export function requestLog(logger: Logger): MiddlewareHandler {
  return async (c, next) => {
    const started = performance.now();
    await next();
    const status = c.res.status;
    const entry = {
      method: c.req.method,
      path: c.req.path,
      status,
      ms: Math.round((performance.now() - started) * 10) / 10,
      sessionId: c.res.headers.get(SESSION_HEADER) ?? undefined,
    };
    // A 503 is the server shedding load or waiting for its store, not a fault to page about;
    // a 499 is a client that left.
    if (status >= 500 && status !== 503) logger.error(entry, 'request');
    else if (status >= 400 && status !== 499) logger.warn(entry, 'request');
    else logger.info(entry, 'request');
  };
}

/** Where {@link requestTelemetry} finds what a request served when its route does not say. */
export interface RequestTelemetryOptions {
  /**
   * The header that names the session: the answer's, else (only when given here) the request's
   * (default: the answer's `x-session-id`).
   */
  readonly sessionHeader?: string | undefined;
  /** The agent every request serves (the MCP gateway's one template). */
  readonly agentId?: string | undefined;
  /** The route to report (`/mcp`), for a handler whose Hono route path says no more than the middleware's. */
  readonly route?: string | undefined;
}

/**
 * The request's part of the trace (`createApp({ telemetry })`, the MCP gateway's `/mcp`): every
 * span started while the request is handled joins its scope, which gets the agent and session
 * the request served (from the route, the session header, or the first decision of the turn);
 * the route goes to the `SERVER` span of OpenTelemetry's HTTP instrumentation as `http.route`.
 */
export function requestTelemetry(options: RequestTelemetryOptions = {}): MiddlewareHandler {
  const header = options.sessionHeader ?? SESSION_HEADER;
  return async (c, next) => {
    const scope = startRequestScope();
    if (scope === undefined) return next(); // no @opentelemetry/api: nothing records
    const unrouted = routePath(c);
    await scope.run(next);
    const params: Record<string, string | undefined> = c.req.param();
    const attributes: TelemetryAttributes = {};
    const agentId = params.agentId ?? options.agentId;
    if (agentId) Object.assign(attributes, agentAttributes(agentId));
    // A request's own header names the session only where the caller says so: a chat answer's
    // x-session-id is the server's choice, a client's would be a claim.
    const sessionId =
      c.res.headers.get(header) ?? params.sessionId ?? (options.sessionHeader ? c.req.header(header) : undefined);
    if (sessionId) Object.assign(attributes, sessionAttributes(sessionId));
    scope.add(attributes);
    if (options.route !== undefined) return setHttpRoute(options.route);
    // A request no route took (a 404) keeps this middleware's own path: no route to name.
    const route = routePath(c);
    if (route !== unrouted) setHttpRoute(route);
  };
}

/** The headers a browser client of the chat API sends and reads besides the standard ones. */
const API_HEADERS: CorsHeaders = { send: [SESSION_HEADER, STATE_HEADER], read: [SESSION_HEADER, STATE_HEADER] };

/** Headers a route's browser clients send (`send`) and must be able to read (`read`), for CORS. */
export interface CorsHeaders {
  readonly send: readonly string[];
  readonly read: readonly string[];
}

/**
 * CORS for the given origins: a browser client may send `content-type`, `authorization` and
 * `headers.send`, and read `headers.read` (default: the chat API's session headers).
 */
export function corsFor(origins: readonly string[], headers: CorsHeaders = API_HEADERS): MiddlewareHandler {
  return cors({
    origin: [...origins],
    allowHeaders: ['content-type', 'authorization', ...headers.send],
    exposeHeaders: [...headers.read],
  });
}

/** Methods that change nothing, which a page of any origin may send (it never reads the answer without CORS). */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Refuses, with `403 cross-origin`, a request that changes something (any method but GET, HEAD
 * and OPTIONS) when a browser sent it for a page of another origin than the server's own and
 * `origins` (the CORS origins). CORS alone does not stop those: a page may send a "simple"
 * request without asking the server first (a POST with a `text/plain` body or none, a form),
 * and only the answer is hidden from it; so any site the user visits could otherwise run chat
 * turns on, and reset, a `baton serve` on the user's machine.
 *
 * The browser says where a request comes from: `Sec-Fetch-Site` (every current browser), or
 * else `Origin`, compared with the request's own origin. A request with neither (curl, a server)
 * is no browser's and passes; so does a browser's for its own origin. Hono's `csrf()` is not
 * used: it also refuses such header-less requests when they carry no JSON (a `curl -X DELETE`).
 */
export function sameOriginWrites(origins: readonly string[]): MiddlewareHandler {
  const allowed = new Set(origins);
  return async (c, next) => {
    if (SAFE_METHODS.has(c.req.method)) return next();
    const site = c.req.header('sec-fetch-site');
    const origin = c.req.header('origin');
    const ownSite = site === 'same-origin' || site === 'none';
    const ownOrigin = site === undefined && (origin === undefined || origin === new URL(c.req.url).origin);
    if (ownSite || ownOrigin || (origin !== undefined && allowed.has(origin))) return next();
    throw new HttpError(
      'cross-origin',
      `A page of another origin (${origin ?? 'unknown'}) may not change anything here: allow its origin with --cors (createApp({ corsOrigins })).`,
      { path: 'header.origin' },
    );
  };
}

/** Requires `Authorization: Bearer <apiKey>`, answering in the API's error shape. */
export function apiKeyAuth(apiKey: string): MiddlewareHandler {
  const message = (text: string) => ({ error: { code: 'unauthorized', message: text, path: 'header.authorization' } });
  return bearerAuth({
    token: apiKey,
    noAuthenticationHeader: { message: message('Send `Authorization: Bearer <key>` (BATON_API_KEY).') },
    invalidAuthenticationHeader: { message: message('The Authorization header is not `Bearer <key>`.') },
    invalidToken: { message: message('The API key is wrong.') },
  });
}

/** Refuses a body over `maxSize` bytes with `413 body-too-large`, before reading the rest. */
export function bodySizeLimit(maxSize: number): MiddlewareHandler {
  const tooLarge = () => {
    throw new HttpError('body-too-large', `The request body is larger than ${maxSize} bytes.`, { path: 'body' });
  };
  const streamed = bodyLimit({ maxSize, onError: tooLarge });
  return (c, next) => {
    // A body with a Content-Length (and no Transfer-Encoding) is as long as it says: Node's HTTP
    // parser reads exactly that many bytes. Hono's bodyLimit decides the same from the header,
    // but asks for the request's body stream first, which makes @hono/node-server build a whole
    // web Request around the socket, and the route then reads the body through web streams
    // instead of its direct path. Bodies without a length (chunked) are counted as they stream.
    const length = c.req.header('content-length');
    if (length !== undefined && c.req.header('transfer-encoding') === undefined) {
      return Number.parseInt(length, 10) > maxSize ? tooLarge() : next();
    }
    return streamed(c, next);
  };
}
