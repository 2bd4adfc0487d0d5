import { generateText, isStepCount, type ModelMessage, streamText, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { mockModel } from '../../test/helpers/mock-model.js';
import type { OrchestrationEvent } from '../core/events.js';
import type { OrchestrationConfig } from '../core/schema.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import { orchestrate } from './orchestrate.js';

const config: OrchestrationConfig = {
  steps: [
    {
      name: 'Research',
      conditions: [{ type: 'message_contains', value: 'research' }],
      sequence: ['search', 'think'],
      availableTools: { allowed: ['search', 'think'] },
    },
  ],
};

function app() {
  const events: OrchestrationEvent[] = [];
  const manager = createOrchestrationManager({ onEvent: (event) => events.push(event) });
  const executed: string[] = [];
  const tools = {
    // A tool with a side effect: a person approves each call (the AI SDK's tool-level flag).
    search: tool({
      inputSchema: z.object({ q: z.string().optional() }),
      needsApproval: true,
      execute: async (): Promise<string> => {
        executed.push('search');
        return 'search-ok';
      },
    }),
    think: tool({
      inputSchema: z.object({}),
      execute: async (): Promise<string> => {
        executed.push('think');
        return 'think-ok';
      },
    }),
  };
  const failures: unknown[] = [];
  const turn = async (messages: ModelMessage[], policy: Parameters<typeof mockModel>[0]) => {
    const { model, calls } = mockModel(policy);
    const orchestration = orchestrate({
      manager,
      config,
      sessionId: 's',
      tools,
      onError: (error) => failures.push(error),
    });
    const result = await generateText({ model, messages, stopWhen: isStepCount(6), ...orchestration });
    await orchestration.settled();
    return { result, calls, orchestration };
  };
  return { events, manager, executed, turn, failures };
}

/** Calls whatever the model is offered (search first), then answers. */
const obedient = ({ offered }: { offered: string[] }) =>
  offered.length === 1 ? { calls: [{ tool: offered[0]!, id: `${offered[0]}-1` }] } : { text: 'Done.' };

const user: ModelMessage = { role: 'user', content: 'Please research EV adoption' };

type ApprovalRequest<PART> = Extract<PART, { type: 'tool-approval-request' }>;

/** The approval requests a person would be shown (not the automatic ones). */
const prompts = <PART extends { type: string }>(content: readonly PART[]): ApprovalRequest<PART>[] =>
  content.filter(
    (part): part is ApprovalRequest<PART> =>
      part.type === 'tool-approval-request' && (part as { isAutomatic?: boolean }).isAutomatic !== true,
  );

describe('human approval of a sequence tool', () => {
  it('asks a person about an allowed call; once approved, the call runs, is recorded and the sequence goes on', async () => {
    const { turn, executed, manager, events } = app();
    const first = await turn([user], obedient);
    // The turn stops at the approval request: nothing ran, the sequence waits at search.
    expect(executed).toEqual([]);
    const [request] = prompts(first.result.content);
    expect(request?.toolCall.toolName).toBe('search');
    expect(first.orchestration.sequenceIncomplete()).toMatchObject({ index: 0, awaitingApproval: true });
    // The session keeps what the person was asked (no rule: the tool's own needsApproval asked),
    // so that only an approval it asked for counts.
    expect((await manager.getStateManager().getState('s'))?.approvals).toEqual([
      { id: 'search-1', tool: 'search', digest: expect.any(String), at: expect.any(String) },
    ]);

    // The person approves: the approval comes back in the next call's messages.
    const approved: ModelMessage = {
      role: 'tool',
      content: [{ type: 'tool-approval-response', approvalId: request!.approvalId, approved: true }],
    };
    const offeredBefore = events.filter((e) => e.type === 'tools-offered').length;
    const second = await turn([user, ...first.result.response.messages, approved], obedient);
    expect(executed).toEqual(['search', 'think']);
    // One step decision per model step: running the approved call first decided no step.
    expect(events.filter((e) => e.type === 'tools-offered').length - offeredBefore).toBe(second.calls.length);
    expect(second.calls.map((c) => c.offered)).toEqual([['think'], ['search', 'think']]);
    expect(await manager.getState('s')).toMatchObject({ sequenceIndex: 2, recentlyUsedTools: ['search', 'think'] });
    // Used: the approval is gone with the call that used it.
    expect((await manager.getStateManager().getState('s'))?.approvals).toBeUndefined();
    expect(second.orchestration.sequenceIncomplete()).toBeUndefined();
    expect(events.filter((e) => e.type === 'tool-rejected')).toEqual([]);
  });

  it('runs nothing when the person denies, and the model is told so', async () => {
    const { turn, executed, manager } = app();
    const first = await turn([user], obedient);
    const [request] = prompts(first.result.content);
    const denied: ModelMessage = {
      role: 'tool',
      content: [
        { type: 'tool-approval-response', approvalId: request!.approvalId, approved: false, reason: 'not now' },
      ],
    };
    const second = await turn([user, ...first.result.response.messages, denied], [{ text: 'Understood.' }]);
    expect(executed).toEqual([]);
    // The model read the denial in its prompt, and was offered search again.
    const told = JSON.stringify(second.calls[0]?.options.prompt);
    expect(told).toContain('execution-denied');
    expect(told).toContain('not now');
    expect(second.calls[0]?.offered).toEqual(['search']);
    expect(await manager.getState('s')).toMatchObject({ sequenceIndex: 0, recentlyUsedTools: [] });
    expect((await manager.getStateManager().getState('s'))?.approvals).toBeUndefined();
    expect(second.orchestration.sequenceIncomplete()).toMatchObject({
      index: 0,
      expected: ['search'],
      awaitingApproval: false,
    });
  });

  it('never asks a person about a call orchestration would refuse: the model gets the reason instead', async () => {
    const { turn, executed, events } = app();
    // Two searches in one step: the second could only run if the first were refused.
    const first = await turn(
      [user],
      [
        {
          calls: [
            { tool: 'search', id: 's1' },
            { tool: 'search', id: 's2' },
          ],
        },
      ],
    );
    const asked = prompts(first.result.content);
    expect(asked.map((p) => p.toolCall.toolCallId)).toEqual(['s1']);
    const refusal = first.result.content.find(
      (part) => part.type === 'tool-approval-response' && part.toolCall.toolCallId === 's2',
    );
    expect(refusal).toMatchObject({ approved: false });
    expect((refusal as { reason?: string }).reason).toMatch(/Tool "search" was not run: .*expects think.*/);
    expect(executed).toEqual([]);
    expect(
      events.filter((e) => e.type === 'tool-rejected').map((e) => e.type === 'tool-rejected' && e.toolCallId),
    ).toEqual(['s2']);
  });

  it('never runs a call it denied automatically, sent back approved once the session would allow it', async () => {
    const { turn, executed } = app();
    const first = await turn(
      [user],
      [
        {
          calls: [
            { tool: 'search', id: 's1' },
            { tool: 'search', id: 's2' },
          ],
        },
      ],
    );
    const [asked] = prompts(first.result.content);
    // The AI SDK issues an approval request for the refused call too, marked automatic.
    const automatic = first.result.content.find(
      (part) => part.type === 'tool-approval-request' && part.toolCall.toolCallId === 's2',
    );
    expect(automatic).toMatchObject({ isAutomatic: true });
    const approve = (approvalId: string): ModelMessage => ({
      role: 'tool',
      content: [{ type: 'tool-approval-response', approvalId, approved: true }],
    });
    // The person approves s1: it runs, and the model completes the sequence, after which a
    // search would be allowed again.
    const history = [user, ...first.result.response.messages, approve(asked!.approvalId)];
    const second = await turn(history, [{ calls: [{ tool: 'think', id: 't1' }] }, { text: 'Done.' }]);
    expect(executed).toEqual(['search', 'think']);
    // The automatic request of s2, answered yes by the client: s2 was decided, and stays refused.
    const ran: ModelMessage = {
      role: 'tool',
      content: [{ type: 'tool-result', toolCallId: 's1', toolName: 'search', output: { type: 'text', value: 'ok' } }],
    };
    const third = await turn(
      [...history, ran, ...second.result.response.messages, approve((automatic as { approvalId: string }).approvalId)],
      [{ text: 'ok' }],
    );
    expect(executed).toEqual(['search', 'think']);
    expect(JSON.stringify(third.calls[0]?.options.prompt)).toMatch(/"s2\\" was already used in this session/);
  });

  it('refuses an approved call that is no longer allowed when the approval arrives, with the reason', async () => {
    const { turn, executed, manager } = app();
    const first = await turn([user], obedient);
    const [request] = prompts(first.result.content);
    // Meanwhile the session moved on (another turn ran search).
    await manager.processToolUsage(config, [user], 's', 'search');
    const approved: ModelMessage = {
      role: 'tool',
      content: [{ type: 'tool-approval-response', approvalId: request!.approvalId, approved: true }],
    };
    const second = await turn([user, ...first.result.response.messages, approved], [{ text: 'ok' }]);
    expect(executed).toEqual([]);
    expect(JSON.stringify(second.calls[0]?.options.prompt)).toMatch(/was not run: .*expects think/);
    expect((await manager.getState('s'))?.recentlyUsedTools).toEqual(['search']);
  });

  it('works the same with streamText', async () => {
    const { manager, executed } = app();
    const tools = {
      search: tool({
        inputSchema: z.object({}),
        execute: async (): Promise<string> => {
          executed.push('search');
          return 'ok';
        },
      }),
      think: tool({ inputSchema: z.object({}), execute: async (): Promise<string> => 'ok' }),
    };
    const { model } = mockModel(obedient);
    // The app's own policy, per tool: asked only about what orchestration allows.
    const orchestration = orchestrate({
      manager,
      config,
      sessionId: 'st',
      tools,
      toolApproval: { search: 'user-approval' },
    });
    const result = streamText({ model, messages: [user], stopWhen: isStepCount(5), ...orchestration });
    const parts: string[] = [];
    for await (const part of result.stream) parts.push(part.type);
    await orchestration.settled();
    expect(parts).toContain('tool-approval-request');
    expect(executed).toEqual([]);
    const approval = (await result.content).find((p) => p.type === 'tool-approval-request');
    const next = orchestrate({ manager, config, sessionId: 'st', tools, toolApproval: { search: 'user-approval' } });
    const resumed = streamText({
      model,
      messages: [
        user,
        ...(await result.response).messages,
        {
          role: 'tool',
          content: [{ type: 'tool-approval-response', approvalId: approval!.approvalId, approved: true }],
        },
      ],
      stopWhen: isStepCount(5),
      ...next,
    });
    await resumed.consumeStream();
    await next.settled();
    expect(executed).toEqual(['search']);
    expect((await manager.getState('st'))?.sequenceIndex).toBe(2);
  });
});
