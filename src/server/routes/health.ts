/**
 * `GET /healthz`: 200 when the store answers a read, else 503 saying so. Outside `/api`, so a
 * load balancer needs no API key; and so anyone may ask: the store's own reason (a host, a port)
 * goes to the log, not to the caller.
 */
import { Hono } from 'hono';
import type { Logger } from 'pino';
import type { HealthResponse } from '../api-types.js';
import { errorResponse } from '../http-errors.js';
import type { SessionSource } from '../session-source.js';

/** The health route, to mount at `/healthz`. */
export function healthRoutes(sessions: SessionSource, agentCount: number, logger: Logger): Hono {
  return new Hono().get('/', async (c) => {
    const health = await sessions.health();
    const body: HealthResponse = { ok: health.error === undefined, store: health.store, agents: agentCount };
    if (health.error === undefined) return c.json(body);
    const failure = errorResponse(health.error);
    if (failure.serverFault) logger.warn({ err: health.error }, 'health check failed');
    return c.json({ ...body, error: failure.body.error.message }, 503, failure.headers);
  });
}
