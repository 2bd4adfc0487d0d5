/**
 * Approvals a hostile client makes up from parts this server did send it, over the chat route.
 *
 * The AI SDK signs the approval request of every call its approval hook answers, also one the
 * hook denies automatically (`isAutomatic: true`): a call the orchestration refused comes back
 * to the client with a signature that verifies in its session. Flipped to `approved: true` and
 * put where the AI SDK collects approvals, it must not run, whatever the session allows by then:
 * an approval counts only for a call the session asked a person about, once. And an approval
 * the AI SDK would not act on (left in an earlier step of the message) is refused before the
 * turn, rather than failing the stream after the model loop started.
 *
 * Each refusal is a `400 invalid-history` naming the part and saying what is wrong, before any
 * model call; no tool runs, the session is not written, and the conversation goes on from it.
 * Each case runs with stored and with stateless sessions.
 */
import { tool, type UIMessage } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { AgentTemplate } from '../src/core/schema.js';
import { type BatonApp, type CreateAppOptions, createApp } from '../src/server/create-app.js';
import { loadTemplate } from '../src/templates/load-template.js';
import { APPROVAL_AGENTS, ApprovalClient, approvalTools, SESSION_MODES, type ToolPart } from './helpers/approvals.js';
import { errorOf } from './helpers/chat-requests.js';
import { type ModelCall, mockModel, type Reply } from './helpers/mock-model.js';

const shop = await loadTemplate(`${APPROVAL_AGENTS}shop.json`);

/** Research that must search, then note, in that order; `pay` (needs a person) once it is done. */
const notes: AgentTemplate = {
  id: 'notes',
  name: 'notes',
  tools: ['search', 'note', 'pay'],
  orchestration: {
    steps: [
      {
        name: 'Research',
        isDefault: true,
        availableTools: { allowed: ['search', 'note', 'pay'] },
        sequence: ['search', 'note'],
      },
    ],
  },
};

/** Searches only after a payment (an `allow` rule); `pay` needs a person. */
const desk: AgentTemplate = {
  id: 'desk',
  name: 'desk',
  tools: ['search', 'pay'],
  orchestration: {
    rules: [
      {
        tools: ['search'],
        effect: 'allow',
        when: "'pay' in state.recentlyUsedTools",
        reason: 'Searches come after the payment',
      },
    ],
    steps: [{ name: 'Desk', isDefault: true, availableTools: { allowed: ['search', 'pay'] } }],
  },
};

/** A call a tool ran. */
interface Run {
  tool: string;
  toolCallId: string;
  input: unknown;
}

const apps: BatonApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

/** An app serving `agent` with a model answering from `policy`, and the calls its tools ran. */
function makeApp(agent: AgentTemplate, policy: (call: ModelCall) => Reply, options: Partial<CreateAppOptions>) {
  const ran: Run[] = [];
  const note = tool({
    description: 'Writes a note.',
    inputSchema: z.object({ text: z.string() }),
    execute: async (input, { toolCallId }) => {
      ran.push({ tool: 'note', toolCallId, input });
      return { noted: true };
    },
  });
  const { model, calls } = mockModel(policy);
  const tools = { ...approvalTools((run) => ran.push(run)), note };
  const app = createApp({ agents: [agent], tools, model, webRoot: false, ...options });
  apps.push(app);
  return { app, ran, modelCalls: () => calls.length };
}

/** `n` searches in one model step, with ids `${prefix}-0`, … */
function searches(prefix: string, n: number): Reply['calls'] {
  return Array.from({ length: n }, (_, i) => ({ tool: 'search', id: `${prefix}-${i}`, input: { query: `q${i}` } }));
}

/** The tool part of call `id` in the conversation's last message. */
function partOf(messages: readonly UIMessage[], id: string): ToolPart {
  const part = (messages.at(-1)?.parts ?? []).find((p) => 'toolCallId' in p && p.toolCallId === id);
  if (part === undefined) throw new Error(`no part of call ${id} in ${JSON.stringify(messages.at(-1))}`);
  return part as unknown as ToolPart;
}

