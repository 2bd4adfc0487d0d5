import { describe, expect, it } from 'vitest';
import { compileOrchestration } from './compile.js';
import { ConditionRegistry } from './conditions.js';
import type { OrchestrationEvent } from './events.js';
import { latestUserMessage } from './messages.js';
import type { OrchestrationConfig } from './schema.js';
import { createState, type OrchestrationState } from './state.js';
import {
  explain,
  MAX_PENDING_ENTRIES,
  runningTools,
  settledState,
  type TransitionContext,
  type TransitionInput,
  transition,
  transitionAll,
} from './transition.js';

const m1 = latestUserMessage([{ role: 'user', content: 'research cats', id: 'm1' }]);
const m2 = latestUserMessage([{ role: 'user', content: 'research dogs', id: 'm2' }]);
const tools = ['search', 'think', 'reflect', 'pay', 'summarize', 'free'];

/** A session driven by hand: every input returns its decision and events. */
function session(config: OrchestrationConfig, options: { leaseMs?: number } = {}) {
  const plan = compileOrchestration(config);
  let state: OrchestrationState = createState('s', 0);
  let now = 0;
  const log: OrchestrationEvent[] = [];
  const run = (input: TransitionInput, message = m1) => {
    const context: TransitionContext = { now, message, leaseMs: options.leaseMs ?? 1_000 };
    const result = transition(plan, state, input, context);
    state = result.state;
    log.push(...result.events);
    return result;
  };
  return {
    get state() {
      return state;
    },
    run,
    settled: () => settledState(plan, state, { now, message: m1 }),
    log,
    tick: (ms: number) => {
      now += ms;
    },
    message: (message = m1) => run({ type: 'user-message' }, message),
    request: (tool: string, toolCallId: string, message = m1) =>
      run({ type: 'tool-requested', tool, toolCallId, agentTools: tools }, message).decision as {
        allowed: boolean;
        reason?: { code: string; message: string };
        allowedTools?: readonly string[];
        waitFor?: readonly string[];
      },
    complete: (toolCallId: string, message = m1) => run({ type: 'tool-completed', toolCallId }, message),
    fail: (toolCallId: string) => run({ type: 'tool-failed', toolCallId }),
    abandon: (toolCallId: string) => run({ type: 'tool-abandoned', toolCallId }),
    offered: (message = m1) =>
      (run({ type: 'step-started', agentTools: tools }, message).decision as { allowedTools: readonly string[] })
        .allowedTools,
  };
}

const research: OrchestrationConfig = {
  steps: [
    {
      name: 'Research',
      conditions: [{ type: 'message_contains', value: 'research' }],
      sequence: ['search', 'think', 'reflect'],
      resetSequenceOn: ['new_message'],
    },
  ],
};

