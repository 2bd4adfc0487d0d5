/**
 * `npm run bench:facts`: what facts and labels (SPEC section 11) cost per call.
 *
 * 1. Reading them. A `pay` call against three templates that declare the same facts and labels
 *    and differ only in their rules: none; 10 rules that read only `args`; 10 rules that read
 *    `state.facts.<name>` and `state.labels` (`args.id in state.facts.listed`,
 *    `state.facts.quote.amount == args.amount`, `'confidential' in state.labels`, …). No rule
 *    refuses, so every rule is evaluated on every call. The session holds realistic facts: a union
 *    of 1,000 ids (the call's id is the 500th), a quote object, two labels raised. Measured as
 *    the pure decision (`decideToolCall`, no store) on a fixed state; the same on a new state
 *    object per call (as after every commit: the rules' view of the state is built once per state
 *    object); and `requestTool` + `completeTool` through the manager on the memory store (each
 *    session seeded by real calls: listings, a quote, two reads that raise the labels).
 * 2. Writing them. A `list_items` call whose result holds 100 items, completed with its result
 *    against a template without facts and one that declares 3 facts on it: a `union` of
 *    `result.items.map(i, i.id)` (the same 100 ids each time: it stays at 100), a `last` of an
 *    object, an `append` (max 50). Measured as the pure `tool-completed` transition (on the state
 *    its request made, a new object each call) and as `completeTool(…, { result })` through the
 *    manager on the memory store (the `requestTool` before it is not timed).
 * 3. Each rule's condition of (1) alone, evaluated on the variables a decision builds: where the
 *    difference goes (and the membership test with the id first, last and absent in the union).
 *
 * Rounds alternate the variants (in rotated order), so the machine's other work hits them alike;
 * each variant's figure is its fastest round (the least disturbed), and each difference and ratio
 * is also given per round, as its lowest and highest. The load average is printed before and after.
 *
 *   npx tsc -p tsconfig.build.json && npm run bench:facts -- --dist [--rounds=30 --calls=2000 --json]
 *
 * `--only` takes groups (`read`, `write`, `conditions`) or single rows (`decision`, `fresh`,
 * `manager`, `completion`, `complete`); `--variants=<name>,…` keeps only the variants named, for
 * a profile of one (`npx node --cpu-prof --import tsx bench/facts.ts --dist --only=decision
 * '--variants=10 rules on facts'`).
 *
 * `--dist` measures the built package (`npx tsc -p tsconfig.build.json` first) instead of `src/`
 * through tsx, whose `__name()` wrappers distort figures this small (see bench/running-calls.ts).
 */
import { cpus, loadavg } from 'node:os';
import type * as RuleExpressions from '../src/core/rule-expressions.js';
import type * as Rules from '../src/core/rules.js';
import type { Rule } from '../src/core/schema.js';
import type * as State from '../src/core/state.js';
import type { OrchestrationState } from '../src/core/state.js';
import type * as Transition from '../src/core/transition.js';
import type * as Index from '../src/index.js';
import type { OrchestrationConfig } from '../src/index.js';

const args = process.argv.slice(2);
const DIST = args.includes('--dist');
const from = DIST ? '../dist' : '../src';
const { compileOrchestration, createOrchestrationManager } = (await import(`${from}/index.js`)) as typeof Index;
const { createState } = (await import(`${from}/core/state.js`)) as typeof State;
const { decideToolCall, transition } = (await import(`${from}/core/transition.js`)) as typeof Transition;
const { compileExpression } = (await import(`${from}/core/rule-expressions.js`)) as typeof RuleExpressions;
const { celState, celValue } = (await import(`${from}/core/rules.js`)) as typeof Rules;

const flag = (name: string, fallback: number) => {
  const value = args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  return value === undefined ? fallback : Number(value);
};
const ROUNDS = flag('rounds', 30);
const CALLS = flag('calls', 2_000);
const JSON_OUT = args.includes('--json');
const ONLY = args
  .find((a) => a.startsWith('--only='))
  ?.slice(7)
  .split(',') ?? ['read', 'write', 'conditions'];
/** Only the variants named (`--variants=10 rules on facts`, for a profile of one). */
const VARIANTS = args
  .find((a) => a.startsWith('--variants='))
  ?.slice(11)
  .split(',');

