/**
 * An `approve` rule through the AI SDK's own approval flow: the model's call is shown to a
 * person instead of running; an approval counts only for the call it was asked for, with the
 * input it was asked for, while the session has not moved on; a denied or tampered call never
 * runs. (Modelled on the approval bugs of peers: a stale approval applied to a newer call,
 * declined tools that still ran, approval bypassed.)
 */
import { generateText, isStepCount, type ModelMessage, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { mockModel } from '../../test/helpers/mock-model.js';
import type { OrchestrationEvent } from '../core/events.js';
import type { OrchestrationConfig, Rule } from '../core/schema.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import { orchestrate } from './orchestrate.js';

const config: OrchestrationConfig = {
  rules: [{ tools: ['pay'], when: 'args.amount > 100', effect: 'approve', reason: 'Payments over 100 need a person' }],
  steps: [{ name: 'Checkout', isDefault: true }],
};
const user: ModelMessage = { role: 'user', content: 'Pay the invoice' };

function app(template: OrchestrationConfig = config) {
  const events: OrchestrationEvent[] = [];
  const manager = createOrchestrationManager({ onEvent: (event) => events.push(event) });
  const paid: number[] = [];
  const tools = {
    pay: tool({
      inputSchema: z.object({ amount: z.number() }),
      execute: async ({ amount }) => {
        paid.push(amount);
        return `paid ${amount}`;
      },
    }),
    search: tool({ inputSchema: z.object({}), execute: async () => 'found' }),
    review: tool({ inputSchema: z.object({}), execute: async () => 'reviewed' }),
    close_account: tool({ inputSchema: z.object({}), execute: async () => 'closed' }),
  };
  /** One turn; `miswired`: the app's own prepareStep replaces the orchestration's (spread after it). */
  const turn = async (messages: ModelMessage[], policy: Parameters<typeof mockModel>[0], miswired = false) => {
    const { model, calls } = mockModel(policy);
    const orchestration = orchestrate({
      manager,
      config: template,
      sessionId: 's',
      tools,
      messages,
      ...(miswired ? { onError: () => undefined } : {}),
    });
    const result = await generateText({
      model,
      messages,
      stopWhen: isStepCount(4),
      ...orchestration,
      ...(miswired ? { prepareStep: () => undefined } : {}),
    });
    // Miswired, the turn reports the wiring problem: calls are refused until it is fixed.
    if (miswired) await expect(orchestration.settled()).rejects.toThrow(/prepareStep is not the orchestration's/);
    else await orchestration.settled();
    return { result, calls };
  };
  return { manager, events, paid, turn };
}

const pays = (amount: number, id = `pay-${amount}`) => [
  { calls: [{ tool: 'pay', id, input: { amount } }] },
  { text: 'Done.' },
];

type ApprovalRequest<PART> = Extract<PART, { type: 'tool-approval-request' }>;

/** The approval requests a person is shown (not the automatic ones). */
const prompts = <PART extends { type: string }>(content: readonly PART[]): ApprovalRequest<PART>[] =>
  content.filter(
    (part): part is ApprovalRequest<PART> =>
      part.type === 'tool-approval-request' && (part as { isAutomatic?: boolean }).isAutomatic !== true,
  );

/** A person's denial of `toolCallId` as a client sends it back: the answer, and the call's denied result. */
const denial = (approvalId: string, toolCallId: string): ModelMessage => ({
  role: 'tool',
  content: [
    { type: 'tool-approval-response', approvalId, approved: false, reason: 'no' },
    { type: 'tool-result', toolCallId, toolName: 'pay', output: { type: 'execution-denied', reason: 'no' } },
  ],
});

const answer = (approvalId: string, approved: boolean): ModelMessage => ({
  role: 'tool',
  content: [{ type: 'tool-approval-response', approvalId, approved, ...(approved ? {} : { reason: 'no' }) }],
});

describe('an approve rule in the AI SDK loop', () => {
  it('runs a small payment at once, and asks a person for a large one, which then runs once', async () => {
    const { turn, paid, manager, events } = app();
    await turn([user], pays(50));
    expect(paid).toEqual([50]);

    const first = await turn([user], pays(500));
    expect(paid).toEqual([50]); // not yet: a person is asked
    const [request] = prompts(first.result.content);
    expect(request?.toolCall).toMatchObject({ toolName: 'pay', input: { amount: 500 } });
    expect(events).toContainEqual(expect.objectContaining({ type: 'approval-requested', toolCallId: 'pay-500' }));
    expect((await manager.getStateManager().getState('s'))?.approvals).toMatchObject([{ id: 'pay-500', tool: 'pay' }]);

    const history = [user, ...first.result.response.messages, answer(request!.approvalId, true)];
    await turn(history, [{ text: 'Paid.' }]);
    expect(paid).toEqual([50, 500]);
    const state = await manager.getStateManager().getState('s');
    expect(state?.recentlyUsedTools).toEqual(['pay', 'pay']);
    expect(state?.approvals).toBeUndefined();

    // The same approval again (a replayed request): the call id ran already, nothing runs.
    await turn(history, [{ text: 'Paid.' }]);
    expect(paid).toEqual([50, 500]);
  });

  it('never runs a denied payment', async () => {
    const { turn, paid } = app();
    const first = await turn([user], pays(500));
    const [request] = prompts(first.result.content);
    await turn([user, ...first.result.response.messages, answer(request!.approvalId, false)], [{ text: 'OK.' }]);
    expect(paid).toEqual([]);
  });

  it('refuses an approval applied to other arguments (the client changed the amount)', async () => {
    const { turn, paid, events } = app();
    const first = await turn([user], pays(500));
    const [request] = prompts(first.result.content);
    // The client edits the approved call's input in the history it sends back.
    const tampered = JSON.parse(JSON.stringify(first.result.response.messages).replaceAll('500', '5000'));
    await turn([user, ...tampered, answer(request!.approvalId, true)], [{ text: 'Hm.' }]);
    expect(paid).toEqual([]);
    expect(events).toContainEqual(
      expect.objectContaining({
        type: 'tool-rejected',
        tool: 'pay',
        reason: expect.objectContaining({ code: 'approval-invalid' }),
      }),
    );
  });

  it('never runs a denied payment that the model calls again later with the same call id', async () => {
    // A hostile model (or a provider that lets it choose ids) repeats the id of a call whose
    // approval was denied: it is a call from a model step, not one resumed from the history.
    const { turn, paid, events } = app();
    const first = await turn([user], pays(500));
    const [request] = prompts(first.result.content);
    const refusal = denial(request!.approvalId, 'pay-500');
    const history = [user, ...first.result.response.messages, refusal];
    const second = await turn(history, [{ text: 'OK, I will not pay.' }]);
    const later: ModelMessage[] = [...history, ...second.result.response.messages, { role: 'user', content: 'go on' }];
    const third = await turn(later, pays(500, 'pay-500'));
    expect(paid).toEqual([]);
    // The denial made the id one the session has seen: refused at once, nobody is asked again.
    expect(prompts(third.result.content)).toEqual([]);
    expect(events.filter((event) => event.type === 'tool-rejected' && event.toolCallId === 'pay-500')).toEqual([
      expect.objectContaining({ reason: expect.objectContaining({ code: 'duplicate-call' }) }),
    ]);
  });

  it('never runs a call awaiting approval that the model calls again after the client skipped it', async () => {
    // The client answers the approval with a tool result of its own instead of a person's answer,
    // and the model repeats the call's id: nobody approved it.
    const { turn, paid, manager } = app();
    const first = await turn([user], pays(700));
    expect((await manager.getStateManager().getState('s'))?.approvals).toMatchObject([{ id: 'pay-700' }]);
    const skipped: ModelMessage = {
      role: 'tool',
      content: [
        { type: 'tool-result', toolCallId: 'pay-700', toolName: 'pay', output: { type: 'text', value: 'skipped' } },
      ],
    };
    const history: ModelMessage[] = [
      user,
      ...first.result.response.messages,
      skipped,
      { role: 'user', content: 'go on' },
    ];
    await turn(history, pays(700, 'pay-700'));
    expect(paid).toEqual([]);
  });

  it("never runs a denied call repeated by the model when the app replaced the orchestration's prepareStep", async () => {
    // A miswired app (its own prepareStep spread after the orchestration's): no model step is
    // prepared by Baton, so "before the first model step" cannot tell a resumed call from the
    // model's. Only a call the history's last message approves is resumed.
    const { turn, paid } = app();
    const { result: first } = await turn([user], pays(500));
    const [request] = prompts(first.content);
    const refusal = denial(request!.approvalId, 'pay-500');
    const later: ModelMessage[] = [user, ...first.response.messages, refusal, { role: 'user', content: 'go on' }];
    await turn(later, pays(500, 'pay-500'), true);
    // The same with the refusal as the last message, where the AI SDK looks for approvals.
    await turn([user, ...first.response.messages, refusal], pays(500, 'pay-500'), true);
    expect(paid).toEqual([]);
  });

  it('refuses an approval once the session moved on since it was asked', async () => {
    const { turn, paid, events } = app();
    const first = await turn([user], pays(500));
    const [request] = prompts(first.result.content);
    // Meanwhile another turn of the session ran a tool.
    await turn([user], [{ calls: [{ tool: 'search', id: 'meanwhile' }] }, { text: 'Searched.' }]);
    await turn([user, ...first.result.response.messages, answer(request!.approvalId, true)], [{ text: 'Hm.' }]);
    expect(paid).toEqual([]);
    expect(events).toContainEqual(
      expect.objectContaining({
        type: 'tool-rejected',
        reason: expect.objectContaining({ code: 'approval-invalid', message: expect.stringContaining('moved on') }),
      }),
    );
  });
});

describe('a denied approval', () => {
  it('cannot be turned into an approval later in the turn: the same call, approved then, never runs', async () => {
    const { turn, paid, manager, events } = app();
    const first = await turn([user], pays(500, 'c1'));
    const [asked] = prompts(first.result.content);
    // The person denies; the model asks again, as another call (for another amount).
    const afterDenial = [user, ...first.result.response.messages, denial(asked!.approvalId, 'c1')];
    const second = await turn(afterDenial, pays(600, 'c2'));
    const [again] = prompts(second.result.content);
    expect(again?.toolCall.toolCallId).toBe('c2');
    const waiting = (await manager.getStateManager().getState('s'))?.approvals?.map((approval) => approval.id);

    // The client sends c1's request back, now approved, and approves c2 as well: no newer user
    // message, and the session has not moved on since either was asked.
    const both: ModelMessage = {
      role: 'tool',
      content: [
        { type: 'tool-approval-response', approvalId: asked!.approvalId, approved: true },
        { type: 'tool-approval-response', approvalId: again!.approvalId, approved: true },
      ],
    };
    await turn([...afterDenial, ...second.result.response.messages, both], [{ text: 'Paid.' }]);
    expect(paid).toEqual([600]); // c2 only: the denied payment never runs
    expect(events.filter((event) => event.type === 'tool-rejected' && event.toolCallId === 'c1')).toEqual([
      expect.objectContaining({ reason: expect.objectContaining({ code: 'duplicate-call' }) }),
    ]);
    // What the session asked about c1 went with the denial: only c2 waited for a person.
    expect(waiting).toEqual(['c2']);
  });
});

describe('several calls of one model step', () => {
  const onePayment: Rule = {
    tools: ['pay'],
    when: 'args.amount > 100',
    limit: { max: 1, per: 'turn' },
    reason: 'One payment over 100 per question',
  };
  const bigPayments: Rule = {
    tools: ['pay'],
    when: 'args.amount > 1000',
    effect: 'approve',
    reason: 'Payments over 1000 need a person',
  };

  it('asks nobody about a call that an earlier call of the step, run, leaves over its limit', async () => {
    const template: OrchestrationConfig = {
      rules: [onePayment, bigPayments],
      steps: [{ name: 'Checkout', isDefault: true }],
    };
    const { turn, paid, events } = app(template);
    const step = [
      {
        calls: [
          { tool: 'pay', id: 'small', input: { amount: 500 } },
          { tool: 'pay', id: 'big', input: { amount: 5000 } },
        ],
      },
      { text: 'Paid one.' },
    ];
    const { result } = await turn([user], step);
    expect(paid).toEqual([500]);
    // The large one could only run if the first were refused: nobody is asked about it.
    expect(prompts(result.content)).toEqual([]);
    expect(events).toContainEqual(
      expect.objectContaining({
        type: 'tool-rejected',
        toolCallId: 'big',
        reason: expect.objectContaining({ rule: 'rules[0]' }),
      }),
    );
  });

  it('asks a person about the first call only, when the sequence needs another tool next', async () => {
    const template: OrchestrationConfig = {
      rules: [{ tools: ['search'], effect: 'approve', reason: 'Searches need a person' }],
      steps: [{ name: 'Research', isDefault: true, sequence: ['search', 'review'] }],
    };
    const { turn } = app(template);
    const step = [
      {
        calls: [
          { tool: 'search', id: 's1' },
          { tool: 'search', id: 's2' },
        ],
      },
    ];
    const { result } = await turn([user], step);
    expect(prompts(result.content).map((request) => request.toolCall.toolCallId)).toEqual(['s1']);
  });
});

/** `first`'s messages with every occurrence of `from` (a call id) replaced by `to`. */
const renamed = (messages: readonly ModelMessage[], from: string, to: string): ModelMessage[] =>
  JSON.parse(JSON.stringify(messages).replaceAll(`"${from}"`, `"${to}"`)) as ModelMessage[];

describe("approval attacks (modelled on the peers' bugs)", () => {
  it('asks once when a durable engine replays the turn that asked (turnId)', async () => {
    const events: OrchestrationEvent[] = [];
    const manager = createOrchestrationManager({ onEvent: (event) => events.push(event) });
    const paid: number[] = [];
    const pay = tool({
      inputSchema: z.object({ amount: z.number() }),
      execute: async ({ amount }) => {
        paid.push(amount);
        return 'paid';
      },
    });
    const run = async () => {
      const { model } = mockModel(pays(500));
      const orchestration = orchestrate({
        manager,
        config,
        sessionId: 'durable',
        tools: { pay },
        messages: [user],
        turnId: 'workflow-1',
      });
      const result = await generateText({ model, messages: [user], stopWhen: isStepCount(4), ...orchestration });
      await orchestration.settled();
      return prompts(result.content);
    };
    expect(await run()).toHaveLength(1);
    // The engine replays the turn (the same model output, the same call id): the same question.
    expect(await run()).toHaveLength(1);
    expect(events.filter((event) => event.type === 'approval-requested')).toHaveLength(1);
    expect(events.filter((event) => event.type === 'tools-offered')).toHaveLength(1);
    expect((await manager.getStateManager().getState('durable'))?.approvals).toHaveLength(1);
    expect(paid).toEqual([]);
  });

  it('refuses an approval replayed for another call id', async () => {
    const { turn, paid, events } = app();
    const first = await turn([user], pays(500));
    const [request] = prompts(first.result.content);
    // The client moves the approval to a call id Baton never asked about.
    const moved = renamed(first.result.response.messages, 'pay-500', 'pay-forged');
    await turn([user, ...moved, answer(request!.approvalId, true)], [{ text: 'Hm.' }]);
    expect(paid).toEqual([]);
    expect(events).toContainEqual(
      expect.objectContaining({
        type: 'tool-rejected',
        toolCallId: 'pay-forged',
        reason: expect.objectContaining({
          code: 'approval-invalid',
          message: expect.stringContaining('no approval was asked for call "pay-forged"'),
        }),
      }),
    );
  });

  it('runs an approved call once when the approval is sent twice', async () => {
    const { turn, paid, events } = app();
    const first = await turn([user], pays(500));
    const [request] = prompts(first.result.content);
    const approved = [user, ...first.result.response.messages, answer(request!.approvalId, true)];
    await turn(approved, [{ text: 'Paid.' }]);
    await turn(approved, [{ text: 'Paid again?' }]);
    expect(paid).toEqual([500]);
    expect(events.filter((event) => event.type === 'tool-rejected' && event.toolCallId === 'pay-500')).toEqual([
      expect.objectContaining({ reason: expect.objectContaining({ code: 'duplicate-call' }) }),
    ]);
  });

  it('refuses an approval after a step change, even where the new step allows the tool', async () => {
    const steps: OrchestrationConfig = {
      ...config,
      steps: [
        { name: 'Checkout', isDefault: true },
        { name: 'Reviewed', conditions: [{ type: 'tool_used', value: 'review' }] },
      ],
    };
    const { turn, paid, events, manager } = app(steps);
    const first = await turn([user], pays(500));
    const [request] = prompts(first.result.content);
    await turn([user], [{ calls: [{ tool: 'review', id: 'review-1' }] }, { text: 'Reviewed.' }]);
    expect((await manager.getState('s'))?.activeStep).toBe('Reviewed');
    await turn([user, ...first.result.response.messages, answer(request!.approvalId, true)], [{ text: 'Hm.' }]);
    expect(paid).toEqual([]);
    expect(events).toContainEqual(
      expect.objectContaining({
        type: 'tool-rejected',
        toolCallId: 'pay-500',
        reason: expect.objectContaining({ code: 'approval-invalid', message: expect.stringContaining('moved on') }),
      }),
    );
  });

  it("refuses an approved call that the step no longer allows, for the step's reason", async () => {
    const steps: OrchestrationConfig = {
      ...config,
      steps: [
        { name: 'Checkout', isDefault: true },
        {
          name: 'Closed',
          conditions: [{ type: 'tool_used', value: 'close_account' }],
          availableTools: { allowed: ['search'] },
        },
      ],
    };
    const { turn, paid, events } = app(steps);
    const first = await turn([user], pays(500));
    const [request] = prompts(first.result.content);
    await turn([user], [{ calls: [{ tool: 'close_account', id: 'close-1' }] }, { text: 'Closed.' }]);
    await turn([user, ...first.result.response.messages, answer(request!.approvalId, true)], [{ text: 'Hm.' }]);
    expect(paid).toEqual([]);
    expect(events).toContainEqual(
      expect.objectContaining({
        type: 'tool-rejected',
        toolCallId: 'pay-500',
        reason: expect.objectContaining({ code: 'not-allowed' }),
      }),
    );
  });
});

describe("rule conditions against the tools' input schemas", () => {
  it('refuses to orchestrate when a condition names a field the tool does not have', () => {
    const manager = createOrchestrationManager();
    const typo: OrchestrationConfig = {
      rules: [{ tools: ['pay'], when: 'args.amout > 100', effect: 'approve', reason: 'Big payments' }],
      steps: [{ name: 'Checkout', isDefault: true }],
    };
    const tools = { pay: tool({ inputSchema: z.object({ amount: z.number() }), execute: async () => 'ok' }) };
    expect(() => orchestrate({ manager, config: typo, sessionId: 's', tools })).toThrow(
      /config\.rules\[0\]\.when: for tool "pay": No such key: amout/,
    );
    expect(() => orchestrate({ manager, config, sessionId: 's', tools })).not.toThrow();
  });

  it('checks the config against each new tools object, though the same config passed with others', () => {
    const manager = createOrchestrationManager();
    const byAmount: OrchestrationConfig = {
      rules: [{ tools: ['pay'], when: 'args.amount > 100', effect: 'approve', reason: 'Big payments' }],
      steps: [{ name: 'Checkout', isDefault: true }],
    };
    const good = { pay: tool({ inputSchema: z.object({ amount: z.number() }), execute: async () => 'ok' }) };
    const renamed = { pay: tool({ inputSchema: z.object({ total: z.number() }), execute: async () => 'ok' }) };
    // Checked once for this combination, then remembered: the second turn passes as well.
    expect(() => orchestrate({ manager, config: byAmount, sessionId: 's1', tools: good })).not.toThrow();
    expect(() => orchestrate({ manager, config: byAmount, sessionId: 's2', tools: good })).not.toThrow();
    // Tools whose schema lost the field: the same config is refused with them, every time.
    for (const sessionId of ['s3', 's4']) {
      expect(() => orchestrate({ manager, config: byAmount, sessionId, tools: renamed })).toThrow(
        /config\.rules\[0\]\.when: for tool "pay": No such key: amount/,
      );
    }
    // And on another manager, which may know other conditions, it is checked again.
    expect(() =>
      orchestrate({ manager: createOrchestrationManager(), config: byAmount, sessionId: 's5', tools: renamed }),
    ).toThrow(/No such key: amount/);
  });
});
