import { readFileSync } from 'node:fs';
import { describe, expect, it, vi } from 'vitest';
import { agentdockSample } from '../../test/helpers/agentdock.js';
import { ConditionRegistry } from '../core/conditions.js';
import { InvalidArgumentError } from '../core/errors.js';
import type { OrchestrationEvent } from '../core/events.js';
import type { AgentTemplate, OrchestrationConfig } from '../core/schema.js';
import { TemplateConfigError } from '../core/template-issues.js';
import { parseTemplate } from '../core/validate-template.js';
import { memoryStore } from '../stores/memory.js';
import { createFakeClock } from '../testing/fake-clock.js';
import { createOrchestrationManager } from './orchestration-manager.js';
import { createOrchestrationStateManager } from './state-manager.js';
import { createStepSequencer } from './step-sequencer.js';
import { Turn } from './turn.js';

const reasoner: AgentTemplate = parseTemplate(readFileSync(agentdockSample('cognitive-reasoner'), 'utf8'));
const config = reasoner.orchestration!;
const tools = reasoner.tools;
const user = (content: unknown) => [{ role: 'user', content }];

describe('the cognitive-reasoner walk-through of seed 004', () => {
  it('critique, debate, reflect switches to EvaluationMode within the same turn, history oldest first', async () => {
    const events: OrchestrationEvent[] = [];
    const manager = createOrchestrationManager({ onEvent: (e) => events.push(e) });
    const messages = user('Critique the argument that remote work improves productivity.');

    // 1. Initial state: DefaultMode, nothing used yet; every tool allowed.
    expect((await manager.getActiveStep(config, messages, 's'))?.name).toBe('DefaultMode');
    expect(await manager.getAllowedTools(config, messages, 's', tools)).toEqual(tools);

    // 3-4. critique, then debate: still DefaultMode.
    await manager.processToolUsage(config, messages, 's', 'critique');
    expect(await manager.getState('s')).toMatchObject({ activeStep: 'DefaultMode', recentlyUsedTools: ['critique'] });
    await manager.processToolUsage(config, messages, 's', 'debate');
    expect(await manager.getState('s')).toMatchObject({
      activeStep: 'DefaultMode',
      recentlyUsedTools: ['critique', 'debate'],
    });

    // 5. reflect completes the sequence: EvaluationMode, sequenceIndex reset to 0, in the same turn.
    await manager.processToolUsage(config, messages, 's', 'reflect');
    expect(await manager.getState('s')).toMatchObject({
      activeStep: 'EvaluationMode',
      sequenceIndex: 0,
      recentlyUsedTools: ['critique', 'debate', 'reflect'],
    });
    expect(events.filter((e) => e.type === 'step-changed').at(-1)).toEqual({
      type: 'step-changed',
      sessionId: 's',
      from: 'DefaultMode',
      to: 'EvaluationMode',
    });

    // 6. Next turn: only the tool at sequenceIndex 0 is allowed, then the sequence is enforced.
    expect(await manager.getAllowedTools(config, messages, 's', tools)).toEqual(['critique']);
    await manager.processToolUsage(config, messages, 's', 'critique');
    expect(await manager.getAllowedTools(config, messages, 's', tools)).toEqual(['debate']);
    await manager.processToolUsage(config, messages, 's', 'debate');
    expect(await manager.getAllowedTools(config, messages, 's', tools)).toEqual(['reflect']);
    await manager.processToolUsage(config, messages, 's', 'reflect');
    // Complete: the step's allowed tools that the agent has.
    expect(await manager.getAllowedTools(config, messages, 's', tools)).toEqual(
      ['reflect', 'critique', 'debate', 'search'].sort((a, b) => tools.indexOf(a) - tools.indexOf(b)),
    );
  });

  it('the reversed order does not match (AgentDock matched only reversed, newest-first histories)', async () => {
    const manager = createOrchestrationManager();
    for (const tool of ['reflect', 'debate', 'critique']) await manager.processToolUsage(config, [], 'r', tool);
    expect((await manager.getState('r'))?.activeStep).toBe('DefaultMode');
  });
});

