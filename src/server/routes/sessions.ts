/**
 * `GET /api/sessions/:sessionId`, `POST /api/sessions/:sessionId/reset` and
 * `DELETE /api/sessions/:sessionId`, for stored and stateless sessions alike, and
 * `GET /api/sessions/:sessionId/events`, the session's event log (stored sessions only).
 */
import { type Context, Hono } from 'hono';
import type { OrchestrationState } from '../../core/state.js';
import { HttpError } from '../http-errors.js';
import { parseEventsQuery, parseSessionId } from '../request-schemas.js';
import { explainState, type Served, type ServedAgents } from '../served-agents.js';
import { type SessionSource, STATE_HEADER } from '../session-source.js';
import { sessionEventsResponse, sessionResponse } from '../snapshots.js';
import { methodNotAllowed } from './method-not-allowed.js';

/** The session routes, to mount at `/api/sessions`. */
export function sessionRoutes(agents: ServedAgents, sessions: SessionSource): Hono {
  /** The session named in the path, with the agent that owns it. */
  const sessionOf = async (c: Context): Promise<{ served: Served; state: OrchestrationState; token?: string }> => {
    const sessionId = parseSessionId(c.req.param('sessionId') ?? '', 'path.sessionId');
    const token = c.req.header(STATE_HEADER);
    const state = await sessions.read(sessionId, token);
    const served = state.agentId === undefined ? undefined : agents.find(state.agentId);
    if (!served) {
      throw new HttpError(
        'session-without-agent',
        state.agentId === undefined
          ? `Session "${sessionId}" was not created by an agent of this server.`
          : `Session "${sessionId}" belongs to agent "${state.agentId}", which this server does not serve.`,
        { path: 'path.sessionId' },
      );
    }
    return token === undefined ? { served, state } : { served, state, token };
  };
  const respond = (served: Served, state: OrchestrationState) =>
    sessionResponse(served.agent.id, state, explainState(sessions.manager, served, state));

  return new Hono()
    .get('/:sessionId', async (c) => {
      const { served, state } = await sessionOf(c);
      return c.json(respond(served, state));
    })
    .get('/:sessionId/events', async (c) => {
      // Checked first: in stateless mode the session cannot even be read without its token.
      const store = sessions.stateless ? undefined : await sessions.manager.getStateManager().store();
      if (store === undefined || sessions.manager.eventLog === 0 || store.readLog === undefined) {
        const why =
          store === undefined
            ? 'This server is stateless: it keeps no event log, because a session travels in its token.'
            : sessions.manager.eventLog === 0
              ? 'This server keeps no event log: start it with --event-log <n> (or createApp({ eventLog }), or a manager created with eventLog).'
              : `This server's session store (${store.name}) keeps no event log.`;
        throw new HttpError('not-available', why, { path: 'path.sessionId' });
      }
      const page = parseEventsQuery(c.req.query());
      const { served, state } = await sessionOf(c);
      const entries = await store.readLog(state.sessionId);
      const explain = (at: OrchestrationState) => explainState(sessions.manager, served, at);
      return c.json(sessionEventsResponse(served.agent.id, state, entries, explain, page));
    })
    .post('/:sessionId/reset', async (c) => {
      const { served, state, token } = await sessionOf(c);
      const reset = await sessions.reset(state.sessionId, token);
      if (reset.stateToken !== undefined) c.header(STATE_HEADER, reset.stateToken);
      return c.json(respond(served, reset.state));
    })
    .delete('/:sessionId', async (c) => {
      const { state, token } = await sessionOf(c);
      await sessions.remove(state.sessionId, token);
      return c.body(null, 204);
    })
    .all('/:sessionId', methodNotAllowed('GET, DELETE'))
    .all('/:sessionId/reset', methodNotAllowed('POST'))
    .all('/:sessionId/events', methodNotAllowed('GET'));
}
