/**
 * Rules on calls (SPEC section 9) as the transition decides them: conditions on arguments in
 * CEL, deny / allow / approve effects in their order, limits with running calls counted,
 * approvals bound to the call, its input and the session, shadow mode and explain().
 */
import { describe, expect, it } from 'vitest';
import { compileOrchestration } from './compile.js';
import { latestUserMessage } from './messages.js';
import { expressionProblemFor, MAX_LIST_LENGTH } from './rules.js';
import type { OrchestrationConfig, Rule } from './schema.js';
import { createState, type OrchestrationState } from './state.js';
import { assertState } from './state-check.js';
import { explain, type StepDecision, type ToolDecision, type TransitionInput, transition } from './transition.js';
import { validateOrchestration } from './validate-template.js';

const TOOLS = ['pay', 'refund', 'send_email', 'search', 'summarize', 'delete_user', 'delete_file'];
const m1 = latestUserMessage([{ role: 'user', content: 'pay the invoice', id: 'm1' }]);
const m2 = latestUserMessage([{ role: 'user', content: 'and another', id: 'm2' }]);

/** A session driven by hand through `transition`, with a clock. */
function session(config: OrchestrationConfig, ruleContext: Record<string, unknown> = {}) {
  const plan = compileOrchestration(config);
  let state: OrchestrationState = createState('s', 0);
  let now = 1_000;
  let message = m1;
  const run = (input: TransitionInput) => {
    const result = transition(plan, state, input, { now, message, ruleContext, leaseMs: 60_000 });
    state = result.state;
    return result;
  };
  run({ type: 'user-message' });
  return {
    plan,
    get state() {
      return state;
    },
    run,
    tick(ms: number) {
      now += ms;
    },
    message(next = m2) {
      message = next;
      return run({ type: 'user-message' });
    },
    request(tool: string, id: string, args: unknown = {}, extra: { argsDigest?: string; approved?: boolean } = {}) {
      return run({ type: 'tool-requested', tool, toolCallId: id, agentTools: TOOLS, args, ...extra })
        .decision as ToolDecision;
    },
    complete(id: string) {
      run({ type: 'tool-completed', toolCallId: id });
    },
    call(tool: string, id: string, args: unknown = {}) {
      const decision = this.request(tool, id, args);
      if (decision.allowed) this.complete(id);
      return decision;
    },
    offered() {
      return (run({ type: 'step-started', agentTools: TOOLS }).decision as StepDecision).allowedTools;
    },
    explain() {
      return explain(plan, state, TOOLS, { now, message, ruleContext });
    },
  };
}

const withRules = (rules: Rule[], steps: OrchestrationConfig['steps'] = [{ name: 'Work', isDefault: true }]) =>
  ({ rules, steps }) satisfies OrchestrationConfig;

