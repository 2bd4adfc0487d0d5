/**
 * Fuzzing of template validation: `validateTemplate` on random JSON values, random JSON
 * text, structure-aware random templates, mutated AgentDock templates and corrupted JSON
 * text (10,000 cases in all, fixed seeds). Whatever the input, it must never throw and
 * must return a well-formed result; `parseTemplate` may throw only a `TemplateConfigError`;
 * a template that validates must compile and run.
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { agentdockFixtures, agentdockSampleFiles, agentdockTemplateFiles } from '../../test/helpers/agentdock.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import { compileOrchestration } from './compile.js';
import { ConditionRegistry } from './conditions.js';
import { allowedTools } from './engine.js';
import { createState } from './state.js';
import { TemplateConfigError, TemplateIssueCode } from './template-issues.js';
import { parseTemplate, type ValidateTemplateOptions, validateTemplate } from './validate-template.js';

/** Every published AgentDock template when the environment names them, else none. */
const agentdock = agentdockFixtures();
/** The AgentDock templates mutated: every published one, or the four copied into the repository. */
const fixtureTexts = agentdockTemplateFiles().map((file) => readFileSync(file, 'utf8'));
/** The templates with an orchestration block, which mutations reach most often. */
const orchestrated = fixtureTexts.filter((t) => t.includes('"orchestration"'));

const CODES: ReadonlySet<string> = new Set(Object.values(TemplateIssueCode));
const ISSUE_KEYS: ReadonlySet<string> = new Set(['code', 'severity', 'path', 'message', 'hint']);
const PROTOTYPE_NAMES = Object.getOwnPropertyNames(Object.prototype).sort();

/** A registry with a custom type whose validator throws, and one that reads messages. */
const customRegistry = new ConditionRegistry()
  .register({
    type: 'custom_throws',
    validate: () => {
      throw new Error('validator bug');
    },
    evaluate: () => true,
  })
  .register({
    type: 'custom_message',
    usesMessage: true,
    requiresValue: true,
    evaluate: (c, ctx) => ctx.message?.text === c.value,
  });

const optionsArb: fc.Arbitrary<ValidateTemplateOptions | undefined> = fc.oneof(
  { weight: 4, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.constant({ conditions: customRegistry }) },
  {
    weight: 1,
    arbitrary: fc.array(fc.constantFrom('search', 'think', 'reflect', 'web_search', 'mcp/fs.read')).map((tools) => ({
      tools,
    })),
  },
);

/** Cases checked, and how many of them validated (with orchestration steps): the fuzz must reach both paths. */
const stats = { checked: 0, valid: 0, validWithSteps: 0 };

function fail(message: string, input: unknown): never {
  let shown: string;
  try {
    shown = JSON.stringify(input)?.slice(0, 2_000) ?? String(input);
  } catch {
    shown = '(not serializable)';
  }
  throw new Error(`${message}\ninput: ${shown}`);
}

