/**
 * `npm run bench:running`: what one decision costs while calls run in its session. One
 * `tool-requested` (pure `transition()`, no store) on a session with 0, 1, 8 and 32 reserved calls
 * still running, each independent of the request, for three templates: a plain step, a step with
 * a limit rule, and a step with a rule whose condition is expensive (a nested macro over 1,000
 * paths, within the documented bounds). The decision must not grow with the running calls: each
 * row prints its time and its ratio to the row with none running. Every row's session made the
 * same number of calls before (so it remembers as many call ids); rounds alternate the rows, and
 * each row's figure is its fastest round, the one other work on the machine disturbed least.
 *
 *   npm run bench:running [-- --rounds=15 --running=0,1,8,32 --templates=plain,limit,expensive --json]
 *
 * `--dist` measures the built package (`dist/`, `npx tsc -p tsconfig.build.json` first) instead
 * of `src/` through tsx: tsx compiles with esbuild's `keepNames`, which wraps every closure a
 * decision creates in a `__name()` call, and that alone made the new build's decision look 1.6x
 * slower than the old one's with nothing running, where the built packages are within 5%.
 *
 * It reads only what every build exports (`transition`, `compileOrchestration`, `createState`),
 * so it runs unchanged in an older checkout; a build that cannot hold a row's running calls (the
 * enumeration's cap of 8) prints `refused` there. Against another build, each in its own
 * process, alternating (the old build cannot hold 8, hence 7):
 *
 *   npx tsx bench/ab.ts --other=<checkout> -- bench/running-calls.ts --json --dist --running=0,1,7
 */
import type * as Compile from '../src/core/compile.js';
import type { OrchestrationConfig } from '../src/core/schema.js';
import type * as State from '../src/core/state.js';
import type { OrchestrationState } from '../src/core/state.js';
import type * as Transition from '../src/core/transition.js';

const args = process.argv.slice(2);
const from = args.includes('--dist') ? '../dist/core' : '../src/core';
const { compileOrchestration } = (await import(`${from}/compile.js`)) as typeof Compile;
const { createState } = (await import(`${from}/state.js`)) as typeof State;
const { transition } = (await import(`${from}/transition.js`)) as typeof Transition;

const flag = (name: string, fallback: number) => {
  const value = args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  return value === undefined ? fallback : Number(value);
};
const ROUNDS = flag('rounds', 15);
const JSON_OUT = args.includes('--json');
const list = (name: string, fallback: readonly string[]) =>
  args
    .find((a) => a.startsWith(`--${name}=`))
    ?.slice(name.length + 3)
    .split(',')
    .filter((v) => v !== '') ?? fallback;
const RUNNING = list('running', ['0', '1', '8', '32']).map(Number);
const TEMPLATES = list('templates', ['plain', 'limit', 'expensive']);
const TOOLS = ['search', 'fetch', 'read', 'write'];
const PATHS = Array.from({ length: 1_000 }, (_, i) => `/data/file-${i}.txt`);

const templates: Record<string, { config: OrchestrationConfig; args: unknown; calls: number }> = {
  plain: { config: { steps: [{ name: 'Work', isDefault: true }] }, args: {}, calls: 20_000 },
  limit: {
    config: {
      rules: [{ tools: ['write'], limit: { max: 1_000, per: 'session' }, reason: 'enough writes' }],
      steps: [{ name: 'Work', isDefault: true }],
    },
    args: {},
    calls: 20_000,
  },
  expensive: {
    config: {
      rules: [
        {
          tools: ['write'],
          when: 'args.paths.all(p, args.paths.exists_one(q, q == p))',
          effect: 'allow',
          reason: 'no path twice',
        },
      ],
      steps: [{ name: 'Work', isDefault: true }],
    },
    args: { paths: PATHS },
    calls: 3,
  },
};

/** Calls every session made and completed before the measured ones: the same on every row. */
const EARLIER_CALLS = 64;

