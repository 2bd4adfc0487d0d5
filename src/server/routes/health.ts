/**
 * `GET /healthz`: 200 when the store answers a read, else 503 with the reason. Outside `/api`,
 * so a load balancer needs no API key.
 */
import { Hono } from 'hono';
import type { HealthResponse } from '../api-types.js';
import { errorResponse } from '../http-errors.js';
import type { SessionSource } from '../session-source.js';

/** The health route, to mount at `/healthz`. */
export function healthRoutes(sessions: SessionSource, agentCount: number): Hono {
  return new Hono().get('/', async (c) => {
    const health = await sessions.health();
    const body: HealthResponse = { ok: health.error === undefined, store: health.store, agents: agentCount };
    if (health.error === undefined) return c.json(body);
    const failure = errorResponse(health.error);
    return c.json({ ...body, error: failure.body.error.message }, 503, failure.headers);
  });
}