describe('rules on calls: effects', () => {
  it('denies when a deny condition holds, with the rule and its reason', () => {
    const s = session(
      withRules([
        {
          tools: ['send_email'],
          when: "!args.to.endsWith('@example.com')",
          effect: 'deny',
          reason: 'Internal mail only',
        },
      ]),
    );
    expect(s.request('send_email', 'a', { to: 'boss@example.com' })).toMatchObject({ allowed: true });
    expect(s.request('send_email', 'b', { to: 'rival@elsewhere.org' })).toMatchObject({
      allowed: false,
      reason: { code: 'rule', rule: 'rules[0]', effect: 'deny', message: 'Internal mail only' },
    });
  });

  it('allows only when an allow condition holds', () => {
    const s = session(
      withRules([{ tools: ['refund'], when: 'args.amount <= 50', effect: 'allow', reason: 'Refunds up to 50 only' }]),
    );
    expect(s.request('refund', 'a', { amount: 50 })).toMatchObject({ allowed: true });
    expect(s.request('refund', 'b', { amount: 50.01 })).toMatchObject({
      allowed: false,
      reason: { code: 'rule', effect: 'allow', message: 'Refunds up to 50 only' },
    });
  });

  it('asks for approval when an approve condition holds; deny wins over approve, a failing allow too', () => {
    const rules: Rule[] = [
      {
        tools: ['pay', 'refund'],
        when: 'args.amount > 100',
        effect: 'approve',
        reason: 'Payments over 100 need a person',
      },
      { tools: ['pay'], when: 'args.amount > 10000', effect: 'deny', reason: 'Never over 10,000' },
      { tools: ['refund'], when: 'args.amount <= 500', effect: 'allow', reason: 'Refunds up to 500' },
    ];
    const s = session(withRules(rules));
    expect(s.request('pay', 'a', { amount: 100 })).toMatchObject({ allowed: true });
    expect(s.request('pay', 'b', { amount: 101 })).toMatchObject({
      allowed: false,
      reason: { code: 'approval-required', rule: 'rules[0]' },
    });
    expect(s.request('pay', 'c', { amount: 20_000 })).toMatchObject({ reason: { code: 'rule', effect: 'deny' } });
    expect(s.request('refund', 'd', { amount: 600 })).toMatchObject({ reason: { code: 'rule', effect: 'allow' } });
    expect(s.request('refund', 'e', { amount: 200 })).toMatchObject({ reason: { code: 'approval-required' } });
  });

  it('reads the tool, the session and what the caller passes', () => {
    const s = session(
      withRules([
        { tools: ['delete_*'], when: "context.role != 'admin'", effect: 'deny', reason: 'Admins only' },
        {
          tools: ['summarize'],
          when: "!('search' in state.recentlyUsedTools)",
          effect: 'deny',
          reason: 'Search first',
        },
        { tools: ['*'], when: "tool == 'refund' && state.activeStep == 'Work'", effect: 'deny', reason: 'Not at work' },
      ]),
      { role: 'user' },
    );
    expect(s.request('delete_user', 'a')).toMatchObject({ reason: { message: 'Admins only' } });
    expect(s.request('summarize', 'b')).toMatchObject({ reason: { message: 'Search first' } });
    s.call('search', 'c');
    expect(s.request('summarize', 'd')).toMatchObject({ allowed: true });
    expect(s.request('refund', 'e')).toMatchObject({ reason: { message: 'Not at work' } });
    const admin = session(
      withRules([{ tools: ['delete_*'], when: "context.role != 'admin'", effect: 'deny', reason: 'Admins only' }]),
      { role: 'admin' },
    );
    expect(admin.request('delete_file', 'a')).toMatchObject({ allowed: true });
  });

  it('refuses a call whose rule cannot be evaluated, and says why (fail closed)', () => {
    const s = session(withRules([{ tools: ['pay'], when: 'args.amount > 100', effect: 'deny', reason: 'Too much' }]));
    const decision = s.request('pay', 'a', { total: 5 });
    expect(decision).toMatchObject({ allowed: false, reason: { code: 'rule', rule: 'rules[0]' } });
    expect(decision.allowed ? '' : decision.reason.message).toMatch(/could not be evaluated \(No such key: amount\)/);
    const guarded = session(
      withRules([
        { tools: ['pay'], when: 'has(args.amount) && args.amount > 100', effect: 'deny', reason: 'Too much' },
      ]),
    );
    expect(guarded.request('pay', 'b', { total: 5 })).toMatchObject({ allowed: true });
  });

  it('applies a step rule only while its step is active', () => {
    const s = session(
      withRules(
        [],
        [
          {
            name: 'Checkout',
            conditions: [{ type: 'tool_used', value: 'search' }],
            rules: [{ tools: ['pay'], when: 'args.amount > 5', effect: 'deny', reason: 'Small payments at checkout' }],
          },
          { name: 'Browse', isDefault: true },
        ],
      ),
    );
    expect(s.request('pay', 'a', { amount: 50 })).toMatchObject({ allowed: true });
    s.complete('a');
    s.call('search', 'b');
    expect(s.state.activeStep).toBe('Checkout');
    expect(s.request('pay', 'c', { amount: 50 })).toMatchObject({ reason: { rule: 'steps[0].rules[0]' } });
  });

  it('in shadow mode runs what a rule refuses and reports it', () => {
    const s = session({
      ...withRules([{ tools: ['pay'], when: 'args.amount > 100', effect: 'deny', reason: 'Too much' }]),
      shadow: true,
    });
    expect(s.request('pay', 'a', { amount: 500 })).toMatchObject({
      allowed: true,
      wouldBlock: { code: 'rule', message: 'Too much' },
    });
  });
});