/**
 * A session with `n` reserved calls of `search` still running. Every row's session first made and
 * completed the same {@link EARLIER_CALLS} calls (and the rows with fewer running calls as many
 * more as the others have running), so the rows differ in their running calls only, not in how
 * many call ids the session remembers.
 */
function sessionWith(config: OrchestrationConfig, n: number): OrchestrationState | undefined {
  const plan = compileOrchestration(config);
  const context = { now: 1_000, leaseMs: 3_600_000 };
  let state = transition(plan, createState('bench', 0), { type: 'user-message' }, context).state;
  const most = Math.max(...RUNNING);
  for (let i = 0; i < EARLIER_CALLS + most - n; i++) {
    const input = { type: 'tool-requested' as const, tool: 'search', toolCallId: `e${i}`, agentTools: TOOLS };
    const result = transition(plan, state, input, context);
    if ((result.decision as { allowed?: boolean }).allowed !== true) return undefined;
    state = transition(plan, result.state, { type: 'tool-completed', toolCallId: `e${i}` }, context).state;
  }
  for (let i = 0; i < n; i++) {
    const input = { type: 'tool-requested' as const, tool: 'search', toolCallId: `r${i}`, agentTools: TOOLS };
    const result = transition(plan, state, input, context);
    if ((result.decision as { allowed?: boolean }).allowed !== true) return undefined;
    state = result.state;
  }
  return state;
}

/** µs per decision of a `write` on `state`, over `calls` decisions. */
function time(config: OrchestrationConfig, state: OrchestrationState, callArgs: unknown, calls: number): number {
  const plan = compileOrchestration(config);
  const context = { now: 1_000, leaseMs: 3_600_000 };
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) {
    const input = {
      type: 'tool-requested' as const,
      tool: 'write',
      toolCallId: `w${i}`,
      agentTools: TOOLS,
      args: callArgs,
    };
    const decision = transition(plan, state, input, context).decision as { allowed?: boolean };
    if (decision.allowed !== true) throw new Error('the benchmark call was not allowed at once');
  }
  return Number(process.hrtime.bigint() - start) / 1_000 / calls;
}

const results: Record<string, Record<number, number | 'refused'>> = {};
for (const name of TEMPLATES) {
  const template = templates[name];
  if (template === undefined) throw new Error(`unknown template ${name}: ${Object.keys(templates).join(', ')}`);
  const { config, args: callArgs, calls } = template;
  results[name] = {};
  const states = new Map(RUNNING.map((n) => [n, sessionWith(config, n)]));
  const samples = new Map<number, number[]>(RUNNING.map((n) => [n, []]));
  // Round -1 warms the JIT up and is not counted (the first row measured would pay for it).
  for (let round = -1; round < ROUNDS; round++) {
    // Alternating within each round, so machine noise hits every row alike.
    for (const n of RUNNING) {
      const state = states.get(n);
      if (state === undefined) continue;
      try {
        const taken = time(config, state, callArgs, calls);
        if (round >= 0) samples.get(n)!.push(taken);
      } catch {
        states.set(n, undefined); // this build cannot decide it at once
      }
    }
  }
  for (const n of RUNNING) {
    const taken = samples.get(n)!;
    // The fastest round: the one the machine's other work disturbed least (rounds alternate rows).
    results[name]![n] = states.get(n) === undefined || taken.length === 0 ? 'refused' : Math.min(...taken);
  }
}

if (JSON_OUT) {
  console.log(JSON.stringify(results));
} else {
  for (const [name, row] of Object.entries(results)) {
    const base = row[RUNNING[0]!];
    const cells = RUNNING.map((n) => {
      const value = row[n];
      if (value === 'refused' || value === undefined) return `${n} running: refused`;
      const ratio = typeof base === 'number' ? ` (x${(value / base).toFixed(2)})` : '';
      return `${n} running: ${value < 10 ? value.toFixed(2) : value.toFixed(0)} µs${ratio}`;
    });
    console.log(`${name.padEnd(10)} ${cells.join('   ')}`);
  }
}
