/**
 * Facts and labels (SPEC section 11) through the transition: the SPEC's three examples (delete
 * only what was listed, pay the quoted amount, nothing leaves once something confidential was
 * read), failing closed on a fact that is absent, unknown or past its bound, waiting for a running
 * call that may write what a rule reads, and applied in reservation order whatever order the
 * calls complete in.
 */
import { describe, expect, it } from 'vitest';
import { compileOrchestration } from './compile.js';
import { latestUserMessage } from './messages.js';
import type { OrchestrationConfig } from './schema.js';
import { createState, type OrchestrationState } from './state.js';
import { explain, type ToolDecision, type TransitionInput, transition } from './transition.js';
import { validateOrchestration } from './validate-template.js';

const TOOLS = ['list_items', 'delete_item', 'get_quote', 'pay', 'read_file', 'send_email'];

const config: OrchestrationConfig = {
  facts: [
    {
      name: 'listed_ids',
      tools: ['list_items'],
      value: 'result.items.map(i, i.id)',
      keep: 'union',
      max: 1000,
    },
    { name: 'quote', tools: ['get_quote'], value: "{'id': result.id, 'amount': result.amount}", keep: 'last' },
  ],
  labels: [{ name: 'confidential', tools: ['read_file'], when: "result.classification == 'confidential'" }],
  rules: [
    {
      tools: ['delete_item'],
      when: '!(args.id in state.facts.listed_ids)',
      effect: 'deny',
      reason: 'Delete only what was listed',
    },
    {
      tools: ['pay'],
      when: '!has(state.facts.quote) || args.amount != state.facts.quote.amount',
      effect: 'deny',
      reason: 'Pay the quoted amount',
    },
    { tools: ['send_*'], when: "'confidential' in state.labels", effect: 'deny', reason: 'Nothing leaves' },
  ],
  steps: [],
};

function session(source: OrchestrationConfig = config) {
  const plan = compileOrchestration(source);
  let state: OrchestrationState = createState('s', 0);
  const message = latestUserMessage([{ role: 'user', content: 'tidy up', id: 'm1' }]);
  let n = 0;
  const run = (input: TransitionInput) => {
    const result = transition(plan, state, input, { now: 1_000, message, leaseMs: 60_000 });
    state = result.state;
    return result;
  };
  run({ type: 'user-message' });
  const request = (tool: string, args: unknown = {}, toolCallId = `c${n++}`) =>
    run({ type: 'tool-requested', tool, toolCallId, agentTools: TOOLS, args }).decision as ToolDecision;
  return {
    get state() {
      return state;
    },
    request,
    explain: () => explain(plan, state, TOOLS, { now: 1_000, message }),
    complete: (toolCallId: string, result: unknown, args: unknown = {}) =>
      run({ type: 'tool-completed', toolCallId, result, args }),
    /** Requests `tool` and completes it with `result` at once. */
    call(tool: string, result: unknown, args: unknown = {}) {
      const decision = request(tool, args);
      expect(decision, `${tool} was refused`).toMatchObject({ allowed: true });
      return run({ type: 'tool-completed', toolCallId: decision.toolCallId, result, args });
    },
  };
}

