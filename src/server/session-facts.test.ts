/**
 * Facts and labels (SPEC section 11) in every view of the HTTP API: the chat stream's snapshots,
 * `GET /api/sessions/:id` (stored and stateless sessions) and each entry of the session's event
 * log, which shows them as they were right after that entry, a long value left out.
 */
import { tool } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { chatTurn, userMessage } from '../../test/helpers/chat-requests.js';
import { MAX_LOGGED_FACT_CHARACTERS } from '../core/session-log.js';
import { parseTemplate } from '../core/validate-template.js';
import { ScriptedModel } from '../testing/scripted-model.js';
import type { SessionEventsResponse, SessionResponse } from './api-types.js';
import { type BatonApp, type CreateAppOptions, createApp } from './create-app.js';

const STATE_KEY = 'session-facts-test-state-key-0123456789abcdef';
/** What read_file returns: longer than an event log entry copies. */
const TEXT = 'The plan. '.repeat(40);

const template = parseTemplate({
  id: 'files',
  tools: ['list_items', 'read_file', 'send_email'],
  orchestration: {
    facts: [
      { name: 'listed_ids', tools: ['list_items'], value: 'result.items.map(i, i.id)', keep: 'union' },
      { name: 'last_text', tools: ['read_file'], value: 'result.text' },
    ],
    labels: [{ name: 'confidential', tools: ['read_file'], when: "result.classification == 'confidential'" }],
    rules: [
      {
        tools: ['send_email'],
        when: "'confidential' in state.labels",
        effect: 'deny',
        reason: 'Nothing leaves after a confidential read',
      },
    ],
    steps: [],
  },
});

const tools = {
  list_items: tool({ inputSchema: z.object({}), execute: async () => ({ items: [{ id: 'a' }, { id: 'b' }] }) }),
  read_file: tool({
    inputSchema: z.object({ path: z.string() }),
    execute: async () => ({ classification: 'confidential', text: TEXT }),
  }),
  send_email: tool({ inputSchema: z.object({ to: z.string() }), execute: async () => 'sent' }),
};

const apps: BatonApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

/** An app whose model lists, reads a confidential file, tries to send it, then answers. */
function app(options: Partial<CreateAppOptions> = {}): BatonApp {
  const model = new ScriptedModel([
    { toolCalls: [{ toolName: 'list_items', input: {} }] },
    { toolCalls: [{ toolName: 'read_file', input: { path: 'plan.txt' } }] },
    { toolCalls: [{ toolName: 'send_email', input: { to: 'someone@example.com' } }] },
    { text: 'Nothing was sent.' },
  ]);
  const created = createApp({ agents: [template], model, tools, webRoot: false, ...options });
  apps.push(created);
  return created;
}

const FACTS = { listed_ids: { value: ['a', 'b'] }, last_text: { value: TEXT } };

describe('facts and labels over HTTP', () => {
  it('shows them in the stream, the session view and each entry of the event log', async () => {
    const server = app();
    const turn = await chatTurn(server, 'files', { messages: [userMessage('Tidy up and mail me the plan')] });
    // The stream: before any call nothing is set; each model step shows what the earlier calls set.
    expect(turn.snapshots[0]).not.toHaveProperty('facts');
    expect(turn.snapshots[0]).not.toHaveProperty('labels');
    expect(turn.snapshots.find((s) => s.facts?.listed_ids !== undefined)?.facts).toMatchObject({
      listed_ids: { value: ['a', 'b'] },
    });
    expect(turn.final).toMatchObject({ final: true, facts: FACTS, labels: ['confidential'] });

    const view = (await (await server.request(`/api/sessions/${turn.sessionId}`)).json()) as SessionResponse;
    expect(view.state.facts).toEqual(FACTS);
    expect(view.state.labels).toEqual(['confidential']);
    // The rule that refused the mail reads the labels, and says so.
    expect(view.tools.find((t) => t.tool === 'send_email')?.rules).toEqual([
      { rule: 'rules[0]', effect: 'deny', reason: 'Nothing leaves after a confidential read', labels: true },
    ]);

    const response = await server.request(`/api/sessions/${turn.sessionId}/events`);
    const log = (await response.json()) as SessionEventsResponse;
    const types = log.events.map((entry) => entry.event.type);
    const listed = log.events.find((e) => e.event.type === 'fact-set' && e.event.fact === 'listed_ids');
    const read = log.events.find((e) => e.event.type === 'fact-set' && e.event.fact === 'last_text');
    const raised = log.events.find((e) => e.event.type === 'label-raised');
    expect(listed?.event, JSON.stringify(types)).toMatchObject({ tool: 'list_items', toolCallId: expect.any(String) });
    expect(raised?.event).toMatchObject({ label: 'confidential', tool: 'read_file' });
    // Right after the listing: its ids, and no label yet.
    expect(listed?.state.facts).toEqual({ listed_ids: { value: ['a', 'b'] } });
    expect(listed?.state).not.toHaveProperty('labels');
    // Right after the read: the text is longer than an entry copies, so only its length is kept.
    const length = JSON.stringify(TEXT).length;
    expect(length).toBeGreaterThan(MAX_LOGGED_FACT_CHARACTERS);
    expect(read?.state.facts).toEqual({ listed_ids: { value: ['a', 'b'] }, last_text: { omitted: length } });
    expect(raised?.state.labels).toEqual(['confidential']);
    // Entries before the listing show none, so each entry is the session as it was then.
    expect(log.events[0]?.state).not.toHaveProperty('facts');
    expect(log.events.at(-1)?.state).toMatchObject({ facts: read?.state.facts, labels: ['confidential'] });
    // The refused mail is in the log, refused by the rule that reads the label.
    const refused = log.events.find((e) => e.event.type === 'tool-rejected');
    expect(refused?.event).toMatchObject({ tool: 'send_email', reason: { code: 'rule', rule: 'rules[0]' } });
  });

  it('shows them in the view of a stateless session, read from its token', async () => {
    const server = app({ stateless: { keys: [STATE_KEY] } });
    const turn = await chatTurn(server, 'files', { messages: [userMessage('Tidy up and mail me the plan')] });
    expect(turn.final.stateToken).toEqual(expect.any(String));
    const response = await server.request(`/api/sessions/${turn.sessionId}`, {
      headers: { 'x-orchestration-state': turn.final.stateToken! },
    });
    expect(response.status).toBe(200);
    const view = (await response.json()) as SessionResponse;
    expect(view.state).toMatchObject({ facts: FACTS, labels: ['confidential'] });
  });

  it('lowers no label and clears the facts on a reset, and the view says so', async () => {
    const server = app();
    const turn = await chatTurn(server, 'files', { messages: [userMessage('Tidy up and mail me the plan')] });
    const reset = await server.request(`/api/sessions/${turn.sessionId}/reset`, { method: 'POST' });
    const view = (await reset.json()) as SessionResponse;
    expect(view.state).not.toHaveProperty('facts');
    expect(view.state.labels).toEqual(['confidential']);
  });
});