describe('rules on calls: limits', () => {
  it('counts per turn, running calls included, and starts again with a new user message', () => {
    const s = session(
      withRules([{ tools: ['search'], limit: { max: 2, per: 'turn' }, reason: 'Two searches per question' }]),
    );
    expect(s.request('search', 'a')).toMatchObject({ allowed: true }); // still running
    expect(s.request('search', 'b')).toMatchObject({ allowed: true }); // still running
    // Both may complete: a third would exceed the limit in that outcome.
    expect(s.request('search', 'c')).toMatchObject({ allowed: false, reason: { code: 'pending' } });
    s.complete('a');
    s.complete('b');
    expect(s.request('search', 'd')).toMatchObject({
      allowed: false,
      reason: { code: 'limit', rule: 'rules[0]', max: 2, per: 'turn', used: 2 },
    });
    expect(s.offered()).not.toContain('search');
    s.message();
    expect(s.offered()).toContain('search');
    expect(s.call('search', 'e')).toMatchObject({ allowed: true });
  });

  it('counts per session across turns, and only calls whose condition holds', () => {
    const s = session(
      withRules([
        { tools: ['pay'], when: 'args.amount > 100', limit: { max: 1, per: 'session' }, reason: 'One big payment' },
      ]),
    );
    expect(s.call('pay', 'a', { amount: 500 })).toMatchObject({ allowed: true });
    expect(s.call('pay', 'b', { amount: 50 })).toMatchObject({ allowed: true });
    s.message();
    expect(s.request('pay', 'c', { amount: 500 })).toMatchObject({ reason: { code: 'limit', used: 1 } });
    expect(s.request('pay', 'd', { amount: 5 })).toMatchObject({ allowed: true });
  });

  it('counts per step, starting again when the step changes', () => {
    const s = session(
      withRules(
        [{ tools: ['search'], limit: { max: 1, per: 'step' }, reason: 'One search per step' }],
        [
          { name: 'Second', conditions: [{ type: 'tool_used', value: 'summarize' }] },
          { name: 'First', isDefault: true },
        ],
      ),
    );
    s.call('search', 'a');
    expect(s.request('search', 'b')).toMatchObject({ reason: { code: 'limit', per: 'step' } });
    s.call('summarize', 'c');
    expect(s.state.activeStep).toBe('Second');
    expect(s.call('search', 'd')).toMatchObject({ allowed: true });
    expect(s.request('search', 'e')).toMatchObject({ reason: { code: 'limit' } });
  });

  it('counts over a rolling window', () => {
    const s = session(withRules([{ tools: ['search'], limit: { max: 2, per: '10s' }, reason: 'Two a ten seconds' }]));
    s.call('search', 'a');
    s.tick(4_000);
    s.call('search', 'b');
    expect(s.request('search', 'c')).toMatchObject({ reason: { code: 'limit', used: 2 } });
    s.tick(6_001); // a is out of the window now
    expect(s.call('search', 'd')).toMatchObject({ allowed: true });
    expect(s.state.counts?.['rules[0]']?.at).toHaveLength(2);
  });

  it('keeps a rolling window in at most 61 buckets, whatever its max, over 100,000 calls', () => {
    for (const max of [2_000, 1_000_000]) {
      const s = session(withRules([{ tools: ['search'], limit: { max, per: '1d' }, reason: 'Enough for today' }]));
      // Calls 0 to 86.4 s apart (43.2 s on average: 2,000 a day), the same on every run.
      let seed = 7;
      const next = () => {
        seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0;
        return seed / 2 ** 32;
      };
      let allowed = 0;
      let largest = 0;
      s.tick(1_700_000_000_000); // times of today's length
      for (let i = 0; i < 100_000; i++) {
        s.tick(Math.floor(next() * 86_400));
        if (s.call('search', `c${i}`).allowed) allowed++;
        if (i % 1_000 === 999) largest = Math.max(largest, JSON.stringify(s.state.counts).length);
      }
      const count = s.state.counts!['rules[0]']!;
      expect(count.at!.length).toBeLessThanOrEqual(61);
      expect(count.calls).toHaveLength(count.at!.length);
      // Measured: 1,077 characters of JSON (61 bucket times and counts); with one time per
      // call, as before the buckets, over 20,000.
      expect(largest).toBeLessThan(1_200);
      // The bucketed count still lets the session go on at its pace: a tight limit refuses a
      // few calls (more than it would with the exact times, never fewer), a loose one none.
      if (max === 2_000) expect(allowed).toBeGreaterThan(90_000);
      else expect(allowed).toBe(100_000);
    }
  }, 60_000);

  it('reads the counts of a window stored before its buckets (one time per call), and buckets them from then on', () => {
    const plan = compileOrchestration(
      withRules([{ tools: ['search'], limit: { max: 3, per: '1h' }, reason: 'Three an hour' }]),
    );
    const now = 1_700_000_000_000;
    // As a store or a token kept it before: the exact time of each of the window's calls.
    const stored: OrchestrationState = JSON.parse(
      JSON.stringify({
        ...createState('s', now - 3_600_000),
        counts: { 'rules[0]': { n: 3, at: [now - 3_599_000, now - 60_000, now - 1_000] } },
      }),
    );
    expect(assertState(stored)).toBe(stored);
    const at = (time: number) => ({ now: time, message: m1, leaseMs: 60_000 });
    const request = (state: OrchestrationState, id: string, time: number) =>
      transition(plan, state, { type: 'tool-requested', tool: 'search', toolCallId: id, agentTools: TOOLS }, at(time));
    // All three are in the hour: refused, with the count they make.
    expect(request(stored, 'a', now).decision).toMatchObject({ reason: { code: 'limit', used: 3 } });
    // Once the oldest is out of it, a call runs, and the count is kept in buckets from then on.
    const later = now + 1_000;
    const reserved = request(stored, 'b', later);
    expect(reserved.decision).toMatchObject({ allowed: true });
    const { state } = transition(plan, reserved.state, { type: 'tool-completed', toolCallId: 'b' }, at(later));
    const count = state.counts!['rules[0]']!;
    // Buckets of a minute (an hour's 60th): the call of a minute ago has its own, the two of
    // this minute share one; each counted as made at the end of its minute, never earlier.
    const endOfMinute = (t: number) => Math.floor(t / 60_000) * 60_000 + 59_999;
    expect(endOfMinute(now - 1_000)).toBe(endOfMinute(later));
    expect(count).toEqual({ n: 3, at: [endOfMinute(now - 60_000), endOfMinute(later)], calls: [1, 2] });
    expect(request(state, 'c', later).decision).toMatchObject({ reason: { code: 'limit', used: 3 } });
  });

  it('refuses a stored window count whose buckets and counts do not pair up, naming the field', () => {
    const state = { ...createState('s', 0), counts: { 'rules[0]': { n: 2, at: [5, 9], calls: [2] } } };
    expect(() => assertState(state)).toThrow(/state\.counts.*as many calls as at/);
    expect(() => assertState({ ...state, counts: { 'rules[0]': { n: 2, calls: [2] } } })).toThrow(/state\.counts/);
    expect(assertState({ ...state, counts: { 'rules[0]': { n: 3, at: [5, 9], calls: [2, 1] } } })).toBeDefined();
  });
});