describe('transition: reserve before run', () => {
  it('reserves an allowed call, commits it on completion, and the sequence advances then', () => {
    const s = session(research);
    s.message();
    expect(s.request('search', 'c1')).toMatchObject({ allowed: true });
    // Reserved, not yet recorded: the history is what has run.
    expect(s.state.recentlyUsedTools).toEqual([]);
    expect(runningTools(s.state)).toEqual(['search']);
    expect(s.log.at(-1)).toMatchObject({ type: 'tool-reserved', tool: 'search', toolCallId: 'c1' });
    s.complete('c1');
    expect(s.state).toMatchObject({ recentlyUsedTools: ['search'], sequenceIndex: 1 });
    expect(s.state.pending).toBeUndefined();
    expect(s.log.map((e) => e.type)).toContain('sequence-advanced');
  });

  it('releases a call whose tool threw: nothing recorded, the position is free again', () => {
    const s = session(research);
    s.message();
    s.request('search', 'c1');
    s.fail('c1');
    expect(s.state).toMatchObject({ recentlyUsedTools: [], sequenceIndex: 0 });
    expect(s.state.pending).toBeUndefined();
    expect(s.log.at(-1)).toMatchObject({ type: 'tool-released', reason: 'failed', toolCallId: 'c1' });
    expect(s.request('search', 'c2')).toMatchObject({ allowed: true });
  });

  it('releases a call whose outcome is unknown without recording it, but its limit rules count it', () => {
    const s = session({
      rules: [{ tools: ['pay'], limit: { max: 1, per: 'session' }, reason: 'Pay once' }],
      steps: [{ name: 'Checkout', isDefault: true, sequence: ['pay', 'search'] }],
    });
    s.message();
    expect(s.request('pay', 'p1')).toMatchObject({ allowed: true });
    s.abandon('p1');
    expect(s.log.at(-1)).toMatchObject({ type: 'tool-released', reason: 'abandoned', toolCallId: 'p1', tool: 'pay' });
    // Not recorded: the history and the sequence stay where they were, nothing waits in the log.
    expect(s.state).toMatchObject({ recentlyUsedTools: [], sequenceIndex: 0 });
    expect(s.state.pending).toBeUndefined();
    expect(s.state.counts).toEqual({ 'rules[0]': { n: 1 } });
    // It may have run, so the limit is spent: a second payment is refused, not pending.
    expect(s.request('pay', 'p2')).toMatchObject({ allowed: false, reason: { code: 'limit', used: 1 } });
  });

  it('releases an abandoned call no limit counts as a failed one', () => {
    const s = session(research);
    s.message();
    s.request('search', 'c1');
    s.abandon('c1');
    expect(s.state).toMatchObject({ recentlyUsedTools: [], sequenceIndex: 0 });
    expect(s.state.pending).toBeUndefined();
    expect(s.state.counts).toBeUndefined();
    expect(s.request('search', 'c2')).toMatchObject({ allowed: true });
  });

  it('counts an abandoned call in its place behind a running call, as its completion would count', () => {
    const config: OrchestrationConfig = {
      rules: [{ tools: ['pay'], limit: { max: 1, per: 'session' }, reason: 'Pay once' }],
      steps: [{ name: 'Checkout', isDefault: true }],
    };
    const play = (end: 'complete' | 'abandon') => {
      const s = session(config);
      s.message();
      expect(s.request('search', 'a')).toMatchObject({ allowed: true });
      // Nothing "search" does changes whether "pay" may run: it is decided at once.
      expect(s.request('pay', 'p1')).toMatchObject({ allowed: true });
      s[end]('p1');
      return s;
    };
    const abandoned = play('abandon');
    // The count waits behind the running call, in the place the call held, and counts now.
    expect(abandoned.state.pending?.map((entry) => entry.kind)).toEqual(['call', 'counted']);
    expect(abandoned.request('pay', 'p2')).toMatchObject({ allowed: false, reason: { code: 'limit', used: 1 } });
    const completed = play('complete');
    abandoned.complete('a');
    completed.complete('a');
    expect(abandoned.state.counts).toEqual(completed.state.counts);
    expect(abandoned.state.counts).toEqual({ 'rules[0]': { n: 1 } });
    expect(abandoned.state).toMatchObject({ recentlyUsedTools: ['search'] });
    expect(completed.state.recentlyUsedTools).toEqual(['search', 'pay']);
    expect(abandoned.state.pending).toBeUndefined();
  });

  it('makes a call wait for a running call whose completion could change its step, then decides it', () => {
    // "pay" and "free" share one call per step; a completed "pay" moves the session to After,
    // where the count starts again. Whether "free" may run depends on how "pay" ends.
    const s = session({
      rules: [{ tools: ['pay', 'free'], limit: { max: 1, per: 'step' }, reason: 'One per step' }],
      steps: [
        { name: 'After', conditions: [{ type: 'tool_used', value: 'pay' }] },
        { name: 'Checkout', isDefault: true },
      ],
    });
    s.message();
    expect(s.request('pay', 'p1')).toMatchObject({ allowed: true });
    const waiting = s.request('free', 'f1');
    expect(waiting).toMatchObject({ allowed: false, reason: { code: 'pending', cause: 'running' }, waitFor: ['p1'] });
    // Nothing was written for it: the same call asks again once "pay" ended.
    expect(s.state.toolCallIds).toEqual(['p1']);
    s.abandon('p1');
    expect(s.state.activeStep).toBe('Checkout');
    expect(s.request('free', 'f1')).toMatchObject({ allowed: false, reason: { code: 'limit', used: 1 } });
  });

  it('makes a call wait, not refuses it as over its limit, while a running call that counts may still fail', () => {
    const s = session({
      rules: [{ tools: ['pay'], limit: { max: 1, per: 'session' }, reason: 'Pay once' }],
      steps: [{ name: 'Checkout', isDefault: true }],
    });
    s.message();
    expect(s.request('pay', 'p1')).toMatchObject({ allowed: true });
    expect(s.request('pay', 'p2')).toMatchObject({ allowed: false, reason: { code: 'pending' }, waitFor: ['p1'] });
    s.fail('p1');
    expect(s.request('pay', 'p2')).toMatchObject({ allowed: true });
  });

  it('decides a call under a limit at once when the running calls cannot reach it', () => {
    const s = session({
      rules: [{ tools: ['pay'], limit: { max: 3, per: 'session' }, reason: 'Three payments' }],
      steps: [{ name: 'Checkout', isDefault: true }],
    });
    s.message();
    expect(s.request('pay', 'p1')).toMatchObject({ allowed: true });
    expect(s.request('pay', 'p2')).toMatchObject({ allowed: true });
    expect(s.request('pay', 'p3')).toMatchObject({ allowed: true });
    // Three run: a fourth depends on whether one of them fails.
    expect(s.request('pay', 'p4')).toMatchObject({ allowed: false, waitFor: ['p1', 'p2', 'p3'] });
    s.complete('p2');
    s.complete('p1');
    expect(s.request('pay', 'p4')).toMatchObject({ allowed: false, waitFor: ['p3'] });
    s.complete('p3');
    expect(s.request('pay', 'p4')).toMatchObject({ allowed: false, reason: { code: 'limit', used: 3 } });
  });

  it('counts a call whose lease expired for its limits: its process died while it may have run', () => {
    const s = session(
      { rules: [{ tools: ['pay'], limit: { max: 1, per: 'session' }, reason: 'Pay once' }], steps: [] },
      { leaseMs: 1_000 },
    );
    s.message();
    expect(s.request('pay', 'p1')).toMatchObject({ allowed: true });
    s.tick(1_001);
    expect(s.request('pay', 'p2')).toMatchObject({ allowed: false, reason: { code: 'limit', used: 1 } });
    expect(s.log.find((event) => event.type === 'tool-released')).toMatchObject({ reason: 'expired', tool: 'pay' });
    expect(s.state).toMatchObject({ recentlyUsedTools: [] });
  });

  it('makes a call at the position a running call holds, or the next, wait until it ended', () => {
    const s = session(research);
    s.message();
    expect(s.request('search', 'a')).toMatchObject({ allowed: true });
    // Whether these may run depends on how "a" ends: they wait, never run out of order.
    expect(s.request('search', 'b')).toMatchObject({ allowed: false, reason: { code: 'pending' }, waitFor: ['a'] });
    expect(s.request('think', 'c')).toMatchObject({ allowed: false, reason: { code: 'pending' }, waitFor: ['a'] });
    // Offered is what runs on the session as it stands without "a".
    expect(s.offered()).toEqual(['search']);
    s.complete('a');
    expect(s.offered()).toEqual(['think']);
    expect(s.request('think', 'c')).toMatchObject({ allowed: true });
    s.complete('c');
    expect(s.request('search', 'b')).toMatchObject({ allowed: false, reason: { code: 'sequence' } });
  });

  it('allows a tool that is allowed whatever a running call does, and refuses one that is not', () => {
    const s = session({ steps: [{ name: 'Open', isDefault: true }] });
    s.message();
    expect(s.request('search', 'a')).toMatchObject({ allowed: true });
    expect(s.request('think', 'b')).toMatchObject({ allowed: true });
    expect(s.request('ghost', 'c')).toMatchObject({ allowed: false, reason: { code: 'no-such-tool' } });
  });

  it('runs a once-only tool once however many requests race for it', () => {
    // "pay" is allowed until it was used: then the Done step, which denies it, takes over.
    const s = session({
      steps: [
        { name: 'Done', conditions: [{ type: 'tool_used', value: 'pay' }], availableTools: { denied: ['pay'] } },
        { name: 'Checkout', isDefault: true, availableTools: { allowed: ['pay'] } },
      ],
    });
    s.message();
    const decisions = Array.from({ length: 10 }, (_, i) => s.request('pay', `p${i}`));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(1);
    s.complete('p0');
    expect(s.request('pay', 'later')).toMatchObject({ allowed: false, reason: { code: 'denied' } });
    expect(s.state.recentlyUsedTools).toEqual(['pay']);
  });

  it('does not allow a tool that depends on a running call having succeeded', () => {
    // summarize is allowed only after search was used: while search runs, the answer is unknown.
    const s = session({
      steps: [
        {
          name: 'After',
          conditions: [{ type: 'tool_used', value: 'search' }],
          availableTools: { allowed: ['summarize'] },
        },
        { name: 'Before', isDefault: true, availableTools: { allowed: ['search'] } },
      ],
    });
    s.message();
    s.request('search', 'a');
    expect(s.request('summarize', 'b')).toMatchObject({ allowed: false, reason: { code: 'pending' } });
    s.fail('a');
    expect(s.request('summarize', 'c')).toMatchObject({ allowed: false, reason: { code: 'not-allowed' } });
  });

  it('commits in reservation order, whatever order the tools finish in', () => {
    const s = session({ steps: [{ name: 'Open', isDefault: true }] });
    s.message();
    s.request('search', 'a');
    s.request('think', 'b');
    s.request('reflect', 'c');
    s.complete('c');
    s.complete('b');
    // c and b finished, but a still runs: nothing is committed past it.
    expect(s.state.recentlyUsedTools).toEqual([]);
    expect(runningTools(s.state)).toEqual(['search']);
    s.complete('a');
    expect(s.state.recentlyUsedTools).toEqual(['search', 'think', 'reflect']);
    expect(s.state.pending).toBeUndefined();
  });

  it(`runs up to ${MAX_PENDING_ENTRIES} independent calls at once, then makes the next wait for room`, () => {
    const s = session({ steps: [{ name: 'Open', isDefault: true }] });
    s.message();
    for (let i = 0; i < MAX_PENDING_ENTRIES; i++) expect(s.request('free', `f${i}`)).toMatchObject({ allowed: true });
    expect(s.request('free', 'more')).toMatchObject({ allowed: false, reason: { code: 'pending' }, waitFor: ['f0'] });
    const waited = s.run({
      type: 'tool-requested',
      tool: 'free',
      toolCallId: 'more',
      agentTools: tools,
      waited: { cause: 'wait-bound', waitedMs: 50 },
    }).decision;
    expect(waited).toMatchObject({ allowed: false, reason: { code: 'pending', cause: 'wait-bound', waitedMs: 50 } });
    expect(waited).not.toHaveProperty('waitFor');
    s.complete('f0');
    expect(s.request('free', 'after')).toMatchObject({ allowed: true });
  });
});

