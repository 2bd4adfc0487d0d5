/**
 * The chat id is the session: `useChat` posts `{ id, messages, trigger, messageId }`, and a chat
 * continues one session across its messages, with the rules `sessionId` has (the agent that owns
 * a session, stateless tokens). Bodies here are what `DefaultChatTransport` sends.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentTemplate } from '../core/schema.js';
import { loadTemplate } from '../templates/load-template.js';
import type { ApiErrorBody, OrchestrationSnapshot, SessionResponse } from './api-types.js';
import { type BatonApp, type CreateAppOptions, createApp } from './create-app.js';

const reasoner: AgentTemplate = await loadTemplate(
  new URL('../../examples/agents/cognitive-reasoner.json', import.meta.url).pathname,
);
const study: AgentTemplate = await loadTemplate(
  new URL('../../examples/agents/study-buddy.json', import.meta.url).pathname,
);
const RESEARCH = 'How many electric vehicles will be on the road by 2030?';
const AGAIN = 'And how many charging stations will they need?';

const apps: BatonApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

function makeApp(options: Partial<CreateAppOptions> = {}): BatonApp {
  const app = createApp({ agents: [reasoner, study], model: 'offline', webRoot: false, ...options });
  apps.push(app);
  return app;
}

type Message = { id: string; role: 'user' | 'assistant'; parts: { type: string; text?: string }[] };

const user = (text: string): Message => ({ id: crypto.randomUUID(), role: 'user', parts: [{ type: 'text', text }] });

/** What useChat's default transport posts for a chat. */
function useChatBody(id: string, messages: Message[], trigger = 'submit-message') {
  return { id, messages, trigger, messageId: undefined };
}