const TOOLS = ['list_items', 'get_quote', 'read_file', 'pay'];
const IDS = Array.from({ length: 1_000 }, (_, i) => `item-${i}`);
const QUOTE = { id: 'q-7', amount: 120, currency: 'EUR' };
/** The measured call's input: its id is the 500th listed, its amount the quote's. */
const PAY = { id: 'item-499', quote: 'q-7', amount: 120, currency: 'EUR', to: 'acme' };
const CONTEXT = { role: 'buyer' };

// ---------------------------------------------------------------------------------------------
// 1. Reading facts and labels

const DECLARED: OrchestrationConfig = {
  facts: [
    { name: 'listed', tools: ['list_items'], value: 'result.items.map(i, i.id)', keep: 'union' },
    {
      name: 'quote',
      tools: ['get_quote'],
      value: "{'id': result.id, 'amount': result.amount, 'currency': result.currency}",
    },
  ],
  labels: [
    { name: 'confidential', tools: ['read_file'], when: "result.classification == 'confidential'" },
    { name: 'reviewed', tools: ['read_file'], when: 'result.reviewed' },
    { name: 'pii', tools: ['read_file'], when: 'result.pii' },
  ],
  steps: [{ name: 'Checkout', isDefault: true, availableTools: { allowed: TOOLS } }],
};
const ARG_RULES: Rule[] = [
  { tools: ['pay'], when: "args.id.startsWith('item-')", effect: 'allow', reason: 'items only' },
  { tools: ['pay'], when: 'args.amount > 1000000', effect: 'deny', reason: 'too much' },
  { tools: ['pay'], when: "args.to == 'mallory'", effect: 'deny', reason: 'blocked payee' },
  { tools: ['pay'], when: 'args.amount >= 0', effect: 'allow', reason: 'no negative payments' },
  { tools: ['pay'], when: "args.currency != 'EUR' && args.currency != 'USD'", effect: 'deny', reason: 'currency' },
  { tools: ['pay'], when: 'args.amount > 500000', effect: 'approve', reason: 'large payments' },
  { tools: ['pay'], when: "args.to.startsWith('new-')", effect: 'approve', reason: 'new payees' },
  { tools: ['pay'], when: 'size(args.id) == 0', effect: 'deny', reason: 'an id' },
  { tools: ['pay'], when: "args.quote == ''", effect: 'deny', reason: 'a quote' },
  { tools: ['pay'], when: "args.currency in ['EUR', 'USD']", effect: 'allow', reason: 'known currencies' },
];
const FACT_RULES: Rule[] = [
  { tools: ['pay'], when: 'args.id in state.facts.listed', effect: 'allow', reason: 'listed items only' },
  { tools: ['pay'], when: 'state.facts.quote.amount != args.amount', effect: 'deny', reason: 'the quoted amount' },
  { tools: ['pay'], when: "'confidential' in state.labels", effect: 'deny', reason: 'nothing after confidential' },
  { tools: ['pay'], when: 'state.facts.quote.amount == args.amount', effect: 'allow', reason: 'the quoted amount' },
  { tools: ['pay'], when: 'state.facts.quote.currency != args.currency', effect: 'deny', reason: 'the currency' },
  { tools: ['pay'], when: "'pii' in state.labels && args.amount > 500000", effect: 'approve', reason: 'large, pii' },
  { tools: ['pay'], when: 'state.facts.quote.id != args.quote', effect: 'approve', reason: 'another quote' },
  { tools: ['pay'], when: 'size(state.facts.listed) == 0', effect: 'deny', reason: 'nothing listed' },
  { tools: ['pay'], when: "!('reviewed' in state.labels)", effect: 'deny', reason: 'not reviewed' },
  { tools: ['pay'], when: 'state.facts.quote.id == args.quote', effect: 'allow', reason: 'this quote' },
];
const reading: Record<string, OrchestrationConfig> = {
  'no rules': DECLARED,
  '10 rules on args': { ...DECLARED, rules: ARG_RULES },
  '10 rules on facts': { ...DECLARED, rules: FACT_RULES },
};

/** A session as the seeding calls leave it (the pure decision's fixed state). */
const SEEDED: Pick<OrchestrationState, 'facts' | 'labels'> = {
  facts: { listed: { value: IDS }, quote: { value: QUOTE } },
  labels: ['reviewed', 'pii'],
};

