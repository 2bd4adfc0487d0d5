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
import { orchestrationPartsTransformer } from '../ai-sdk/orchestration-parts.js';
import type { OrchestrationSnapshot } from './api-types.js';
import { errorResponse } from './http-errors.js';

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
  const errorText = (error: unknown): string => {
    // The client has its 200 already and gets what an error response would have said (a fault
    // of the server or a store's own words stay in the log): the log is where the cause is.
    logger.error({ err: error, sessionId, agentId }, 'chat stream failed');
    return errorResponse(error).body.error.message;
  };

  // The parts go where orchestrationParts() puts them in an app's own stream (one writer for
  // both); this transform also frames and encodes each chunk, and writes the start and finish.
  // The turn's own finish is held until then: its reason is the answer's, unless the final part failed.
  let finishReason: FinishReason | undefined;
  const orchestratedEvents = new TransformStream<UIMessageChunk, Uint8Array>(
    orchestrationPartsTransformer<Uint8Array>({
      steps,
      final: options.final,
      errorText,
      write: (controller, chunk) => {
        if (chunk.type === 'finish') finishReason = chunk.finishReason;
        else controller.enqueue(event(chunk));
      },
      start: (controller) => controller.enqueue(event({ type: 'start', messageMetadata: { sessionId, agentId } })),
      async end(controller, failed) {
        controller.enqueue(event({ type: 'finish', finishReason: failed ? 'error' : (finishReason ?? 'error') }));
        controller.enqueue(DONE);
      },
    }),
    undefined,
    // The one reader of the turn (handleMessage's callerDrains): it reads every chunk as it comes
    // and queues the bytes for a slow client, so the model loop, and the turn's slot in the
    // limiter, never wait on the client.
    { highWaterMark: Number.POSITIVE_INFINITY },
  );

  const body = result
    .toUIMessageStream({
      sendStart: false,
      sendFinish: true,
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
