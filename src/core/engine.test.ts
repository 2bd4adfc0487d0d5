import { describe, expect, it } from 'vitest';
import { compileOrchestration } from './compile.js';
import { allowedTools, handleMessage, recordToolUse, selectStep } from './engine.js';
import type { OrchestrationEvent } from './events.js';
import { latestUserMessage } from './messages.js';
import type { OrchestrationConfig } from './schema.js';
import { createState, isSameNewSession, type OrchestrationState } from './state.js';
import { addTokenUsage, normalizeUsage } from './token-usage.js';
import { explain, transition } from './transition.js';

const msg = (text: string, id?: string) => latestUserMessage([{ role: 'user', content: text, ...(id ? { id } : {}) }]);
const fresh = (patch: Partial<OrchestrationState> = {}): OrchestrationState => ({ ...createState('s', 0), ...patch });
const types = (events: readonly OrchestrationEvent[]) => events.map((e) => e.type);

describe('step selection (SPEC section 3)', () => {
  const config: OrchestrationConfig = {
    steps: [
      { name: 'NoConditions' },
      { name: 'Research', conditions: [{ type: 'message_contains', value: 'research' }] },
      { name: 'AlsoResearch', conditions: [{ type: 'message_contains', value: 'research' }] },
      { name: 'AfterSearch', conditions: [{ type: 'tool_used', value: 'search' }] },
      { name: 'Idle', isDefault: true },
    ],
  };
  const plan = compileOrchestration(config);

  it('1. chooses the first step, in configuration order, whose conditions all hold, skipping steps without conditions', () => {
    const r = selectStep(plan, fresh(), msg('research this'));
    expect(r.state.activeStep).toBe('Research');
    expect(r.events).toEqual([{ type: 'step-changed', sessionId: 's', from: undefined, to: 'Research' }]);
  });

  it('2. keeps the current active step when no step is chosen and it still exists', () => {
    const r = selectStep(plan, fresh({ activeStep: 'AfterSearch' }), msg('hello'));
    expect(r.state.activeStep).toBe('AfterSearch');
    expect(r.events).toEqual([]);
    const manual = selectStep(plan, fresh({ activeStep: 'NoConditions' }), msg('hello'));
    expect(manual.state.activeStep).toBe('NoConditions');
  });

  it('3. falls back to the default step (isDefault, or defaultStep) when the current step is gone', () => {
    expect(selectStep(plan, fresh(), msg('hello')).state.activeStep).toBe('Idle');
    expect(selectStep(plan, fresh({ activeStep: 'Deleted' }), msg('hello')).state.activeStep).toBe('Idle');
    const byName = compileOrchestration({ defaultStep: 'B', steps: [{ name: 'A' }, { name: 'B' }] });
    expect(selectStep(byName, fresh(), undefined).state.activeStep).toBe('B');
  });

  it('4. has no active step when there is no default either', () => {
    const none = compileOrchestration({ steps: [{ name: 'A', conditions: [{ type: 'tool_used', value: 'x' }] }] });
    const r = selectStep(none, fresh({ activeStep: 'Gone' }), undefined);
    expect(r.state.activeStep).toBeUndefined();
    expect(r.events).toEqual([{ type: 'step-changed', sessionId: 's', from: 'Gone', to: undefined }]);
  });

  it('changing step resets sequenceIndex to 0; re-choosing the active step changes nothing', () => {
    const changed = selectStep(plan, fresh({ activeStep: 'Idle', sequenceIndex: 2 }), msg('research'));
    expect(changed.state).toMatchObject({ activeStep: 'Research', sequenceIndex: 0 });
    const same = fresh({ activeStep: 'Research', sequenceIndex: 2 });
    const again = selectStep(plan, same, msg('research'));
    expect(again.state).toBe(same);
    expect(again.events).toEqual([]);
  });
});