describe('transition: toolCallId is an idempotency key', () => {
  it('refuses a repeated id while it runs, after it completed, after it failed and after a refusal', () => {
    const s = session({ steps: [{ name: 'Open', isDefault: true }] });
    s.message();
    s.request('search', 'dup');
    expect(s.request('search', 'dup')).toMatchObject({ allowed: false, reason: { code: 'duplicate-call' } });
    s.complete('dup');
    const again = s.request('think', 'dup');
    expect(again).toMatchObject({ allowed: false, reason: { code: 'duplicate-call' } });
    expect(again.reason?.message).toMatch(/"dup" was already used/);
    s.request('think', 'failing');
    s.fail('failing');
    expect(s.request('think', 'failing')).toMatchObject({ allowed: false, reason: { code: 'duplicate-call' } });
    s.request('ghost', 'refused');
    expect(s.request('think', 'refused')).toMatchObject({ allowed: false, reason: { code: 'duplicate-call' } });
    expect(s.state.recentlyUsedTools).toEqual(['search']);
  });

  it('runs three calls with one id at most once, and a not_recently_used tool once', () => {
    const s = session({
      steps: [{ name: 'Research', isDefault: true, sequence: ['search', 'think', 'reflect'] }],
    });
    s.message();
    s.request('search', 'dup-1');
    s.complete('dup-1');
    const results = [s.request('think', 'dup-1'), s.request('think', 'dup-1'), s.request('think', 'dup-1')];
    expect(results.every((r) => !r.allowed)).toBe(true);
    expect(s.state).toMatchObject({ recentlyUsedTools: ['search'], sequenceIndex: 1 });
  });
});

describe('transition: leases', () => {
  it('releases a reservation whose lease ended, so a crashed process cannot block the session', () => {
    const s = session(research, { leaseMs: 1_000 });
    s.message();
    s.request('search', 'crashed'); // its process dies: no completion ever comes
    s.tick(999);
    expect(s.request('search', 'early')).toMatchObject({ allowed: false, reason: { code: 'pending' } });
    s.tick(1);
    expect(s.request('search', 'after')).toMatchObject({ allowed: true });
    expect(s.log).toContainEqual(
      expect.objectContaining({ type: 'tool-released', toolCallId: 'crashed', reason: 'expired' }),
    );
  });

  it('does not record a completion that comes after the lease ended', () => {
    const s = session(research, { leaseMs: 1_000 });
    s.message();
    s.request('search', 'slow');
    s.tick(1_500);
    s.complete('slow');
    expect(s.state).toMatchObject({ recentlyUsedTools: [], sequenceIndex: 0 });
    expect(s.log.at(-1)).toMatchObject({ type: 'tool-released', toolCallId: 'slow', reason: 'late' });
  });

  it('keeps a completed call that waits behind an expiring one, and commits it when that one goes', () => {
    const s = session({ steps: [{ name: 'Open', isDefault: true }] }, { leaseMs: 1_000 });
    s.message();
    s.request('search', 'dies');
    s.tick(500);
    s.request('think', 'ok');
    s.complete('ok');
    s.tick(600); // "dies" expired; "ok" completed and keeps its place
    s.offered();
    expect(s.state.recentlyUsedTools).toEqual(['think']);
    expect(s.state.pending).toBeUndefined();
  });
});

