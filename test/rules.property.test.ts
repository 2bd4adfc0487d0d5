/**
 * Rules on calls under concurrency: random rules (conditions on arguments, limits per session),
 * random arguments, 2-4 turns racing on one session, tools that sometimes fail and calls that are
 * sometimes abandoned (cancelled once sent: they may have run). Replaying the store's writes in
 * version order (the serial order), every call that ran satisfied every rule at its reservation:
 * no `deny` held for its arguments, every `allow` held, and the calls of a limit rule that ran or
 * may have run (reserved before it and completed or abandoned, whenever they finished) were fewer
 * than its max. On every store; on the durable ones the turns alternate between two store
 * instances.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { expect, it } from 'vitest';
import type { OrchestrationConfig, Rule } from '../src/core/schema.js';
import type { ToolDecision } from '../src/core/transition.js';
import { createOrchestrationManager, type OrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { yieldTurns } from './helpers/concurrency-case.js';
import { describeEachStore } from './helpers/store-kinds.js';

const TOOLS = ['pay', 'refund', 'search'];

interface Call {
  tool: string;
  amount: number;
  /** How the call ends once reserved: it completes, it fails, or its outcome is unknown. */
  end: 'tool-completed' | 'tool-failed' | 'tool-abandoned';
  before: number;
  during: number;
}

interface RuleCase {
  rules: Rule[];
  turns: Call[][];
}

const ruleArb: fc.Arbitrary<Rule> = fc.oneof(
  fc.record({
    tools: fc.constantFrom<string[]>(['pay'], ['refund'], ['pay', 'refund'], ['*']),
    when: fc.integer({ min: 0, max: 200 }).map((t) => `args.amount > ${t}`),
    effect: fc.constant('deny' as const),
    reason: fc.constant('too much'),
  }),
  fc.record({
    tools: fc.constantFrom<string[]>(['refund'], ['pay'], ['*']),
    when: fc.integer({ min: 0, max: 200 }).map((t) => `args.amount <= ${t}`),
    effect: fc.constant('allow' as const),
    reason: fc.constant('small only'),
  }),
  fc.record({
    tools: fc.constantFrom<string[]>(['search'], ['pay'], ['pay', 'refund'], ['*']),
    limit: fc.record({ max: fc.integer({ min: 0, max: 3 }), per: fc.constant('session') }),
    reason: fc.constant('enough'),
  }),
  fc.record({
    tools: fc.constantFrom<string[]>(['pay'], ['*']),
    when: fc.integer({ min: 0, max: 200 }).map((t) => `args.amount > ${t}`),
    limit: fc.record({ max: fc.integer({ min: 0, max: 2 }), per: fc.constant('session') }),
    reason: fc.constant('few big ones'),
  }),
);

const callArb: fc.Arbitrary<Call> = fc.record({
  tool: fc.constantFrom(...TOOLS),
  amount: fc.integer({ min: 0, max: 250 }),
  end: fc
    .integer({ min: 0, max: 9 })
    .map((n) => (n < 2 ? 'tool-failed' : n < 4 ? 'tool-abandoned' : 'tool-completed') as Call['end']),
  before: fc.nat(3),
  during: fc.nat(3),
});

const caseArb: fc.Arbitrary<RuleCase> = fc.record({
  rules: fc.array(ruleArb, { minLength: 1, maxLength: 4 }),
  turns: fc.array(fc.array(callArb, { minLength: 1, maxLength: 5 }), { minLength: 2, maxLength: 4 }),
});

interface Logged {
  kind: 'request' | 'finish';
  id: string;
  call: Call;
  decision?: ToolDecision;
  version: number;
  changed: boolean;
}