describe('rules on calls: approvals are bound', () => {
  const approve: OrchestrationConfig = withRules([
    { tools: ['pay'], when: 'args.amount > 100', effect: 'approve', reason: 'Payments over 100 need a person' },
  ]);
  const ask = (s: ReturnType<typeof session>, id: string, digest: string) =>
    s.run({ type: 'approval-requested', tool: 'pay', toolCallId: id, argsDigest: digest, rule: 'rules[0]' });

  it('runs an approved call once, for the call, input and session it was asked for', () => {
    const s = session(approve);
    expect(ask(s, 'p1', 'digest-500').events).toContainEqual(
      expect.objectContaining({ type: 'approval-requested', toolCallId: 'p1', rule: 'rules[0]' }),
    );
    // Not approved (a forged or missing approval): refused.
    expect(s.request('pay', 'p1', { amount: 500 }, { argsDigest: 'digest-500' })).toMatchObject({
      reason: { code: 'approval-required' },
    });
    const s2 = session(approve);
    ask(s2, 'p1', 'digest-500');
    expect(s2.request('pay', 'p1', { amount: 500 }, { argsDigest: 'digest-500', approved: true })).toMatchObject({
      allowed: true,
    });
    expect(s2.state.approvals).toBeUndefined(); // spent
  });

  it('refuses an approval for another call id, other arguments, or after the session moved on', () => {
    const other = session(approve);
    ask(other, 'p1', 'digest-500');
    expect(other.request('pay', 'p2', { amount: 500 }, { argsDigest: 'digest-500', approved: true })).toMatchObject({
      reason: { code: 'approval-invalid', message: expect.stringContaining('no approval was asked for call "p2"') },
    });
    const changed = session(approve);
    ask(changed, 'p1', 'digest-500');
    expect(
      changed.request('pay', 'p1', { amount: 9_000 }, { argsDigest: 'digest-9000', approved: true }),
    ).toMatchObject({ reason: { code: 'approval-invalid', message: expect.stringContaining('other arguments') } });
    const moved = session(approve);
    ask(moved, 'p1', 'digest-500');
    moved.call('search', 's1');
    expect(moved.request('pay', 'p1', { amount: 500 }, { argsDigest: 'digest-500', approved: true })).toMatchObject({
      reason: { code: 'approval-invalid', message: expect.stringContaining('moved on') },
    });
  });
});