/** Raises the facts and labels of {@link SEEDED} in session `sessionId` by real calls. */
async function seed(manager: ReturnType<typeof createOrchestrationManager>, config: OrchestrationConfig, id: string) {
  const call = async (tool: string, toolCallId: string, result: unknown) => {
    const decision = await manager.requestTool(config, undefined, id, { tool, toolCallId, agentTools: TOOLS });
    if (!decision.allowed) throw new Error(`the seeding call ${tool} was refused`);
    await manager.completeTool(config, undefined, id, toolCallId, { result });
  };
  for (let page = 0; page < 10; page++) {
    await call('list_items', `l${page}`, { items: IDS.slice(page * 100, page * 100 + 100).map((i) => ({ id: i })) });
  }
  await call('get_quote', 'q', QUOTE);
  await call('read_file', 'r1', { classification: 'internal', reviewed: true, pii: false });
  await call('read_file', 'r2', { classification: 'internal', reviewed: false, pii: true });
  const state = await manager.getStateManager().getState(id);
  if (JSON.stringify({ facts: state?.facts, labels: state?.labels }) !== JSON.stringify(SEEDED)) {
    throw new Error(`seeding did not set the facts expected: ${JSON.stringify(state?.labels)}`);
  }
}

/** `requestTool` + `completeTool` of a `pay` on one seeded session (its history full once warm). */
async function managerCall(config: OrchestrationConfig) {
  const manager = createOrchestrationManager();
  await seed(manager, config, 's');
  let n = 0;
  return async () => {
    const toolCallId = `p${n++}`;
    const decision = await manager.requestTool(config, undefined, 's', {
      tool: 'pay',
      toolCallId,
      agentTools: TOOLS,
      args: PAY,
      context: CONTEXT,
    });
    if (!decision.allowed) throw new Error(`the benchmark's call was refused: ${decision.reason.message}`);
    await manager.completeTool(config, undefined, 's', toolCallId);
  };
}

/** The pure decision of a `pay` on a seeded state: the same object each call, or a new one. */
function pureDecision(fresh: boolean) {
  return (config: OrchestrationConfig) => {
    const plan = compileOrchestration(config);
    const state: OrchestrationState = { ...createState('s', 0), activeStep: 'Checkout', ...SEEDED };
    let n = 0;
    return () => {
      const decision = decideToolCall(
        plan,
        fresh ? { ...state } : state,
        { tool: 'pay', toolCallId: `p${n++}`, agentTools: TOOLS, args: PAY },
        { now: 0, ruleContext: CONTEXT },
      );
      if (!decision.allowed) throw new Error(`the benchmark's call was refused: ${decision.reason.message}`);
    };
  };
}

// ---------------------------------------------------------------------------------------------
// 2. Writing facts

const PLAIN: OrchestrationConfig = { steps: [{ name: 'Work', isDefault: true, availableTools: { allowed: TOOLS } }] };
const writing: Record<string, OrchestrationConfig> = {
  'no facts': PLAIN,
  '3 facts': {
    ...PLAIN,
    facts: [
      { name: 'listed', tools: ['list_items'], value: 'result.items.map(i, i.id)', keep: 'union' },
      { name: 'page', tools: ['list_items'], value: "{'next': result.next, 'total': result.total}", keep: 'last' },
      { name: 'cursors', tools: ['list_items'], value: 'result.next', keep: 'append', max: 50 },
    ],
  },
};
const LISTING = {
  items: Array.from({ length: 100 }, (_, i) => ({ id: `item-${i}`, name: `Item ${i}`, price: 10 + i })),
  next: 'cursor-100',
  total: 1_000,
};

/**
 * One completion of a `list_items` with its result through the manager; the `requestTool` before
 * it is not timed. Returns the µs of the completion.
 */
async function managerCompletion(config: OrchestrationConfig) {
  const manager = createOrchestrationManager();
  let n = 0;
  return async () => {
    const toolCallId = `l${n++}`;
    const decision = await manager.requestTool(config, undefined, 's', {
      tool: 'list_items',
      toolCallId,
      agentTools: TOOLS,
    });
    if (!decision.allowed) throw new Error(`the benchmark's call was refused: ${decision.reason.message}`);
    const start = process.hrtime.bigint();
    await manager.completeTool(config, undefined, 's', toolCallId, { result: LISTING });
    return Number(process.hrtime.bigint() - start);
  };
}

