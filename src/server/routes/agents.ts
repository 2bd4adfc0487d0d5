/**
 * `GET /api/agents` and `GET /api/agents/:agentId`: what the server serves.
 */
import { Hono } from 'hono';
import type { AgentListResponse } from '../api-types.js';
import type { ServedAgents } from '../served-agents.js';
import { methodNotAllowed } from './method-not-allowed.js';

/** The agent routes, to mount at `/api/agents`. */
export function agentRoutes(agents: ServedAgents): Hono {
  const list: AgentListResponse = { agents: agents.all.map((served) => served.summary) };
  return new Hono()
    .get('/', (c) => c.json(list))
    .get('/:agentId', (c) => c.json(agents.get(c.req.param('agentId')).detail))
    .all('/', methodNotAllowed('GET'))
    .all('/:agentId', methodNotAllowed('GET'));
}
