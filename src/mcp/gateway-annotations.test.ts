import { describe, expect, it } from 'vitest';
import type { AgentTemplate } from '../core/schema.js';
import { hintsOf, sameHints, widening, withHints } from './gateway-annotations.js';

const READ_ONLY = { readOnlyHint: true };
const WRITES = { readOnlyHint: false, destructiveHint: true };
const WRITES_SAFELY = { readOnlyHint: false, destructiveHint: false };

function template(fields: Partial<AgentTemplate>): AgentTemplate {
  return { id: 't', tools: [], ...fields } as AgentTemplate;
}

describe('widening: where a re-declaration would let the template do more with a tool', () => {
  it('is a granting list that starts to match: @readOnly in tools, a writing tool re-declared read-only', () => {
    const readOnly = template({ tools: ['@readOnly'] });
    expect(widening(readOnly, 'peek', WRITES, READ_ONLY)).toBe('tools');
    // The other way narrows: taken.
    expect(widening(readOnly, 'peek', READ_ONLY, WRITES)).toBeUndefined();
  });

  it('follows negation: !@readOnly grants to tools that write', () => {
    const writers = template({ tools: ['!@readOnly'] });
    expect(widening(writers, 'save', READ_ONLY, WRITES)).toBe('tools');
    expect(widening(writers, 'save', WRITES, READ_ONLY)).toBeUndefined();
  });

  it('is a restricting list that stops matching: a denied list, a rule', () => {
    const denied = template({
      tools: ['*'],
      orchestration: { steps: [{ name: 'S', availableTools: { denied: ['@destructive'] } }] },
    });
    expect(widening(denied, 'rm', WRITES, WRITES_SAFELY)).toBe('orchestration.steps[0].availableTools.denied');
    expect(widening(denied, 'rm', WRITES_SAFELY, WRITES)).toBeUndefined();
    const ruled = template({
      tools: ['*'],
      orchestration: {
        steps: [{ name: 'S', rules: [{ tools: ['@openWorld'], effect: 'approve', reason: 'r' }] }],
        rules: [{ tools: ['@destructive'], effect: 'deny', reason: 'r' }],
      },
    });
    expect(widening(ruled, 'rm', WRITES, READ_ONLY)).toBe('orchestration.rules[0].tools');
    expect(widening(ruled, 'fetch', {}, { openWorldHint: false, readOnlyHint: true })).toBe(
      'orchestration.rules[0].tools',
    );
    expect(widening(ruled, 'fetch', READ_ONLY, { readOnlyHint: true, openWorldHint: false })).toBe(
      'orchestration.steps[0].rules[0].tools',
    );
  });

  it('is a step’s allowed list that starts to match, and not an empty one (it allows everything)', () => {
    const steps = template({
      tools: ['*'],
      orchestration: {
        steps: [
          { name: 'Any', availableTools: { allowed: [] } },
          { name: 'Look', availableTools: { allowed: ['@idempotent'] } },
        ],
      },
    });
    expect(widening(steps, 'put', WRITES, { ...WRITES, idempotentHint: true })).toBe(
      'orchestration.steps[1].availableTools.allowed',
    );
  });

  it('is nowhere when the template reads nothing that changed', () => {
    // Names and globs do not read annotations; unlistedTools "allowed" offers every tool anyway.
    expect(widening(template({ tools: ['peek', 'p*'] }), 'peek', WRITES, READ_ONLY)).toBeUndefined();
    expect(
      widening(
        template({ tools: ['@readOnly'], orchestration: { unlistedTools: 'allowed', steps: [] } }),
        'peek',
        WRITES,
        READ_ONLY,
      ),
    ).toBeUndefined();
    // A read-only tool is idempotent and not destructive whatever else it says.
    const idempotent = template({ tools: ['@idempotent', '!@destructive'] });
    expect(widening(idempotent, 'peek', READ_ONLY, { ...READ_ONLY, idempotentHint: true })).toBeUndefined();
  });

  it('counts a change that widens one place and narrows another as widening', () => {
    const mixed = template({
      tools: ['@readOnly'],
      orchestration: { steps: [], rules: [{ tools: ['!@openWorld'], effect: 'deny', reason: 'r' }] },
    });
    expect(widening(mixed, 't', { openWorldHint: true }, { readOnlyHint: true, openWorldHint: false })).toBe('tools');
  });
});

describe('hints', () => {
  it('are the four booleans a selector reads; anything else says nothing', () => {
    expect(hintsOf({ title: 'T', readOnlyHint: true, destructiveHint: 'yes', openWorldHint: false })).toEqual({
      readOnlyHint: true,
      openWorldHint: false,
    });
    expect(hintsOf(undefined)).toEqual({});
    expect(sameHints({ readOnlyHint: true }, hintsOf({ readOnlyHint: true, title: 'x' }))).toBe(true);
    expect(sameHints({ readOnlyHint: true }, {})).toBe(false);
  });

  it('replace the ones a tool is offered with, and keep the rest', () => {
    expect(withHints({ title: 'T', readOnlyHint: true, idempotentHint: true }, WRITES)).toEqual({
      title: 'T',
      readOnlyHint: false,
      destructiveHint: true,
    });
  });
});