describe('allowed tools (SPEC section 4)', () => {
  const agentTools = ['search', 'think', 'cognitive_think', 'cognitive_reflect', 'mcp/github.issues', 'delete_all'];
  const plan = compileOrchestration({
    steps: [
      { name: 'Open' },
      { name: 'Globs', availableTools: { allowed: ['*cognitive*', 'search', 'mcp/*'], denied: ['*reflect'] } },
      { name: 'DenyOnly', availableTools: { denied: ['delete_*'] } },
      { name: 'EmptyAllowed', availableTools: { allowed: [] } },
      {
        name: 'Seq',
        availableTools: { allowed: ['search', 'think', 'cognitive_*'] },
        sequence: ['search', ['think', 'cognitive_think'], 'cognitive_reflect'],
      },
      { name: 'Missing', sequence: ['nowhere'], availableTools: { allowed: ['nowhere', 'search'] } },
    ],
  });
  const allowed = (patch: Partial<OrchestrationState>) => allowedTools(plan, fresh(patch), agentTools);

  it('1. allows every agent tool when no step is active', () => {
    expect(allowed({}).tools).toEqual(agentTools);
  });

  it('2. applies allowed and denied globs, keeping the order of the agent tools', () => {
    expect(allowed({ activeStep: 'Open' }).tools).toEqual(agentTools);
    expect(allowed({ activeStep: 'Globs' }).tools).toEqual(['search', 'cognitive_think', 'mcp/github.issues']);
    expect(allowed({ activeStep: 'DenyOnly' }).tools).toEqual(agentTools.filter((t) => t !== 'delete_all'));
    expect(allowed({ activeStep: 'EmptyAllowed' }).tools).toEqual(agentTools);
  });

  it('3. keeps only the current sequence position while the sequence runs', () => {
    expect(allowed({ activeStep: 'Seq', sequenceIndex: 0 }).tools).toEqual(['search']);
    expect(allowed({ activeStep: 'Seq', sequenceIndex: 1 }).tools).toEqual(['think', 'cognitive_think']);
    expect(allowed({ activeStep: 'Seq', sequenceIndex: 2 }).tools).toEqual(['cognitive_reflect']);
  });

  it('3. is empty, with a sequence-blocked event, when the agent lacks the expected tool', () => {
    const r = allowed({ activeStep: 'Missing' });
    expect(r.tools).toEqual([]);
    expect(r.events).toEqual([
      { type: 'sequence-blocked', sessionId: 's', step: 'Missing', expected: ['nowhere'], index: 0 },
    ]);
  });

  it('4. allows the tools of rule 2 once the sequence is complete', () => {
    expect(allowed({ activeStep: 'Seq', sequenceIndex: 3 }).tools).toEqual([
      'search',
      'think',
      'cognitive_think',
      'cognitive_reflect',
    ]);
  });

  it('never trusts a cached answer for a tool list that was changed in place', () => {
    const tools = ['search', 'think'];
    expect(allowedTools(plan, fresh({ activeStep: 'Globs' }), tools).tools).toEqual(['search']);
    tools.push('cognitive_think');
    expect(allowedTools(plan, fresh({ activeStep: 'Globs' }), tools).tools).toEqual(['search', 'cognitive_think']);
  });
});