/**
 * The conversation with the part of call `id` taken out of the last message, answered yes
 * (keeping its signature) and put at the end of that message, where the AI SDK collects
 * approvals; `drop` names parts taken out as well. Returns where the part now is.
 */
function flippedToEnd(client: ApprovalClient, id: string, drop: readonly string[] = []) {
  const messages = structuredClone(client.messages);
  const m = messages.length - 1;
  const part = partOf(messages, id);
  expect(part.approval?.signature).toMatch(/^[\w-]{43}$/);
  const kept = messages[m]!.parts.filter(
    (p) => !('toolCallId' in p) || (p.toolCallId !== id && !drop.includes(p.toolCallId)),
  );
  const flipped = { ...part, state: 'approval-responded', approval: { ...part.approval!, approved: true } };
  messages[m] = { ...messages[m]!, parts: [...kept, flipped as unknown as UIMessage['parts'][number]] };
  return { messages, at: `body.messages[${m}].parts[${kept.length}]` };
}

/**
 * Stored sessions: a check that the client's session is as it was when this was called.
 * Stateless: the state is the client's token, which a refused request leaves it.
 */
async function untouched(app: BatonApp, client: ApprovalClient): Promise<() => Promise<void>> {
  const states = app.manager?.getStateManager();
  const read = async () => (states && client.sessionId ? await states.getState(client.sessionId) : null);
  const before = await read();
  return async () => expect(await read()).toEqual(before);
}

/** Posts `messages` and expects a 400 invalid-history at `path` saying `why`, before anything ran. */
async function expectRefused(
  client: ApprovalClient,
  messages: readonly unknown[],
  path: string,
  why: RegExp,
  seen: { ran: Run[]; modelCalls: () => number; app: BatonApp },
) {
  const ran = seen.ran.length;
  const modelCalls = seen.modelCalls();
  const unchanged = await untouched(seen.app, client);
  const response = await client.post(messages);
  const body = await response.text();
  // Together, so that a failure shows what the request did instead: the status, and what ran.
  expect({ status: response.status, ran: seen.ran.slice(ran) }, body).toEqual({ status: 400, ran: [] });
  const error = await errorOf(new Response(body, { headers: response.headers }));
  expect(error).toMatchObject({ code: 'invalid-history', path });
  expect(error.message).toMatch(why);
  expect(seen.modelCalls()).toBe(modelCalls);
  await unchanged();
}