/** Checks every invariant for one input; plain throws keep 10,000 cases fast. */
function checkInput(input: unknown, options?: ValidateTemplateOptions): void {
  stats.checked++;
  let result: ReturnType<typeof validateTemplate>;
  try {
    result = validateTemplate(input, options);
  } catch (error) {
    fail(`validateTemplate threw: ${(error as Error)?.stack ?? String(error)}`, input);
  }
  if (typeof result !== 'object' || result === null) fail('result is not an object', input);
  const keys = Object.keys(result).sort().join(',');
  let issues: unknown;
  if (result.success === true) {
    if (keys !== 'success,template,warnings') fail(`success result has keys ${keys}`, input);
    const t = result.template as unknown as Record<string, unknown>;
    if (typeof t !== 'object' || t === null) fail('template is not an object', input);
    if (typeof t.id !== 'string' || t.id === '') fail('template.id is not a non-empty string', input);
    if (!Array.isArray(t.tools) || !t.tools.every((x) => typeof x === 'string')) fail('template.tools', input);
    issues = result.warnings;
  } else if (result.success === false) {
    if (keys !== 'issues,success') fail(`failure result has keys ${keys}`, input);
    issues = result.issues;
  } else fail('success is not a boolean', input);
  if (!Array.isArray(issues)) fail('issues/warnings is not an array', input);
  let seenWarning = false;
  let errors = 0;
  for (const issue of issues as unknown[]) {
    const i = issue as Record<string, unknown>;
    if (typeof i !== 'object' || i === null) fail('an issue is not an object', input);
    for (const key of Object.keys(i)) if (!ISSUE_KEYS.has(key)) fail(`issue has key ${key}`, input);
    if (typeof i.code !== 'string' || !CODES.has(i.code)) fail(`issue code ${String(i.code)}`, input);
    if (i.severity !== 'error' && i.severity !== 'warning') fail(`issue severity ${String(i.severity)}`, input);
    if (typeof i.path !== 'string') fail('issue path is not a string', input);
    if (typeof i.message !== 'string' || i.message.length === 0) fail('issue message is empty', input);
    if ('hint' in i && (typeof i.hint !== 'string' || i.hint.length === 0)) fail('issue hint is empty', input);
    if (i.severity === 'error') {
      errors++;
      if (seenWarning) fail('an error comes after a warning (errors first)', input);
    } else seenWarning = true;
  }
  if (result.success) {
    stats.valid++;
    if ((result.template.orchestration?.steps.length ?? 0) > 0) stats.validWithSteps++;
  }
  if (result.success && errors > 0) fail('success with error-severity issues', input);
  if (!result.success && errors === 0) fail('failure without an error-severity issue', input);

  // parseTemplate throws exactly when validation fails, and only a TemplateConfigError.
  let thrown: unknown;
  try {
    parseTemplate(input, options);
  } catch (error) {
    thrown = error ?? new Error('threw a nullish value');
  }
  if (thrown !== undefined) {
    if (!TemplateConfigError.isInstance(thrown)) fail(`parseTemplate threw ${String(thrown)}`, input);
    if (result.success) fail('parseTemplate threw although validateTemplate succeeded', input);
    if (thrown.issues.length !== (issues as unknown[]).length) fail('parseTemplate issues differ', input);
  } else if (!result.success) fail('parseTemplate returned although validateTemplate failed', input);

  // A template that validates compiles and answers (including one that keeps an unknown
  // top-level "steps" key, which was once mistaken for an orchestration block).
  if (result.success) {
    try {
      const plan = compileOrchestration(result.template, options?.conditions ? { conditions: options.conditions } : {});
      const state = { ...createState('fuzz', 0), activeStep: plan.defaultStep?.name ?? plan.steps[0]?.name };
      allowedTools(plan, state, result.template.tools);
    } catch (error) {
      fail(`a valid template does not compile: ${(error as Error).message}`, input);
    }
  }
  const names = Object.getOwnPropertyNames(Object.prototype);
  if (names.length !== PROTOTYPE_NAMES.length) fail(`Object.prototype changed: ${names.join(',')}`, input);
}

// ---------------------------------------------------------------------------------------
// Generators

const INTERESTING_STRINGS = [
  '',
  ' ',
  '*',
  '**',
  '*think*',
  'mcp/*',
  'search',
  'think',
  'llm.openai',
  'llm.',
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
  '(',
  '[a-',
  '(?<n>x)',
  '(?=x)',
  '\\1',
  '\\p{L}+',
  '(a*)*b',
  'a{2,1}',
  '\\',
  'x++',
  '.*',
  '[[:alpha:]]',
  'a|',
  '\u0000',
  '\uD800',
  '🎉',
  'İ',
  'new_message',
  'out_of_sequence',
  'message_contains',
  'message_regex',
  'tool_used',
  'sequence_match',
  'not_recently_used',
  'custom_throws',
  'custom_message',
];
const stringArb = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...INTERESTING_STRINGS) },
  { weight: 1, arbitrary: fc.string({ maxLength: 12, unit: 'binary' }) },
);
const numberArb = fc.oneof(
  fc.constantFrom(0, -1, 1, 1.5, 50, 1e308, -0, Number.MAX_SAFE_INTEGER + 2),
  fc.integer({ min: -3, max: 300 }),
);
/** Usually the right type, sometimes any JSON value. */
const maybe = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | fc.JsonValue> =>
  fc.oneof({ weight: 5, arbitrary: arb }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) });