async function play(c: RuleCase, managers: readonly OrchestrationManager[]): Promise<void> {
  const config: OrchestrationConfig = { rules: c.rules, steps: [{ name: 'Work', isDefault: true }] };
  const sessionId = `rules-${randomUUID()}`;
  const log: Logged[] = [];
  const plan = managers[0]!.plan(config);
  await Promise.all(
    c.turns.map(async (calls, t) => {
      const manager = managers[t % managers.length]!;
      for (const [k, call] of calls.entries()) {
        await yieldTurns(call.before);
        const id = `t${t}-c${k}`;
        const requested = await manager.apply(plan, undefined, sessionId, [
          { type: 'tool-requested', tool: call.tool, toolCallId: id, agentTools: TOOLS, args: { amount: call.amount } },
        ]);
        const decision = requested.decisions[0] as ToolDecision;
        log.push({ kind: 'request', id, call, decision, version: requested.state.version, changed: requested.changed });
        if (!decision.allowed) continue;
        await yieldTurns(call.during);
        const finished = await manager.apply(plan, undefined, sessionId, [{ type: call.end, toolCallId: id }]);
        log.push({ kind: 'finish', id, call, version: finished.state.version, changed: finished.changed });
      }
    }),
  );
  // The serial order is the order of the writes; a call counts for a limit when it completes or
  // is abandoned (it may have run), and only a completed one is recorded.
  const reservations = log.filter((entry) => entry.kind === 'request' && entry.decision?.allowed);
  reservations.sort((a, b) => a.version - b.version);
  const ran = reservations.filter((entry) => entry.call.end !== 'tool-failed');
  const recorded = ran.filter((entry) => entry.call.end === 'tool-completed');
  const matches = (rule: Rule, tool: string) => rule.tools.includes('*') || rule.tools.includes(tool);
  const threshold = (rule: Rule) => Number(rule.when?.replace(/^\D+/, ''));
  for (const [position, entry] of ran.entries()) {
    const { tool, amount } = entry.call;
    for (const [r, rule] of c.rules.entries()) {
      if (!matches(rule, tool)) continue;
      const holds =
        rule.when === undefined || (rule.when.includes('<=') ? amount <= threshold(rule) : amount > threshold(rule));
      if (rule.effect === 'deny') expect(holds, `rules[${r}] denies ${tool}(${amount})`).toBe(false);
      if (rule.effect === 'allow') expect(holds, `rules[${r}] allows ${tool}(${amount}) only when it holds`).toBe(true);
      if (rule.limit && holds) {
        const before = ran.slice(0, position).filter((other) => {
          if (!matches(rule, other.call.tool)) return false;
          return rule.when === undefined || other.call.amount > threshold(rule);
        }).length;
        expect(before, `rules[${r}] (at most ${rule.limit.max}) exceeded by ${entry.id}`).toBeLessThan(rule.limit.max);
      }
    }
  }
  const state = await managers[0]!.getStateManager().getState(sessionId);
  expect(state?.pending).toBeUndefined();
  expect(state?.recentlyUsedTools).toEqual(recorded.map((entry) => entry.call.tool).slice(-50));
}

describeEachStore('rules on calls hold under racing turns', (open, kind) => {
  it('every call that ran satisfied every rule at its reservation', async () => {
    const stores = kind === 'memory' ? [open()] : [open(), open()];
    const managers = stores.map((store) => createOrchestrationManager({ store }));
    await fc.assert(
      fc.asyncProperty(caseArb, (c) => play(c, managers)),
      { numRuns: kind === 'memory' ? 300 : 40 },
    );
  }, 180_000);

  it('ten concurrent turns never exceed a limit of one, from two instances', async () => {
    const managers = [createOrchestrationManager({ store: open() }), createOrchestrationManager({ store: open() })];
    const config: OrchestrationConfig = {
      rules: [{ tools: ['pay'], limit: { max: 1, per: 'session' }, reason: 'Pay once' }],
      steps: [{ name: 'Work', isDefault: true }],
    };
    const sessionId = `limit-10-${randomUUID()}`;
    const ran: string[] = [];
    await Promise.all(
      Array.from({ length: 10 }, async (_, i) => {
        const manager = managers[i % 2]!;
        const decision = await manager.requestTool(config, [], sessionId, {
          tool: 'pay',
          toolCallId: `p${i}`,
          agentTools: TOOLS,
        });
        if (!decision.allowed) return;
        ran.push(`p${i}`);
        await yieldTurns(3);
        await manager.completeTool(config, [], sessionId, `p${i}`);
      }),
    );
    expect(ran).toHaveLength(1);
    const later = await managers[1]!.requestTool(config, [], sessionId, {
      tool: 'pay',
      toolCallId: 'late',
      agentTools: TOOLS,
    });
    expect(later).toMatchObject({ allowed: false, reason: { code: 'limit', used: 1 } });
  }, 60_000);
});