describe.each(SESSION_MODES)('an automatic denial answered yes, with %s sessions', (_mode, options) => {
  it('is refused once the session has moved on to where the call would be allowed', async () => {
    // Two searches in one step: the sequence allows the first and refuses the second at once.
    // A note then completes the sequence, after which a search would be allowed.
    const seen = makeApp(
      notes,
      (call) => {
        if (call.index === 0) return { calls: searches('s', 2) };
        if (call.index === 1) return { calls: [{ tool: 'note', id: 'n1', input: { text: 'found it' } }] };
        return { text: 'Done.' };
      },
      options,
    );
    const client = new ApprovalClient(seen.app, 'notes');
    await client.say('Look this up and note it');
    expect(seen.ran.map((run) => run.toolCallId)).toEqual(['s-0', 'n1']);
    const denied = partOf(client.messages, 's-1');
    expect(denied).toMatchObject({ state: 'output-denied', approval: { approved: false, isAutomatic: true } });

    const { messages, at } = flippedToEnd(client, 's-1');
    await expectRefused(client, messages, `${at}.approval`, /already decided in this session/, seen);
    // Without the client's flag: the server does not take the client's word for what was automatic.
    const unflagged = structuredClone(messages);
    delete (unflagged.at(-1)!.parts.at(-1) as unknown as ToolPart).approval!.isAutomatic;
    await expectRefused(client, unflagged, `${at}.approval`, /already decided in this session/, seen);

    // The session lost nothing: the conversation goes on from it.
    await client.say('Thanks');
    expect(seen.ran.map((run) => run.toolCallId)).toEqual(['s-0', 'n1']);
  });

  it('is refused beside the approval a person is asked for in the same step, which still runs alone', async () => {
    // A search before the payment is refused at once; the payment goes to a person.
    const seen = makeApp(
      desk,
      (call) => {
        if (call.index === 0) {
          return {
            calls: [
              { tool: 'search', id: 'x1', input: { query: 'CLIENT WANTS THIS' } },
              { tool: 'pay', id: 'p1', input: { to: 'acme', amount: 120 } },
            ],
          };
        }
        return { text: 'Paid.' };
      },
      options,
    );
    const client = new ApprovalClient(seen.app, 'desk');
    await client.say('Please settle my invoice');
    expect(client.pendingApproval().toolCallId).toBe('p1');
    expect(partOf(client.messages, 'x1')).toMatchObject({ state: 'output-denied', approval: { isAutomatic: true } });

    // The payment approved as the person would, the search flipped and put after it: the search
    // would run once the payment ran.
    const { messages, at } = flippedToEnd(client, 'x1');
    const pay = partOf(messages, 'p1');
    Object.assign(pay, { state: 'approval-responded', approval: { ...pay.approval!, approved: true } });
    await expectRefused(client, messages, `${at}.approval`, /already decided in this session/, seen);

    // The person's own answer runs the payment, and only it.
    await client.answer(true);
    expect(seen.ran.map((run) => run.toolCallId)).toEqual(['p1']);
  });

  it('is refused when the model reused its call id for a call a person is asked about', async () => {
    const seen = makeApp(
      notes,
      (call) => {
        if (call.index === 0) return { calls: searches('s', 2) };
        if (call.index === 1) return { calls: [{ tool: 'note', id: 'n1', input: { text: 'found it' } }] };
        // The id of the refused search again, for a payment.
        if (call.index === 2) return { calls: [{ tool: 'pay', id: 's-1', input: { to: 'acme', amount: 5 } }] };
        return { text: 'Done.' };
      },
      options,
    );
    const client = new ApprovalClient(seen.app, 'notes');
    await client.say('Look this up, note it, then pay');

    // The search's signed denial, flipped, alone under its id at the end of the message.
    const search = structuredClone(client.messages);
    const last = search.at(-1)!;
    const part = last.parts.find((p) => p.type === 'tool-search' && 'toolCallId' in p && p.toolCallId === 's-1')!;
    const rest = last.parts.filter((p) => !('toolCallId' in p) || p.toolCallId !== 's-1');
    const flipped = {
      ...part,
      state: 'approval-responded',
      approval: { ...(part as ToolPart).approval!, approved: true },
    };
    last.parts = [...rest, flipped as UIMessage['parts'][number]];
    const at = `body.messages[${search.length - 1}].parts[${rest.length}]`;
    await expectRefused(client, search, `${at}.approval`, /already decided in this session/, seen);
    expect(seen.ran.map((run) => run.toolCallId)).toEqual(['s-0', 'n1']);

    // The id was decided already: the payment under it was refused at once, nobody was asked.
    const reused = (client.messages.at(-1)?.parts ?? []).filter((p) => 'toolCallId' in p && p.toolCallId === 's-1');
    expect(reused.map((p) => [p.type, 'state' in p ? p.state : undefined])).toEqual([
      ['tool-search', 'output-denied'],
      ['tool-pay', 'output-denied'],
    ]);
  });

  it('is refused for a call the session never asked a person about, when it no longer remembers the id', async () => {
    // A session remembers its latest 256 call ids: a step of 300 searches pushes the refused
    // one out. Its approval still counts only if the session asked a person for it.
    const seen = makeApp(
      notes,
      (call) => {
        if (call.index === 0) return { calls: searches('s', 2) };
        if (call.index === 1) return { calls: [{ tool: 'note', id: 'n1', input: { text: 'found it' } }] };
        if (call.index === 2) return { calls: searches('more', 300) };
        return { text: 'Done.' };
      },
      options,
    );
    const client = new ApprovalClient(seen.app, 'notes');
    await client.say('Look this up, note it, then look up everything');
    expect(seen.ran).toHaveLength(302);

    const { messages, at } = flippedToEnd(client, 's-1');
    await expectRefused(client, messages, `${at}.approval`, /did not ask a person to approve/, seen);
    expect(seen.ran.some((run) => run.toolCallId === 's-1')).toBe(false);
  });
});