/**
 * One pure `tool-completed` of a `list_items` with its result, on the state its request made from
 * a fixed committed state (facts at their steady sizes). Returns the ns of the completion.
 */
function pureCompletion(config: OrchestrationConfig) {
  const plan = compileOrchestration(config);
  const context = { now: 1_000, leaseMs: 3_600_000 };
  let state = transition(plan, createState('s', 0), { type: 'user-message' }, context).state;
  const complete = (s: OrchestrationState, toolCallId: string) => {
    const requested = transition(
      plan,
      s,
      { type: 'tool-requested', tool: 'list_items', toolCallId, agentTools: TOOLS },
      context,
    );
    if ((requested.decision as { allowed?: boolean }).allowed !== true) throw new Error('the call was refused');
    const start = process.hrtime.bigint();
    const done = transition(plan, requested.state, { type: 'tool-completed', toolCallId, result: LISTING }, context);
    return { state: done.state, ns: Number(process.hrtime.bigint() - start) };
  };
  // Committed 60 times first: the history and the appended list at their bounds.
  for (let i = 0; i < 60; i++) state = complete(state, `w${i}`).state;
  let n = 0;
  return () => complete(state, `l${n++}`).ns;
}

// ---------------------------------------------------------------------------------------------

/** µs per call of `calls` calls of `run` (or of the ns each returns, when it times itself). */
async function time(calls: number, run: () => unknown, selfTimed: boolean): Promise<number> {
  let ns = 0;
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) {
    let taken = run();
    // Awaited only when it is a promise: a microtask per call would weigh on the pure figures.
    if (taken instanceof Promise) taken = await taken;
    if (selfTimed) ns += taken as number;
  }
  if (!selfTimed) ns = Number(process.hrtime.bigint() - start);
  return ns / 1_000 / calls;
}

interface Row {
  what: string;
  /** Each variant's fastest round, µs per call. */
  fastest: Record<string, number>;
  /** Every round, µs per call, by variant (rounds in order). */
  rounds: Record<string, number[]>;
}