describe('OrchestrationManager', () => {
  it('records every one of 200 concurrent tool uses on one session (AgentDock recorded 1 of 50)', async () => {
    const manager = createOrchestrationManager({ historyLimit: 500 });
    await Promise.all(
      Array.from({ length: 200 }, (_, i) => manager.processToolUsage(config, [], 'hot', i % 2 ? 'think' : 'search')),
    );
    const state = await manager.getState('hot');
    expect(state?.recentlyUsedTools).toHaveLength(200);
  });

  it('accepts AI SDK message shapes: content parts and UI message parts', async () => {
    const c: OrchestrationConfig = {
      steps: [
        { name: 'Plan', conditions: [{ type: 'message_contains', value: 'plan' }] },
        { name: 'Idle', isDefault: true },
      ],
    };
    const manager = createOrchestrationManager();
    const parts = [
      { role: 'user', content: 'old plan message' },
      { role: 'assistant', content: 'ok' },
      {
        role: 'user',
        content: [
          { type: 'image', image: 'x' },
          { type: 'text', text: 'Let us PLAN it' },
        ],
      },
    ];
    expect((await manager.getActiveStep(c, parts, 'a'))?.name).toBe('Plan');
    const ui = [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'hello there' }] }];
    expect((await manager.getActiveStep(c, ui, 'b'))?.name).toBe('Idle');
    // The latest user message is the one that counts.
    expect((await manager.getActiveStep(c, [...parts, { role: 'user', content: 'something else' }], 'c'))?.name).toBe(
      'Idle',
    );
  });

  it('accepts a whole template as the config, and reuses the compiled plan for the same object', async () => {
    const manager = createOrchestrationManager();
    expect(manager.plan(reasoner)).toBe(manager.plan(reasoner));
    expect((await manager.getActiveStep(reasoner, [], 't'))?.name).toBe('DefaultMode');
  });

  it('rejects an invalid config with every issue, and bad arguments with the argument named', async () => {
    const manager = createOrchestrationManager();
    const bad = { steps: [{ name: 'A', conditions: [{ type: 'tool_used' }] }, { name: 'A' }] } as OrchestrationConfig;
    const error = await manager.getActiveStep(bad, [], 's').catch((e: unknown) => e);
    expect(TemplateConfigError.isInstance(error)).toBe(true);
    expect(new Set((error as TemplateConfigError).issues.map((i) => i.code))).toEqual(
      new Set(['missing_value', 'duplicate_step', 'unreachable_step']),
    );
    await expect(manager.getAllowedTools(config, [], '', tools)).rejects.toThrow(/session id is empty/);
    await expect(manager.getAllowedTools(config, [], 's', 'search' as never)).rejects.toThrow(InvalidArgumentError);
    await expect(manager.processToolUsage(config, [], 's', '')).rejects.toThrow(/toolName/);
    await expect(manager.getActiveStep(config, 'hi' as never, 's')).rejects.toThrow(/messages/);
  });

  it('explains every tool without changing the stored state', async () => {
    const manager = createOrchestrationManager();
    for (const tool of ['critique', 'debate', 'reflect']) await manager.processToolUsage(config, [], 'e', tool);
    const before = await manager.getStateManager().getState('e');
    const explanation = await manager.explain(config, [], 'e', [...tools, 'email']);
    expect(explanation.activeStep).toBe('EvaluationMode');
    expect(explanation.allowedTools).toEqual(['critique']);
    const byTool = Object.fromEntries(explanation.tools.map((t) => [t.tool, t]));
    expect(byTool.critique?.allowed).toBe(true);
    expect(byTool.debate?.reason?.code).toBe('sequence');
    expect(byTool.think?.reason?.code).toBe('not-allowed');
    expect(byTool.email?.reason?.code).toBe('not-allowed');
    expect(await manager.getStateManager().getState('e')).toBe(before);
    expect(await manager.getState('never-seen')).toBeNull();
    await manager.explain(config, [], 'never-seen', tools);
    expect(await manager.getState('never-seen')).toBeNull();
  });

  it('explains a spent token budget: nothing allowed, each tool refused for the budget after its own reasons', async () => {
    const budgeted: OrchestrationConfig = {
      budget: { totalTokens: 100 },
      steps: [{ name: 'Research', isDefault: true, availableTools: { allowed: ['search', 'think'] } }],
    };
    const manager = createOrchestrationManager();
    expect((await manager.explain(budgeted, [], 'b', ['search', 'think', 'email'])).allowedTools).toEqual([
      'search',
      'think',
    ]);
    await manager.addTokenUsage('b', { promptTokens: 90, completionTokens: 20 });
    const explanation = await manager.explain(budgeted, [], 'b', ['search', 'think', 'email']);
    expect(explanation.allowedTools).toEqual([]);
    expect(explanation.budget).toEqual({ scope: 'session', step: undefined, limit: 100, used: 110 });
    const byTool = Object.fromEntries(explanation.tools.map((t) => [t.tool, t]));
    expect(byTool.search).toMatchObject({ allowed: false, reason: { code: 'budget', limit: 100, used: 110 } });
    expect(byTool.email?.reason?.code).toBe('not-allowed');
  });

  it('emits tool-rejected when a call is not allowed', async () => {
    const events: OrchestrationEvent[] = [];
    const manager = createOrchestrationManager({ onEvent: (e) => events.push(e) });
    for (const tool of ['critique', 'debate', 'reflect']) await manager.processToolUsage(config, [], 'x', tool);
    const decision = await manager.requestTool(config, [], 'x', {
      tool: 'search',
      toolCallId: 'c1',
      agentTools: tools,
    });
    expect(decision.allowed).toBe(false);
    expect(events.at(-1)).toMatchObject({ type: 'tool-rejected', tool: 'search', allowedTools: ['critique'] });
  });

  it('a call made from inside another (a condition, a listener) leaves both sessions right', async () => {
    // The synchronous path reuses its working objects between calls; a call that re-enters the
    // manager while one is under way must neither take them over nor lose its own answer.
    const registry = new ConditionRegistry();
    let manager: ReturnType<typeof createOrchestrationManager> | undefined;
    const inner: Promise<unknown>[] = [];
    registry.register({
      type: 'records_elsewhere',
      evaluate: () => {
        inner.push(manager!.processToolUsage(other, [], 'inner', 'y'));
        return false;
      },
    });
    const outer = {
      steps: [
        { name: 'Never', conditions: [{ type: 'records_elsewhere' }], availableTools: { allowed: ['b'] } },
        { name: 'Work', isDefault: true, sequence: ['a', 'b'], requireSequence: true },
      ],
    } as OrchestrationConfig;
    const other = { steps: [{ name: 'Y', isDefault: true, sequence: ['y'] }] } as OrchestrationConfig;
    manager = createOrchestrationManager({
      conditions: registry,
      onEvent: (event) => {
        if (event.sessionId === 'outer' && event.type === 'sequence-advanced') {
          inner.push(manager!.getAllowedTools(other, [], 'listener', ['y', 'z']));
        }
      },
    });
    expect(await manager.getAllowedTools(outer, [], 'outer', ['a', 'b'])).toEqual(['a']);
    await manager.processToolUsage(outer, [], 'outer', 'a');
    expect(await manager.getAllowedTools(outer, [], 'outer', ['a', 'b'])).toEqual(['b']);
    expect(await Promise.all(inner)).toContainEqual(['y']);
    expect(await manager.getState('outer')).toMatchObject({
      activeStep: 'Work',
      recentlyUsedTools: ['a'],
      sequenceIndex: 1,
    });
    const recorded = await manager.getState('inner');
    expect(recorded?.recentlyUsedTools.length).toBe(inner.length - 1);
    expect(new Set(recorded?.recentlyUsedTools)).toEqual(new Set(['y']));
    expect(await manager.getState('listener')).toMatchObject({ activeStep: 'Y', recentlyUsedTools: [] });
  });

  it('reports an exception thrown by an event listener instead of losing it or breaking the call', async () => {
    const onError = vi.fn();
    const manager = createOrchestrationManager({
      onEvent: () => {
        throw new Error('listener bug');
      },
      onError,
    });
    await manager.getActiveStep(config, [], 'l');
    expect(onError).toHaveBeenCalledWith(
      expect.objectContaining({ message: 'listener bug' }),
      expect.objectContaining({ type: 'step-changed' }),
    );
  });

  it('sums token usage from AI SDK and seed field names', async () => {
    const manager = createOrchestrationManager();
    await manager.addTokenUsage('u', { inputTokens: 100, outputTokens: 10, totalTokens: 110 });
    const total = await manager.addTokenUsage('u', { promptTokens: 5, completionTokens: 1 });
    expect(total).toEqual({ promptTokens: 105, completionTokens: 11, totalTokens: 116 });
    await expect(manager.addTokenUsage('u', { inputTokens: -1 })).rejects.toThrow(/usage.inputTokens/);
  });

  it('updateState validates the patch; resetState keeps token usage; removeSession deletes', async () => {
    const manager = createOrchestrationManager();
    await manager.updateState('p', { activeStep: 'EvaluationMode', sequenceIndex: 2 });
    expect(await manager.getAllowedTools(config, [], 'p', tools)).toEqual(['reflect']);
    await expect(manager.updateState('p', { version: 3 } as never)).rejects.toThrow(/"version" cannot be changed/);
    await expect(manager.updateState('p', { sequenceIndex: -1 })).rejects.toThrow(/sequenceIndex/);
    await manager.addTokenUsage('p', { inputTokens: 3, outputTokens: 4 });
    await manager.resetState('p');
    expect(await manager.getState('p')).toEqual({
      sessionId: 'p',
      recentlyUsedTools: [],
      sequenceIndex: 0,
      cumulativeTokenUsage: { promptTokens: 3, completionTokens: 4, totalTokens: 7 },
    });
    await manager.removeSession('p');
    expect(await manager.getState('p')).toBeNull();
    expect((await manager.ensureStateExists('p')).sessionId).toBe('p');
  });

  it('uses the injected clock for timestamps and the sliding TTL', async () => {
    const clock = createFakeClock(1_000);
    const manager = createOrchestrationManager({ clock: clock.now, ttl: 500, store: memoryStore({ now: clock.now }) });
    await manager.processToolUsage(config, [], 'c', 'search');
    clock.advance(100);
    await manager.processToolUsage(config, [], 'c', 'think');
    const state = await manager.getStateManager().getState('c');
    expect(state).toMatchObject({ createdAt: 1_000, lastAccessed: 1_100, ttl: 500 });
    clock.advance(501);
    expect(await manager.getState('c')).toBeNull();
  });

  it('refuses to store the times of a clock that returns no whole milliseconds, on its own store too', async () => {
    // The manager's own store skips re-checking the transition's states only on Date.now: times
    // from an injected clock are checked with every write, as SQLite or Redis would check them.
    const manager = createOrchestrationManager({ clock: () => 1_000.5 });
    await expect(manager.processToolUsage(config, [], 'f', 'search')).rejects.toThrow(/state\.createdAt/);
    await expect(manager.getAllowedTools(config, [], 'f', tools)).rejects.toThrow(/state\.createdAt/);
    expect(await manager.getState('f')).toBeNull();
    const fine = createOrchestrationManager();
    await fine.processToolUsage(config, [], 'f', 'search');
    expect(await fine.getState('f')).toMatchObject({ recentlyUsedTools: ['search'] });
  });

  it('opens a store from a URL', async () => {
    const manager = createOrchestrationManager({ store: 'memory:' });
    await manager.processToolUsage(config, [], 'm', 'search');
    expect((await manager.getStateManager().store()).name).toBe('memory');
    expect(() => createOrchestrationManager({ store: 'ftp://nope' })).not.toThrow();
    await expect(createOrchestrationManager({ store: 'ftp://nope' }).getState('x')).rejects.toThrow(/not a store URL/);
  });
});