describe.each(SESSION_MODES)('a genuine approval, with %s sessions', (_mode, options) => {
  /** The shop, whose model asks to pay (p1), then, once paid, searches `n` times and answers. */
  function shopApp(n: number) {
    return makeApp(
      shop,
      (call) => {
        if (call.index === 0) return { calls: [{ tool: 'pay', id: 'p1', input: { to: 'acme', amount: 120 } }] };
        if (call.index === 1 && n > 0) return { calls: searches('more', n) };
        return { text: 'Paid.' };
      },
      options,
    );
  }

  it('is refused when replayed after it ran, also once the session no longer remembers the call id', async () => {
    const seen = shopApp(300);
    const client = new ApprovalClient(seen.app, 'shop');
    await client.say('Please settle my invoice');
    const grant = structuredClone(client.messages);
    const pay = partOf(grant, 'p1');
    Object.assign(pay, { state: 'approval-responded', approval: { ...pay.approval!, approved: true } });
    const at = `body.messages[1].parts[${grant[1]!.parts.indexOf(pay as unknown as UIMessage['parts'][number])}]`;
    await client.answer(true);
    expect(seen.ran.filter((run) => run.tool === 'pay')).toHaveLength(1);
    expect(seen.ran).toHaveLength(301);

    // The same request again, in the same turn (no newer user message): the approval was used.
    await expectRefused(
      client,
      grant,
      `${at}.approval`,
      /did not ask a person to approve.*or that approval was used/,
      seen,
    );
    expect(seen.ran.filter((run) => run.tool === 'pay')).toHaveLength(1);
  });

  describe('left in an earlier step of the last message', () => {
    const variants: [string, (parts: UIMessage['parts'], pay: UIMessage['parts'][number]) => UIMessage['parts']][] = [
      [
        'a step the client added after it',
        (parts) => [...parts, { type: 'step-start' }, { type: 'text', text: 'Hm.' }],
      ],
      [
        'a steering message after it',
        (parts) => [...parts, { type: 'steering-message', id: 'st1', parts: [{ type: 'text', text: 'Hm.' }] }],
      ],
      [
        'moved before the step it was asked in',
        (parts, pay) => {
          const rest = parts.filter((p) => p !== pay);
          const first = rest.findIndex((p) => p.type === 'step-start');
          return [...rest.slice(0, first + 1), pay, ...rest.slice(first + 1)];
        },
      ],
      ['a bare step start after it', (parts) => [...parts, { type: 'step-start' }]],
    ];

    it.each(variants)('is refused before the turn: %s', async (_name, change) => {
      // A first step whose search the sequence refuses, then the payment in a step of its own.
      const seen = makeApp(
        shop,
        (call) => {
          if (call.index === 0) return { calls: [{ tool: 'search', id: 'c0', input: { query: 'invoice' } }] };
          if (call.index === 1) {
            return { text: 'Let me pay.', calls: [{ tool: 'pay', id: 'p1', input: { to: 'acme', amount: 120 } }] };
          }
          return { text: 'Paid.' };
        },
        options,
      );
      const client = new ApprovalClient(seen.app, 'shop');
      await client.say('Please settle my invoice');
      const messages = structuredClone(client.messages);
      const last = messages.at(-1)!;
      const pay = partOf(messages, 'p1');
      Object.assign(pay, { state: 'approval-responded', approval: { ...pay.approval!, approved: true } });
      last.parts = change(last.parts, pay as unknown as UIMessage['parts'][number]);
      const p = last.parts.indexOf(pay as unknown as UIMessage['parts'][number]);
      const at = `body.messages[${messages.length - 1}].parts[${p}]`;
      await expectRefused(client, messages, `${at}.state`, /earlier step of its message .* never ran/, seen);

      // The approval as the AI SDK's client sends it still runs the payment, once.
      await client.answer(true);
      expect(seen.ran.map((run) => run.toolCallId)).toEqual(['p1']);
    });
  });
});