describe('recording a tool use (SPEC section 5)', () => {
  const config: OrchestrationConfig = {
    historyLimit: 4,
    steps: [
      {
        name: 'Eval',
        sequence: ['critique', 'debate', 'reflect'],
        conditions: [{ type: 'message_contains', value: 'critique' }],
      },
      { name: 'Default', isDefault: true },
    ],
  };
  const plan = compileOrchestration(config);

  it('appends oldest first, keeps repeats, and trims from the front to historyLimit', () => {
    let state = fresh();
    for (const tool of ['a', 'b', 'a', 'c', 'd', 'a']) state = recordToolUse(plan, state, { tool }).state;
    expect(state.recentlyUsedTools).toEqual(['a', 'c', 'd', 'a']);
    const unlimited = compileOrchestration({ steps: [] });
    let s2 = fresh();
    for (const tool of ['x', 'y', 'z']) s2 = recordToolUse(unlimited, s2, { tool, historyLimit: 2 }).state;
    expect(s2.recentlyUsedTools).toEqual(['y', 'z']);
  });

  it('advances the sequence when the tool fills the current position, and reports completion', () => {
    let state = fresh({ activeStep: 'Eval' });
    const events: OrchestrationEvent[] = [];
    for (const tool of ['critique', 'debate', 'reflect']) {
      const r = recordToolUse(plan, state, { tool, message: msg('critique this') });
      state = r.state;
      events.push(...r.events);
    }
    expect(state.sequenceIndex).toBe(3);
    expect(types(events)).toEqual([
      'sequence-advanced',
      'sequence-advanced',
      'sequence-advanced',
      'sequence-completed',
    ]);
    expect(events[2]).toMatchObject({ type: 'sequence-advanced', tool: 'reflect', index: 3, length: 3 });
  });

  it('stays and reports a violation when the tool is out of order', () => {
    const r = recordToolUse(plan, fresh({ activeStep: 'Eval', sequenceIndex: 1 }), { tool: 'reflect' });
    expect(r.state.sequenceIndex).toBe(1);
    expect(r.state.recentlyUsedTools).toEqual(['reflect']);
    expect(r.events).toEqual([
      { type: 'sequence-violation', sessionId: 's', step: 'Eval', tool: 'reflect', expected: ['debate'], index: 1 },
    ]);
  });

  it('does not report violations in a step without a sequence, or after it completed', () => {
    expect(recordToolUse(plan, fresh({ activeStep: 'Default' }), { tool: 'x' }).events).toEqual([]);
    expect(recordToolUse(plan, fresh({ activeStep: 'Eval', sequenceIndex: 3 }), { tool: 'x' }).events).toEqual([]);
  });

  it('records a tool call id once: a replayed call changes nothing', () => {
    const used = (state: OrchestrationState, tool: string, toolCallId: string) =>
      transition(plan, state, { type: 'tool-used', tool, toolCallId }, { now: 0 });
    const first = used(fresh({ activeStep: 'Eval' }), 'critique', 'c1');
    expect(first.state.sequenceIndex).toBe(1);
    const replay = used(first.state, 'critique', 'c1');
    expect(replay.state).toBe(first.state);
    expect(replay.events).toEqual([]);
    const other = used(first.state, 'debate', 'c2');
    expect(other.state).toMatchObject({ sequenceIndex: 2, toolCallIds: ['c1', 'c2'] });
  });

  it('runs step selection again after recording, so a completed sequence_match switches step in the same turn', () => {
    const p = compileOrchestration({
      steps: [
        { name: 'Eval', sequence: ['critique', 'debate', 'reflect'], conditions: [{ type: 'sequence_match' }] },
        { name: 'Default', isDefault: true },
      ],
    });
    let state = fresh({ activeStep: 'Default' });
    state = recordToolUse(p, state, { tool: 'critique' }).state;
    state = recordToolUse(p, state, { tool: 'debate' }).state;
    const last = recordToolUse(p, state, { tool: 'reflect' });
    expect(last.state).toMatchObject({ activeStep: 'Eval', sequenceIndex: 0 });
    expect(last.events).toEqual([{ type: 'step-changed', sessionId: 's', from: 'Default', to: 'Eval' }]);
  });
});

describe('resetSequenceOn (SPEC section 5)', () => {
  const step = (resetSequenceOn: NonNullable<OrchestrationConfig['steps'][number]['resetSequenceOn']>) =>
    compileOrchestration({
      steps: [
        {
          name: 'S',
          isDefault: true,
          sequence: ['a', 'b', 'c'],
          conditions: [{ type: 'message_contains', value: 'again' }],
          resetSequenceOn,
        },
      ],
    });
  const midway = fresh({ activeStep: 'S', sequenceIndex: 2, lastMessageKey: 'old' });

  it('"new_message" resets on every new user message, once per message', () => {
    const plan = step(['new_message']);
    const first = handleMessage(plan, midway, msg('hello'));
    expect(first.state.sequenceIndex).toBe(0);
    expect(first.events).toEqual([
      { type: 'sequence-reset', sessionId: 's', step: 'S', from: 2, reason: 'new_message' },
    ]);
    const advanced = { ...first.state, sequenceIndex: 1 };
    // The same message again (before the next model step) is not new.
    const again = handleMessage(plan, advanced, msg('hello'));
    expect(again.state.sequenceIndex).toBe(1);
  });

  it('a message with an id is new only when the id changes', () => {
    const plan = step(['new_message']);
    const a = handleMessage(plan, midway, msg('same text', 'm1'));
    const b = handleMessage(plan, { ...a.state, sequenceIndex: 1 }, msg('same text', 'm2'));
    expect(b.state.sequenceIndex).toBe(0);
  });

  it('"out_of_sequence" resets when a tool is used out of order', () => {
    const plan = step(['out_of_sequence']);
    const r = recordToolUse(plan, midway, { tool: 'a' });
    expect(r.state.sequenceIndex).toBe(0);
    expect(types(r.events)).toEqual(['sequence-violation', 'sequence-reset']);
  });

  it('a bare message condition type resets when a new message satisfies the step own condition', () => {
    const plan = step(['message_contains']);
    expect(handleMessage(plan, midway, msg('nothing to see')).state.sequenceIndex).toBe(2);
    expect(handleMessage(plan, midway, msg('do it AGAIN')).state.sequenceIndex).toBe(0);
  });

  it('a condition object resets when it holds for a new message', () => {
    const plan = step([{ type: 'message_regex', value: '^start over' }]);
    expect(handleMessage(plan, midway, msg('please start over')).state.sequenceIndex).toBe(2);
    const r = handleMessage(plan, midway, msg('Start over please'));
    expect(r.state.sequenceIndex).toBe(0);
    expect(r.events[0]).toMatchObject({ type: 'sequence-reset', reason: 'message_condition' });
  });

  it('without reset rules a new message keeps the position', () => {
    const plan = step([]);
    expect(handleMessage(plan, midway, msg('hello')).state.sequenceIndex).toBe(2);
  });
});