async function measure(
  what: string,
  variants: Record<string, OrchestrationConfig>,
  make: (config: OrchestrationConfig) => (() => unknown) | Promise<() => unknown>,
  selfTimed = false,
): Promise<Row> {
  const names = Object.keys(variants).filter((name) => VARIANTS === undefined || VARIANTS.includes(name));
  const runs = new Map<string, () => unknown>();
  for (const name of names) runs.set(name, await make(variants[name]!));
  // Warm up (JIT, plan caches, the sessions' history to its bound) before measuring.
  for (const name of names) await time(CALLS, runs.get(name)!, selfTimed);
  const rounds: Record<string, number[]> = Object.fromEntries(names.map((name) => [name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    // Rotated order, so no variant always runs first in its round.
    for (let k = 0; k < names.length; k++) {
      const name = names[(round + k) % names.length]!;
      rounds[name]!.push(await time(CALLS, runs.get(name)!, selfTimed));
    }
  }
  const fastest = Object.fromEntries(names.map((name) => [name, Math.min(...rounds[name]!)]));
  return { what, fastest, rounds };
}

/**
 * Each rule's condition alone (the evaluator's program on the variables a decision builds, the
 * state's view built once): µs per evaluation, fastest of the rounds, expressions alternating.
 * Also the membership test at other places in the union: first, last, absent.
 */
function measureConditions(): Record<string, number> {
  const state: OrchestrationState = { ...createState('s', 0), activeStep: 'Checkout', ...SEEDED };
  const variables = { tool: 'pay', args: celValue(PAY), state: celState(state), context: celValue(CONTEXT) };
  const expressions = [
    ...ARG_RULES.map((rule) => rule.when!),
    ...FACT_RULES.map((rule) => rule.when!),
    "'item-0' in state.facts.listed",
    "'item-999' in state.facts.listed",
    "'item-x' in state.facts.listed",
    "state.activeStep == 'Checkout'",
  ];
  const programs = expressions.map((expression) => {
    const { program, problem } = compileExpression(expression);
    if (program === undefined) throw new Error(`${expression}: ${problem}`);
    return program;
  });
  const best = expressions.map(() => Number.POSITIVE_INFINITY);
  for (let round = -1; round < ROUNDS; round++) {
    programs.forEach((program, k) => {
      const start = process.hrtime.bigint();
      for (let i = 0; i < CALLS; i++) program(variables);
      const taken = Number(process.hrtime.bigint() - start) / 1_000 / CALLS;
      if (round >= 0) best[k] = Math.min(best[k]!, taken);
    });
  }
  return Object.fromEntries(expressions.map((expression, k) => [expression, best[k]!]));
}

const loadBefore = loadavg()[0]!;
const rows: Row[] = [];
const conditions = ONLY.includes('conditions') ? measureConditions() : undefined;
const want = (group: string, row: string) => ONLY.includes(group) || ONLY.includes(row);
if (want('read', 'decision')) {
  rows.push(await measure('decision (decideToolCall), fixed state', reading, pureDecision(false)));
}
if (want('read', 'fresh')) {
  rows.push(await measure('decision (decideToolCall), new state object', reading, pureDecision(true)));
}
if (want('read', 'manager')) rows.push(await measure('requestTool + completeTool, memory store', reading, managerCall));
if (want('write', 'completion')) {
  rows.push(await measure('completion (tool-completed transition)', writing, pureCompletion, true));
}
if (want('write', 'complete')) {
  rows.push(await measure('completeTool(…, { result }), memory store', writing, managerCompletion, true));
}
const loadAfter = loadavg()[0]!;

/** `b` against `a`: the difference and ratio of the fastest rounds, and per round their extremes. */
function against(row: Row, a: string, b: string) {
  const x = row.rounds[a]!;
  const y = row.rounds[b]!;
  const diffs = y.map((v, i) => v - x[i]!);
  const ratios = y.map((v, i) => v / x[i]!);
  return {
    extra: row.fastest[b]! - row.fastest[a]!,
    extraRange: [Math.min(...diffs), Math.max(...diffs)] as const,
    ratio: row.fastest[b]! / row.fastest[a]!,
    ratioRange: [Math.min(...ratios), Math.max(...ratios)] as const,
  };
}

const pairs = (row: Row): [string, string][] => {
  const names = Object.keys(row.fastest);
  if (names.length < 2) return [];
  return names.length === 3
    ? [
        [names[1]!, names[2]!],
        [names[0]!, names[2]!],
        [names[0]!, names[1]!],
      ]
    : [[names[0]!, names[1]!]];
};

if (JSON_OUT) {
  console.log(
    JSON.stringify({
      load: [loadBefore, loadAfter],
      conditions,
      rows: rows.map((row) => ({
        ...row,
        against: pairs(row).map(([a, b]) => ({ a, b, ...against(row, a, b) })),
      })),
    }),
  );
} else {
  const f = (v: number) => (Math.abs(v) < 10 ? v.toFixed(2) : v.toFixed(1));
  console.log(
    `facts and labels: ${ROUNDS} alternating rounds of ${CALLS} calls, fastest round; ${DIST ? 'dist/' : 'src/ through tsx'}`,
  );
  console.log(
    `${cpus()[0]?.model ?? 'cpu'} x${cpus().length}, load ${loadBefore.toFixed(2)} before, ${loadAfter.toFixed(2)} after, node ${process.version}`,
  );
  for (const row of rows) {
    console.log(
      `\n${row.what}: ${Object.entries(row.fastest)
        .map(([n, v]) => `${n} ${f(v)} µs`)
        .join(', ')}`,
    );
    for (const [a, b] of pairs(row)) {
      const c = against(row, a, b);
      console.log(
        `  ${b} against ${a}: ${c.extra >= 0 ? '+' : ''}${f(c.extra)} µs (rounds ${f(c.extraRange[0])} to ${f(c.extraRange[1])}), ` +
          `x${c.ratio.toFixed(2)} (${c.ratioRange[0].toFixed(2)}-${c.ratioRange[1].toFixed(2)})`,
      );
    }
  }
  if (conditions !== undefined) {
    const sum = (rules: Rule[]) => rules.reduce((total, rule) => total + conditions[rule.when!]!, 0);
    console.log(
      `\neach condition alone, µs per evaluation (10 on args: ${f(sum(ARG_RULES))} in all, 10 on facts: ${f(sum(FACT_RULES))}):`,
    );
    for (const [expression, taken] of Object.entries(conditions)) console.log(`  ${taken.toFixed(3)}  ${expression}`);
  }
}