describe('rules on calls: what is offered and explained', () => {
  it('hides a tool an unconditional rule refuses, offers one an approve rule guards, and lists conditional rules', () => {
    const s = session(
      withRules([
        { tools: ['delete_*'], effect: 'deny', reason: 'Never delete' },
        { tools: ['pay'], effect: 'approve', reason: 'Every payment needs a person' },
        { tools: ['refund'], when: 'args.amount > 50', effect: 'deny', reason: 'Small refunds only' },
      ]),
    );
    const offered = s.offered();
    expect(offered).toContain('pay');
    expect(offered).toContain('refund');
    expect(offered).not.toContain('delete_user');
    const view = s.explain();
    const byTool = Object.fromEntries(view.tools.map((t) => [t.tool, t]));
    expect(byTool.delete_user).toMatchObject({
      allowed: false,
      reason: { code: 'rule', rule: 'rules[0]', effect: 'deny', message: 'Never delete' },
    });
    expect(byTool.pay).toMatchObject({
      allowed: false,
      reason: {
        code: 'approval-required',
        rule: 'rules[1]',
        message: expect.stringContaining('Every payment needs a person'),
      },
    });
    expect(byTool.refund).toMatchObject({
      allowed: true,
      rules: [{ rule: 'rules[2]', effect: 'deny', reason: 'Small refunds only' }],
    });
  });
});