const CONDITION_TYPES = [
  'tool_used',
  'sequence_match',
  'message_contains',
  'message_regex',
  'not_recently_used',
  'custom_throws',
  'custom_message',
  'tool-used',
  'toolUsed',
  '',
];
const toolArb = fc.oneof(fc.constantFrom('search', 'think', 'reflect', 'web_search', 'mcp/fs.read', '*'), stringArb);
const conditionArb = fc.record(
  {
    type: maybe(fc.constantFrom(...CONDITION_TYPES)),
    value: maybe(toolArb),
    description: maybe(stringArb),
    window: maybe(numberArb),
    flags: maybe(fc.constantFrom('i', 'm', 's', 'u', 'g', 'y', '', 'iu', 'x', 'ii')),
    params: maybe(fc.dictionary(stringArb, fc.jsonValue({ maxDepth: 1 }), { maxKeys: 2 })),
  },
  { requiredKeys: [] },
);
const STEP_NAMES = ['A', 'B', 'C', 'a', '', 'constructor', '__proto__'];
const stepArb = fc.record(
  {
    name: maybe(fc.constantFrom(...STEP_NAMES)),
    description: maybe(stringArb),
    isDefault: maybe(fc.boolean()),
    conditions: maybe(fc.array(conditionArb, { maxLength: 3 })),
    availableTools: maybe(
      fc.record(
        { allowed: maybe(fc.array(toolArb, { maxLength: 3 })), denied: maybe(fc.array(toolArb, { maxLength: 2 })) },
        { requiredKeys: [] },
      ),
    ),
    sequence: maybe(fc.array(fc.oneof(toolArb, fc.array(toolArb, { maxLength: 3 })), { maxLength: 4 })),
    resetSequenceOn: maybe(
      fc.array(fc.oneof(fc.constantFrom(...INTERESTING_STRINGS.slice(-9), 'newMessage'), conditionArb), {
        maxLength: 3,
      }),
    ),
    instructions: maybe(fc.oneof(stringArb, fc.array(stringArb, { maxLength: 2 }))),
  },
  { requiredKeys: [] },
);
const orchestrationArb = fc.record(
  {
    description: maybe(fc.oneof(stringArb, fc.array(stringArb, { maxLength: 2 }))),
    defaultStep: maybe(fc.constantFrom(...STEP_NAMES)),
    historyLimit: maybe(numberArb),
    steps: maybe(fc.array(stepArb, { maxLength: 5 })),
  },
  { requiredKeys: [] },
);
/** Structure-aware random templates: the right shape, with wrong types and values mixed in. */
const looseTemplateArb = fc.record(
  {
    id: maybe(stringArb),
    agentId: maybe(stringArb),
    name: maybe(stringArb),
    personality: maybe(fc.oneof(stringArb, fc.array(stringArb, { maxLength: 2 }))),
    llm: maybe(fc.record({ provider: maybe(stringArb), model: maybe(stringArb) }, { requiredKeys: [] })),
    tools: maybe(fc.array(toolArb, { maxLength: 4 })),
    nodes: maybe(fc.array(fc.oneof(toolArb, fc.constantFrom('llm.openai', 'llm.anthropic')), { maxLength: 4 })),
    options: maybe(fc.record({ maxSteps: maybe(numberArb) }, { requiredKeys: [] })),
    orchestration: maybe(orchestrationArb),
  },
  { requiredKeys: [] },
);

// Mutations of real templates.

type Path = (string | number)[];
type Json = fc.JsonValue;

/** Every path in `doc` (the root first), in a stable order. */
function pathsOf(doc: Json): Path[] {
  const out: Path[] = [];
  const walk = (node: Json, path: Path, depth: number) => {
    out.push(path);
    if (depth > 50 || typeof node !== 'object' || node === null) return;
    if (Array.isArray(node)) for (const [i, child] of node.entries()) walk(child, [...path, i], depth + 1);
    else for (const key of Object.keys(node)) walk((node as Record<string, Json>)[key]!, [...path, key], depth + 1);
  };
  walk(doc, [], 0);
  return out;
}

function getAt(doc: Json, path: Path): Json {
  let node: Json = doc;
  for (const key of path) node = (node as Record<string | number, Json>)[key]!;
  return node;
}

