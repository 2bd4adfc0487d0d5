/**
 * A person's denial over the HTTP chat route is final: a client that sends the denied call's
 * signed approval request back, answered yes, later in the same turn (no newer user message,
 * the model having asked again as another call) is refused before the turn starts, and the
 * payment runs once, for the call the person did approve. Each case runs with stored and with
 * stateless sessions.
 */
import type { UIMessage } from 'ai';
import { afterEach, describe, expect, it } from 'vitest';
import { compileOrchestration } from '../src/core/compile.js';
import { createState } from '../src/core/state.js';
import { transition } from '../src/core/transition.js';
import type { BatonApp, CreateAppOptions } from '../src/server/create-app.js';
import { loadTemplate } from '../src/templates/load-template.js';
import {
  APPROVAL_AGENTS,
  ApprovalClient,
  approvalApp,
  SESSION_MODES,
  type ToolPart,
  toolParts,
} from './helpers/approvals.js';
import { errorOf } from './helpers/chat-requests.js';
import { mockModel } from './helpers/mock-model.js';

const shop = await loadTemplate(`${APPROVAL_AGENTS}shop.json`);
const INVOICE = { to: 'acme', amount: 120 };

const apps: BatonApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

/** The shop agent, with a model that asks to pay (c1), asks again once denied (c2), then answers. */
function makeApp(options: Partial<CreateAppOptions>) {
  const { model, calls } = mockModel((call) => {
    if (call.index === 0) return { calls: [{ tool: 'pay', id: 'c1', input: INVOICE }] };
    if (call.index === 1) return { calls: [{ tool: 'pay', id: 'c2', input: INVOICE }] };
    return { text: 'Done.' };
  });
  const { app, ran } = approvalApp({ agents: [shop], model, ...options });
  apps.push(app);
  return { app, ran, modelCalls: () => calls.length };
}

describe.each(SESSION_MODES)('a denied approval with %s sessions', (_mode, options) => {
  it('cannot be answered yes later in the turn: refused before the turn starts, and nothing is paid twice', async () => {
    const { app, ran, modelCalls } = makeApp(options);
    const client = new ApprovalClient(app, 'shop');
    await client.say('Please settle my invoice');
    const first = structuredClone(client.pendingApproval());
    expect(first.toolCallId).toBe('c1');
    // The person says no; the model asks again, as c2, in the same turn.
    await client.answer(false);
    expect(client.pendingApproval().toolCallId).toBe('c2');

    // The client puts c1's signed request back, answered yes, beside c2 (the last step of the
    // message, where the AI SDK collects approvals), and approves c2 as well.
    const messages = structuredClone(client.messages) as UIMessage[];
    const last = messages.length - 1;
    const c2 = toolParts(messages[last]).find((part) => part.toolCallId === 'c2')!;
    Object.assign(c2, { state: 'approval-responded', approval: { ...c2.approval!, approved: true } });
    const c1: ToolPart = { ...first, state: 'approval-responded', approval: { ...first.approval!, approved: true } };
    const parts = messages[last]!.parts.filter((part) => !('toolCallId' in part) || part.toolCallId !== 'c1');
    messages[last] = { ...messages[last]!, parts: [...parts, c1 as unknown as UIMessage['parts'][number]] };
    const at = `body.messages[${last}].parts[${parts.length}]`;
    const before = modelCalls();
    const response = await client.post(messages);
    expect(response.status, await response.clone().text()).toBe(400);
    const error = await errorOf(response);
    expect(error).toMatchObject({ code: 'invalid-history', path: `${at}.approval` });
    expect(error.message).toMatch(/already decided in this session/);
    expect(ran).toEqual([]);
    expect(modelCalls()).toBe(before);

    // The approval the person gives c2 runs it, once: the invoice is paid once.
    await client.answer(true);
    expect(ran).toEqual([{ tool: 'pay', toolCallId: 'c2', input: INVOICE }]);
  });
});

describe('a denial naming a call id no provider makes', () => {
  it('is not kept: a client cannot grow the session by writing huge ids into its history', () => {
    const plan = compileOrchestration({ steps: [{ name: 'Pay', isDefault: true }] });
    const context = { now: 1_000, message: undefined };
    let state = createState('s', 0);
    state = transition(plan, state, { type: 'approval-denied', toolCallId: 'real-call-1' }, context).state;
    state = transition(plan, state, { type: 'approval-denied', toolCallId: 'x'.repeat(100_000) }, context).state;
    expect(state.toolCallIds).toEqual(['real-call-1']);
    expect(JSON.stringify(state).length).toBeLessThan(1_000);
  });
});
