/**
 * Annotation selectors (`@readOnly`, `!@destructive`, ...) wherever tool patterns are accepted,
 * `selectTools` with `unlistedTools`, their validation, and explain() naming the selector.
 * The property tests compare the engine with an oracle written from the MCP spec's table of
 * defaults, without any of the code under test.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { globMatches } from '../testing/arbitraries.js';
import { compileOrchestration } from './compile.js';
import { allowedTools } from './engine.js';
import { latestUserMessage } from './messages.js';
import type { OrchestrationConfig } from './schema.js';
import { createState, type OrchestrationState } from './state.js';
import { hasAnnotation, selectTools, type ToolAnnotations } from './tool-annotations.js';
import { explain, type ToolDecision, transition } from './transition.js';
import { validateOrchestration, validateTemplate } from './validate-template.js';

/** The MCP spec's ToolAnnotations defaults, written out once for the oracle. */
const MCP_DEFAULTS = { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true };

/** What a selector means, from the spec's table (destructive/idempotent only mean something when not read-only). */
function oracleHas(selector: string, declared: ToolAnnotations | undefined): boolean {
  const hints = { ...MCP_DEFAULTS };
  for (const [key, value] of Object.entries(declared ?? {}))
    if (value !== undefined) hints[key as keyof typeof hints] = value;
  if (selector === '@readOnly') return hints.readOnlyHint;
  if (selector === '@destructive') return hints.readOnlyHint ? false : hints.destructiveHint;
  if (selector === '@idempotent') return hints.readOnlyHint ? true : hints.idempotentHint;
  if (selector === '@openWorld') return hints.openWorldHint;
  throw new Error(`not a selector: ${selector}`);
}

function oracleMatches(
  pattern: string,
  tool: string,
  annotations: ReadonlyMap<string, ToolAnnotations> | undefined,
): boolean {
  if (pattern.startsWith('!')) return !oracleMatches(pattern.slice(1), tool, annotations);
  if (pattern.startsWith('@')) return oracleHas(pattern, annotations?.get(tool));
  return globMatches(pattern, tool);
}

const SELECTORS = ['@readOnly', '@destructive', '@idempotent', '@openWorld'];
const TOOL_NAMES = ['fs/read_file', 'fs/write_file', 'fs/delete', 'github/search', 'github/create_issue', 'echo'];
const hint = fc.option(fc.boolean(), { nil: undefined });
const annotationsArb: fc.Arbitrary<ToolAnnotations> = fc.record(
  { readOnlyHint: hint, destructiveHint: hint, idempotentHint: hint, openWorldHint: hint },
  { requiredKeys: [] },
);
const patternArb = fc.oneof(
  fc.constantFrom(...SELECTORS, ...SELECTORS.map((s) => `!${s}`)),
  fc.constantFrom(...TOOL_NAMES, 'fs/*', 'github/*', '*', '*file*', 'nothing'),
);
/** Some tools declare annotations, some declare none, some are unknown to the map. */
const catalogArb = fc.dictionary(fc.constantFrom(...TOOL_NAMES), fc.option(annotationsArb, { nil: undefined }));