/** Sets an own property, even one called `__proto__` (plain assignment would change the prototype). */
function define(target: object, key: string | number, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

function setAt(doc: Json, path: Path, value: Json): Json {
  if (path.length === 0) return value;
  const parent = getAt(doc, path.slice(0, -1)) as object;
  define(parent, path[path.length - 1]!, value);
  return doc;
}

const UNKNOWN_KEYS = [
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
  'valueOf',
  'condtions',
  'availabeTools',
  'sequnce',
  'resetSequenceon',
  'isdefault',
  'step',
  'steps',
  'type',
  'value',
  'allowed',
  'orchestration',
  '',
  ' ',
  '🎉',
];

type Mutation =
  | { op: 'delete'; at: number }
  | { op: 'replace'; at: number; value: Json }
  | { op: 'insert'; at: number; key: string; value: Json }
  | { op: 'swap'; at: number; other: number }
  | { op: 'nest'; at: number; depth: number; kind: 'array' | 'object' }
  | { op: 'huge'; at: number; size: number; unit: string }
  | { op: 'duplicate'; at: number };

const weirdValueArb: fc.Arbitrary<Json> = fc.oneof(
  fc.constantFrom(null, true, false, 0, -1, 1.5, 1e308, '', [], {}, [[]], { '': null }),
  stringArb,
  fc.jsonValue({ maxDepth: 3 }),
);

const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ op: fc.constant('delete' as const), at: fc.nat() }),
  fc.record({ op: fc.constant('replace' as const), at: fc.nat(), value: weirdValueArb }),
  fc.record({
    op: fc.constant('insert' as const),
    // Path 0 is the root, where unknown keys are kept (and "steps" once confused compile).
    at: fc.oneof({ weight: 1, arbitrary: fc.constant(0) }, { weight: 3, arbitrary: fc.nat() }),
    key: fc.oneof(fc.constantFrom(...UNKNOWN_KEYS), fc.string({ maxLength: 6 })),
    value: weirdValueArb,
  }),
  fc.record({ op: fc.constant('swap' as const), at: fc.nat(), other: fc.nat() }),
  fc.record({
    op: fc.constant('nest' as const),
    at: fc.nat(),
    depth: fc.constantFrom(1, 2, 10, 100, 1_000),
    kind: fc.constantFrom('array' as const, 'object' as const),
  }),
  fc.record({
    op: fc.constant('huge' as const),
    at: fc.nat(),
    size: fc.constantFrom(1_000, 5_000),
    unit: fc.constantFrom('a', 'search ', '(a|b)', '*', '\\', '🎉'),
  }),
  fc.record({ op: fc.constant('duplicate' as const), at: fc.nat() }),
);

function mutate(doc: Json, mutations: readonly Mutation[]): Json {
  let hugeApplied = false;
  for (const m of mutations) {
    const paths = pathsOf(doc);
    const path = paths[m.at % paths.length]!;
    const parentPath = path.slice(0, -1);
    const key = path[path.length - 1];
    switch (m.op) {
      case 'delete': {
        if (key === undefined) break;
        const parent = getAt(doc, parentPath);
        if (Array.isArray(parent)) parent.splice(key as number, 1);
        else delete (parent as Record<string, Json>)[key];
        break;
      }
      case 'replace':
        doc = setAt(doc, path, structuredClone(m.value));
        break;
      case 'insert': {
        const target = getAt(doc, path);
        if (typeof target === 'object' && target !== null && !Array.isArray(target)) {
          define(target, m.key, structuredClone(m.value));
        } else if (Array.isArray(target)) target.push(structuredClone(m.value));
        break;
      }
      case 'swap': {
        const other = paths[m.other % paths.length]!;
        const related = (a: Path, b: Path) => a.length <= b.length && a.every((k, i) => b[i] === k);
        if (related(path, other) || related(other, path)) break;
        const a = getAt(doc, path);
        const b = getAt(doc, other);
        doc = setAt(doc, path, b);
        doc = setAt(doc, other, a);
        break;
      }
      case 'nest': {
        let value = getAt(doc, path);
        for (let i = 0; i < m.depth; i++) value = m.kind === 'array' ? [value] : { nested: value };
        doc = setAt(doc, path, value);
        break;
      }
      case 'huge': {
        const size = hugeApplied ? 300 : m.size;
        hugeApplied = true;
        doc = setAt(doc, path, m.unit.repeat(Math.ceil(size / m.unit.length)));
        break;
      }
      case 'duplicate': {
        const parent = key === undefined ? undefined : getAt(doc, parentPath);
        if (Array.isArray(parent)) parent.push(structuredClone(getAt(doc, path)));
        break;
      }
    }
  }
  return doc;
}

