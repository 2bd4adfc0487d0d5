/**
 * Shadow mode and token budgets as a client of the chat stream sees them: each
 * `data-orchestration` part says what enforcement would have offered (shadow) or that a budget
 * is spent, and what ran is what the decisions allowed.
 */
import type { UIMessageChunk } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';
import { chatTurn, userMessage } from '../../test/helpers/chat-requests.js';
import { parseTemplate } from '../core/validate-template.js';
import type { SessionEventsResponse, SessionResponse } from './api-types.js';
import { type BatonApp, createApp } from './create-app.js';

const apps: BatonApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

/** Tools that ran (returned an output) in a stream, in order. */
function ran(chunks: readonly UIMessageChunk[]): string[] {
  const names = new Map<string, string>();
  const out: string[] = [];
  for (const chunk of chunks) {
    if (chunk.type === 'tool-input-available') names.set(chunk.toolCallId, chunk.toolName);
    if (chunk.type === 'tool-output-available') out.push(names.get(chunk.toolCallId) ?? '?');
  }
  return out;
}

describe('shadow mode in the chat stream', () => {
  it('offers every tool, runs what enforcement would refuse, and says what it would have offered', async () => {
    // The template wants think before search; the offline model searches first for a research question.
    const template = parseTemplate({
      id: 'shadowed',
      tools: ['search', 'think', 'reflect'],
      orchestration: { shadow: true, steps: [{ name: 'Plan', isDefault: true, sequence: ['think', 'search'] }] },
    });
    const app = createApp({ agents: [template], model: 'offline', webRoot: false });
    apps.push(app);
    const turn = await chatTurn(app, 'shadowed', { messages: [userMessage('How many EVs by 2030?')] });
    const first = turn.snapshots[0]!;
    expect(first.allowedTools).toEqual(['search', 'think', 'reflect']);
    expect(first.shadow).toEqual({ wouldOffer: ['think'] });
    expect(ran(turn.chunks)[0]).toBe('search'); // enforcement would have refused it; it ran
  });
});

describe('token budgets in the chat stream', () => {
  it('stops offering tools once the session budget is spent, says so, and the turn ends with an answer', async () => {
    const template = parseTemplate({
      id: 'frugal',
      tools: ['search', 'think', 'reflect'],
      orchestration: { budget: { totalTokens: 1 }, steps: [{ name: 'Research', isDefault: true }] },
    });
    const app = createApp({ agents: [template], model: 'offline', webRoot: false });
    apps.push(app);
    const turn = await chatTurn(app, 'frugal', { messages: [userMessage('How many EVs by 2030?')] });
    // The first model step spent the budget: one tool ran, then none was offered.
    expect(ran(turn.chunks)).toHaveLength(1);
    const spent = turn.snapshots.find((s) => s.budget !== undefined);
    expect(spent).toMatchObject({ allowedTools: [], budget: { scope: 'session', limit: 1 } });
    expect(spent!.budget!.used).toBeGreaterThanOrEqual(1);
    expect(turn.chunks.some((chunk) => chunk.type === 'text-delta')).toBe(true);
  });
});

describe('a session at rest says what its next step decision would', () => {
  it('keeps shadow mode in the final part, the session view and the event log: every tool offered, what enforcement would offer, and why not', async () => {
    const template = parseTemplate({
      id: 'shadowed',
      tools: ['search', 'think', 'reflect', 'compare'],
      orchestration: {
        shadow: true,
        steps: [{ name: 'Research', isDefault: true, availableTools: { allowed: ['search', 'think'] } }],
      },
    });
    const app = createApp({ agents: [template], model: 'offline', webRoot: false });
    apps.push(app);
    const turn = await chatTurn(app, 'shadowed', { messages: [userMessage('How many EVs by 2030?')] });
    const atRest = {
      allowedTools: ['search', 'think', 'reflect', 'compare'],
      shadow: { wouldOffer: ['search', 'think'] },
    };
    // The stream's parts said shadow mode before every model step; the final part says it too.
    expect(turn.snapshots.at(-2)).toMatchObject(atRest);
    expect(turn.final).toMatchObject(atRest);
    const view = (await (await app.request(`/api/sessions/${turn.sessionId}`)).json()) as SessionResponse;
    expect(view.state).toMatchObject(atRest);
    // The tools say what enforcement would decide: its reason is what shadow mode reports.
    expect(view.tools.find((t) => t.tool === 'reflect')).toMatchObject({
      allowed: false,
      reason: { code: 'not-allowed', message: 'step "Research" allows only search, think' },
    });
    const log = (await (await app.request(`/api/sessions/${turn.sessionId}/events`)).json()) as SessionEventsResponse;
    expect(log.events.at(-1)!.state).toMatchObject(atRest);
  });

  it('keeps a spent budget in the final part, the session view and the event log: no tool offered, each refused for the budget', async () => {
    const template = parseTemplate({
      id: 'frugal',
      tools: ['search', 'think', 'reflect'],
      orchestration: { budget: { totalTokens: 1 }, steps: [{ name: 'Research', isDefault: true }] },
    });
    const app = createApp({ agents: [template], model: 'offline', webRoot: false });
    apps.push(app);
    const turn = await chatTurn(app, 'frugal', { messages: [userMessage('How many EVs by 2030?')] });
    const used = turn.final.tokenUsage.totalTokens;
    const atRest = { allowedTools: [], budget: { scope: 'session', step: null, limit: 1, used } };
    expect(turn.final).toMatchObject(atRest);
    expect(turn.final.shadow).toBeUndefined();
    const view = (await (await app.request(`/api/sessions/${turn.sessionId}`)).json()) as SessionResponse;
    expect(view.state).toMatchObject(atRest);
    for (const status of view.tools) {
      expect(status).toMatchObject({ allowed: false, reason: { code: 'budget', scope: 'session', limit: 1, used } });
    }
    const log = (await (await app.request(`/api/sessions/${turn.sessionId}/events`)).json()) as SessionEventsResponse;
    const last = log.events.at(-1)!;
    expect(last.state).toMatchObject(atRest);
    expect(last.tools.every((t) => !t.allowed && t.reason?.code === 'budget')).toBe(true);
    // Before the first model step nothing was spent: every tool was allowed then.
    expect(log.events[0]!.state).toMatchObject({ allowedTools: ['search', 'think', 'reflect'] });
    expect(log.events[0]!.state.budget).toBeUndefined();
  });
});
