/**
 * `useChat({ resume: true })` asks `GET /api/chat/:agentId/:chatId/stream` on every load: the
 * answer must be "nothing to resume" (204), which the AI SDK's transport takes as done, not an
 * error the page would show.
 */
import { DefaultChatTransport, type UIMessage } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';
import { loadTemplate } from '../templates/load-template.js';
import type { ApiErrorBody } from './api-types.js';
import { type BatonApp, createApp } from './create-app.js';

const reasoner = await loadTemplate(new URL('../../examples/agents/cognitive-reasoner.json', import.meta.url).pathname);

const apps: BatonApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

function makeApp(options: { apiKey?: string } = {}): BatonApp {
  const app = createApp({ agents: [reasoner], model: 'offline', webRoot: false, ...options });
  apps.push(app);
  return app;
}

/** useChat's own transport, talking to the app in-process. */
function transportFor(app: BatonApp, agentId: string, headers: Record<string, string> = {}) {
  return new DefaultChatTransport<UIMessage>({
    api: `http://baton.test/api/chat/${agentId}`,
    headers,
    fetch: async (input, init) => app.request(String(input), init),
  });
}

describe('GET /api/chat/:agentId/:chatId/stream (useChat resume)', () => {
  it('answers 204 with no body, which useChat reads as nothing to resume', async () => {
    const app = makeApp();
    const response = await app.request('/api/chat/cognitive-reasoner/chat-1/stream');
    expect(response.status).toBe(204);
    expect(await response.text()).toBe('');
    await expect(transportFor(app, 'cognitive-reasoner').reconnectToStream({ chatId: 'chat-1' })).resolves.toBeNull();
  });

  it('is still a 404 naming the agents for an agent the server does not have', async () => {
    const app = makeApp();
    const response = await app.request('/api/chat/no-such-agent/chat-1/stream');
    expect(response.status).toBe(404);
    const body = (await response.json()) as ApiErrorBody;
    expect(body.error.code).toBe('unknown-agent');
    expect(body.error.message).toContain('cognitive-reasoner');
    await expect(transportFor(app, 'no-such-agent').reconnectToStream({ chatId: 'chat-1' })).rejects.toThrow();
  });

  it('needs the API key like every /api route', async () => {
    const app = makeApp({ apiKey: 'k'.repeat(32) });
    expect((await app.request('/api/chat/cognitive-reasoner/chat-1/stream')).status).toBe(401);
    const transport = transportFor(app, 'cognitive-reasoner', { authorization: `Bearer ${'k'.repeat(32)}` });
    await expect(transport.reconnectToStream({ chatId: 'chat-1' })).resolves.toBeNull();
  });

  it('refuses other methods with 405 and Allow: GET', async () => {
    const app = makeApp();
    const response = await app.request('/api/chat/cognitive-reasoner/chat-1/stream', { method: 'POST' });
    expect(response.status).toBe(405);
    expect(response.headers.get('allow')).toBe('GET');
  });
});
