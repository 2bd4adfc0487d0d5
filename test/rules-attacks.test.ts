/**
 * Rules on calls (SPEC section 9) against a hostile model and a careless caller: a per-turn limit
 * in a turn that has no user message, a context object the app changes between calls, and an
 * input crafted to make a rule's `matches()` backtrack for ever. Each holds the promise the docs
 * make: a limit is never exceeded, a rule judges what the caller passes now, and no input can make
 * a decision slow.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileOrchestration } from '../src/core/compile.js';
import { latestUserMessage } from '../src/core/messages.js';
import type { OrchestrationConfig } from '../src/core/schema.js';
import { createState } from '../src/core/state.js';
import { type ToolDecision, transition } from '../src/core/transition.js';
import { validateOrchestration } from '../src/core/validate-template.js';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';

const TOOLS = ['search', 'pay'];

describe('a per-turn limit in a turn without a user message', () => {
  const config: OrchestrationConfig = {
    rules: [{ tools: ['search'], limit: { max: 2, per: 'turn' }, reason: 'Two searches per question' }],
    steps: [{ name: 'Work', isDefault: true }],
  };

  it('refuses the call beyond the limit (requestTool with no messages)', async () => {
    const manager = createOrchestrationManager();
    const decisions: ToolDecision[] = [];
    for (const id of ['s1', 's2', 's3', 's4']) {
      const decision = await manager.requestTool(config, undefined, 'no-message', {
        tool: 'search',
        toolCallId: id,
        agentTools: TOOLS,
      });
      decisions.push(decision);
      if (decision.allowed) await manager.completeTool(config, undefined, 'no-message', id);
    }
    expect(decisions.map((d) => d.allowed)).toEqual([true, true, false, false]);
    expect(decisions[2]).toMatchObject({ reason: { code: 'limit', max: 2, per: 'turn', used: 2 } });
  });

  it('never lets more calls commit than the limit, whatever runs and completes when', () => {
    const plan = compileOrchestration(config);
    fc.assert(
      fc.property(
        // Each step: request a new call, or complete / fail one that runs.
        fc.array(
          fc.oneof(
            fc.constant({ kind: 'request' as const }),
            fc.nat(5).map((i) => ({ kind: 'settle' as const, i, ok: i % 2 === 0 })),
          ),
          {
            maxLength: 40,
          },
        ),
        (steps) => {
          let state = createState('s', 0);
          const running: string[] = [];
          let ids = 0;
          let committed = 0;
          for (const step of steps) {
            if (step.kind === 'request') {
              const id = `c${++ids}`;
              const result = transition(
                plan,
                state,
                { type: 'tool-requested', tool: 'search', toolCallId: id, agentTools: TOOLS },
                { now: 1_000, message: undefined },
              );
              state = result.state;
              if ((result.decision as ToolDecision).allowed) running.push(id);
            } else if (running.length > 0) {
              const [id] = running.splice(step.i % running.length, 1);
              const type = step.ok ? 'tool-completed' : 'tool-failed';
              state = transition(plan, state, { type, toolCallId: id! }, { now: 1_000, message: undefined }).state;
              if (step.ok) committed++;
            }
          }
          expect(committed).toBeLessThanOrEqual(2);
        },
      ),
    );
  });
});

describe('the context a caller passes', () => {
  it('is read as it is at each call, also when the same object was changed since', async () => {
    const manager = createOrchestrationManager();
    const config: OrchestrationConfig = {
      rules: [{ tools: ['pay'], when: "context.role != 'admin'", effect: 'deny', reason: 'Admins only' }],
      steps: [{ name: 'Work', isDefault: true }],
    };
    const messages = [{ role: 'user', content: 'pay it', id: 'm1' }];
    const user: Record<string, unknown> = { role: 'admin' };
    const call = (id: string) =>
      manager.requestTool(config, messages, 'context', {
        tool: 'pay',
        toolCallId: id,
        agentTools: TOOLS,
        context: user,
      });
    expect(await call('p1')).toMatchObject({ allowed: true });
    await manager.completeTool(config, messages, 'context', 'p1');
    // The app takes the role away on its long-lived user object, and passes it again.
    user.role = 'guest';
    expect(await call('p2')).toMatchObject({
      allowed: false,
      reason: { code: 'rule', effect: 'deny', message: 'Admins only' },
    });
  });
});

describe('matches() in a rule', () => {
  const message = latestUserMessage([{ role: 'user', content: 'look it up', id: 'm1' }]);
  const decide = (config: OrchestrationConfig, q: string) =>
    transition(
      compileOrchestration(config),
      createState('s', 0),
      { type: 'tool-requested', tool: 'search', toolCallId: 'c', agentTools: TOOLS, args: { q } },
      { now: 1_000, message },
    ).decision as ToolDecision;
  const rule = (when: string): OrchestrationConfig => ({
    rules: [{ tools: ['search'], when, effect: 'deny', reason: 'No such queries' }],
    steps: [{ name: 'Work', isDefault: true }],
  });

  it('decides quickly on an input crafted to make a backtracking regex take exponential time', () => {
    const config = rule("args.q.matches('^(a+)+$')");
    expect(decide(config, 'aaaa')).toMatchObject({ allowed: false, reason: { message: 'No such queries' } });
    const started = performance.now();
    // With JavaScript's RegExp this takes seconds (each further `a` doubles it); RE2 is linear.
    expect(decide(config, `${'a'.repeat(30)}!`)).toMatchObject({ allowed: true });
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('keeps the meaning of matches(): a search anywhere in the text, RE2 syntax, inline flags', () => {
    const config = rule("args.q.matches('dr(o|0)p\\\\s+table') || args.q.matches('(?i)^secret')");
    expect(decide(config, 'please DROP table; dr0p   table')).toMatchObject({ allowed: false });
    expect(decide(config, 'SeCrEt plans')).toMatchObject({ allowed: false });
    expect(decide(config, 'dropped the table, DROP TABLE')).toMatchObject({ allowed: true });
    expect(decide(config, 'not secret')).toMatchObject({ allowed: true });
  });

  it('refuses at load a pattern the input chooses, or one RE2 does not take', () => {
    const errors = (when: string) => {
      const result = validateOrchestration(rule(when));
      return result.success ? [] : result.issues.map((issue) => `${issue.path}: ${issue.message}`);
    };
    expect(errors("args.q.matches('^[a-z]+$')")).toEqual([]);
    expect(errors('args.q.matches(args.pattern)')).toEqual([
      expect.stringMatching(/^rules\[0\]\.when: .*must be a string written in the rule/),
    ]);
    expect(errors('args.q.matchesRe2(context.pattern)')).toEqual([
      expect.stringMatching(/^rules\[0\]\.when: .*must be a string written in the rule/),
    ]);
    expect(errors("args.q.matches('(?=lookahead)')")).toEqual([
      expect.stringMatching(/^rules\[0\]\.when: .*matches\(\) takes an RE2 pattern/),
    ]);
  });
});

describe('a session reset', () => {
  const config: OrchestrationConfig = {
    rules: [
      { tools: ['pay'], limit: { max: 1, per: 'session' }, reason: 'One payment per session' },
      { tools: ['search'], limit: { max: 2, per: '1h' }, reason: 'Two searches an hour' },
    ],
    steps: [{ name: 'Work', isDefault: true }],
  };
  const messages = [{ role: 'user', content: 'Pay and look around' }];

  it('does not give back what limits counted: spent stays spent, as for tokens', async () => {
    const manager = createOrchestrationManager();
    const call = async (tool: string, id: string) => {
      const decision = await manager.requestTool(config, messages, 'reset', {
        tool,
        toolCallId: id,
        agentTools: TOOLS,
      });
      if (decision.allowed) await manager.completeTool(config, messages, 'reset', id);
      return decision.allowed;
    };
    expect([await call('pay', 'p1'), await call('search', 's1'), await call('search', 's2')]).toEqual([
      true,
      true,
      true,
    ]);
    await manager.getStateManager().resetState('reset');
    // Without the counts, a client could reset its session to pay again and search again.
    expect([await call('pay', 'p2'), await call('search', 's3')]).toEqual([false, false]);
  });
});

describe('a session reset while a limited call runs', () => {
  const config: OrchestrationConfig = {
    rules: [{ tools: ['pay'], limit: { max: 1, per: 'session' }, reason: 'One payment per session' }],
    steps: [{ name: 'Work', isDefault: true }],
  };
  const messages = [{ role: 'user', content: 'Pay' }];

  it('keeps the running call counted: it may still pay, and its late completion is not recorded', async () => {
    const manager = createOrchestrationManager();
    const request = (id: string) =>
      manager.requestTool(config, messages, 'reset-running', { tool: 'pay', toolCallId: id, agentTools: TOOLS });
    expect(await request('p1')).toMatchObject({ allowed: true }); // still running
    await manager.getStateManager().resetState('reset-running');
    // Without the count, a client could reset mid-payment and pay again.
    expect(await request('p2')).toMatchObject({ allowed: false, reason: { code: 'limit', used: 1 } });
    const after = await manager.completeTool(config, messages, 'reset-running', 'p1');
    expect(after.recentlyUsedTools).toEqual([]);
    expect(after.pending).toBeUndefined();
    expect(after.counts).toEqual({ 'rules[0]': { n: 1 } });
  });

  it('keeps a completed call that waited behind a running one counted too', async () => {
    const manager = createOrchestrationManager();
    const request = (tool: string, id: string) =>
      manager.requestTool(config, messages, 'reset-done', { tool, toolCallId: id, agentTools: TOOLS });
    expect(await request('search', 's1')).toMatchObject({ allowed: true }); // still running
    expect(await request('pay', 'p1')).toMatchObject({ allowed: true });
    await manager.completeTool(config, messages, 'reset-done', 'p1'); // waits behind s1
    await manager.getStateManager().resetState('reset-done');
    expect(await request('pay', 'p2')).toMatchObject({ allowed: false, reason: { code: 'limit', used: 1 } });
  });
});

describe('a session reset while a call a per-turn limit counts runs', () => {
  const config: OrchestrationConfig = {
    rules: [{ tools: ['pay'], limit: { max: 1, per: 'turn' }, reason: 'One payment per question' }],
    steps: [{ name: 'Work', isDefault: true }],
  };
  const question = [{ role: 'user', content: 'Pay', id: 'q1' }];

  it('counts the released call in its own turn, whatever message the next write comes with', async () => {
    const manager = createOrchestrationManager();
    const request = (id: string) =>
      manager.requestTool(config, question, 'reset-turn', { tool: 'pay', toolCallId: id, agentTools: TOOLS });
    expect(await request('p1')).toMatchObject({ allowed: true }); // still running
    await manager.getStateManager().resetState('reset-turn');
    // The next write says no message (the seed API's completion of the running call, say): the
    // count of "p1" belongs to the question it ran for, not to no turn at all.
    await manager.completeTool(config, undefined, 'reset-turn', 'p1');
    expect(await request('p2')).toMatchObject({ allowed: false, reason: { code: 'limit', used: 1 } });
  });

  it('does not count the released call in the next question', async () => {
    const manager = createOrchestrationManager();
    expect(
      await manager.requestTool(config, question, 'reset-next', { tool: 'pay', toolCallId: 'p1', agentTools: TOOLS }),
    ).toMatchObject({ allowed: true });
    await manager.getStateManager().resetState('reset-next');
    const next = [...question, { role: 'assistant', content: 'Paid?' }, { role: 'user', content: 'Again', id: 'q2' }];
    // Serially "p1" ended (it may have run) in the first question: the second has its own payment.
    expect(
      await manager.requestTool(config, next, 'reset-next', { tool: 'pay', toolCallId: 'p2', agentTools: TOOLS }),
    ).toMatchObject({ allowed: true });
  });
});