describe('transition: messages behind running calls', () => {
  it('replays a new message after the call that was running when it came, as a serial run would', () => {
    const s = session(research);
    s.message(m1);
    s.request('search', 'a', m1);
    // A newer message arrives while search runs; its new_message reset must follow search.
    s.message(m2);
    expect(s.state.pending?.map((e) => e.kind)).toEqual(['call', 'message']);
    s.complete('a', m2);
    // Serially: search advanced the sequence, then m2 reset it.
    expect(s.state).toMatchObject({ recentlyUsedTools: ['search'], sequenceIndex: 0, lastMessageKey: m2!.key });
    expect(s.request('think', 'b', m2)).toMatchObject({ allowed: false, reason: { code: 'sequence' } });
    expect(s.request('search', 'c', m2)).toMatchObject({ allowed: true });
  });

  it('refuses tools to a turn whose message a newer turn superseded', () => {
    const s = session(research);
    s.message(m1);
    s.message(m2);
    expect(s.request('search', 'old', m1)).toMatchObject({ allowed: false, reason: { code: 'superseded' } });
    expect(s.offered(m1)).toEqual([]);
    expect(s.request('search', 'new', m2)).toMatchObject({ allowed: true });
  });

  it('shows what is known for sure while calls run: settledState leaves running calls out', () => {
    const s = session(research);
    s.message();
    s.request('search', 'a');
    expect(s.settled()).toMatchObject({ recentlyUsedTools: [], sequenceIndex: 0 });
    expect(s.settled().pending).toBeUndefined();
  });
});

describe('transition: required sequences and the end of a turn', () => {
  const required: OrchestrationConfig = {
    steps: [
      { ...research.steps[0]!, requireSequence: true },
      { name: 'Idle', isDefault: true, sequence: ['free'] },
    ],
  };
  const step = (s: ReturnType<typeof session>) =>
    s.run({ type: 'step-started', agentTools: tools }).decision as {
      toolChoice: string;
      allowedTools: readonly string[];
    };

  it('forces the next tool while a required sequence is unfinished, and stops forcing once it completes', () => {
    const s = session(required);
    s.message();
    expect(step(s)).toMatchObject({ toolChoice: 'required', allowedTools: ['search'] });
    for (const [id, tool] of [
      ['c1', 'search'],
      ['c2', 'think'],
    ] as const) {
      s.request(tool, id);
      s.complete(id);
    }
    expect(step(s)).toMatchObject({ toolChoice: 'required', allowedTools: ['reflect'] });
    s.request('reflect', 'c3');
    s.complete('c3');
    // Complete: the step's availableTools apply again, nothing is forced.
    expect(step(s)).toMatchObject({ toolChoice: 'auto', allowedTools: tools });
  });

  it('does not force a sequence the step does not require, nor one the agent cannot follow', () => {
    const s = session(research);
    s.message();
    expect(step(s)).toMatchObject({ toolChoice: 'auto', allowedTools: ['search'] });
    const blocked = session({ steps: [{ name: 'B', isDefault: true, sequence: ['absent'], requireSequence: true }] });
    blocked.message();
    expect(step(blocked)).toMatchObject({ toolChoice: 'none', allowedTools: [] });
  });

  it('emits sequence-incomplete when a turn ends with the sequence unfinished, and nothing once it is done', () => {
    const s = session(required);
    s.message();
    s.request('search', 'c1');
    s.complete('c1');
    const ended = s.run({ type: 'turn-ended' });
    expect(ended.state).toBe(s.state);
    expect(ended.events).toEqual([
      {
        type: 'sequence-incomplete',
        sessionId: 's',
        step: 'Research',
        index: 1,
        length: 3,
        expected: ['think'],
        required: true,
        awaitingApproval: false,
      },
    ]);
    expect(s.run({ type: 'turn-ended', awaitingApproval: true }).events[0]).toMatchObject({ awaitingApproval: true });
    for (const [id, tool] of [
      ['c2', 'think'],
      ['c3', 'reflect'],
    ] as const) {
      s.request(tool, id);
      s.complete(id);
    }
    expect(s.run({ type: 'turn-ended' }).events).toEqual([]);
  });

  it('counts a call still running as not run when the turn ends', () => {
    const s = session(research);
    s.message();
    s.request('search', 'c1');
    expect(s.run({ type: 'turn-ended' }).events[0]).toMatchObject({ index: 0, expected: ['search'], required: false });
  });
});

describe('transition: shadow mode', () => {
  const shadowResearch: OrchestrationConfig = { ...research, shadow: true };

  it('offers every tool, runs what enforcement would refuse, and reports it as would-block', () => {
    const s = session(shadowResearch);
    s.message();
    const step = transition(
      compileOrchestration(shadowResearch),
      s.state,
      { type: 'step-started', agentTools: tools },
      { now: 0, message: m1 },
    );
    expect(step.decision).toMatchObject({
      shadow: true,
      allowedTools: tools,
      wouldOffer: ['search'],
      toolChoice: 'auto',
    });
    const decision = s.request('reflect', 'r1');
    expect(decision).toMatchObject({ allowed: true, wouldBlock: { code: 'sequence' } });
    expect(s.log).toContainEqual(
      expect.objectContaining({
        type: 'tool-would-block',
        tool: 'reflect',
        reason: expect.objectContaining({ code: 'sequence' }),
      }),
    );
    s.complete('r1');
    // The record shows what enforcement would have seen: an out-of-order tool.
    expect(s.log).toContainEqual(expect.objectContaining({ type: 'sequence-violation', tool: 'reflect' }));
    expect(s.state.recentlyUsedTools).toEqual(['reflect']);
  });

  it('still refuses a repeated call id and a tool the agent does not have', () => {
    const s = session(shadowResearch);
    s.message();
    s.request('search', 'same');
    expect(s.request('search', 'same')).toMatchObject({ allowed: false, reason: { code: 'duplicate-call' } });
    expect(s.request('ghost', 'g')).toMatchObject({ allowed: false, reason: { code: 'no-such-tool' } });
  });

  it('lets a step override the template: an enforcing step in a shadow template enforces', () => {
    const config: OrchestrationConfig = {
      shadow: true,
      steps: [{ ...research.steps[0]!, shadow: false }],
    };
    const s = session(config);
    s.message();
    expect(s.request('reflect', 'r')).toMatchObject({ allowed: false, reason: { code: 'sequence' } });
  });
});

