/**
 * The operator's policy (SPEC section 11): judged before every template's rules, never loosened by
 * a template, its refusals naming `policy.rules[i]`; its limits count per session, or across
 * sessions per principal, per agent or globally, atomically in the shared store (two managers on
 * one store stand for two processes), and through a Turn as through the seed API. A bad policy
 * fails when the manager is created, with every issue.
 */
import { describe, expect, it } from 'vitest';
import type { OrchestrationConfig, Policy } from '../core/schema.js';
import { TemplateConfigError } from '../core/template-issues.js';
import { memoryStore } from '../stores/memory.js';
import { createOrchestrationManager, type OrchestrationManager } from './orchestration-manager.js';
import { Turn } from './turn.js';

const TOOLS = ['pay', 'search'];
const messages = [{ role: 'user', content: 'go' }];

/** A template that allows every payment: it cannot undo the operator's deny. */
const loose: OrchestrationConfig = {
  rules: [{ tools: ['pay'], when: 'args.amount >= 0', effect: 'allow', reason: 'Any payment' }],
  steps: [],
};

function request(manager: OrchestrationManager, sessionId: string, id: string, amount: number, principal?: string) {
  return manager.requestTool(loose, messages, sessionId, {
    tool: 'pay',
    toolCallId: id,
    agentTools: TOOLS,
    args: { amount },
    ...(principal === undefined ? {} : { context: { principal } }),
  });
}

describe("the operator's policy", () => {
  it("is judged before the template's rules, which cannot loosen it, and names its rule", async () => {
    const policy: Policy = {
      rules: [{ tools: ['pay'], when: 'args.amount > 100', effect: 'deny', reason: 'The operator caps payments' }],
    };
    const manager = createOrchestrationManager({ policy });
    expect(await request(manager, 's', 'p1', 50)).toMatchObject({ allowed: true });
    expect(await request(manager, 's', 'p2', 500)).toMatchObject({
      allowed: false,
      reason: { code: 'rule', rule: 'policy.rules[0]', message: 'The operator caps payments' },
    });
  });

  it('limits per session by default', async () => {
    const policy: Policy = { rules: [{ tools: ['pay'], limit: { max: 1, per: 'session' }, reason: 'One payment' }] };
    const manager = createOrchestrationManager({ policy });
    expect(await request(manager, 'a', 'p1', 1)).toMatchObject({ allowed: true });
    await manager.completeTool(loose, messages, 'a', 'p1');
    expect(await request(manager, 'a', 'p2', 1)).toMatchObject({
      allowed: false,
      reason: { code: 'limit', rule: 'policy.rules[0]' },
    });
    // Another session has its own count.
    expect(await request(manager, 'b', 'p3', 1)).toMatchObject({ allowed: true });
  });

  it('counts a principal across all of its sessions, in every manager sharing the store', async () => {
    const policy: Policy = {
      rules: [
        { tools: ['pay'], limit: { max: 2, per: '1h', scope: 'principal' }, reason: 'Two payments an hour each' },
      ],
    };
    const store = memoryStore();
    const one = createOrchestrationManager({ store, policy });
    const two = createOrchestrationManager({ store, policy });
    expect(await request(one, 'alice-1', 'a1', 1, 'alice')).toMatchObject({ allowed: true });
    await one.completeTool(loose, messages, 'alice-1', 'a1');
    // A new session does not reset the caller's count.
    expect(await request(two, 'alice-2', 'a2', 1, 'alice')).toMatchObject({ allowed: true });
    await two.completeTool(loose, messages, 'alice-2', 'a2');
    expect(await request(one, 'alice-3', 'a3', 1, 'alice')).toMatchObject({
      allowed: false,
      reason: { code: 'limit', rule: 'policy.rules[0]' },
    });
    // Another caller has a count of its own.
    expect(await request(two, 'bob-1', 'b1', 1, 'bob')).toMatchObject({ allowed: true });
  });

  it('releases the scope when the session refuses the call, and counts a failed call nowhere', async () => {
    const policy: Policy = {
      rules: [{ tools: ['pay'], limit: { max: 1, per: 'session', scope: 'global' }, reason: 'One payment in all' }],
    };
    const manager = createOrchestrationManager({ policy });
    const strict: OrchestrationConfig = {
      rules: [{ tools: ['pay'], when: 'args.amount > 10', effect: 'deny', reason: 'Small only' }],
      steps: [],
    };
    const refused = await manager.requestTool(strict, messages, 'x', {
      tool: 'pay',
      toolCallId: 'big',
      agentTools: TOOLS,
      args: { amount: 50 },
    });
    expect(refused).toMatchObject({ allowed: false, reason: { message: 'Small only' } });
    expect(await request(manager, 'y', 'ok', 5)).toMatchObject({ allowed: true });
    await manager.failTool(loose, 'y', 'ok');
    expect(await request(manager, 'z', 'again', 5)).toMatchObject({ allowed: true });
  });

  it('holds through a Turn, whose concurrent calls across sessions wait for the running one', async () => {
    const policy: Policy = {
      rules: [{ tools: ['pay'], limit: { max: 1, per: 'session', scope: 'agent' }, reason: 'One payment per agent' }],
    };
    const manager = createOrchestrationManager({ policy });
    const turn = (sessionId: string) =>
      new Turn({ manager, config: loose, sessionId, agentTools: TOOLS, messages, agentId: 'shop' });
    const first = turn('t1');
    const second = turn('t2');
    expect(await first.request('pay', 'c1', undefined, { args: { amount: 1 } })).toMatchObject({ allowed: true });
    // The second depends on whether the first's payment goes through: it waits for it.
    const waiting = second.request('pay', 'c2', undefined, { args: { amount: 1 } });
    await new Promise((resolve) => setTimeout(resolve, 30));
    first.completed('c1');
    await first.flush();
    expect(await waiting).toMatchObject({ allowed: false, reason: { code: 'limit', rule: 'policy.rules[0]' } });
  });

  it('refuses a bad policy when the manager is created, naming every problem', () => {
    const bad = {
      rules: [
        { tools: ['pay'], when: 'args.(', effect: 'deny', reason: 'x' },
        { tools: ['pay'], limit: { max: 1, per: 'session', scope: 'planet' }, reason: 'y' },
      ],
    } as unknown as Policy;
    let error: unknown;
    try {
      createOrchestrationManager({ policy: bad });
    } catch (thrown) {
      error = thrown;
    }
    expect(TemplateConfigError.isInstance(error)).toBe(true);
    const paths = (error as TemplateConfigError).issues.map((issue) => issue.path);
    expect(paths).toEqual(expect.arrayContaining(['policy.rules[0].when', 'policy.rules[1].limit.scope']));
  });
});