describe('rules on calls: hostile input', () => {
  const s = () =>
    session(
      withRules([
        {
          tools: ['search'],
          when: 'args.terms.all(t, args.terms.exists(u, u == t))',
          effect: 'allow',
          reason: 'Terms',
        },
        { tools: ['pay'], when: 'has(args.constructor) || has(args.__proto__)', effect: 'deny', reason: 'Prototype' },
      ]),
    );

  it('refuses arguments beyond the bounds, and evaluates the largest allowed ones quickly', () => {
    const huge = s().request('search', 'a', { terms: Array.from({ length: MAX_LIST_LENGTH + 1 }, (_, i) => `t${i}`) });
    expect(huge).toMatchObject({ allowed: false, reason: { code: 'rule' } });
    expect(huge.allowed ? '' : huge.reason.message).toContain(`at most ${MAX_LIST_LENGTH}`);
    let deep: unknown = 'x';
    for (let i = 0; i < 40; i++) deep = { deep };
    expect(s().request('search', 'b', { terms: [], deep })).toMatchObject({ allowed: false, reason: { code: 'rule' } });
    // The worst case the bounds allow: two nested macros over the longest list.
    const started = performance.now();
    const largest = s().request('search', 'c', {
      terms: Array.from({ length: MAX_LIST_LENGTH }, (_, i) => `t${i}`),
    });
    expect(largest).toMatchObject({ allowed: true });
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  it('reads no prototype keys, and a wrong type is refused, not thrown', () => {
    const parsed = JSON.parse('{"__proto__": {"amount": 1}, "constructor": "x"}');
    expect(s().request('pay', 'a', parsed)).toMatchObject({ reason: { message: 'Prototype' } });
    expect(s().request('pay', 'b', {})).toMatchObject({ allowed: true });
    expect(s().request('search', 'c', { terms: 'not a list' })).toMatchObject({
      allowed: false,
      reason: { code: 'rule' },
    });
  });

  it('judges the JSON as sent: a tool that merges its input with Object.assign sees keys the rule did not', () => {
    const guarded = session(
      withRules([{ tools: ['delete_file'], when: 'has(args.admin)', effect: 'deny', reason: 'No admin flag' }]),
    );
    const input = JSON.parse('{"path": "/srv/x", "__proto__": {"admin": true}}');
    // For the rule, "__proto__" is a key like any other, and there is no key "admin".
    expect(guarded.request('delete_file', 'a', input)).toMatchObject({ allowed: true });
    // The tool's own merge goes through the __proto__ setter: "admin" now reads true (the
    // warning of docs/behaviour.md, Rules on calls).
    expect((Object.assign({}, input) as { admin?: boolean }).admin).toBe(true);
    expect(guarded.request('delete_file', 'b', { path: '/srv/x', admin: true })).toMatchObject({ allowed: false });
  });
});

describe('rules on calls: validation', () => {
  const issues = (rules: unknown[], steps: unknown[] = [{ name: 'S', isDefault: true }]) => {
    const result = validateOrchestration({ rules, steps });
    return result.success
      ? []
      : result.issues.filter((issue) => issue.severity === 'error').map((issue) => `${issue.path}: ${issue.message}`);
  };

  it('reports a bad expression, a missing or double effect and a bad period, with paths', () => {
    expect(issues([{ tools: ['pay'], when: 'args.amount >', effect: 'deny', reason: 'r' }])).toEqual([
      expect.stringMatching(/^rules\[0\]\.when: invalid CEL expression: Unexpected token/),
    ]);
    expect(issues([{ tools: ['pay'], when: 'state.activStep == "x"', effect: 'deny', reason: 'r' }])).toEqual([
      expect.stringMatching(/^rules\[0\]\.when: invalid CEL expression: No such key: activStep/),
    ]);
    expect(issues([{ tools: ['pay'], when: 'args.amount + 1', effect: 'deny', reason: 'r' }])).toEqual([
      expect.stringMatching(/rules\[0\]\.when: .*a rule needs a boolean/),
    ]);
    expect(issues([{ tools: ['pay'], reason: 'r' }])).toEqual([
      expect.stringMatching(/^rules\[0\]: a rule needs an effect or a limit/),
    ]);
    expect(issues([{ tools: ['pay'], effect: 'deny', limit: { max: 1, per: 'turn' }, reason: 'r' }])).toHaveLength(1);
    expect(issues([{ tools: ['pay'], limit: { max: 1, per: 'fortnight' }, reason: 'r' }])).toEqual([
      expect.stringMatching(/^rules\[0\]\.limit\.per: "fortnight" is not a period/),
    ]);
    expect(issues([], [{ name: 'S', rules: [{ tools: ['pay'], effect: 'deny', reason: 'r', whne: 'x' }] }])).toEqual([
      expect.stringMatching(/^steps\[0\]\.rules\[0\]\.whne: unknown key "whne"/),
    ]);
  });

  it('refuses expressions that could run long: three nested macros, too many nodes', () => {
    const nested = 'args.a.all(x, args.a.all(y, args.a.all(z, x == y && y == z)))';
    expect(issues([{ tools: ['pay'], when: nested, effect: 'deny', reason: 'r' }])).toEqual([
      expect.stringMatching(/nested 3 deep; at most 2/),
    ]);
    const wide = Array.from({ length: 120 }, (_, i) => `args.a==${i}`).join('||');
    expect(wide.length).toBeLessThan(2_000);
    expect(issues([{ tools: ['pay'], when: wide, effect: 'deny', reason: 'r' }])).toEqual([
      expect.stringMatching(/invalid CEL expression: .*maxAstNodes/),
    ]);
  });

  it("checks a condition against a tool's input schema: a typo or a wrong type is found before any call", () => {
    const schema = {
      type: 'object',
      properties: { amount: { type: 'number' }, to: { type: 'string' }, urgent: { type: 'boolean' } },
    };
    expect(expressionProblemFor('args.amount > 100 && args.to.endsWith("@x.com")', schema)).toBeUndefined();
    expect(expressionProblemFor('args.amout > 100', schema)).toMatch(/No such key: amout/);
    expect(expressionProblemFor('args.to > 100', schema)).toBeDefined();
    expect(expressionProblemFor('args.urgent.size() > 0', schema)).toBeDefined();
  });
});