describe('transition: token budgets', () => {
  function transitionUsage(s: ReturnType<typeof session>, totalTokens: number) {
    return s.run({ type: 'usage', usage: { promptTokens: totalTokens, completionTokens: 0, totalTokens } });
  }

  it('offers no tool and refuses calls once the session budget is spent, with a budget-exceeded event', () => {
    const s = session({ ...research, budget: { totalTokens: 100 } });
    s.message();
    transitionUsage(s, 60);
    expect(s.offered()).toEqual(['search']);
    transitionUsage(s, 40);
    expect(s.offered()).toEqual([]);
    expect(s.log.at(-1)).toMatchObject({
      type: 'budget-exceeded',
      scope: 'session',
      limit: 100,
      used: 100,
      shadow: false,
    });
    expect(s.request('search', 'late')).toMatchObject({ allowed: false, reason: { code: 'budget', scope: 'session' } });
  });

  it('counts a step budget only while that step is active', () => {
    const config: OrchestrationConfig = {
      steps: [
        { ...research.steps[0]!, budget: { totalTokens: 50 } },
        { name: 'Chat', isDefault: true },
      ],
    };
    const s = session(config);
    s.message(latestUserMessage([{ role: 'user', content: 'hello', id: 'h' }]));
    transitionUsage(s, 500); // spent in Chat: does not count against Research
    expect(s.state.stepTokens).toEqual({ Chat: 500 });
    s.message(m1);
    expect(s.offered()).toEqual(['search']);
    transitionUsage(s, 50);
    expect(s.state.stepTokens).toEqual({ Chat: 500, Research: 50 });
    expect(s.offered()).toEqual([]);
    expect(s.request('search', 'x')).toMatchObject({ allowed: false, reason: { code: 'budget', scope: 'step' } });
  });

  it('in shadow mode only reports a spent budget', () => {
    const s = session({ ...research, shadow: true, budget: { totalTokens: 10 } });
    s.message();
    transitionUsage(s, 10);
    expect(s.offered()).toEqual(tools);
    expect(s.log.at(-1)).toMatchObject({ type: 'budget-exceeded', shadow: true });
    expect(s.request('search', 'x')).toMatchObject({ allowed: true, wouldBlock: { code: 'budget' } });
  });
});

describe('transition: shadow and enforced steps share one serial order', () => {
  // Locked enforces; the default step Open only observes. A `lock` running in Open decides
  // which step `deploy` would meet: every serial order of lock-then-deploy refuses deploy.
  const config: OrchestrationConfig = {
    steps: [
      {
        name: 'Locked',
        conditions: [{ type: 'tool_used', value: 'lock' }],
        availableTools: { allowed: ['status'] },
      },
      { name: 'Open', isDefault: true, shadow: true },
    ],
  };
  const agentTools = ['lock', 'deploy', 'status'];
  const plan = compileOrchestration(config);
  const context: TransitionContext = { now: 0, message: m1 };
  const request = (state: OrchestrationState, tool: string, toolCallId: string) =>
    transition(plan, state, { type: 'tool-requested', tool, toolCallId, agentTools }, context);

  it('refuses a call that a running shadow call could make an enforcing step refuse', () => {
    let state = transition(plan, createState('s', 0), { type: 'user-message' }, context).state;
    const locking = request(state, 'lock', 'a');
    expect(locking.decision).toMatchObject({ allowed: true });
    state = locking.state;
    // Serially: lock completes, Locked is active, deploy is not allowed. Running lock fails:
    // Open would let it run. It cannot be both, so it waits.
    const deploying = request(state, 'deploy', 'b');
    expect(deploying.decision).toMatchObject({ allowed: false, reason: { code: 'pending', running: ['lock'] } });
    // And explain() says the same; a model step is offered what runs without lock (Open observes).
    const view = explain(plan, state, agentTools, context);
    expect(view.tools.find((t) => t.tool === 'deploy')).toMatchObject({ allowed: false, reason: { code: 'pending' } });
    const step = transition(plan, state, { type: 'step-started', agentTools }, context).decision;
    expect(step).toMatchObject({ allowedTools: agentTools, shadow: true });
    expect(view.allowedTools).toEqual(agentTools);
    // Once lock committed, deploy meets Locked, which enforces.
    state = transition(plan, deploying.state, { type: 'tool-completed', toolCallId: 'a' }, context).state;
    expect(state.activeStep).toBe('Locked');
    expect(request(state, 'deploy', 'c').decision).toMatchObject({ allowed: false, reason: { code: 'not-allowed' } });
  });

  it('decides at once in a shadow step what no running call can change', () => {
    let state = transition(plan, createState('s', 0), { type: 'user-message' }, context).state;
    state = request(state, 'status', 'a').state;
    // status changes no step: deploy is judged in Open, which observes only.
    expect(request(state, 'deploy', 'b').decision).toMatchObject({ allowed: true });
    expect(request(state, 'deploy', 'b').decision).not.toHaveProperty('wouldBlock');
  });
});

