/**
 * `POST /api/chat/:agentId`: one orchestrated turn, streamed. Everything a request can get
 * wrong is refused before the turn starts (so before any model call or tool), with a 4xx
 * saying where; a turn waits for a slot of the turn limiter first.
 */
import { safeValidateUIMessages, type UIMessage } from 'ai';
import { Hono } from 'hono';
import type { Logger } from 'pino';
import { toAIState } from '../../core/state.js';
import type { OrchestrationSnapshot } from '../api-types.js';
import { checkHistory, type LooseMessage } from '../chat-history.js';
import { chatResponse } from '../chat-stream.js';
import { nextEventLoopTurn } from '../event-loop.js';
import { HttpError, messagePath } from '../http-errors.js';
import { SESSION_HEADER } from '../middleware.js';
import { parseChatBody, parseJsonBody } from '../request-schemas.js';
import { explainState, restingContext, type Served, type ServedAgents } from '../served-agents.js';
import { type SessionSource, STATE_HEADER } from '../session-source.js';
import { restingSnapshot, stepSnapshot } from '../snapshots.js';
import type { TurnLimiter } from '../turn-limiter.js';
import { methodNotAllowed } from './method-not-allowed.js';

/** What the chat route needs. */
export interface ChatRouteOptions {
  agents: ServedAgents;
  sessions: SessionSource;
  limiter: TurnLimiter;
  maxMessages: number;
  /** Most characters of text in one message. */
  maxMessageChars: number;
  logger: Logger;
}

/** The chat route, to mount at `/api/chat`. */
export function chatRoutes(options: ChatRouteOptions): Hono {
  const { agents, sessions, limiter, maxMessages, maxMessageChars, logger } = options;
  return new Hono()
    .post('/:agentId', async (c) => {
      const served = agents.get(c.req.param('agentId'));
      const agentId = served.agent.id;
      const signal = c.req.raw.signal;
      const release = await limiter.acquire(signal);
      try {
        const body = parseChatBody(parseJsonBody(await c.req.text()), maxMessages, maxMessageChars);
        const messages = await validMessages(body.messages, served);
        const turn = await sessions.startTurn({
          agentId,
          sessionId: body.sessionId,
          token: c.req.header(STATE_HEADER),
        });
        const { sessionId } = turn;
        const steps: OrchestrationSnapshot[] = [];
        const result = await served.agent
          .handleMessage({
            messages,
            sessionId,
            manager: turn.manager,
            abortSignal: signal,
            onStep: (info) => {
              steps.push(stepSnapshot(agentId, info));
              // Each model step starts in a later turn of the event loop; see event-loop.ts.
              return nextEventLoopTurn();
            },
            stream: {
              initialState: toAIState(turn.state),
              onCallbackError: (error: unknown, callback: string) =>
                logger.error({ err: error, sessionId, agentId }, `orchestration ${callback} failed`),
            },
          })
          .catch(async (error: unknown) => {
            await turn.abandon();
            throw error;
          });
        // The slot is the turn's until the model loop has ended and its writes are stored
        // (or a client that left stopped it), not until a slow client has read every byte.
        const ended = result.finalOrchestrationState.then(() => turn.finish(result.orchestration.sessionState()));
        ended.then(release, release);
        signal.addEventListener('abort', release, { once: true });
        const final = async () => {
          const { state, stateToken } = await ended;
          const explanation = explainState(turn.manager, served, state);
          const snapshot = restingSnapshot(agentId, state, explanation, true, restingContext(turn.manager, served));
          if (stateToken !== undefined) snapshot.stateToken = stateToken;
          const incomplete = result.orchestration.sequenceIncomplete();
          if (incomplete !== undefined) {
            const { type: _type, sessionId: _session, expected, ...rest } = incomplete;
            snapshot.sequenceIncomplete = { ...rest, expected: [...expected] };
          }
          return snapshot;
        };
        return chatResponse({
          result,
          sessionId,
          agentId,
          headers: { [SESSION_HEADER]: sessionId },
          steps,
          final,
          logger,
        });
      } catch (error) {
        release();
        throw error;
      }
    })
    .all('/:agentId', methodNotAllowed('POST'));
}

/**
 * The messages checked as a history a turn can continue, then as the AI SDK validates them
 * (part shapes, and each tool input against the agent's schema).
 */
async function validMessages(messages: readonly LooseMessage[], served: Served): Promise<UIMessage[]> {
  checkHistory(messages, served.toolNames);
  const validated = await safeValidateUIMessages({ messages, tools: served.agent.tools });
  if (!validated.success) {
    const path = messagePath(validated.error);
    throw new HttpError('invalid-messages', `${path}: ${validated.error.message}`, { path, cause: validated.error });
  }
  return validated.data;
}
