/**
 * A replay of a turn under a durable-execution engine (`turnId`) gets the recorded decision of a
 * call back only for the same call: the same tool with the same input. The call id is the
 * model's to choose, so an id reused for another tool or input is refused as `duplicate-call`,
 * through the transition and through `orchestrate({ turnId })`; it neither inherits the original
 * decision (skipping the step's tools and every rule) nor is decided again as a new call.
 *
 * And an approval is bound to the session as it stands: any tool use moves it on, even one that
 * leaves a history at its bound unchanged (the same tool in and out).
 */
import { generateText, isStepCount, type ModelMessage, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { orchestrate } from '../src/ai-sdk/orchestrate.js';
import { compileOrchestration } from '../src/core/compile.js';
import type { OrchestrationEvent } from '../src/core/events.js';
import { latestUserMessage } from '../src/core/messages.js';
import type { OrchestrationConfig } from '../src/core/schema.js';
import { createState, type OrchestrationState } from '../src/core/state.js';
import { assertState } from '../src/core/state-check.js';
import {
  decideToolCall,
  type ToolDecision,
  type TransitionContext,
  type TransitionInput,
  transition,
} from '../src/core/transition.js';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { mockModel } from './helpers/mock-model.js';

const TOOLS = ['search', 'pay'];
const TURN = 'workflow-1';
const message = latestUserMessage([{ role: 'user', content: 'find the invoice', id: 'm1' }]);

/** Research may search only; a payment over 1000 is refused by a rule wherever it is called. */
const config: OrchestrationConfig = {
  rules: [{ tools: ['pay'], when: 'args.amount > 1000', effect: 'deny', reason: 'Payments over 1000 are refused' }],
  steps: [{ name: 'Research', isDefault: true, availableTools: { allowed: ['search'] } }],
};

function session(template: OrchestrationConfig = config) {
  const plan = compileOrchestration(template);
  let now = 1_000;
  let state: OrchestrationState = createState('s', 0);
  const events: OrchestrationEvent[] = [];
  const context = (): TransitionContext => ({ now, message, leaseMs: 60_000 });
  const run = (input: TransitionInput) => {
    const result = transition(plan, state, input, context());
    state = result.state;
    events.push(...result.events);
    return result;
  };
  run({ type: 'user-message' });
  const request = (name: string, id: string, amount?: number) =>
    run({
      type: 'tool-requested',
      tool: name,
      toolCallId: id,
      agentTools: TOOLS,
      ...(amount === undefined ? {} : { args: { amount }, argsDigest: `amount=${amount}` }),
      turnId: TURN,
    }).decision as ToolDecision;
  return {
    plan,
    run,
    request,
    events,
    context,
    tick: (ms: number) => {
      now += ms;
    },
    get state() {
      return state;
    },
    set state(next: OrchestrationState) {
      state = next;
    },
  };
}

const duplicate = { allowed: false, reason: { code: 'duplicate-call', toolCallId: 'c1' } };

describe('a replayed call id must carry the tool and input it was decided for', () => {
  it('refuses an id of a completed call reused for another tool, which would skip the step and the rules', () => {
    const s = session();
    expect(s.request('search', 'c1')).toMatchObject({ allowed: true });
    s.run({ type: 'tool-completed', toolCallId: 'c1' });
    // The genuine replay still gets its decision back.
    expect(s.request('search', 'c1')).toMatchObject({ allowed: true, replayed: 'settled' });
    const before = s.state;
    const reused = s.request('pay', 'c1', 5_000);
    expect(reused).toMatchObject(duplicate);
    expect(reused).not.toHaveProperty('replayed');
    // What the model may call instead is what the step offers.
    expect(reused.allowed ? [] : reused.allowedTools).toEqual(['search']);
    expect(s.events.at(-1)).toMatchObject({ type: 'tool-rejected', tool: 'pay', toolCallId: 'c1' });
    // Not recorded over the original: the turn's replays of search still get theirs.
    expect(s.state).toBe(before);
    expect(s.request('search', 'c1')).toMatchObject({ allowed: true, replayed: 'settled' });
    // The non-reserving check (the AI SDK's approval hook) answers the same.
    expect(
      decideToolCall(
        s.plan,
        s.state,
        {
          tool: 'pay',
          toolCallId: 'c1',
          agentTools: TOOLS,
          args: { amount: 5_000 },
          argsDigest: 'amount=5000',
          turnId: TURN,
        },
        s.context(),
      ),
    ).toMatchObject(duplicate);
  });

  it('refuses an id of a running call reused for another tool or another input', () => {
    const s = session({ ...config, steps: [{ name: 'Pay', isDefault: true }] });
    expect(s.request('pay', 'c1', 50)).toMatchObject({ allowed: true });
    expect(s.request('pay', 'c1', 50)).toMatchObject({ allowed: true, replayed: 'running' });
    expect(s.request('pay', 'c1', 5_000)).toMatchObject(duplicate);
    expect(s.request('search', 'c1')).toMatchObject(duplicate);
    // The reservation is the original call's, and commits as usual.
    s.run({ type: 'tool-completed', toolCallId: 'c1' });
    expect(s.state.recentlyUsedTools).toEqual(['pay']);
  });

  it('refuses a reused id of a call whose reservation ended, instead of deciding it again as new', () => {
    const s = session({ ...config, steps: [{ name: 'Pay', isDefault: true }] });
    expect(s.request('pay', 'c1', 50)).toMatchObject({ allowed: true });
    s.tick(120_000); // its process died: the lease ended
    expect(s.request('pay', 'c1', 5_000)).toMatchObject(duplicate);
    expect(s.request('search', 'c1')).toMatchObject(duplicate);
    // The same call is decided again, as before.
    expect(s.request('pay', 'c1', 50)).toMatchObject({ allowed: true });
  });

  it("refuses an id of a refused call reused for another tool (the shell's recorded refusal too)", () => {
    const s = session();
    expect(s.request('pay', 'c1', 50)).toMatchObject({ allowed: false, reason: { code: 'not-allowed' } });
    expect(s.request('pay', 'c1', 50)).toMatchObject({ allowed: false, replayed: 'settled' });
    expect(s.request('search', 'c1')).toMatchObject(duplicate);
    // Another input too: a refusal was judged on the input it was recorded for.
    expect(s.request('pay', 'c1', 5_000)).toMatchObject(duplicate);
    s.run({
      type: 'observed',
      turnId: TURN,
      event: {
        type: 'tool-rejected',
        sessionId: 's',
        tool: 'pay',
        toolCallId: 'c2',
        step: 'Research',
        allowedTools: ['search'],
        reason: { code: 'not-offered', offered: ['search'], message: 'not offered' },
      },
    });
    expect(s.request('search', 'c2')).toMatchObject({ allowed: false, reason: { code: 'duplicate-call' } });
  });

  it('reads records stored before tools were kept: still replayed, and a running one still bound to its tool', () => {
    const s = session({ ...config, steps: [{ name: 'Pay', isDefault: true }] });
    s.request('search', 'c1');
    s.run({ type: 'tool-completed', toolCallId: 'c1' });
    s.request('pay', 'c2', 50);
    // As a store kept it before: no tool, no digest.
    const stored = JSON.parse(JSON.stringify(s.state)) as OrchestrationState;
    stored.replay!.calls = stored.replay!.calls.map(({ id, allowed, ran }) =>
      ran === undefined ? { id, allowed } : { id, allowed, ran },
    );
    s.state = assertState(stored);
    expect(s.request('search', 'c1')).toMatchObject({ allowed: true, replayed: 'settled' });
    expect(s.request('pay', 'c2', 50)).toMatchObject({ allowed: true, replayed: 'running' });
    expect(s.request('search', 'c2')).toMatchObject({ allowed: false, reason: { code: 'duplicate-call' } });
  });

  it('has the state validators accept the new fields and refuse them malformed', () => {
    const s = session();
    s.request('pay', 'c1', 50);
    const state = JSON.parse(JSON.stringify(s.state)) as OrchestrationState;
    expect(state.replay?.calls[0]).toMatchObject({ id: 'c1', tool: 'pay', digest: 'amount=50' });
    expect(assertState(state)).toBe(state);
    const broken = (call: Record<string, unknown>) => ({ ...state, replay: { ...state.replay, calls: [call] } });
    expect(() => assertState(broken({ id: 'c1', allowed: true, tool: 7 }))).toThrow(/state\.replay/);
    expect(() => assertState(broken({ id: 'c1', allowed: true, digest: {} }))).toThrow(/state\.replay/);
    expect(() => assertState({ ...state, toolUses: -1 })).toThrow(/state\.toolUses/);
    expect(() => assertState({ ...state, toolUses: '3' })).toThrow(/state\.toolUses/);
    expect(assertState({ ...state, toolUses: 3 })).toMatchObject({ toolUses: 3 });
  });
});

describe('a replay through orchestrate({ turnId }) whose model answer reuses a call id', () => {
  const user: ModelMessage = { role: 'user', content: 'Pay the invoice' };
  const payOrSearch: OrchestrationConfig = {
    rules: config.rules,
    steps: [{ name: 'Checkout', isDefault: true }],
  };

  function app(template: OrchestrationConfig = payOrSearch) {
    const events: OrchestrationEvent[] = [];
    const manager = createOrchestrationManager({ onEvent: (event) => events.push(event) });
    const paid: number[] = [];
    const tools = {
      search: tool({ inputSchema: z.object({}), execute: async () => 'found' }),
      pay: tool({
        inputSchema: z.object({ amount: z.number() }),
        execute: async ({ amount }) => {
          paid.push(amount);
          return `paid ${amount}`;
        },
      }),
    };
    /** One run of the turn, whose model answers with `call` then ends. */
    const run = async (call: { tool: string; id: string; input: unknown }) => {
      const { model } = mockModel([{ calls: [call] }, { text: 'Done.' }]);
      const orchestration = orchestrate({
        manager,
        config: template,
        sessionId: 'durable',
        tools,
        messages: [user],
        turnId: TURN,
      });
      const result = await generateText({ model, messages: [user], stopWhen: isStepCount(3), ...orchestration });
      await orchestration.settled();
      return result;
    };
    return { run, paid, events };
  }

  it('does not run another tool under the id of one the turn ran', async () => {
    const { run, paid, events } = app();
    await run({ tool: 'search', id: 'c1', input: {} });
    await run({ tool: 'pay', id: 'c1', input: { amount: 5_000 } });
    expect(paid).toEqual([]);
    expect(events).toContainEqual(
      expect.objectContaining({
        type: 'tool-rejected',
        tool: 'pay',
        toolCallId: 'c1',
        reason: expect.objectContaining({ code: 'duplicate-call' }),
      }),
    );
  });

  it('does not run the same tool with another input under the id of one the turn ran', async () => {
    const { run, paid } = app();
    await run({ tool: 'pay', id: 'c1', input: { amount: 50 } });
    expect(paid).toEqual([50]);
    await run({ tool: 'pay', id: 'c1', input: { amount: 5_000 } });
    expect(paid).toEqual([50]);
  });

  it('binds the input in a template without rules too', async () => {
    const { run, paid, events } = app({ steps: [{ name: 'Checkout', isDefault: true }] });
    await run({ tool: 'pay', id: 'c1', input: { amount: 50 } });
    await run({ tool: 'pay', id: 'c1', input: { amount: 5_000 } });
    expect(paid).toEqual([50]);
    expect(events).toContainEqual(
      expect.objectContaining({
        type: 'tool-rejected',
        toolCallId: 'c1',
        reason: expect.objectContaining({ code: 'duplicate-call' }),
      }),
    );
  });
});

describe('an approval after a tool use that leaves the history unchanged', () => {
  const approve: OrchestrationConfig = {
    historyLimit: 1,
    rules: [{ tools: ['pay'], effect: 'approve', reason: 'Every payment needs a person' }],
    steps: [{ name: 'Checkout', isDefault: true }],
  };
  const use = (s: ReturnType<typeof session>, id: string) => {
    s.run({ type: 'tool-requested', tool: 'search', toolCallId: id, agentTools: TOOLS });
    s.run({ type: 'tool-completed', toolCallId: id });
  };
  const approved = (s: ReturnType<typeof session>) =>
    s.run({
      type: 'tool-requested',
      tool: 'pay',
      toolCallId: 'p1',
      agentTools: TOOLS,
      args: { amount: 5 },
      argsDigest: 'amount=5',
      approved: true,
    }).decision as ToolDecision;

  it('is refused: the session moved on', () => {
    const s = session(approve);
    use(s, 's1');
    s.run({ type: 'approval-requested', tool: 'pay', toolCallId: 'p1', argsDigest: 'amount=5', rule: 'rules[0]' });
    use(s, 's2');
    expect(s.state.recentlyUsedTools).toEqual(['search']); // the history reads as it did when asked
    expect(approved(s)).toMatchObject({
      allowed: false,
      reason: { code: 'approval-invalid', message: expect.stringContaining('moved on') },
    });
  });

  it('counts while nothing was used since it was asked, also in a state stored before uses were counted', () => {
    const s = session(approve);
    use(s, 's1');
    const { toolUses: _uses, ...stored } = s.state;
    s.state = assertState(stored);
    s.run({ type: 'approval-requested', tool: 'pay', toolCallId: 'p1', argsDigest: 'amount=5', rule: 'rules[0]' });
    expect(approved(s)).toMatchObject({ allowed: true });
  });
});