describe('StepSequencer and OrchestrationStateManager (seed API)', () => {
  const step = config.steps.find((s) => s.name === 'EvaluationMode')!;

  it('tracks, advances and filters by a sequence', async () => {
    const states = createOrchestrationStateManager();
    const sequencer = createStepSequencer(states);
    expect(await sequencer.hasActiveSequence(step, 'q')).toBe(true);
    expect(await sequencer.getCurrentSequenceTool(step, 'q')).toBe('critique');
    expect(await sequencer.filterToolsBySequence(step, 'q', tools)).toEqual(['critique']);
    expect(await sequencer.processTool(step, 'q', 'debate')).toBe(false);
    expect(await sequencer.processTool(step, 'q', 'critique')).toBe(true);
    expect(await sequencer.getCurrentSequenceTool(step, 'q')).toBe('debate');
    expect(await sequencer.advanceSequence(step, 'q')).toBe(true);
    expect(await sequencer.advanceSequence(step, 'q')).toBe(true);
    // Complete: it never moves past the end, and says so.
    expect(await sequencer.advanceSequence(step, 'q')).toBe(false);
    expect((await states.getState('q'))?.sequenceIndex).toBe(3);
    expect(await sequencer.hasActiveSequence(step, 'q')).toBe(false);
    expect(await sequencer.getCurrentSequenceTool(step, 'q')).toBeNull();
    expect(await sequencer.filterToolsBySequence(step, 'q', tools)).toEqual(tools);
    expect((await states.getState('q'))?.recentlyUsedTools).toEqual(['debate', 'critique']);
  });

  it('resolves false or null on a missing session without creating it, as AgentDock does', async () => {
    const states = createOrchestrationStateManager();
    const sequencer = createStepSequencer(states);
    expect(await sequencer.advanceSequence(step, 'missing')).toBe(false);
    expect(await sequencer.advanceSequence({ name: 'NoSequence' }, 'missing')).toBe(false);
    expect(await states.addUsedTool('missing', 'think')).toBeNull();
    expect(await states.advanceSequence('missing')).toBeNull();
    expect(await states.getState('missing')).toBeNull();
  });

  it('processTool reports a violation and applies out_of_sequence through the transition', async () => {
    const states = createOrchestrationStateManager();
    const sequencer = createStepSequencer(states);
    const strict = { name: 'Strict', sequence: ['a', 'b', 'c'], resetSequenceOn: ['out_of_sequence'] };
    expect(await sequencer.processTool(strict, 'v', 'a')).toBe(true);
    expect(await sequencer.processTool(strict, 'v', 'c')).toBe(false);
    // The out-of-order tool restarted the sequence, as the manager's own recording does.
    expect((await states.getState('v'))?.sequenceIndex).toBe(0);
    expect((await states.getState('v'))?.recentlyUsedTools).toEqual(['a', 'c']);
  });

  it('returns alternatives of a group position and filters to those the agent has', async () => {
    const sequencer = createStepSequencer(createOrchestrationStateManager());
    const group = { name: 'G', sequence: [['think', 'reflect', 'nope'], 'search'] };
    expect(await sequencer.getCurrentSequenceTool(group, 'g')).toEqual(['think', 'reflect', 'nope']);
    expect(await sequencer.filterToolsBySequence(group, 'g', tools)).toEqual(['think', 'reflect']);
  });

  it('state manager: set step, add tools, advance, AI state', async () => {
    const states = createOrchestrationStateManager({ historyLimit: 2 });
    await states.setActiveStep('z', 'A');
    await states.advanceSequence('z');
    expect((await states.getState('z'))?.sequenceIndex).toBe(1);
    await states.setActiveStep('z', 'B');
    expect((await states.getState('z'))?.sequenceIndex).toBe(0);
    for (const t of ['a', 'b', 'c']) await states.addUsedTool('z', t);
    expect(await states.toAIOrchestrationState('z')).toEqual({
      sessionId: 'z',
      activeStep: 'B',
      recentlyUsedTools: ['b', 'c'],
      sequenceIndex: 0,
      cumulativeTokenUsage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 },
    });
    await states.cleanupSession('z');
    expect(await states.toAIOrchestrationState('z')).toBeNull();
    expect(() => createOrchestrationStateManager({ historyLimit: 0 })).toThrow(/historyLimit/);
  });
});

