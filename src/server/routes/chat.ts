/**
 * `POST /api/chat/:agentId`: one orchestrated turn, streamed. Everything a request can get
 * wrong is refused before the turn starts (so before any model call or tool), with a 4xx
 * saying where; a turn waits for a slot of the turn limiter first.
 *
 * `GET /api/chat/:agentId/:chatId/stream`: where `useChat({ resume: true })` asks to reconnect
 * to a stream still running. Baton keeps no stream to resume (a turn belongs to the request
 * that started it, and its state is stored as it goes), so the answer is the AI SDK's "nothing
 * to resume", 204, which `useChat` takes as done; a 404 would show as an error on every load.
 */
import { safeValidateUIMessages, type UIMessage } from 'ai';
import { Hono } from 'hono';
import type { Logger } from 'pino';
import { finalSnapshot, stepSnapshot } from '../../ai-sdk/orchestration-snapshot.js';
import type { ToolApprovalScope } from '../../ai-sdk/tool-approval-secret.js';
import { latestUserMessage } from '../../core/messages.js';
import type { OrchestrationSnapshot } from '../api-types.js';
import type { ApprovalKeys } from '../approval-keys.js';
import { checkGrantsUsable, checkHistory, type LooseMessage } from '../chat-history.js';
import { chatResponse } from '../chat-stream.js';
import { nextEventLoopTurn } from '../event-loop.js';
import { HttpError, messagePath } from '../http-errors.js';
import { SESSION_HEADER } from '../middleware.js';
import { parseChatBody, parseJsonBody } from '../request-schemas.js';
import { explainState, type Served, type ServedAgents } from '../served-agents.js';
import { type SessionSource, STATE_HEADER } from '../session-source.js';
import type { TurnLimiter } from '../turn-limiter.js';
import { methodNotAllowed } from './method-not-allowed.js';

/** What the chat route needs. */
export interface ChatRouteOptions {
  agents: ServedAgents;
  sessions: SessionSource;
  /** The keys that sign the tool approvals turns issue, and verify the ones clients send back. */
  approvals: ApprovalKeys;
  limiter: TurnLimiter;
  maxMessages: number;
  /** Most characters of text in one message. */
  maxMessageChars: number;
  logger: Logger;
}

/** The chat route, to mount at `/api/chat`. */
export function chatRoutes(options: ChatRouteOptions): Hono {
  const { agents, sessions, approvals, limiter, maxMessages, maxMessageChars, logger } = options;
  return new Hono()
    .post('/:agentId', async (c) => {
      const served = agents.get(c.req.param('agentId'));
      const agentId = served.agent.id;
      const signal = c.req.raw.signal;
      const release = await limiter.acquire(signal);
      try {
        const body = parseChatBody(parseJsonBody(await c.req.text()), maxMessages, maxMessageChars);
        const named = { sessionId: body.sessionId, sessionField: body.sessionField, token: c.req.header(STATE_HEADER) };
        // The user message this turn answers, as the session records it (its lastMessageKey).
        // Approvals are signed for it, so that one asked for in an earlier turn cannot be carried
        // past a newer message (see checkGrantsUsable, which checks the session handled it last).
        const turnKey = latestUserMessage(body.messages as Parameters<typeof latestUserMessage>[0])?.key;
        const history = checkHistory(body.messages, served.toolNames, {
          keys: approvals,
          scope: () => {
            const sessionId = sessions.sessionOf(named);
            return sessionId === undefined ? undefined : approvalScope(agentId, sessionId, turnKey);
          },
        });
        // Granted approvals are checked against the session as it is before the turn begins
        // (one store read, for such requests only): the turn's first write handles the message.
        if (history.grants.length > 0) checkGrantsUsable(history, body.messages, await sessions.stateBefore(named));
        const messages = await validMessages(body.messages, served);
        const turn = await sessions.startTurn({ agentId, ...named, config: served.agent.template, messages });
        const { sessionId } = turn;
        const steps: OrchestrationSnapshot[] = [];
        const result = await served.agent
          .handleMessage({
            messages,
            sessionId,
            manager: turn.manager,
            abortSignal: signal,
            // The approvals this turn asks for are signed for this agent, session and user message,
            // under the key that signed the ones it runs (so that a turn during a key rotation verifies).
            toolApprovalSecret: approvals.secret(approvalScope(agentId, sessionId, turnKey), history.key),
            // The response reads the turn to its end whatever the client's pace (chat-stream.ts).
            callerDrains: true,
            onStep: (info) => {
              steps.push(stepSnapshot(agentId, info));
              // Each model step starts in a later turn of the event loop; see event-loop.ts.
              return nextEventLoopTurn();
            },
            stream: {
              // The turn's first write is done: the model loop starts from it, and keeps the claim.
              sessionState: turn.state,
              agentId,
              onCallbackError: (error: unknown, callback: string) =>
                logger.error({ err: error, sessionId, agentId }, `orchestration ${callback} failed`),
            },
          })
          .catch(async (error: unknown) => {
            await turn.abandon();
            throw error;
          });
        // The slot is the turn's until the model loop has ended and its writes are stored, not
        // until a slow client has read every byte; and not sooner when the client leaves: its
        // abort stops the model loop, but a tool that ignores the signal runs on, and a client
        // that left and came back at once would get a second one running beside it.
        const ended = result.finalOrchestrationState.then(
          () => turn.finish(result.orchestration.sessionState()),
          // A turn that failed late still gives its session back (stateless: its working copy and
          // its claim), or the session would refuse every later turn in this process.
          async (error: unknown) => {
            await turn.abandon();
            throw error;
          },
        );
        ended.then(release, release);
        const final = async () => {
          const { state, stateToken } = await ended;
          const explanation = explainState(turn.manager, served, state);
          const snapshot = finalSnapshot(agentId, state, explanation, result.orchestration.sequenceIncomplete());
          if (stateToken !== undefined) snapshot.stateToken = stateToken;
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
    .all('/:agentId', methodNotAllowed('POST'))
    .get('/:agentId/:chatId/stream', (c) => {
      agents.get(c.req.param('agentId')); // an unknown agent is still a 404 that lists the agents
      return c.body(null, 204);
    })
    .all('/:agentId/:chatId/stream', methodNotAllowed('GET'));
}

/** The scope of a turn's approvals: its agent, its session and the user message it answers. */
function approvalScope(agentId: string, sessionId: string, turn: string | undefined): ToolApprovalScope {
  return turn === undefined ? { agentId, sessionId } : { agentId, sessionId, turn };
}

/**
 * The messages (checked by `checkHistory` as a history a turn can continue) as the AI SDK
 * validates them: part shapes, and each tool input against the agent's schema.
 */
async function validMessages(messages: readonly LooseMessage[], served: Served): Promise<UIMessage[]> {
  const validated = await safeValidateUIMessages({ messages, tools: served.agent.tools });
  if (!validated.success) {
    const path = messagePath(validated.error);
    throw new HttpError('invalid-messages', `${path}: ${validated.error.message}`, { path, cause: validated.error });
  }
  return validated.data;
}