describe('facts', () => {
  it('deletes only the ids a listing returned, and refuses before any listing, naming the fact', () => {
    const s = session();
    expect(s.request('delete_item', { id: 'a' })).toMatchObject({
      allowed: false,
      reason: { code: 'rule', fact: 'listed_ids', message: expect.stringContaining('listed_ids') },
    });
    const listed = s.call('list_items', { items: [{ id: 'a' }, { id: 'b' }] });
    expect(listed.events).toContainEqual(expect.objectContaining({ type: 'fact-set', fact: 'listed_ids' }));
    expect(s.state.facts).toEqual({ listed_ids: { value: ['a', 'b'] } });
    s.call('delete_item', 'deleted', { id: 'a' });
    expect(s.request('delete_item', { id: 'c' })).toMatchObject({
      allowed: false,
      reason: { code: 'rule', message: 'Delete only what was listed' },
    });
    // A second listing adds to the set.
    s.call('list_items', { items: [{ id: 'c' }, { id: 'a' }] });
    expect(s.state.facts?.listed_ids).toEqual({ value: ['a', 'b', 'c'] });
    expect(s.request('delete_item', { id: 'c' })).toMatchObject({ allowed: true });
  });

  it('pays the quoted amount only', () => {
    const s = session();
    expect(s.request('pay', { amount: 120 })).toMatchObject({
      allowed: false,
      reason: { message: 'Pay the quoted amount' },
    });
    s.call('get_quote', { id: 'q1', amount: 120 });
    expect(s.state.facts?.quote).toEqual({ value: { id: 'q1', amount: 120 } });
    expect(s.request('pay', { amount: 99 })).toMatchObject({ allowed: false });
    s.call('pay', 'paid', { amount: 120 });
    // The latest quote replaces the earlier.
    s.call('get_quote', { id: 'q2', amount: 99 });
    expect(s.request('pay', { amount: 99 })).toMatchObject({ allowed: true });
  });

  it('makes a union fact past its max unknown, and refuses what reads it, saying why', () => {
    const s = session();
    const ids = Array.from({ length: 100_000 }, (_, i) => ({ id: `id-${i}` }));
    s.call('list_items', { items: ids });
    expect(s.state.facts?.listed_ids).toMatchObject({ unknown: expect.any(String) });
    const refused = s.request('delete_item', { id: 'id-1' });
    expect(refused).toMatchObject({ allowed: false, reason: { code: 'rule', fact: 'listed_ids' } });
    expect((refused as { reason: { message: string } }).reason.message).toMatch(/listed_ids.*unknown/);
    // The state stays small: an unknown fact keeps only why.
    expect(JSON.stringify(s.state).length).toBeLessThan(2_000);
  });

  it('makes a fact whose value cannot be computed unknown', () => {
    const s = session();
    s.call('list_items', { nothing: true });
    expect(s.state.facts?.listed_ids).toMatchObject({ unknown: expect.stringContaining('could not be computed') });
    expect(s.request('delete_item', { id: 'a' })).toMatchObject({ allowed: false, reason: { fact: 'listed_ids' } });
  });

  it('keeps a union of values apart as JSON does: a string is never its JSON look-alike', () => {
    const s = session();
    const items = ['1', 1, 'null', null, '"1"', { a: 1 }, '{"a":1}', [1], '[1]', true, 'true'].map((id) => ({ id }));
    s.call('list_items', { items });
    s.call('list_items', { items: [...items].reverse() });
    expect(s.state.facts?.listed_ids).toEqual({ value: items.map((item) => item.id) });
  });

  it('keeps the last max values of an append fact', () => {
    const s = session({
      facts: [{ name: 'seen', tools: ['read_file'], value: 'result.path', keep: 'append', max: 2 }],
      steps: [],
    });
    for (const path of ['a', 'b', 'c']) s.call('read_file', { path });
    expect(s.state.facts?.seen).toEqual({ value: ['b', 'c'] });
  });
});

describe('labels', () => {
  it('raise on a confidential result, refuse what leaves from then on, and survive a reset of the turn', () => {
    const s = session();
    s.call('send_email', 'sent', { to: 'x' });
    s.call('read_file', { classification: 'public' });
    expect(s.state.labels).toBeUndefined();
    const read = s.call('read_file', { classification: 'confidential' });
    expect(read.events).toContainEqual(expect.objectContaining({ type: 'label-raised', label: 'confidential' }));
    expect(s.state.labels).toEqual(['confidential']);
    expect(s.request('send_email', { to: 'x' })).toMatchObject({
      allowed: false,
      reason: { message: 'Nothing leaves' },
    });
    // Only ever rising: a public read does not lower it.
    s.call('read_file', { classification: 'public' });
    expect(s.state.labels).toEqual(['confidential']);
  });
});

describe('shadow mode', () => {
  it('runs what a fact or a label would refuse, and reports the refusal naming the fact', () => {
    const s = session({ ...config, shadow: true });
    // No listing yet: enforcement would refuse, naming the fact; shadow mode lets it run.
    expect(s.request('delete_item', { id: 'a' })).toMatchObject({
      allowed: true,
      wouldBlock: { code: 'rule', fact: 'listed_ids', message: expect.stringContaining('listed_ids') },
    });
    s.call('list_items', { items: [{ id: 'a' }] });
    expect(s.request('delete_item', { id: 'a' })).not.toHaveProperty('wouldBlock');
    expect(s.request('delete_item', { id: 'z' })).toMatchObject({
      allowed: true,
      wouldBlock: { code: 'rule', message: 'Delete only what was listed' },
    });
    // A raised label: what leaves runs, and would have been refused.
    s.call('read_file', { classification: 'confidential' });
    expect(s.request('send_email', { to: 'x' })).toMatchObject({
      allowed: true,
      wouldBlock: { code: 'rule', message: 'Nothing leaves' },
    });
  });
});