describe('transition: lease renewal', () => {
  it('renews a running call so it outlives its first lease, and says when a call holds none', () => {
    const s = session(research, { leaseMs: 300 });
    s.message();
    s.request('search', 'c1');
    for (let i = 0; i < 10; i++) {
      s.tick(200);
      expect(s.run({ type: 'lease-renewed', toolCallId: 'c1' }).decision).toEqual({
        type: 'lease',
        toolCallId: 'c1',
        held: true,
      });
    }
    // Two seconds later, well past the first lease: still reserved, and it commits.
    expect(runningTools(s.state)).toEqual(['search']);
    s.complete('c1');
    expect(s.state.recentlyUsedTools).toEqual(['search']);
    expect(s.run({ type: 'lease-renewed', toolCallId: 'c1' }).decision).toMatchObject({ held: false });
    expect(s.run({ type: 'lease-renewed', toolCallId: 'never' }).decision).toMatchObject({ held: false });
  });

  it('cannot renew a lease that already ended: the call lost its place, and its completion is reported late', () => {
    const s = session(research, { leaseMs: 300 });
    s.message();
    s.request('search', 'c1');
    s.tick(301);
    const renewed = s.run({ type: 'lease-renewed', toolCallId: 'c1' });
    expect(renewed.decision).toMatchObject({ held: false });
    expect(renewed.events).toContainEqual(expect.objectContaining({ type: 'tool-released', reason: 'expired' }));
    expect(s.complete('c1').events).toContainEqual(
      expect.objectContaining({ type: 'tool-released', toolCallId: 'c1', reason: 'late' }),
    );
    expect(s.state.recentlyUsedTools).toEqual([]);
  });
});

describe('transition: what a session takes while calls run', () => {
  const text = (n: number, words = 'research cats ') => words.repeat(Math.ceil(n / words.length)).slice(0, n);

  it('keeps the answers of message conditions, not the text, for messages behind a running call', () => {
    const s = session(research);
    s.message();
    s.request('search', 'c1');
    const long = latestUserMessage([{ role: 'user', content: text(30_000, 'please research the dogs '), id: 'big' }]);
    s.message(long);
    const size = JSON.stringify(s.state).length;
    expect(size).toBeLessThan(1_000);
    expect(JSON.stringify(s.state)).not.toContain('please research');
    // The kept message still resets the sequence when it is replayed after the call.
    s.complete('c1', long);
    expect(s.log).toContainEqual(expect.objectContaining({ type: 'sequence-reset', reason: 'new_message' }));
    expect(s.state).toMatchObject({ activeStep: 'Research', sequenceIndex: 0, lastMessageKey: long?.key });
  });

  it('keeps the text when a custom condition reads more than the message', () => {
    const registry = new ConditionRegistry();
    registry.register({
      type: 'asks_after',
      usesMessage: true,
      evaluate: (condition, context) =>
        context.history.includes(condition.value ?? '') && context.message?.lower.includes('again') === true,
    });
    const plan = compileOrchestration(
      { steps: [{ name: 'Again', conditions: [{ type: 'asks_after', value: 'search' }] }] },
      { conditions: registry },
    );
    const kept = plan.pendingMessage({ key: 'k', text: 'Search AGAIN', lower: 'search again' });
    expect(kept).toEqual({ key: 'k', text: 'Search AGAIN' });
    expect(compileOrchestration(research).pendingMessage({ key: 'k', text: 'research', lower: 'research' })).toEqual({
      key: 'k',
      matches: [0],
    });
  });

  it(`takes at most ${MAX_PENDING_ENTRIES} entries behind a running call, then refuses messages as session-busy`, () => {
    const s = session(research);
    s.message();
    s.request('search', 'c1');
    const refused: string[] = [];
    for (let i = 0; i < 300; i++) {
      const m = latestUserMessage([{ role: 'user', content: text(30_000), id: `m${i}` }]);
      const decision = s.message(m).decision;
      if (decision?.type === 'message' && !decision.accepted) refused.push(decision.reason.code);
    }
    expect(s.state.pending).toHaveLength(MAX_PENDING_ENTRIES);
    expect(refused).toHaveLength(300 - (MAX_PENDING_ENTRIES - 1));
    expect(new Set(refused)).toEqual(new Set(['session-busy']));
    // The messages' answers are kept, not their text: a full log stays small.
    expect(JSON.stringify(s.state).length).toBeLessThan(20_000);
    // A request waits for room as well, and the session frees up when the call finishes.
    expect(s.request('think', 'c2')).toMatchObject({ allowed: false, reason: { code: 'pending' }, waitFor: ['c1'] });
    s.complete('c1');
    expect(s.state.pending).toBeUndefined();
    expect(s.message(latestUserMessage([{ role: 'user', content: 'research again', id: 'after' }])).decision).toEqual({
      type: 'message',
      accepted: true,
    });
  });

  it('claims a new session for an agent, and refuses a turn of another agent without changing anything', () => {
    const plan = compileOrchestration(research);
    const context: TransitionContext = { now: 0, message: m1 };
    const claimed = transition(plan, createState('s', 0), { type: 'user-message', agentId: 'a' }, context);
    expect(claimed.state.agentId).toBe('a');
    const other = transitionAll(
      plan,
      claimed.state,
      [
        { type: 'user-message', agentId: 'b' },
        { type: 'tool-requested', tool: 'search', toolCallId: 'x', agentTools: tools },
      ],
      { now: 0, message: m2 },
    );
    expect(other.decisions[0]).toMatchObject({
      accepted: false,
      reason: { code: 'session-of-another-agent', owner: 'a' },
    });
    // Nothing after the refusal was applied: no reservation for agent b.
    expect(other.decisions[1]).toBeUndefined();
    expect(other.state).toBe(claimed.state);
  });
});