describe('explain and authorize', () => {
  const plan = compileOrchestration({
    steps: [
      {
        name: 'Research',
        isDefault: true,
        availableTools: { allowed: ['search', 'think', 'reflect', 'pubmed'], denied: ['delete_*'] },
        sequence: ['search', 'think'],
      },
    ],
  });
  const tools = ['search', 'think', 'reflect', 'delete_db', 'email'];
  const state = fresh({ activeStep: 'Research' });

  it('says for every tool whether it is allowed and why not', () => {
    const e = explain(plan, state, tools, { now: 0 });
    expect(e.activeStep).toBe('Research');
    expect(e.allowedTools).toEqual(['search']);
    expect(e.sequence).toMatchObject({ index: 0, length: 2, expected: ['search'], completed: false, blocked: false });
    const byTool = Object.fromEntries(e.tools.map((t) => [t.tool, t]));
    expect(byTool.search).toEqual({ tool: 'search', allowed: true, allowedBy: 'search' });
    expect(byTool.think?.reason).toMatchObject({ code: 'sequence', expected: ['search'] });
    expect(byTool.delete_db?.reason).toMatchObject({ code: 'denied', pattern: 'delete_*' });
    expect(byTool.email?.reason).toMatchObject({ code: 'not-allowed' });
    expect(byTool.pubmed?.reason).toMatchObject({ code: 'no-such-tool' });
  });

  it('rejects a call with the reason, the allowed tools and a tool-rejected event', () => {
    const request = (tool: string, toolCallId: string) =>
      transition(plan, state, { type: 'tool-requested', tool, toolCallId, agentTools: tools }, { now: 0 });
    expect(request('search', 'a').decision).toMatchObject({ allowed: true });
    const denied = request('reflect', 'b');
    expect(denied.decision).toMatchObject({ allowed: false, allowedTools: ['search'], reason: { code: 'sequence' } });
    expect(denied.events).toEqual([
      expect.objectContaining({ type: 'tool-rejected', tool: 'reflect', step: 'Research', toolCallId: 'b' }),
    ]);
    expect(request('ghost', 'c').decision).toMatchObject({ allowed: false, reason: { code: 'no-such-tool' } });
  });
});

describe('token usage (SPEC section 6)', () => {
  it('maps AI SDK names and sums', () => {
    expect(normalizeUsage({ inputTokens: 10, outputTokens: 5 })).toEqual({
      promptTokens: 10,
      completionTokens: 5,
      totalTokens: 15,
    });
    const s = addTokenUsage(
      addTokenUsage(fresh(), normalizeUsage({ promptTokens: 1, completionTokens: 2, totalTokens: 3 })),
      {
        promptTokens: 10,
        completionTokens: 20,
        totalTokens: 30,
      },
    );
    expect(s.cumulativeTokenUsage).toEqual({ promptTokens: 11, completionTokens: 22, totalTokens: 33 });
  });
});

describe('isSameNewSession', () => {
  it('holds for two sessions nothing was written to, whatever their times', () => {
    expect(isSameNewSession(createState('s', 1_000), createState('s', 9_000))).toBe(true);
  });

  it('fails for a session with anything written, another session or another TTL', () => {
    const fresh = createState('s', 1_000);
    expect(isSameNewSession(fresh, { ...createState('s', 2_000), version: 1 })).toBe(false);
    expect(isSameNewSession(fresh, { ...createState('s', 2_000), recentlyUsedTools: ['a'] })).toBe(false);
    expect(isSameNewSession(fresh, { ...createState('s', 2_000), activeStep: 'Work' })).toBe(false);
    expect(isSameNewSession(fresh, createState('t', 2_000))).toBe(false);
    expect(isSameNewSession(fresh, createState('s', 2_000, 60_000))).toBe(false);
    // A field a new state never has (an approval asked, say) is something written.
    const asked = { ...createState('s', 2_000), approvals: [] };
    expect(isSameNewSession(fresh, asked)).toBe(false);
    expect(isSameNewSession(asked, fresh)).toBe(false);
  });
});
