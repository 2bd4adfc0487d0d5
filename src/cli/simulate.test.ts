import { readFileSync } from 'node:fs';
import { PassThrough, Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { AgentTemplate } from '../core/schema.js';
import { parseTemplate } from '../core/validate-template.js';
import { loadTemplate } from '../templates/load-template.js';
import {
  formatSequence,
  formatSimulationTable,
  parseEvents,
  runSimulate,
  SimulateExitCode,
  type SimulationEvent,
  simulate,
} from './simulate.js';

const EXAMPLES = new URL('../../examples/agents/', import.meta.url).pathname;
const COGNITIVE = `${EXAMPLES}cognitive-reasoner.json`;
const COGNITIVE_EVENTS = `${EXAMPLES}cognitive-reasoner.events.jsonl`;

function events(lines: readonly unknown[]): SimulationEvent[] {
  const parsed = parseEvents(lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n'));
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  return parsed.events;
}

/** A template where a rejected `think` would, if recorded, switch to the step "Thought". */
const gated: AgentTemplate = parseTemplate({
  id: 'gated',
  tools: ['search', 'think', 'reflect'],
  orchestration: {
    steps: [
      { name: 'Thought', conditions: [{ type: 'tool_used', value: 'think' }] },
      { name: 'Research', isDefault: true, sequence: ['search', 'think'] },
    ],
  },
});

class Sink extends Writable {
  text = '';
  isTTY: boolean;
  constructor(tty = false) {
    super();
    this.isTTY = tty;
  }
  override _write(chunk: Buffer, _encoding: string, done: () => void) {
    this.text += chunk.toString();
    done();
  }
}

async function run(
  args: { template?: string; events?: string; stdin?: string; json?: boolean; tty?: boolean },
  env: Record<string, string> = {},
) {
  const stdin = new PassThrough();
  stdin.end(args.stdin ?? '');
  const stdout = new Sink(args.tty);
  const stderr = new Sink();
  const code = await runSimulate({
    templatePath: args.template ?? COGNITIVE,
    eventsPath: args.events ?? '-',
    json: args.json ?? false,
    stdin,
    stdout,
    stderr,
    env,
  });
  return { code, stdout: stdout.text, stderr: stderr.text };
}

describe('parseEvents', () => {
  it('reads user and tool events with their line numbers, skipping blank and // lines', () => {
    const parsed = parseEvents(
      [
        '// a comment',
        '',
        '{"user": "hi", "expect": {"step": null}}',
        '   ',
        '  // indented comment',
        '{"tool": "search", "expect": {"rejected": false, "allowed": ["a"], "sequenceIndex": 2}}',
      ].join('\r\n'),
    );
    expect(parsed).toEqual({
      ok: true,
      events: [
        { line: 3, kind: 'user', text: 'hi', expect: { step: null } },
        { line: 6, kind: 'tool', tool: 'search', expect: { rejected: false, allowed: ['a'], sequenceIndex: 2 } },
      ],
    });
  });

  it('reports every bad line at once, with its line number and what is wrong', () => {
    const parsed = parseEvents(
      [
        '{"user": "fine"}',
        '{"user": "broken",}',
        '{"tol": "search"}',
        '{"user": "a", "tool": "b"}',
        '{"user": 42}',
        '{"tool": ""}',
        '[1, 2]',
        '{"user": "x", "expect": {"rejected": true}}',
        '{"tool": "x", "expect": {"sequenceIdx": 1, "step": 3}}',
        '{"tool": "x", "expect": {"sequenceIndex": -1, "allowed": "search"}}',
        '{"tool": "x", "expect": []}',
      ].join('\n'),
    );
    expect(parsed.ok).toBe(false);
    if (parsed.ok) return;
    expect(parsed.errors).toEqual([
      { line: 2, column: 18, message: 'not valid JSON: a trailing comma before "}" (JSON allows none)' },
      {
        line: 3,
        message: 'unknown key "tol" (known keys: user, tool, args, context, expect); did you mean "tool"?',
      },
      { line: 3, message: 'an event needs "user" (a user message) or "tool" (a tool the model calls)' },
      { line: 4, message: 'an event has either "user" or "tool", not both; put them on two lines' },
      { line: 5, message: '"user" must be a string, got number' },
      { line: 6, message: '"tool" must be a tool name (a non-empty string), got an empty string' },
      {
        line: 7,
        message: 'an event must be a JSON object like {"user": "..."} or {"tool": "..."}, got an array',
      },
      { line: 8, message: 'expect.rejected applies to "tool" events only' },
      {
        line: 9,
        message:
          'expect: unknown key "sequenceIdx" (known keys: step, allowed, sequenceIndex, rejected, code, rule); did you mean "sequenceIndex"?',
      },
      { line: 9, message: 'expect.step must be a step name or null (no active step), got number' },
      { line: 10, message: 'expect.allowed must be an array of tool names' },
      { line: 10, message: 'expect.sequenceIndex must be an integer >= 0, got -1' },
      { line: 11, message: '"expect" must be an object like {"step": "ResearchMode"}, got an array' },
    ]);
  });
});

describe('simulate', () => {
  it('walks cognitive-reasoner through a research question, rejecting an out-of-order tool', async () => {
    const template = await loadTemplate(COGNITIVE);
    const result = await simulate(
      template,
      events([
        { user: 'How many electric vehicles will be on the road by 2030?' },
        { tool: 'think' },
        { tool: 'search' },
        { tool: 'think' },
        { tool: 'reflect' },
      ]),
    );
    expect(
      result.steps.map((s) => [s.activeStep, formatSequence(s.sequence), s.allowedTools, s.rejected?.code]),
    ).toEqual([
      ['ResearchMode', '0/3 next: search', ['search'], undefined],
      ['ResearchMode', '0/3 next: search', ['search'], 'sequence'],
      ['ResearchMode', '1/3 next: think', ['think'], undefined],
      ['ResearchMode', '2/3 next: reflect', ['reflect'], undefined],
      ['ResearchMode', '3/3 done', ['search', 'think', 'reflect'], undefined],
    ]);
    expect(result.rejected).toBe(1);
    expect(result.steps[1]!.rejected?.message).toBe('step "ResearchMode" expects search next (position 1 of 3)');
    expect(result.steps[0]!.events).toEqual([{ type: 'step-changed', from: undefined, to: 'ResearchMode' }]);
    expect(result.steps[4]!.events.map((e) => e.type)).toEqual([
      'tool-reserved',
      'sequence-advanced',
      'sequence-completed',
    ]);
  });

  it('does not record a rejected tool: a condition on it stays false', async () => {
    const result = await simulate(
      gated,
      events([{ user: 'go' }, { tool: 'think' }, { tool: 'search' }, { tool: 'think' }]),
    );
    expect(result.steps.map((s) => [s.activeStep, s.rejected === null])).toEqual([
      ['Research', true],
      ['Research', false], // think rejected: were it recorded, "Thought" would be active now
      ['Research', true],
      ['Thought', true], // think allowed and recorded: tool_used holds
    ]);
  });

  it('checks expectations after each event and explains every failure', async () => {
    const result = await simulate(
      gated,
      events([
        { user: 'go', expect: { step: 'Research', allowed: ['search'], sequenceIndex: 0 } },
        { tool: 'think', expect: { rejected: false, step: 'Thought' } },
        { tool: 'search', expect: { rejected: true, allowed: ['search', 'think'], sequenceIndex: 0 } },
        { tool: 'think', expect: { step: null } },
      ]),
    );
    expect(result.steps.map((s) => s.expectations)).toEqual([
      { passed: true, failures: [] },
      {
        passed: false,
        failures: [
          'expected step "Thought", got "Research"',
          'expected the call to be allowed, but it was rejected: step "Research" expects search next (position 1 of 2)',
        ],
      },
      {
        passed: false,
        failures: [
          'expected allowed [search, think], got [think]',
          'expected sequenceIndex 0, got 1',
          'expected the call to be rejected, but it was allowed',
        ],
      },
      { passed: false, failures: ['expected step no step, got "Thought"'] },
    ]);
    expect(result.expectationsChecked).toBe(4);
    expect(result.expectationsFailed).toBe(3);
  });

  it('allows every tool when no step is active, and takes the tools from the events when the template lists none', async () => {
    const template = parseTemplate({ id: 'bare' });
    const result = await simulate(template, events([{ user: 'hi', expect: { step: null } }, { tool: 'anything' }]));
    expect(result.agentTools).toEqual(['anything']);
    expect(result.steps[1]).toMatchObject({
      activeStep: null,
      sequence: null,
      allowedTools: ['anything'],
      rejected: null,
    });
    expect(result.steps[0]!.expectations?.passed).toBe(true);
  });

  it('takes an AgentDock template that lists only its model at its word: it has no tools', async () => {
    const template = parseTemplate({ agentId: 'vision', nodes: ['llm.gemini'] });
    const result = await simulate(template, events([{ user: 'hi' }, { tool: 'search' }]));
    expect(result.agentTools).toEqual([]);
    expect(result.steps[1]!.rejected?.code).toBe('no-such-tool');
  });

  it('rejects a tool the agent does not have', async () => {
    const result = await simulate(gated, events([{ user: 'go' }, { tool: 'delete_everything' }]));
    expect(result.steps[1]!.rejected).toEqual({
      code: 'no-such-tool',
      message: '"delete_everything" is not one of the agent\'s tools',
    });
  });
});

describe('simulate: rules on calls', () => {
  const billing: AgentTemplate = parseTemplate({
    id: 'billing',
    tools: ['pay', 'search'],
    orchestration: {
      rules: [
        { tools: ['pay'], when: 'args.amount > 1000', effect: 'deny', reason: 'Payments over 1000 need finance' },
        { tools: ['pay'], when: "context.role == 'buyer'", effect: 'allow', reason: 'Only buyers pay' },
        { tools: ['pay'], when: 'args.amount > 100', effect: 'approve', reason: 'Payments over 100 need a person' },
        { tools: ['search'], limit: { max: 1, per: 'turn' }, reason: 'One search per question' },
      ],
      steps: [{ name: 'Billing', isDefault: true }],
    },
  });

  it('decides each call on its args and context, and checks the refusal code and rule', async () => {
    const result = await simulate(
      billing,
      events([
        { user: 'pay the invoices' },
        { tool: 'pay', args: { amount: 50 }, context: { role: 'buyer' }, expect: { rejected: false, code: null } },
        { tool: 'pay', args: { amount: 5000 }, context: { role: 'buyer' }, expect: { code: 'rule', rule: 'rules[0]' } },
        { tool: 'pay', args: { amount: 50 }, context: { role: 'guest' }, expect: { code: 'rule', rule: 'rules[1]' } },
        {
          tool: 'pay',
          args: { amount: 500 },
          context: { role: 'buyer' },
          expect: { code: 'approval-required', rule: 'rules[2]' },
        },
        { tool: 'search', expect: { rule: null } },
        { tool: 'search', expect: { code: 'limit', rule: 'rules[3]', allowed: ['pay'] } },
        // Without args, a condition on them cannot be evaluated: the call is refused (fail closed).
        { tool: 'pay', context: { role: 'buyer' }, expect: { code: 'rule', rule: 'rules[0]' } },
      ]),
    );
    expect(result.steps.map((step) => step.expectations)).toEqual(
      Array.from({ length: 8 }, () => ({ passed: true, failures: [] })).map((passed, i) => (i === 0 ? null : passed)),
    );
    expect(result.steps[7]?.rejected?.message).toContain('could not be evaluated');
  });

  it('explains a failed expectation on a rule outcome', async () => {
    const result = await simulate(
      billing,
      events([
        { tool: 'pay', args: { amount: 50 }, context: { role: 'buyer' }, expect: { code: 'rule', rule: 'rules[0]' } },
        { tool: 'pay', args: { amount: 5000 }, context: { role: 'buyer' }, expect: { rule: 'rules[2]' } },
      ]),
    );
    expect(result.steps[0]?.expectations?.failures).toEqual([
      'expected refusal code rule, got none (the call was allowed)',
      'expected rule rules[0] to refuse the call, got none (the call was allowed)',
    ]);
    expect(result.steps[1]?.expectations?.failures).toEqual([
      'expected rule rules[2] to refuse the call, got rules[0]: Payments over 1000 need finance',
    ]);
    expect(formatSimulationTable(result)).toContain('rejected by rules[0]: Payments over 1000 need finance');
  });

  it('refuses args or context that are not objects, and rule expectations on user events', () => {
    const parsed = parseEvents(
      [
        JSON.stringify({ tool: 'pay', args: 5 }),
        JSON.stringify({ user: 'hi', context: { role: 'x' } }),
        JSON.stringify({ user: 'hi', expect: { rule: 'rules[0]' } }),
        JSON.stringify({ tool: 'pay', expect: { code: 3 } }),
      ].join('\n'),
    );
    expect(parsed.ok ? [] : parsed.errors).toEqual([
      { line: 1, message: '"args" must be a JSON object like {"amount": 120}, got number' },
      { line: 2, message: '"context" applies to "tool" events only' },
      { line: 3, message: 'expect.rule applies to "tool" events only' },
      { line: 4, message: 'expect.code must be a string or null (the call was not refused), got number' },
    ]);
  });
});

describe('formatSimulationTable', () => {
  it('prints aligned columns and notes for rejections, step changes and expectations', async () => {
    const result = await simulate(
      gated,
      events([
        { user: 'go', expect: { step: 'Research' } },
        { tool: 'think', expect: { step: 'Thought' } },
      ]),
    );
    expect(formatSimulationTable(result).split('\n')).toEqual([
      '#  event        step      sequence          allowed  note',
      '1  user: "go"   Research  0/2 next: search  search   step (none) → Research; ✓ expectations met',
      '2  tool: think  Research  0/2 next: search  search   ✗ rejected: step "Research" expects search next (position 1 of 2); ✗ FAILED: expected step "Thought", got "Research"',
      '',
    ]);
  });

  it('shortens long user messages and shows blocked sequences', async () => {
    const long = `Please research ${'very '.repeat(20)}carefully`;
    const table = formatSimulationTable(await simulate(gated, events([{ user: long }])));
    const cell = table.split('\n')[1]!.slice(3, 3 + 44);
    expect(cell).toBe('user: "Please research very very very very …');
    expect(table).not.toContain('carefully');
    expect(
      formatSequence({ index: 1, length: 3, expected: ['think', 'reflect'], completed: false, blocked: true }),
    ).toBe('1/3 blocked: think|reflect');
    expect(formatSequence(null)).toBe('-');
  });
});

describe('runSimulate', () => {
  it('replays the committed example events with every expectation met (exit 0)', async () => {
    const result = await run({ events: COGNITIVE_EVENTS });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(SimulateExitCode.ok);
    expect(result.stdout).toContain('✗ rejected: step "ResearchMode" expects search next (position 1 of 3)');
    expect(result.stdout).toMatch(/\d+ events, 2 rejected tool calls, all \d+ expectations met\n$/);
    expect(result.stdout).not.toContain('\u001b[');
  });

  it('reads events from stdin with -, and exits 1 naming the failed events', async () => {
    const result = await run({
      stdin:
        '{"user": "Critique this plan", "expect": {"step": "EvaluationMode"}}\n{"tool": "debate", "expect": {"rejected": false}}\n',
    });
    expect(result.code).toBe(SimulateExitCode.failed);
    expect(result.stdout).toContain(
      '✗ FAILED: expected the call to be allowed, but it was rejected: step "EvaluationMode" expects critique next (position 1 of 3)',
    );
    expect(result.stdout).toContain('1 of 2 expectations failed: #2 (line 2)');
  });

  it('prints one JSON object per event with --json', async () => {
    const result = await run({ json: true, stdin: '{"user": "compare solar vs wind"}\n// c\n{"tool": "search"}\n' });
    expect(result.code).toBe(0);
    const objects = result.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(objects).toHaveLength(2);
    expect(objects[1]).toMatchObject({
      index: 2,
      line: 3,
      event: { tool: 'search' },
      activeStep: 'ComparisonMode',
      sequence: { index: 1, length: 3, expected: ['compare'], completed: false, blocked: false },
      allowedTools: ['compare'],
      rejected: null,
      expectations: null,
    });
  });

  it('exits 2 on bad event lines, printing each as source:line, and replays nothing', async () => {
    const result = await run({ stdin: '{"user": "ok"}\n{"tool": search}\n{"usr": "x"}\n' });
    expect(result.code).toBe(SimulateExitCode.badEvents);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(
      'stdin:2:10: not valid JSON: expected a value, found "search" (JSON knows only true, false and null)',
    );
    expect(result.stderr).toContain(
      'stdin:3: unknown key "usr" (known keys: user, tool, args, context, expect); did you mean "user"?',
    );
    expect(result.stderr).toContain('2 bad event lines in stdin; nothing was replayed');
  });

  it('exits 2 when the events file cannot be read', async () => {
    const result = await run({ events: '/nonexistent/events.jsonl' });
    expect(result.code).toBe(SimulateExitCode.badEvents);
    expect(result.stderr).toBe('baton simulate: cannot read the events /nonexistent/events.jsonl: no such file\n');
  });

  it('exits 1 with the issues of an invalid template', async () => {
    const result = await run({ template: '/nonexistent/agent.json', stdin: '{"user": "x"}' });
    expect(result.code).toBe(SimulateExitCode.failed);
    expect(result.stderr).toContain('/nonexistent/agent.json: error: cannot read the file: no such file');
  });

  it('colours only a terminal, and never with NO_COLOR', async () => {
    const stdin = readFileSync(COGNITIVE_EVENTS, 'utf8');
    expect((await run({ stdin, tty: true })).stdout).toContain('\u001b[');
    expect((await run({ stdin, tty: true }, { NO_COLOR: '1' })).stdout).not.toContain('\u001b[');
  });
});