type TextEdit =
  | { kind: 'delete'; at: number; length: number }
  | { kind: 'insert'; at: number; text: string }
  | { kind: 'replace'; at: number; text: string }
  | { kind: 'truncate'; at: number }
  | { kind: 'duplicate'; at: number; length: number };

const corruptionTextArb = fc.oneof(
  fc.constantFrom('{', '}', '[', ']', '"', ',', ':', '\\', '\\u', '\\ud800', 'null', '1e999', '-', '\u0000', '\uFEFF'),
  fc.string({ maxLength: 4, unit: 'binary' }),
);
const textEditArb: fc.Arbitrary<TextEdit> = fc.oneof(
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat(), length: fc.integer({ min: 1, max: 20 }) }),
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), text: corruptionTextArb }),
  fc.record({ kind: fc.constant('replace' as const), at: fc.nat(), text: corruptionTextArb }),
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('duplicate' as const), at: fc.nat(), length: fc.integer({ min: 1, max: 40 }) }),
);

function corrupt(text: string, edits: readonly TextEdit[]): string {
  for (const e of edits) {
    const at = e.at % (text.length + 1);
    if (e.kind === 'delete') text = text.slice(0, at) + text.slice(at + e.length);
    else if (e.kind === 'insert') text = text.slice(0, at) + e.text + text.slice(at);
    else if (e.kind === 'replace') text = text.slice(0, at) + e.text + text.slice(at + e.text.length);
    else if (e.kind === 'truncate') text = text.slice(0, at);
    else text = text.slice(0, at) + text.slice(at, at + e.length) + text.slice(at);
  }
  return text;
}

const fixtureArb = fc.oneof(
  { weight: 2, arbitrary: fc.constantFrom(...orchestrated) },
  { weight: 1, arbitrary: fc.constantFrom(...fixtureTexts) },
);

// ---------------------------------------------------------------------------------------

