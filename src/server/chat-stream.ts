/**
 * The chat answer: the AI SDK's UI message stream of the turn, with Baton's
 * `data-orchestration` parts put into the same stream by one transform, so a chunk passes
 * through no more streams than in a plain `toUIMessageStreamResponse` server, plus that one.
 *
 * Order of the parts: `start` (its metadata names the session and agent), then for every model
 * step the snapshot taken before it, right before the step's `start-step`, then the step; after
 * the last step, once every state write is stored, the final snapshot, then `finish`.
 */
import { createUIMessageStreamResponse, type FinishReason, type UIMessageChunk } from 'ai';
import type { Logger } from 'pino';
import type { OrchestratedStreamResult } from '../ai-sdk/llm-orchestration-service.js';
import { BatonError } from '../core/errors.js';
import type { OrchestrationSnapshot } from './api-types.js';

/** The id every `data-orchestration` part shares, so a client keeps one and replaces it in place. */
export const ORCHESTRATION_PART_ID = 'orchestration';

/** What {@link chatResponse} needs from the route. */
export interface ChatResponseOptions {
  result: OrchestratedStreamResult;
  sessionId: string;
  agentId: string;
  headers: Record<string, string>;
  /** Snapshots the model loop reported before its steps, in order, not yet sent. */
  steps: OrchestrationSnapshot[];
  /** The final snapshot, once the turn's writes are done. */
  final: () => Promise<OrchestrationSnapshot>;
  logger: Logger;
}

/** Streams the turn as the response; see the module comment. */
export function chatResponse(options: ChatResponseOptions): Response {
  const { result, sessionId, agentId, steps, logger } = options;
  const part = (data: OrchestrationSnapshot): UIMessageChunk =>
    ({ type: 'data-orchestration', id: ORCHESTRATION_PART_ID, data }) as UIMessageChunk;
  const errorText = (error: unknown): string => {
    logger.warn({ err: error, sessionId, agentId }, 'chat stream failed');
    // Baton's own messages say what to do; others (a provider's) may carry details of the
    // server, so the client gets the AI SDK's generic text.
    return BatonError.isInstance(error) ? error.message : 'An error occurred.';
  };

  const orchestrated = new TransformStream<UIMessageChunk, UIMessageChunk>({
    start(controller) {
      controller.enqueue({ type: 'start', messageMetadata: { sessionId, agentId } });
    },
    transform(chunk, controller) {
      // The snapshot of a step was taken in prepareStep, before the step began.
      if (chunk.type === 'start-step') for (const snapshot of steps.splice(0)) controller.enqueue(part(snapshot));
      controller.enqueue(chunk);
    },
    async flush(controller) {
      // A step that was prepared but never began (the turn was aborted) still shows what it offered.
      for (const snapshot of steps.splice(0)) controller.enqueue(part(snapshot));
      let finishReason: FinishReason = 'error';
      try {
        controller.enqueue(part(await options.final()));
        finishReason = await Promise.resolve(result.finishReason).catch(() => 'error' as const);
      } catch (error) {
        controller.enqueue({ type: 'error', errorText: errorText(error) });
      }
      controller.enqueue({ type: 'finish', finishReason });
    },
  });

  const stream = result
    .toUIMessageStream({
      sendStart: false,
      sendFinish: false,
      onError: errorText,
      // A refused tool call's text says why and which tools are allowed: the client needs it.
      redactToolErrors: false,
    })
    .pipeThrough(orchestrated);
  return createUIMessageStreamResponse({ stream, headers: options.headers });
}
