/**
 * `GET /api/sessions/:id/events`: the session's bounded event log as a client (the inspector's
 * timeline) reads it: every decision in order, each with the state it left and every tool's
 * status at that point, paged, bounded, and refused clearly where the server keeps none.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { chatTurn, errorOf, postJson, userMessage } from '../../test/helpers/chat-requests.js';
import { createOfflineModel } from '../ai-sdk/offline-model.js';
import { parseTemplate } from '../core/validate-template.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import type { SessionEventsResponse, SessionResponse } from './api-types.js';
import { type BatonApp, createApp } from './create-app.js';

const apps: BatonApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

// The offline model searches first for a research question; this template wants think first,
// so the first search is refused and the timeline has a refusal with a reason.
const template = parseTemplate({
  id: 'planner',
  tools: ['search', 'think', 'reflect'],
  orchestration: {
    steps: [
      {
        name: 'Plan',
        isDefault: true,
        sequence: ['think', 'search'],
        availableTools: { allowed: ['think', 'search'] },
      },
    ],
  },
});

function app(options: Partial<Parameters<typeof createApp>[0]> = {}): BatonApp {
  const created = createApp({ agents: [template], model: 'offline', webRoot: false, ...options });
  apps.push(created);
  return created;
}

async function eventsOf(target: BatonApp, sessionId: string, query = ''): Promise<SessionEventsResponse> {
  const response = await target.request(`/api/sessions/${sessionId}/events${query}`);
  expect(response.status, await response.clone().text()).toBe(200);
  return (await response.json()) as SessionEventsResponse;
}

describe('the session event log over HTTP', () => {
  it('lists every decision of two turns in order, each with the state and tool statuses at that point', async () => {
    const server = app();
    const first = await chatTurn(server, 'planner', { messages: [userMessage('How many EVs will be sold by 2030?')] });
    const { sessionId } = first;
    await chatTurn(server, 'planner', {
      sessionId,
      messages: [userMessage('How many EVs will be sold by 2030?'), userMessage('And in Europe?')],
    });
    const log = await eventsOf(server, sessionId);
    expect(log).toMatchObject({ sessionId, agentId: 'planner', capacity: 100, dropped: 0 });
    const seqs = log.events.map((entry) => entry.seq);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    expect(log.nextAfter).toBe(seqs.at(-1));
    expect(new Set(log.events.map((entry) => entry.turn))).toEqual(new Set([1, 2]));
    const types = log.events.map((entry) => entry.event.type);
    // The step is chosen, then the first model step is offered only what the sequence allows.
    expect(log.events[0]).toMatchObject({ turn: 1, event: { type: 'step-changed', to: 'Plan' } });
    const offer = log.events[1]!;
    expect(offer).toMatchObject({ turn: 1, event: { type: 'tools-offered', step: 'Plan', tools: ['think'] } });
    expect(offer.state).toMatchObject({ activeStep: 'Plan', allowedTools: ['think'], final: false });
    expect(offer.state.sequence).toMatchObject({ index: 0, length: 2 });
    const searchBefore = offer.tools.find((tool) => tool.tool === 'search');
    expect(searchBefore).toMatchObject({ allowed: false, reason: { code: 'sequence' } });
    // think was reserved, then recorded; the sequence moved on and search became allowed there.
    const recorded = log.events.find((entry) => entry.event.type === 'tool-recorded' && entry.event.tool === 'think');
    expect(recorded, JSON.stringify(types)).toBeDefined();
    expect(types.indexOf('tool-reserved')).toBeLessThan(types.indexOf('tool-recorded'));
    const advanced = log.events.find((entry) => entry.event.type === 'sequence-advanced');
    expect(advanced!.state.sequence).toMatchObject({ index: 1 });
    expect(advanced!.state.recentlyUsedTools).toEqual(['think']);
    expect(advanced!.tools.find((tool) => tool.tool === 'search')).toEqual({ tool: 'search', allowed: true });
    // Each turn ends with an entry saying where it left the session, and the last agrees with the session view.
    expect(log.events.filter((entry) => entry.event.type === 'turn-ended').map((entry) => entry.turn)).toEqual([1, 2]);
    const view = (await (await server.request(`/api/sessions/${sessionId}`)).json()) as SessionResponse;
    const last = log.events.at(-1)!;
    expect(last.state.recentlyUsedTools).toEqual(view.state.recentlyUsedTools);
    expect(last.state.tokenUsage).toEqual(view.state.tokenUsage);
    expect(last.tools).toEqual(view.tools);
    // Token usage only grows along the log.
    const totals = log.events.map((entry) => entry.state.tokenUsage.totalTokens);
    expect(totals).toEqual([...totals].sort((a, b) => a - b));
  });

  it('records the refusal of a call the model made against the orchestration, with its reason', async () => {
    // A model that first calls a tool it was not offered: refused, never run, and logged.
    const server = app({ model: createOfflineModel({ misbehave: true }) });
    const turn = await chatTurn(server, 'planner', { messages: [userMessage('How many EVs will be sold by 2030?')] });
    const log = await eventsOf(server, turn.sessionId);
    const refusal = log.events.find((entry) => entry.event.type === 'tool-rejected');
    expect(refusal, JSON.stringify(log.events.map((entry) => entry.event))).toBeDefined();
    expect(refusal!.event).toMatchObject({
      step: 'Plan',
      reason: { code: expect.any(String), message: expect.any(String) },
    });
    expect(refusal!.event.tool).not.toBe('think');
    // That call never ran: its id is neither reserved nor recorded anywhere in the log.
    const id = refusal!.event.toolCallId;
    expect(typeof id).toBe('string');
    const ran = log.events.filter((entry) => entry.event.type !== 'tool-rejected' && entry.event.toolCallId === id);
    expect(ran).toEqual([]);
    expect(log.events.some((entry) => entry.event.type === 'tool-recorded')).toBe(true);
    expect(log.events.at(-1)!.event).toMatchObject({ type: 'turn-ended', step: 'Plan' });
  });

  it('pages with after and limit, and keeps only the newest entries past its capacity', async () => {
    const server = app({ eventLog: 5 });
    const first = await chatTurn(server, 'planner', { messages: [userMessage('How many EVs will be sold by 2030?')] });
    const all = await eventsOf(server, first.sessionId);
    expect(all.capacity).toBe(5);
    expect(all.events).toHaveLength(5);
    expect(all.dropped).toBeGreaterThan(0);
    expect(all.events[0]!.seq).toBe(all.dropped + 1);
    const page = await eventsOf(server, first.sessionId, `?after=${all.dropped + 1}&limit=2`);
    expect(page.events.map((entry) => entry.seq)).toEqual([all.dropped + 2, all.dropped + 3]);
    expect(page.nextAfter).toBe(all.dropped + 3);
    const rest = await eventsOf(server, first.sessionId, `?after=${page.nextAfter}`);
    expect(rest.events.map((entry) => entry.seq)).toEqual([all.dropped + 4, all.dropped + 5]);
    const none = await eventsOf(server, first.sessionId, `?after=${rest.nextAfter}`);
    expect(none).toMatchObject({ events: [], nextAfter: rest.nextAfter });
    // The oldest entry kept still shows its state exactly: the same as with an unbounded log.
    const big = app({ eventLog: 100 });
    const again = await chatTurn(big, 'planner', { messages: [userMessage('How many EVs will be sold by 2030?')] });
    const full = await eventsOf(big, again.sessionId);
    const strip = (entries: SessionEventsResponse['events']) =>
      entries.map(({ seq, event, state, tools }) => ({
        seq,
        event: { ...event, toolCallId: undefined },
        steps: [state.activeStep, state.sequence?.index, state.recentlyUsedTools],
        tools,
      }));
    expect(strip(all.events)).toEqual(strip(full.events.slice(-5)));
  });

  it('says a reset happened and shows the cleared history after it', async () => {
    const server = app();
    const turn = await chatTurn(server, 'planner', { messages: [userMessage('How many EVs will be sold by 2030?')] });
    expect((await postJson(server, `/api/sessions/${turn.sessionId}/reset`, {})).status).toBe(200);
    const log = await eventsOf(server, turn.sessionId);
    const last = log.events.at(-1)!;
    expect(last.event).toEqual({ type: 'session-reset' });
    expect(last.state.recentlyUsedTools).toEqual([]);
    expect(log.events.at(-2)!.state.recentlyUsedTools.length).toBeGreaterThan(0);
  });

  it('keeps the log in a SQLite store, across a restart of the server', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'baton-events-'));
    try {
      const store = `sqlite:${join(directory, 'state.db')}`;
      const before = createApp({ agents: [template], model: 'offline', webRoot: false, store });
      const turn = await chatTurn(before, 'planner', { messages: [userMessage('How many EVs will be sold by 2030?')] });
      const logged = await eventsOf(before, turn.sessionId);
      await before.close();
      const after = app({ store });
      const again = await eventsOf(after, turn.sessionId);
      expect(again.events).toEqual(logged.events);
      expect(again.events.at(-1)!.event.type).toBe('turn-ended');
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });

  it('refuses bad queries, naming the parameter', async () => {
    const server = app();
    const turn = await chatTurn(server, 'planner', { messages: [userMessage('How many EVs will be sold by 2030?')] });
    for (const [query, path] of [
      ['?after=-1', 'query.after'],
      ['?after=abc', 'query.after'],
      ['?limit=0', 'query.limit'],
      ['?limit=501', 'query.limit'],
    ] as const) {
      const response = await server.request(`/api/sessions/${turn.sessionId}/events${query}`);
      expect(response.status, query).toBe(400);
      expect(await errorOf(response)).toMatchObject({ code: 'invalid-argument', path });
    }
    const missing = await server.request('/api/sessions/nobody-here/events');
    expect(missing.status).toBe(404);
    const post = await server.request(`/api/sessions/${turn.sessionId}/events`, { method: 'POST' });
    expect(post.status).toBe(405);
  });

  it('answers not-available in stateless mode and for a manager that keeps no log', async () => {
    const stateless = app({ stateless: { keys: ['k'.repeat(32)] } });
    const response = await stateless.request('/api/sessions/abc/events');
    expect(response.status).toBe(409);
    expect(await errorOf(response)).toMatchObject({
      code: 'not-available',
      message: expect.stringContaining('stateless'),
    });
    const manager = createOrchestrationManager();
    const plain = app({ manager });
    const turn = await chatTurn(plain, 'planner', { messages: [userMessage('How many EVs will be sold by 2030?')] });
    const off = await plain.request(`/api/sessions/${turn.sessionId}/events`);
    expect(off.status).toBe(409);
    expect((await errorOf(off)).message).toContain('--event-log');
    await manager.close();
  });
});