describe('annotation selectors: MCP defaults', () => {
  it('a tool that declares nothing is not read-only, is destructive, not idempotent, open-world', () => {
    expect(hasAnnotation('@readOnly', undefined)).toBe(false);
    expect(hasAnnotation('@destructive', undefined)).toBe(true);
    expect(hasAnnotation('@idempotent', undefined)).toBe(false);
    expect(hasAnnotation('@openWorld', undefined)).toBe(true);
    expect(hasAnnotation('@destructive', {})).toBe(true);
  });

  it('a read-only tool is never destructive and always idempotent, whatever else it says', () => {
    expect(hasAnnotation('@destructive', { readOnlyHint: true, destructiveHint: true })).toBe(false);
    expect(hasAnnotation('@idempotent', { readOnlyHint: true, idempotentHint: false })).toBe(true);
  });

  it('a hint that is not a boolean says nothing: the default applies', () => {
    const garbage = { readOnlyHint: 'yes', destructiveHint: 0, openWorldHint: null } as unknown as ToolAnnotations;
    expect(hasAnnotation('@readOnly', garbage)).toBe(false);
    expect(hasAnnotation('@destructive', garbage)).toBe(true);
    expect(hasAnnotation('@openWorld', garbage)).toBe(true);
  });

  it('every selector follows the spec table for any annotations', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...SELECTORS),
        fc.option(annotationsArb, { nil: undefined }),
        (selector, declared) => {
          expect(hasAnnotation(selector as '@readOnly', declared)).toBe(oracleHas(selector, declared));
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('annotation selectors in availableTools', () => {
  it('allowed/denied with names, globs and selectors equal the oracle, with and without annotations', () => {
    fc.assert(
      fc.property(
        catalogArb,
        fc.array(patternArb, { maxLength: 3 }),
        fc.array(patternArb, { maxLength: 3 }),
        fc.boolean(),
        (catalog, allowed, denied, passAnnotations) => {
          const annotations = new Map<string, ToolAnnotations>();
          for (const [name, declared] of Object.entries(catalog)) if (declared) annotations.set(name, declared);
          const config: OrchestrationConfig = {
            steps: [{ name: 'Work', isDefault: true, availableTools: { allowed, denied } }],
          };
          const known = passAnnotations ? annotations : undefined;
          const plan = compileOrchestration(config, known ? { toolAnnotations: known } : {});
          const state = transition(plan, createState('s', 0), { type: 'user-message' }, { now: 1 }).state;
          const expected = TOOL_NAMES.filter(
            (tool) =>
              (allowed.length === 0 || allowed.some((p) => oracleMatches(p, tool, known))) &&
              !denied.some((p) => oracleMatches(p, tool, known)),
          );
          expect(allowedTools(plan, state, TOOL_NAMES).tools).toEqual(expected);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('a deny rule with names, globs and selectors refuses exactly the tools the oracle selects', () => {
    fc.assert(
      fc.property(catalogArb, fc.array(patternArb, { minLength: 1, maxLength: 3 }), (catalog, tools) => {
        const annotations = new Map<string, ToolAnnotations>();
        for (const [name, declared] of Object.entries(catalog)) if (declared) annotations.set(name, declared);
        const plan = compileOrchestration(
          { rules: [{ tools, effect: 'deny', reason: 'no' }], steps: [{ name: 'Any', isDefault: true }] },
          { toolAnnotations: annotations },
        );
        const state = transition(plan, createState('s', 0), { type: 'user-message' }, { now: 1 }).state;
        for (const tool of TOOL_NAMES) {
          const decision = transition(
            plan,
            state,
            { type: 'tool-requested', tool, toolCallId: `c-${tool}`, agentTools: TOOL_NAMES, args: {} },
            { now: 2, leaseMs: 1_000 },
          ).decision as ToolDecision;
          expect(decision.allowed, tool).toBe(!tools.some((p) => oracleMatches(p, tool, annotations)));
        }
      }),
      { numRuns: 200 },
    );
  });

  it('selectTools equals the oracle, and unlistedTools "allowed" keeps every tool', () => {
    fc.assert(
      fc.property(catalogArb, fc.array(patternArb, { maxLength: 4 }), (catalog, tools) => {
        const declared = Object.entries(catalog).map(([name, annotations]) =>
          annotations ? { name, annotations } : { name },
        );
        const map = new Map(declared.map((t) => [t.name, t.annotations ?? {}]));
        const expected = declared.filter((t) => tools.some((p) => oracleMatches(p, t.name, map))).map((t) => t.name);
        expect(selectTools({ tools }, declared)).toEqual(expected);
        expect(selectTools({ tools, orchestration: { unlistedTools: 'allowed' } }, declared)).toEqual(
          declared.map((t) => t.name),
        );
      }),
      { numRuns: 300 },
    );
  });
});

describe('selectTools', () => {
  const declared = [
    { name: 'fs/read_file', annotations: { readOnlyHint: true } },
    { name: 'fs/write_file', annotations: { readOnlyHint: false, destructiveHint: false } },
    { name: 'fs/delete' },
    { name: 'github/search', annotations: { readOnlyHint: true, openWorldHint: true } },
  ];

  it('hides what the template does not list, fails closed without a list, keeps the upstream order', () => {
    expect(selectTools({ tools: ['github/*', 'fs/read_file'] }, declared)).toEqual(['fs/read_file', 'github/search']);
    expect(selectTools({}, declared)).toEqual([]);
    expect(selectTools({ tools: ['@readOnly'] }, declared)).toEqual(['fs/read_file', 'github/search']);
    expect(selectTools({ tools: ['fs/*', '!@destructive'] }, declared)).toEqual([
      'fs/read_file',
      'fs/write_file',
      'fs/delete',
      'github/search',
    ]);
    expect(selectTools({ tools: ['fs/write'] }, declared)).toEqual([]);
  });

  it('refuses a misspelt selector of a template that was not validated, saying where and what was meant', () => {
    expect(() => selectTools({ tools: ['fs/*', '@readonly'] }, declared)).toThrow(
      /tools\[1\]: unknown annotation selector "@readonly"[\s\S]*did you mean "@readOnly"\?/,
    );
  });
});

describe('annotation selectors in decisions', () => {
  const annotations = new Map<string, ToolAnnotations>([
    ['read_file', { readOnlyHint: true }],
    ['write_file', { readOnlyHint: false, destructiveHint: false }],
    ['delete_file', { destructiveHint: true }],
  ]);
  const TOOLS = ['read_file', 'write_file', 'delete_file', 'undeclared'];
  const m1 = latestUserMessage([{ role: 'user', content: 'go', id: 'm1' }]);

  function run(config: OrchestrationConfig, known = annotations) {
    const plan = compileOrchestration(config, { toolAnnotations: known });
    let state: OrchestrationState = createState('s', 0);
    state = transition(plan, state, { type: 'user-message' }, { now: 1, message: m1 }).state;
    const context = { now: 2, message: m1, leaseMs: 60_000 };
    return {
      request: (tool: string, id: string) =>
        transition(plan, state, { type: 'tool-requested', tool, toolCallId: id, agentTools: TOOLS, args: {} }, context)
          .decision as ToolDecision,
      explain: () => explain(plan, state, TOOLS, context),
    };
  }

  it('denies destructive tools, including one that declares nothing, and says which selector did', () => {
    const s = run({ steps: [{ name: 'Safe', isDefault: true, availableTools: { denied: ['@destructive'] } }] });
    expect(s.request('read_file', 'c1').allowed).toBe(true);
    expect(s.request('write_file', 'c2').allowed).toBe(true);
    const refused = s.request('undeclared', 'c3');
    expect(refused.allowed).toBe(false);
    if (refused.allowed) return;
    expect(refused.reason).toMatchObject({ code: 'denied', pattern: '@destructive' });
    expect(refused.reason.message).toContain('selector "@destructive"');
    const explained = s.explain().tools;
    expect(explained.find((t) => t.tool === 'delete_file')?.reason?.message).toContain('"@destructive"');
  });

  it('explain names the selector that allowed a tool', () => {
    const s = run({
      steps: [{ name: 'Look', isDefault: true, availableTools: { allowed: ['write_file', '@readOnly'] } }],
    });
    const tools = s.explain().tools;
    expect(tools.find((t) => t.tool === 'read_file')).toMatchObject({ allowed: true, allowedBy: '@readOnly' });
    expect(tools.find((t) => t.tool === 'write_file')).toMatchObject({ allowed: true, allowedBy: 'write_file' });
    const refused = tools.find((t) => t.tool === 'delete_file');
    expect(refused?.allowed).toBe(false);
    expect(refused?.reason?.message).toBe(
      'step "Look" allows only write_file, "@readOnly" (read-only tools: readOnlyHint true)',
    );
  });

  it('rules select by annotation: a deny rule on !@readOnly refuses every tool that may write', () => {
    const s = run({
      rules: [{ tools: ['!@readOnly'], effect: 'deny', reason: 'Read-only session' }],
      steps: [{ name: 'Any', isDefault: true }],
    });
    expect(s.request('read_file', 'c1').allowed).toBe(true);
    for (const tool of ['write_file', 'delete_file', 'undeclared']) {
      const decision = s.request(tool, `x-${tool}`);
      expect(decision.allowed).toBe(false);
      if (!decision.allowed)
        expect(decision.reason).toMatchObject({ code: 'rule', message: expect.stringContaining('Read-only session') });
    }
  });

  it('without annotations a selector judges every tool as declaring nothing', () => {
    const s = run(
      { steps: [{ name: 'Look', isDefault: true, availableTools: { allowed: ['@readOnly'] } }] },
      new Map(),
    );
    expect(s.request('read_file', 'c1').allowed).toBe(false);
  });
});

describe('validation of selectors', () => {
  it('rejects a misspelt selector with its path and a "did you mean"', () => {
    const result = validateOrchestration(
      {
        steps: [{ name: 'A', isDefault: true, availableTools: { allowed: ['@readonly'], denied: ['!@destructiv'] } }],
        rules: [{ tools: ['@openworld'], effect: 'deny', reason: 'no' }],
      },
      { path: ['orchestration'] },
    );
    expect(result.success).toBe(false);
    if (result.success) return;
    const byPath = Object.fromEntries(result.issues.map((i) => [i.path, i]));
    expect(byPath['orchestration.steps[0].availableTools.allowed[0]']).toMatchObject({
      code: 'unknown_selector',
      hint: 'did you mean "@readOnly"?',
    });
    expect(byPath['orchestration.steps[0].availableTools.denied[0]']?.hint).toBe('did you mean "!@destructive"?');
    expect(byPath['orchestration.rules[0].tools[0]']?.hint).toBe('did you mean "@openWorld"?');
  });

  it('refuses a selector in a sequence or as a condition tool: they name one concrete tool', () => {
    const result = validateOrchestration({
      steps: [
        {
          name: 'A',
          isDefault: true,
          sequence: ['@readOnly', ['x', '!@destructive']],
          conditions: [{ type: 'tool_used', value: '@idempotent' }],
        },
      ],
    });
    expect(result.success).toBe(false);
    if (result.success) return;
    const paths = result.issues.filter((i) => i.code === 'selector_not_allowed_here').map((i) => i.path);
    expect(paths).toEqual(['steps[0].sequence[0]', 'steps[0].sequence[1][1]', 'steps[0].conditions[0].value']);
  });

  it('checks template tools and unlistedTools, and accepts patterns as the agent tool list', () => {
    const bad = validateTemplate({
      id: 'gw',
      tools: ['github/*', '@readonly'],
      orchestration: { unlistedTools: 'shown', steps: [] },
    });
    expect(bad.success).toBe(false);
    if (!bad.success) {
      expect(bad.issues.map((i) => i.path)).toEqual(
        expect.arrayContaining(['tools[1]', 'orchestration.unlistedTools']),
      );
    }
    const good = validateTemplate({
      id: 'gw',
      tools: ['github/*', 'fs/read_file'],
      orchestration: {
        unlistedTools: 'hidden',
        steps: [{ name: 'A', isDefault: true, sequence: ['github/search', 'fs/read_file'] }],
      },
    });
    expect(good.success).toBe(true);
    const unknown = validateTemplate({
      id: 'gw',
      tools: ['github/*'],
      orchestration: { steps: [{ name: 'A', isDefault: true, sequence: ['gitlab/search'] }] },
    });
    expect(unknown.success).toBe(false);
  });

  it('judges a sequence tool against a selector only when annotations are known', () => {
    const config = {
      steps: [{ name: 'A', isDefault: true, availableTools: { allowed: ['@readOnly'] }, sequence: ['write_file'] }],
    };
    expect(validateOrchestration(config).success).toBe(true);
    const judged = validateOrchestration(config, {
      toolAnnotations: new Map([['write_file', { readOnlyHint: false }]]),
    });
    expect(judged.success).toBe(false);
    if (!judged.success) expect(judged.issues[0]?.code).toBe('sequence_tool_not_permitted');
  });
});
