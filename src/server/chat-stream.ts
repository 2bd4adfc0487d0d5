/**
 * The chat answer: the AI SDK's UI message stream of the turn, with Baton's
 * `data-orchestration` parts put into the same stream, framed as server-sent events and
 * encoded, all by one transform.
 *
 * Order of the parts: `start` (its metadata names the session and agent), then for every model
 * step the snapshot taken before it, right before the step's `start-step`, then the step; after
 * the last step, once every state write is stored, the final snapshot, then `finish`.
 *
 * Why one transform: a chunk's cost here is mostly the web streams it passes through (each hop
 * is a few promises and queue operations per chunk, and the offline model streams hundreds of
 * small chunks a turn). `createUIMessageStreamResponse` would add two hops of its own (JSON to
 * SSE, then text to bytes) after ours; doing both in this transform cut the CPU of a whole turn
 * by about a tenth in-process, so Baton's answer passes through fewer streams than a plain
 * `toUIMessageStreamResponse()` server's. The framing is the AI SDK's UI message stream v1
 * (`data: <json>` lines, then `data: [DONE]`, with its `UI_MESSAGE_STREAM_HEADERS`).
 */
import { type FinishReason, UI_MESSAGE_STREAM_HEADERS, type UIMessageChunk } from 'ai';
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

const encoder = new TextEncoder();
const DONE = encoder.encode('data: [DONE]\n\n');

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

  const orchestratedEvents = new TransformStream<UIMessageChunk, Uint8Array>({
    start(controller) {
      controller.enqueue(event({ type: 'start', messageMetadata: { sessionId, agentId } }));
    },
    transform(chunk, controller) {
      // The snapshot of a step was taken in prepareStep, before the step began.
      if (chunk.type === 'start-step')
        for (const snapshot of steps.splice(0)) controller.enqueue(event(part(snapshot)));
      controller.enqueue(event(chunk));
    },
    async flush(controller) {
      // A step that was prepared but never began (the turn was aborted) still shows what it offered.
      for (const snapshot of steps.splice(0)) controller.enqueue(event(part(snapshot)));
      let finishReason: FinishReason = 'error';
      try {
        controller.enqueue(event(part(await options.final())));
        finishReason = await Promise.resolve(result.finishReason).catch(() => 'error' as const);
      } catch (error) {
        controller.enqueue(event({ type: 'error', errorText: errorText(error) }));
      }
      controller.enqueue(event({ type: 'finish', finishReason }));
      controller.enqueue(DONE);
    },
  });

  const body = result
    .toUIMessageStream({
      sendStart: false,
      sendFinish: false,
      onError: errorText,
      // A refused tool call's text says why and which tools are allowed: the client needs it.
      redactToolErrors: false,
    })
    .pipeThrough(orchestratedEvents);
  return new Response(body, { headers: { ...UI_MESSAGE_STREAM_HEADERS, ...options.headers } });
}

/** One server-sent event of the UI message stream protocol, encoded. */
function event(chunk: UIMessageChunk): Uint8Array {
  return encoder.encode(`data: ${JSON.stringify(chunk)}\n\n`);
}