describe('explain()', () => {
  const rulesOf = (s: ReturnType<typeof session>, tool: string) =>
    s.explain().tools.find((t) => t.tool === tool)?.rules;

  it('names the facts and labels each rule reads, whether they are set or not', () => {
    const s = session();
    expect(rulesOf(s, 'delete_item')).toEqual([
      { rule: 'rules[0]', effect: 'deny', reason: 'Delete only what was listed', facts: ['listed_ids'] },
    ]);
    expect(rulesOf(s, 'pay')).toEqual([
      { rule: 'rules[1]', effect: 'deny', reason: 'Pay the quoted amount', facts: ['quote'] },
    ]);
    expect(rulesOf(s, 'send_email')).toEqual([
      { rule: 'rules[2]', effect: 'deny', reason: 'Nothing leaves', labels: true },
    ]);
    // Once set, the same rules read the same facts: what they read is the rule's, not the session's.
    s.call('list_items', { items: [{ id: 'a' }] });
    s.call('read_file', { classification: 'confidential' });
    expect(rulesOf(s, 'delete_item')?.[0]?.facts).toEqual(['listed_ids']);
    expect(rulesOf(s, 'send_email')?.[0]?.labels).toBe(true);
  });

  it('names every declared fact for a rule that reads the facts by a computed name, and none for one that reads none', () => {
    const s = session({
      ...config,
      rules: [
        {
          tools: ['pay'],
          when: 'state.facts[args.fact] != args.amount',
          effect: 'deny',
          reason: 'Read a fact by name',
        },
        { tools: ['pay'], when: 'args.amount > 1000', effect: 'approve', reason: 'A large payment' },
      ],
    });
    expect(rulesOf(s, 'pay')).toEqual([
      { rule: 'rules[0]', effect: 'deny', reason: 'Read a fact by name', facts: ['listed_ids', 'quote'] },
      { rule: 'rules[1]', effect: 'approve', reason: 'A large payment' },
    ]);
  });
});

describe('facts and labels while calls run', () => {
  it('makes a call that reads a fact a running call may write wait for it', () => {
    const s = session();
    const listing = s.request('list_items');
    expect(listing).toMatchObject({ allowed: true });
    const waiting = s.request('delete_item', { id: 'a' }, 'd1');
    expect(waiting).toMatchObject({ allowed: false, reason: { code: 'pending' }, waitFor: [listing.toolCallId] });
    // A call that reads nothing the listing writes runs beside it.
    expect(s.request('send_email', { to: 'x' })).toMatchObject({ allowed: true });
    s.complete(listing.toolCallId, { items: [{ id: 'a' }] });
    expect(s.request('delete_item', { id: 'a' }, 'd1')).toMatchObject({ allowed: true });
  });

  it('applies what results set in reservation order, whatever order the calls complete in', () => {
    const s = session();
    const first = s.request('get_quote');
    const second = s.request('get_quote');
    s.complete(second.toolCallId, { id: 'q2', amount: 2 });
    // The second waits behind the first: nothing is set yet.
    expect(s.state.facts).toBeUndefined();
    s.complete(first.toolCallId, { id: 'q1', amount: 1 });
    expect(s.state.facts?.quote).toEqual({ value: { id: 'q2', amount: 2 } });
  });
});

describe('validation', () => {
  it('refuses facts with bad expressions, duplicate names and unknown keys, naming where', () => {
    const result = validateOrchestration({
      facts: [
        { name: 'a', tools: ['x'], value: 'result.(' },
        { name: 'a', tools: ['x'], value: 'result.id', keep: 'sometimes' },
        { name: 'b', tools: ['x'], value: 'result.id', extra: 1 },
      ],
      labels: [{ name: 'l', tools: ['x'], when: "'not a boolean'" }],
      steps: [],
    });
    expect(result.success).toBe(false);
    const paths = result.success ? [] : result.issues.map((issue) => issue.path);
    expect(paths).toEqual(
      expect.arrayContaining(['facts[0].value', 'facts[1].name', 'facts[1].keep', 'facts[2].extra', 'labels[0].when']),
    );
  });
});