function post(app: BatonApp, body: unknown, agent = 'cognitive-reasoner', headers: Record<string, string> = {}) {
  return app.request(`/api/chat/${agent}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

async function finalOf(response: Response): Promise<OrchestrationSnapshot> {
  expect(response.status).toBe(200);
  const parts = (await response.text())
    .split('\n')
    .filter((line) => line.startsWith('data: {'))
    .map((line) => JSON.parse(line.slice('data: '.length)) as { type: string; data?: OrchestrationSnapshot });
  const final = parts.filter((part) => part.type === 'data-orchestration').at(-1)?.data;
  expect(final?.final).toBe(true);
  return final!;
}

async function errorOf(response: Response): Promise<ApiErrorBody['error']> {
  return ((await response.json()) as ApiErrorBody).error;
}

describe("useChat's chat id", () => {
  it('is the session: two messages of one chat continue it, usage adding up', async () => {
    const app = makeApp();
    const chatId = 'Zq3ZkVdK2lQ9cX1a'; // the shape of useChat's generated ids
    const first = await post(app, useChatBody(chatId, [user(RESEARCH)]));
    expect(first.headers.get('x-session-id')).toBe(chatId);
    const one = await finalOf(first);
    expect(one.sessionId).toBe(chatId);
    expect(one.recentlyUsedTools).toEqual(['search', 'think', 'reflect']);

    const history: Message[] = [
      user(RESEARCH),
      { id: 'a1', role: 'assistant', parts: [{ type: 'text', text: 'About 250 million.' }] },
      user(AGAIN),
    ];
    const second = await post(app, useChatBody(chatId, history));
    expect(second.headers.get('x-session-id')).toBe(chatId);
    const two = await finalOf(second);
    expect(two.sessionId).toBe(chatId);
    // The second turn builds on the first: its tools are added to the same history, its tokens
    // to the same total.
    expect(two.recentlyUsedTools.slice(0, 3)).toEqual(['search', 'think', 'reflect']);
    expect(two.recentlyUsedTools.length).toBeGreaterThan(3);
    expect(two.tokenUsage.totalTokens).toBeGreaterThan(one.tokenUsage.totalTokens);

    const session = (await (await app.request(`/api/sessions/${chatId}`)).json()) as SessionResponse;
    expect(session.state.recentlyUsedTools).toEqual(two.recentlyUsedTools);
  });

  it('continues the session when useChat regenerates the last answer', async () => {
    const app = makeApp();
    const one = await finalOf(await post(app, useChatBody('regen-chat', [user(RESEARCH)])));
    const again = await finalOf(await post(app, useChatBody('regen-chat', [user(RESEARCH)], 'regenerate-message')));
    expect(again.sessionId).toBe('regen-chat');
    expect(again.tokenUsage.totalTokens).toBeGreaterThan(one.tokenUsage.totalTokens);
  });

  it('accepts a sessionId equal to the chat id', async () => {
    const response = await post(makeApp(), { ...useChatBody('same-1', [user(RESEARCH)]), sessionId: 'same-1' });
    expect((await finalOf(response)).sessionId).toBe('same-1');
  });

  it('refuses a chat id and a sessionId that differ with 400 naming body.id, creating no session', async () => {
    const app = makeApp();
    const response = await post(app, { ...useChatBody('chat-a', [user(RESEARCH)]), sessionId: 'chat-b' });
    expect(response.status).toBe(400);
    const error = await errorOf(response);
    expect(error).toMatchObject({ code: 'session-mismatch', path: 'body.id' });
    expect(error.message).toContain('"chat-a"');
    expect(error.message).toContain('"chat-b"');
    expect((await app.request('/api/sessions/chat-a')).status).toBe(404);
    expect((await app.request('/api/sessions/chat-b')).status).toBe(404);
  });

  it("refuses another agent's session with 409 naming body.id, changing nothing", async () => {
    const app = makeApp();
    const one = await finalOf(await post(app, useChatBody('owned', [user(RESEARCH)])));
    const response = await post(app, useChatBody('owned', [user('hello')]), 'study-buddy');
    expect(response.status).toBe(409);
    expect(await errorOf(response)).toMatchObject({ code: 'session-of-another-agent', path: 'body.id' });
    const session = (await (await app.request('/api/sessions/owned')).json()) as SessionResponse;
    expect(session.agentId).toBe('cognitive-reasoner');
    expect(session.state.recentlyUsedTools).toEqual(one.recentlyUsedTools);
  });

  it('refuses a chat id outside the session id alphabet with 400 naming body.id', async () => {
    const response = await post(makeApp(), useChatBody('a/b', [user(RESEARCH)]));
    expect(response.status).toBe(400);
    expect(await errorOf(response)).toMatchObject({ code: 'invalid-body', path: 'body.id' });
  });

  it('still starts a new session for each request that names none', async () => {
    const app = makeApp();
    const a = await finalOf(await post(app, { messages: [user(RESEARCH)] }));
    const b = await finalOf(await post(app, { messages: [user(RESEARCH)] }));
    expect(a.sessionId).not.toBe(b.sessionId);
  });

  describe('in stateless mode', () => {
    const stateless = () => makeApp({ stateless: { keys: ['k'.repeat(32)] } });

    it('is the session the token carries on, and a token of another session is refused naming body.id', async () => {
      const app = stateless();
      const one = await finalOf(await post(app, useChatBody('st-chat', [user(RESEARCH)])));
      expect(one.sessionId).toBe('st-chat');
      const token = one.stateToken!;
      const two = await finalOf(
        await post(app, useChatBody('st-chat', [user(AGAIN)]), 'cognitive-reasoner', {
          'x-orchestration-state': token,
        }),
      );
      expect(two.sessionId).toBe('st-chat');
      expect(two.tokenUsage.totalTokens).toBeGreaterThan(one.tokenUsage.totalTokens);

      const other = await post(app, useChatBody('another-chat', [user(AGAIN)]), 'cognitive-reasoner', {
        'x-orchestration-state': two.stateToken!,
      });
      expect(other.status).toBe(400);
      expect(await errorOf(other)).toMatchObject({ code: 'session-mismatch', path: 'body.id' });
    });

    it('refuses to continue a chat without its token, as with a sessionId', async () => {
      const app = stateless();
      await finalOf(await post(app, useChatBody('st-no-token', [user(RESEARCH)])));
      const response = await post(app, useChatBody('st-no-token', [user(AGAIN)]));
      expect(response.status).toBe(409);
      expect(await errorOf(response)).toMatchObject({ code: 'stale-state-token' });
    });
  });
});