describe('transition: replays of a turn under a durable-execution engine (turnId)', () => {
  const turn = 'workflow-1';
  const plan = compileOrchestration(research);
  const context: TransitionContext = { now: 0, message: m1, leaseMs: 1_000 };
  const run = (state: OrchestrationState, inputs: TransitionInput[]) => transitionAll(plan, state, inputs, context);
  const request = (tool: string, toolCallId: string): TransitionInput => ({
    type: 'tool-requested',
    tool,
    toolCallId,
    agentTools: tools,
    turnId: turn,
  });

  it('gives a replay every decision the original run saw: offers, allowed and refused calls', () => {
    let state = run(createState('s', 0), [{ type: 'user-message' }]).state;
    // The original run: step 0 offered search, which ran; think was called out of order at step 1.
    const step0 = run(state, [{ type: 'step-started', agentTools: tools, turnId: turn, stepNumber: 0 }]);
    state = run(step0.state, [
      { type: 'step-recorded', turnId: turn, stepNumber: 0, tools: ['search'], toolChoice: 'auto' },
    ]).state;
    const first = run(state, [request('search', 's1'), { type: 'tool-completed', toolCallId: 's1' }]);
    state = first.state;
    const refused = run(state, [request('reflect', 'r1')]);
    expect(refused.decisions[0]).toMatchObject({ allowed: false, reason: { code: 'sequence' } });
    state = refused.state;
    // The replay, after a crash: the session moved on (search is committed), yet step 0 is
    // offered search again, search is allowed (already recorded), reflect refused for the same reason.
    const offered = run(state, [{ type: 'step-started', agentTools: tools, turnId: turn, stepNumber: 0 }]);
    expect(offered.decisions[0]).toMatchObject({ allowedTools: ['search'] });
    const again = run(state, [request('search', 's1')]);
    expect(again.decisions[0]).toMatchObject({ allowed: true, replayed: 'settled' });
    expect(again.state).toBe(state); // nothing written, nothing recorded twice
    expect(run(state, [request('reflect', 'r1')]).decisions[0]).toMatchObject({
      allowed: false,
      reason: { code: 'sequence' },
      replayed: 'settled',
    });
    // Without the turn id, a repeated call id is refused, never run twice.
    expect(
      transition(plan, state, { type: 'tool-requested', tool: 'search', toolCallId: 's1', agentTools: tools }, context)
        .decision,
    ).toMatchObject({
      allowed: false,
      reason: { code: 'duplicate-call' },
    });
    // Another turn's id is not this turn's replay.
    expect(
      transition(plan, state, { ...(request('search', 's1') as object), turnId: 'other' } as TransitionInput, context)
        .decision,
    ).toMatchObject({ allowed: false, reason: { code: 'duplicate-call' } });
  });

  it('lets a replay take over a call still reserved, and decides again one whose reservation ended', () => {
    let state = run(createState('s', 0), [{ type: 'user-message' }, request('search', 's1')]).state;
    expect(run(state, [request('search', 's1')]).decisions[0]).toMatchObject({ allowed: true, replayed: 'running' });
    // Its process died: the lease ended, search was released, and it is decided as a new call.
    const later: TransitionContext = { ...context, now: 5_000 };
    const decided = transitionAll(plan, state, [request('search', 's1')], later);
    expect(decided.decisions[0]).toMatchObject({ allowed: true });
    expect(decided.decisions[0]).not.toHaveProperty('replayed');
    state = transitionAll(plan, decided.state, [{ type: 'tool-completed', toolCallId: 's1' }], later).state;
    expect(state.recentlyUsedTools).toEqual(['search']);
  });

  it('gives a replay of a call whose tool failed its decision back, whatever the session did since', () => {
    let state = run(createState('s', 0), [{ type: 'user-message' }, request('search', 's1')]).state;
    state = run(state, [{ type: 'tool-failed', toolCallId: 's1' }]).state;
    // Later calls move the session on; the replay of s1 still gets what the original run saw.
    state = run(state, [request('search', 's2'), { type: 'tool-completed', toolCallId: 's2' }]).state;
    const replayed = run(state, [request('search', 's1')]);
    expect(replayed.decisions[0]).toMatchObject({ allowed: true, replayed: 'settled' });
    expect(replayed.state).toBe(state); // nothing reserved, nothing to release
  });

  it("counts a model step's token usage once, however often the step is replayed", () => {
    const usage = { promptTokens: 10, completionTokens: 5, totalTokens: 15 };
    let state = run(createState('s', 0), [{ type: 'user-message' }]).state;
    state = run(state, [{ type: 'usage', usage, turnId: turn, stepNumber: 0 }]).state;
    // The replay reports step 0 again, then a new step 1.
    state = run(state, [
      { type: 'usage', usage, turnId: turn, stepNumber: 0 },
      { type: 'usage', usage, turnId: turn, stepNumber: 1 },
    ]).state;
    expect(state.cumulativeTokenUsage.totalTokens).toBe(30);
    // Without a turn id every report counts (the model loop reports each step once).
    state = run(state, [{ type: 'usage', usage }]).state;
    expect(state.cumulativeTokenUsage.totalTokens).toBe(45);
  });

  it('records a refusal the shell decided (observed) and gives it back, with what the model may call instead', () => {
    const state = run(createState('s', 0), [{ type: 'user-message' }]).state;
    const refusal = {
      type: 'tool-rejected' as const,
      sessionId: 's',
      tool: 'reflect',
      toolCallId: 'r1',
      step: state.activeStep,
      allowedTools: ['search'],
      reason: { code: 'limit' as const, rule: 'rules[0]', max: 1, per: 'turn', used: 1, message: 'one per turn' },
    };
    const observed = run(state, [{ type: 'observed', event: refusal, turnId: turn }]).state;
    const replayed = run(observed, [request('reflect', 'r1')]);
    expect(replayed.decisions[0]).toEqual({
      type: 'tool',
      tool: 'reflect',
      toolCallId: 'r1',
      allowed: false,
      reason: refusal.reason,
      allowedTools: ['search'],
      replayed: 'settled',
    });
    expect(replayed.state).toBe(observed); // nothing reserved, nothing recorded twice
    // Observed again (a replay that reported it anyway): still one record.
    expect(run(observed, [{ type: 'observed', event: refusal, turnId: turn }]).state).toBe(observed);
    // Without a turn id nothing is recorded for replays, but the call counts as decided, as
    // with one: the approval request the AI SDK signed for it cannot come back approved.
    const untracked = run(state, [{ type: 'observed', event: refusal }]).state;
    expect(untracked.replay).toBeUndefined();
    expect(untracked.toolCallIds).toEqual(['r1']);
    expect(observed.toolCallIds).toEqual(['r1']);
    // Any other observed event changes nothing.
    const offered = {
      type: 'tools-offered' as const,
      sessionId: 's',
      step: state.activeStep,
      tools: [],
      toolChoice: 'auto' as const,
    };
    expect(run(state, [{ type: 'observed', event: offered }]).state).toBe(state);
  });
});

