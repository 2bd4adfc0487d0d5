/**
 * Requests to the HTTP API and readings of its answers, as a client sees them, for tests that
 * drive `createApp()` through `app.request()`.
 */
import type { LanguageModelV4 } from '@ai-sdk/provider';
import type { UIMessageChunk } from 'ai';
import { expect } from 'vitest';
import { createOfflineModel, type OfflineModelOptions } from '../../src/ai-sdk/offline-model.js';
import type { ApiErrorBody, OrchestrationSnapshot } from '../../src/server/api-types.js';

/** Something that answers requests like a Hono app. */
export interface RequestTarget {
  request(path: string, init?: RequestInit): Response | Promise<Response>;
}

/** A user message as `useChat` sends it. */
export function userMessage(text: string, id: string = crypto.randomUUID()) {
  return { id, role: 'user' as const, parts: [{ type: 'text' as const, text }] };
}

/** POSTs `body` as JSON (a string is sent as it is). */
export function postJson(
  app: RequestTarget,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
): Promise<Response> {
  return Promise.resolve(
    app.request(path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
      ...(signal ? { signal } : {}),
    }),
  );
}

/** The JSON chunks of an SSE UI message stream, in order. */
export async function chunksOf(response: Response): Promise<UIMessageChunk[]> {
  const text = await response.text();
  return text
    .split('\n')
    .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
    .map((line) => JSON.parse(line.slice('data: '.length)) as UIMessageChunk);
}

/** The payloads of the `data-orchestration` chunks. */
export function snapshotsOf(chunks: readonly UIMessageChunk[]): OrchestrationSnapshot[] {
  return chunks
    .filter((chunk) => chunk.type === 'data-orchestration')
    .map((chunk) => (chunk as unknown as { data: OrchestrationSnapshot }).data);
}

/** A chat turn that must succeed: its stream finishes without an error chunk. */
export async function chatTurn(
  app: RequestTarget,
  agentId: string,
  body: unknown,
  headers: Record<string, string> = {},
) {
  const response = await postJson(app, `/api/chat/${agentId}`, body, headers);
  expect(response.status, await response.clone().text()).toBe(200);
  const chunks = await chunksOf(response);
  expect(chunks.filter((chunk) => chunk.type === 'error')).toEqual([]);
  expect(chunks.at(-1)?.type).toBe('finish');
  const snapshots = snapshotsOf(chunks);
  return {
    response,
    chunks,
    snapshots,
    final: snapshots.at(-1)!,
    sessionId: response.headers.get('x-session-id')!,
  };
}

/** The error of an error response, checked to be the API's JSON error shape. */
export async function errorOf(response: Response): Promise<ApiErrorBody['error']> {
  expect(response.headers.get('content-type')).toContain('application/json');
  const body = (await response.json()) as ApiErrorBody;
  expect(typeof body.error.code).toBe('string');
  expect(typeof body.error.message).toBe('string');
  return body.error;
}

/** The offline model, counting the model calls it receives. */
export function countingOfflineModel(options: OfflineModelOptions = {}): { model: LanguageModelV4; calls(): number } {
  const offline = createOfflineModel(options);
  let calls = 0;
  const model: LanguageModelV4 = {
    ...offline,
    doGenerate: (call) => {
      calls++;
      return offline.doGenerate(call);
    },
    doStream: (call) => {
      calls++;
      return offline.doStream(call);
    },
  };
  return { model, calls: () => calls };
}