describe('validateTemplate fuzzing (10,000 cases)', () => {
  it('finds the fixtures', () => {
    expect(orchestrated.length).toBeGreaterThanOrEqual(agentdockSampleFiles.length);
    for (const text of fixtureTexts) checkInput(text);
  });

  it.skipIf(agentdock === undefined)('finds every published AgentDock template, six of them orchestrated', () => {
    expect(fixtureTexts.length).toBeGreaterThanOrEqual(30);
    expect(orchestrated.length).toBe(6);
  });

  it('random JSON values (1,500) and random JSON text (1,000)', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 5 }), optionsArb, (value, options) => checkInput(value, options)),
      { seed: 1_001, numRuns: 1_500 },
    );
    fc.assert(
      fc.property(fc.json({ maxDepth: 4 }), (text) => checkInput(text)),
      { seed: 1_002, numRuns: 1_000 },
    );
  });

  it('structure-aware random templates (2,500)', () => {
    fc.assert(
      fc.property(looseTemplateArb, optionsArb, fc.boolean(), (template, options, asText) =>
        checkInput(asText ? JSON.stringify(template) : template, options),
      ),
      { seed: 1_003, numRuns: 2_500 },
    );
  });

  it('mutated AgentDock templates (4,000): deleted keys, changed types, unknown and __proto__ keys, swaps, deep nesting, huge strings', () => {
    fc.assert(
      fc.property(
        fixtureArb,
        fc.array(mutationArb, { minLength: 1, maxLength: 6 }),
        optionsArb,
        fc.boolean(),
        (text, mutations, options, asText) => {
          const doc = mutate(JSON.parse(text) as Json, mutations);
          let input: unknown = doc;
          if (asText) {
            try {
              input = JSON.stringify(doc);
            } catch {
              input = doc; // too deep to serialize: validate the object
            }
          }
          checkInput(input, options);
        },
      ),
      { seed: 1_004, numRuns: 4_000 },
    );
  });

  it('corrupted JSON text of AgentDock templates (1,000)', () => {
    fc.assert(
      fc.property(fixtureArb, fc.array(textEditArb, { minLength: 1, maxLength: 4 }), (text, edits) =>
        checkInput(corrupt(text, edits)),
      ),
      { seed: 1_005, numRuns: 1_000 },
    );
  });

  it('ran 10,000 cases, over 1,000 of them valid templates (so the compile check ran)', () => {
    expect(stats.checked).toBeGreaterThanOrEqual(10_000);
    expect(stats.valid).toBeGreaterThan(1_000);
    expect(stats.validWithSteps).toBeGreaterThan(500);
  });

  it('reports an unknown key, with its path, wherever it is inserted in a strict object', () => {
    const strictPaths = (doc: Json): Path[] =>
      pathsOf(doc).filter((p) => {
        const last = p[p.length - 1];
        const parent = p[p.length - 2];
        if (last === 'orchestration' || last === 'availableTools') return true;
        return typeof last === 'number' && (parent === 'steps' || parent === 'conditions');
      });
    fc.assert(
      fc.property(
        fc.constantFrom(...orchestrated),
        fc.nat(),
        fc.oneof(fc.constantFrom(...UNKNOWN_KEYS.slice(0, 11)), fc.constantFrom('x-extra', 'Name', 'when')),
        (text, at, key) => {
          const doc = JSON.parse(text) as Json;
          const candidates = strictPaths(doc);
          const path = candidates[at % candidates.length]!;
          define(getAt(doc, path) as object, key, 1);
          const result = validateTemplate(doc);
          expect(result.success).toBe(false);
          const issues = result.success ? [] : result.issues;
          const hit = issues.find(
            (i) =>
              i.code === 'unknown_key' && (i.path.endsWith(`.${key}`) || i.path.endsWith(`[${JSON.stringify(key)}]`)),
          );
          expect(hit, JSON.stringify({ path, key, issues })).toBeDefined();
        },
      ),
      { seed: 1_006, numRuns: 300 },
    );
  });

  it('handles single huge strings (200,000 characters) in every string field quickly', () => {
    const doc = JSON.parse(orchestrated[0]!) as Json;
    const stringPaths = pathsOf(doc).filter((p) => typeof getAt(doc, p) === 'string');
    const started = performance.now();
    for (const path of stringPaths.slice(0, 60)) {
      const copy = JSON.parse(orchestrated[0]!) as Json;
      checkInput(setAt(copy, path, `${'x'.repeat(200_000)}(`));
    }
    expect(performance.now() - started).toBeLessThan(15_000);
  });

  // Regression (found by this fuzzing): compileOrchestration told a template from an
  // orchestration block by `'steps' in source`, so a template keeping an unknown top-level
  // "steps" key validated but was then rejected by the manager.
  it('a template with an extra top-level "steps" key that validates also works with the manager', async () => {
    const template = {
      id: 'legacy',
      tools: ['search', 'think'],
      steps: ['kept as an unknown top-level key'],
      orchestration: { steps: [{ name: 'Only', isDefault: true, availableTools: { allowed: ['search'] } }] },
    };
    const result = validateTemplate(template);
    expect(result.success).toBe(true);
    const manager = createOrchestrationManager();
    expect(await manager.getAllowedTools(template, [], 's', ['search', 'think'])).toEqual(['search']);
  });

  // Regression (found by this fuzzing): a template WITHOUT an "orchestration" block but with
  // an unknown top-level "steps" key was read as an orchestration block and rejected.
  it('precondition: that template validates', () => {
    expect(validateTemplate({ id: 'plain', tools: ['search', 'think'], steps: null }).success).toBe(true);
  });
  it('a parsed template with a top-level "steps" key and no orchestration works with the manager', async () => {
    const template = parseTemplate({ id: 'plain', tools: ['search', 'think'], steps: null });
    const manager = createOrchestrationManager();
    expect(await manager.getAllowedTools(template, [], 's', ['search', 'think'])).toEqual(['search', 'think']);
  });

  // Regression (found by this fuzzing): "did you mean" hints ran an edit distance over names
  // of any length, quadratic in their lengths: ~22 s for 100,000-character near-miss names.
  it('validates huge near-miss names without quadratic "did you mean" hints', () => {
    const long = 'x'.repeat(20_000);
    const template = {
      id: 'slow',
      tools: [`${long}tool`],
      orchestration: { defaultStep: `${long}A`, steps: [{ name: `${long}B`, sequence: [`${long}tol`] }] },
    };
    const started = performance.now();
    const result = validateTemplate(template);
    const elapsed = performance.now() - started;
    expect(result.success).toBe(false);
    expect(elapsed).toBeLessThan(500);
  });
});
