import { describe, expect, it } from 'vitest';
import { compileOrchestration } from './compile.js';
import { ConditionRegistry, registerConditionType } from './conditions.js';
import { chooseStep } from './engine.js';
import { latestUserMessage } from './messages.js';
import type { OrchestrationConfig, StepCondition } from './schema.js';
import { createState, type OrchestrationState } from './state.js';

/** The step chosen for a config with one conditional step `T` and a default `D`. */
function holds(
  condition: StepCondition,
  history: string[],
  text?: string,
  sequence?: OrchestrationConfig['steps'][number]['sequence'],
  registry?: ConditionRegistry,
): boolean {
  const config: OrchestrationConfig = {
    steps: [
      { name: 'T', conditions: [condition], ...(sequence ? { sequence } : {}) },
      { name: 'D', isDefault: true },
    ],
  };
  const plan = compileOrchestration(config, registry ? { conditions: registry } : {});
  const state: OrchestrationState = { ...createState('s', 0), recentlyUsedTools: history };
  const message = text === undefined ? undefined : latestUserMessage([{ role: 'user', content: text }]);
  return chooseStep(plan, state, message)?.name === 'T';
}

describe('conditions (SPEC section 2)', () => {
  it('tool_used holds when the tool occurs anywhere in the history', () => {
    const c = { type: 'tool_used', value: 'search' };
    expect(holds(c, [])).toBe(false);
    expect(holds(c, ['search', 'think', 'reflect'])).toBe(true);
    expect(holds(c, ['think', 'search'])).toBe(true);
    expect(holds(c, ['searching'])).toBe(false);
  });

  it('sequence_match compares the last n tools, oldest first, with the step sequence', () => {
    const c = { type: 'sequence_match' };
    const seq = ['critique', 'debate', 'reflect'];
    expect(holds(c, ['critique', 'debate', 'reflect'], undefined, seq)).toBe(true);
    expect(holds(c, ['think', 'critique', 'debate', 'reflect'], undefined, seq)).toBe(true);
    // AgentDock's newest-first history made only the reversed order match; ours must not.
    expect(holds(c, ['reflect', 'debate', 'critique'], undefined, seq)).toBe(false);
    expect(holds(c, ['critique', 'debate', 'reflect', 'think'], undefined, seq)).toBe(false);
    expect(holds(c, ['debate', 'reflect'], undefined, seq)).toBe(false);
  });

  it('sequence_match accepts any alternative of a group position', () => {
    const seq = [['think', 'reflect'], 'search'];
    expect(holds({ type: 'sequence_match' }, ['reflect', 'search'], undefined, seq)).toBe(true);
    expect(holds({ type: 'sequence_match' }, ['think', 'search'], undefined, seq)).toBe(true);
    expect(holds({ type: 'sequence_match' }, ['search', 'search'], undefined, seq)).toBe(false);
  });

  it('message_contains is case-insensitive and needs a user message', () => {
    const c = { type: 'message_contains', value: 'Plan' };
    expect(holds(c, [], "Okay, let's PLAN the project")).toBe(true);
    expect(holds(c, [], 'research caching')).toBe(false);
    expect(holds(c, [])).toBe(false);
  });

  it('message_regex defaults to case-insensitive and honours explicit flags', () => {
    expect(holds({ type: 'message_regex', value: 'critique|evaluate' }, [], 'Please EVALUATE this')).toBe(true);
    expect(holds({ type: 'message_regex', value: 'critique', flags: '' }, [], 'CRITIQUE it')).toBe(false);
    expect(holds({ type: 'message_regex', value: '^plan$', flags: 'im' }, [], 'first\nPLAN\nlast')).toBe(true);
  });

  it('message_regex runs in linear time on inputs that make backtracking engines explode', () => {
    const evil = { type: 'message_regex', value: '(a+)+$' };
    const started = performance.now();
    expect(holds(evil, [], `${'a'.repeat(50_000)}!`)).toBe(false);
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  it('not_recently_used looks only at the last window entries (default 5)', () => {
    const c = { type: 'not_recently_used', value: 'web_search' };
    expect(holds(c, [])).toBe(true);
    expect(holds(c, ['web_search', 'a', 'b', 'c', 'd', 'e'])).toBe(true);
    expect(holds(c, ['web_search', 'a', 'b', 'c', 'd'])).toBe(false);
    expect(holds({ ...c, window: 2 }, ['web_search', 'a', 'b'])).toBe(true);
    expect(holds({ ...c, window: 3 }, ['web_search', 'a', 'b'])).toBe(false);
  });

  it('all conditions of a step must hold (logical AND)', () => {
    const config: OrchestrationConfig = {
      steps: [
        {
          name: 'planning_mode',
          conditions: [
            { type: 'message_contains', value: 'plan' },
            { type: 'not_recently_used', value: 'web_search', window: 3 },
          ],
        },
      ],
    };
    const plan = compileOrchestration(config);
    const msg = latestUserMessage([{ role: 'user', content: "Okay, let's plan the project structure." }]);
    const fresh = createState('s', 0);
    expect(chooseStep(plan, fresh, msg)?.name).toBe('planning_mode');
    expect(chooseStep(plan, { ...fresh, recentlyUsedTools: ['web_search'] }, msg)).toBeUndefined();
  });

  it('custom condition types can be registered and used in templates', () => {
    const registry = new ConditionRegistry();
    registry.register({
      type: 'history_longer_than',
      requiresValue: true,
      validate: (c) => (/^\d+$/.test(c.value ?? '') ? undefined : 'value must be a whole number'),
      evaluate: (c, ctx) => ctx.history.length > Number(c.value),
    });
    const c = { type: 'history_longer_than', value: '2' };
    expect(holds(c, ['a', 'b'], undefined, undefined, registry)).toBe(false);
    expect(holds(c, ['a', 'b', 'c'], undefined, undefined, registry)).toBe(true);
    expect(() =>
      compileOrchestration(
        { steps: [{ name: 'x', conditions: [{ type: 'history_longer_than', value: 'two' }] }] },
        { conditions: registry },
      ),
    ).toThrow(/value must be a whole number/);
    // Unknown in the default registry.
    expect(() => compileOrchestration({ steps: [{ name: 'x', conditions: [c] }] })).toThrow(/unknown condition type/);
  });

  it('registerConditionType adds to the default registry and refuses duplicates', () => {
    registerConditionType({ type: 'test_always', evaluate: () => true });
    expect(holds({ type: 'test_always' }, [])).toBe(true);
    expect(() => registerConditionType({ type: 'test_always', evaluate: () => true })).toThrow(/already registered/);
    expect(() => registerConditionType({ type: 'tool_used', evaluate: () => true })).toThrow(/already registered/);
    expect(() => registerConditionType({ type: 'neither' })).toThrow(/exactly one of compile\(\) or evaluate\(\)/);
  });
});