describe('transition: approvals a person is asked for', () => {
  const pay = (id: string, digest: string): TransitionInput => ({
    type: 'tool-requested',
    tool: 'pay',
    toolCallId: id,
    agentTools: tools,
    args: { amount: 5 },
    argsDigest: digest,
    approved: true,
  });

  it("keeps the app's own request, without a rule or an event, and never lets it answer a rule", () => {
    const s = session({
      rules: [{ tools: ['pay'], effect: 'approve', reason: 'Payments need a person' }],
      steps: [{ name: 'Pay', isDefault: true }],
    });
    s.run({ type: 'user-message' });
    const asked = s.run({ type: 'approval-requested', tool: 'pay', toolCallId: 'p1', argsDigest: 'd' });
    expect(asked.events).toEqual([]);
    expect(s.state.approvals).toEqual([{ id: 'p1', tool: 'pay', digest: 'd', at: expect.any(String) }]);
    // The rule asks a person itself: the app's approval is not the rule's.
    expect(s.run(pay('p1', 'd')).decision).toMatchObject({
      allowed: false,
      reason: { code: 'approval-invalid', message: 'Payments need a person: no approval was asked for call "p1"' },
    });
  });

  it('drops an approval once its call is decided, refused as well as run', () => {
    const s = session({
      rules: [{ tools: ['pay'], effect: 'approve', reason: 'Payments need a person' }],
      steps: [{ name: 'Pay', isDefault: true }],
    });
    s.run({ type: 'user-message' });
    s.run({ type: 'approval-requested', tool: 'pay', toolCallId: 'p1', argsDigest: 'd', rule: 'rules[0]' });
    s.run({ type: 'approval-requested', tool: 'pay', toolCallId: 'p2', argsDigest: 'd', rule: 'rules[0]' });
    expect(s.run(pay('p1', 'other input')).decision).toMatchObject({ allowed: false });
    expect(s.state.approvals?.map((approval) => approval.id)).toEqual(['p2']);
    expect(s.run(pay('p2', 'd')).decision).toMatchObject({ allowed: true });
    expect(s.state.approvals).toBeUndefined();
  });
});

describe('transition: a call the shell refused (observed)', () => {
  const context: TransitionContext = { now: 0, message: m1, leaseMs: 1_000 };

  it('drops the approval kept for a call the shell refused, and keeps no id no provider makes', () => {
    const approvalPlan = compileOrchestration({
      rules: [{ tools: ['reflect'], effect: 'approve', reason: 'Reflection needs a person' }],
      steps: [{ name: 'Research', isDefault: true }],
    });
    const apply = (from: OrchestrationState, inputs: TransitionInput[]) =>
      transitionAll(approvalPlan, from, inputs, context).state;
    const asked = apply(createState('s', 0), [
      { type: 'user-message' },
      { type: 'approval-requested', tool: 'reflect', toolCallId: 'r1', argsDigest: 'd', rule: 'rules[0]' },
    ]);
    expect(asked.approvals).toMatchObject([{ id: 'r1' }]);
    const rejected = (toolCallId: string) => ({
      type: 'observed' as const,
      event: {
        type: 'tool-rejected' as const,
        sessionId: 's',
        tool: 'reflect',
        toolCallId,
        step: asked.activeStep,
        allowedTools: [],
        reason: { code: 'not-allowed' as const, message: 'not now', allowed: [] },
      },
    });
    const refused = apply(asked, [rejected('r1'), rejected('x'.repeat(100_000))]);
    expect(refused.approvals).toBeUndefined();
    expect(refused.toolCallIds).toEqual(['r1']);
  });
});

describe("a step's decisions for the agent's tools", () => {
  const config: OrchestrationConfig = {
    steps: [
      {
        name: 'Research',
        isDefault: true,
        availableTools: { allowed: ['search', 'think'] },
        sequence: ['search', 'think'],
      },
    ],
  };
  const started = (plan: ReturnType<typeof compileOrchestration>, agentTools: string[]) =>
    transitionAll(plan, createState('s', 0), [{ type: 'user-message' }, { type: 'step-started', agentTools }], {
      now: 0,
      message: m1,
    }).decisions[1] as { allowedTools: readonly string[] };

  it('are shared by every turn that lists the same tools, whatever array they come in', () => {
    const plan = compileOrchestration(config);
    // Each turn lists its tools anew (`Object.keys(tools)`): the decision is the same object.
    expect(started(plan, ['search', 'think', 'pay'])).toBe(started(plan, ['search', 'think', 'pay']));
  });

  it('follow the tools when a list changes, in a new array or in the same one', () => {
    const plan = compileOrchestration(config);
    const list = ['search', 'think'];
    expect(started(plan, list).allowedTools).toEqual(['search']);
    expect(started(plan, ['think', 'pay']).allowedTools).toEqual([]);
    list.splice(0, 1, 'pay'); // the app dropped search from the same array
    expect(started(plan, list).allowedTools).toEqual([]);
    list.splice(0, 1, 'search');
    expect(started(plan, list).allowedTools).toEqual(['search']);
  });
});

describe('the message a reserved call keeps', () => {
  const config: OrchestrationConfig = {
    steps: [
      {
        name: 'Cats',
        conditions: [{ type: 'message_contains', value: 'cats' }],
        availableTools: { allowed: ['search'] },
      },
      {
        name: 'Dogs',
        conditions: [{ type: 'message_contains', value: 'dogs' }],
        availableTools: { allowed: ['think'] },
      },
    ],
  };

  it('is read once per message, frozen, and is each message its own', () => {
    const plan = compileOrchestration(config);
    const cats = plan.pendingMessage(m1!);
    expect(plan.pendingMessage(m1!)).toBe(cats);
    expect(Object.isFrozen(cats)).toBe(true);
    const dogs = plan.pendingMessage(m2!);
    expect(dogs).not.toBe(cats);
    expect([cats.key, cats.matches, dogs.key, dogs.matches]).toEqual([m1!.key, [0], m2!.key, [1]]);
    expect(plan.pendingMessage(m1!).matches).toEqual([0]);
  });
});