describe('every entry point feeds the same inputs', () => {
  const research: OrchestrationConfig = {
    steps: [
      {
        name: 'Research',
        isDefault: true,
        sequence: ['search', 'summarize'],
        budget: { totalTokens: 100 },
      },
    ],
  };
  const agentTools = ['search', 'summarize'];

  it('requestTool on a new session handles the message first: an out-of-sequence call is refused', async () => {
    const manager = createOrchestrationManager();
    const messages = user('research cats');
    const decision = await manager.requestTool(research, messages, 'fresh', {
      tool: 'summarize',
      toolCallId: 'c1',
      agentTools,
    });
    expect(decision).toMatchObject({ allowed: false, reason: { code: 'sequence', expected: ['search'] } });
    expect(
      await manager.requestTool(research, messages, 'fresh', { tool: 'search', toolCallId: 'c2', agentTools }),
    ).toMatchObject({ allowed: true });
  });

  it('addTokenUsage(sessionId, usage) counts against the active step: its budget is spent at once', async () => {
    const manager = createOrchestrationManager();
    const messages = user('research cats');
    expect(await manager.getAllowedTools(research, messages, 's', agentTools)).toEqual(['search']);
    await manager.addTokenUsage('s', { inputTokens: 100, outputTokens: 50 });
    expect((await manager.getStateManager().getState('s'))?.stepTokens).toEqual({ Research: 150 });
    expect(await manager.getAllowedTools(research, messages, 's', agentTools)).toEqual([]);
    const denied = await manager.requestTool(research, messages, 's', { tool: 'search', toolCallId: 'c', agentTools });
    expect(denied).toMatchObject({ allowed: false, reason: { code: 'budget', scope: 'step', used: 150 } });
    const view = await manager.explain(research, messages, 's', agentTools);
    expect(view).toMatchObject({ allowedTools: [], budget: { scope: 'step', used: 150, limit: 100 } });
  });

  it('explain() answers as a decision does while another turn runs a call', async () => {
    const manager = createOrchestrationManager({ waitMs: 50 });
    const messages = user('research cats');
    const config: OrchestrationConfig = { steps: [{ name: 'R', isDefault: true, sequence: ['search', 'summarize'] }] };
    await manager.requestTool(config, messages, 'r', { tool: 'search', toolCallId: 'running', agentTools });
    const view = await manager.explain(config, messages, 'r', agentTools);
    // The call waits for the running one; it never ends, so the wait's bound ends it.
    const decision = await manager.requestTool(config, messages, 'r', { tool: 'search', toolCallId: 'x', agentTools });
    expect(decision).toMatchObject({ allowed: false, reason: { code: 'pending', cause: 'wait-bound' } });
    expect(view.tools.find((t) => t.tool === 'search')).toMatchObject({ allowed: false, reason: { code: 'pending' } });
    // What a model step is offered: the session as it stands without the running call.
    expect(view.allowedTools).toEqual(['search']);
    expect(view.running).toEqual(['search']);
  });

  it('requestTool waits for a running call its answer depends on, then decides', async () => {
    const manager = createOrchestrationManager();
    const messages = user('research cats');
    const config: OrchestrationConfig = { steps: [{ name: 'R', isDefault: true, sequence: ['search', 'summarize'] }] };
    await manager.requestTool(config, messages, 'w', { tool: 'search', toolCallId: 'first', agentTools });
    const waiting = manager.requestTool(config, messages, 'w', { tool: 'summarize', toolCallId: 'next', agentTools });
    setTimeout(() => void manager.completeTool(config, messages, 'w', 'first'), 20);
    const started = Date.now();
    expect(await waiting).toMatchObject({ allowed: true });
    expect(Date.now() - started).toBeGreaterThanOrEqual(15);
    await manager.completeTool(config, messages, 'w', 'next');
    expect((await manager.getState('w'))?.recentlyUsedTools).toEqual(['search', 'summarize']);
  });

  it('completeTool(…, { result }) sets facts; a delete racing the listing it depends on waits for it', async () => {
    const manager = createOrchestrationManager();
    const config: OrchestrationConfig = {
      facts: [{ name: 'listed', tools: ['list_items'], value: 'result.ids', keep: 'union' }],
      rules: [
        { tools: ['delete_item'], when: '!(args.id in state.facts.listed)', effect: 'deny', reason: 'Listed only' },
      ],
      steps: [],
    };
    const tools = ['list_items', 'delete_item'];
    const messages = user('clean up');
    await manager.requestTool(config, messages, 'f', { tool: 'list_items', toolCallId: 'l1', agentTools: tools });
    // Two deletes sent while the listing runs: both wait for it, then are judged on what it returned.
    const kept = manager.requestTool(config, messages, 'f', {
      tool: 'delete_item',
      toolCallId: 'd1',
      agentTools: tools,
      args: { id: 'a' },
    });
    const gone = manager.requestTool(config, messages, 'f', {
      tool: 'delete_item',
      toolCallId: 'd2',
      agentTools: tools,
      args: { id: 'z' },
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    await manager.completeTool(config, messages, 'f', 'l1', { result: { ids: ['a', 'b'] } });
    expect(await kept).toMatchObject({ allowed: true });
    expect(await gone).toMatchObject({ allowed: false, reason: { code: 'rule', message: 'Listed only' } });
    expect((await manager.getStateManager().getState('f'))?.facts).toEqual({ listed: { value: ['a', 'b'] } });
  });

  it('a turn of another agent is refused with a SessionRefusedError, and nothing is written', async () => {
    const manager = createOrchestrationManager();
    const turn = new Turn({ manager, config: research, sessionId: 'owned', agentTools, agentId: 'a' });
    await turn.begin();
    const before = await manager.getStateManager().getState('owned');
    const other = new Turn({ manager, config: research, sessionId: 'owned', agentTools, agentId: 'b' });
    await expect(other.stepStarted()).rejects.toMatchObject({ code: 'session-of-another-agent' });
    expect(await manager.getStateManager().getState('owned')).toEqual(before);
  });
});
