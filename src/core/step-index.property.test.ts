/**
 * The indexed step selection answers exactly as the plain walk of SPEC section 3 (the first
 * conditional step whose conditions all hold), for random configs, histories and messages.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { anyToolArb, messageTextArb, orchestrationConfigArb } from '../testing/arbitraries.js';
import { compileOrchestration } from './compile.js';
import { defaultConditionRegistry } from './conditions.js';
import { latestUserMessage } from './messages.js';
import { stepSelector, walkSteps } from './step-index.js';

describe('indexed step selection', () => {
  it('chooses the step the plain walk chooses', () => {
    fc.assert(
      fc.property(
        orchestrationConfigArb({ maxSteps: 12 }),
        fc.array(fc.array(anyToolArb, { maxLength: 12 }), { minLength: 1, maxLength: 6 }),
        fc.option(messageTextArb, { nil: undefined }),
        (config, histories, text) => {
          const plan = compileOrchestration(config);
          const indexed = stepSelector(plan.conditionalSteps, defaultConditionRegistry, { index: true });
          const message = text === undefined ? undefined : latestUserMessage([{ role: 'user', content: text }]);
          // Several histories against one selector: its per-message answers are reused.
          for (const history of histories) {
            expect(indexed(history, message)?.name).toBe(walkSteps(plan.conditionalSteps, history, message)?.name);
          }
        },
      ),
      { numRuns: 1500 },
    );
  });

  it('looks tool_used steps up in a long history as well as in a short one', () => {
    const config = {
      steps: Array.from({ length: 12 }, (_, i) => ({
        name: `Used${i}`,
        conditions: [{ type: 'tool_used', value: `tool_${i}` }],
      })),
    };
    const plan = compileOrchestration(config);
    const indexed = stepSelector(plan.conditionalSteps, defaultConditionRegistry, { index: true });
    const long = [...Array.from({ length: 1_000 }, () => 'other'), 'tool_7', 'tool_3'];
    expect(indexed(long, undefined)?.name).toBe('Used3');
    expect(indexed(['tool_9', 'tool_5'], undefined)?.name).toBe('Used5');
    expect(indexed(['nothing'], undefined)).toBeUndefined();
  });
});
