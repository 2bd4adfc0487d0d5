/**
 * `npm run bench:history`: what a long tool history costs. A session whose `recentlyUsedTools`
 * is filled to its `historyLimit` (10, 1,000, 100,000), against the same limit with an empty
 * history, for the two inputs a call makes: the decision (`tool-requested`: judged, and reserved
 * when allowed) and the write that commits it (`tool-completed`: the history grows by one and
 * drops its oldest).
 *
 * 1. In memory, the pure `transition()` (no store): µs per input, for three templates: `plain`
 *    (one step), `agentdock` (AgentDock's cognitive reasoner, whose steps switch on
 *    `sequence_match`: it reads the end of the history) and `tool_used` (a step whose condition
 *    asks whether a tool is anywhere in the history, one that never is).
 * 2. Per write on each store (memory, SQLite, Redis, PostgreSQL), through the manager:
 *    `requestTool` (decide and reserve: one write) and `completeTool` (commit: one write), ms per
 *    call, with no event log and with an event log of 100 (`baton serve` and `baton mcp` keep
 *    100 by default; each entry holds the whole history), the stored state's bytes, and the
 *    event log the store keeps for the session afterwards (entries, bytes).
 *
 * Cells alternate within each round, so machine noise hits every limit alike; medians over the
 * rounds. The ratio is to the 10-entry cell of the same row.
 *
 *   npm run bench:history [-- --limits=10,1000,100000 --stores=memory,sqlite,redis,postgres
 *                            --event-log=0,100 --rounds=5 --no-pure --no-stores --dist --json]
 *
 * `--dist`: the pure part from the built package (`npx tsc -p tsconfig.build.json` first), without
 * tsx's per-closure `__name()` (see bench/running-calls.ts); the stores always run `src/`.
 *
 * Redis and PostgreSQL are skipped, and said so, when unreachable (`redis://127.0.0.1:6379`,
 * `postgres://postgres@127.0.0.1:5432/test`, or BATON_BENCH_REDIS / BATON_BENCH_POSTGRES).
 */
import { randomUUID } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import type * as Compile from '../src/core/compile.js';
import type { OrchestrationConfig } from '../src/core/schema.js';
import type * as State from '../src/core/state.js';
import type { OrchestrationState } from '../src/core/state.js';
import type * as Transition from '../src/core/transition.js';
import { createOrchestrationManager } from '../src/index.js';
import { AGENTDOCK_TEMPLATE_URL, loadAgent, median } from './core.js';
import { open, type StoreKind, unavailable } from './stores.js';

const args = process.argv.slice(2);
const value = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const listOf = (name: string, fallback: string) => (value(name) ?? fallback).split(',').filter((v) => v !== '');
const LIMITS = listOf('limits', '10,1000,100000').map(Number);
const STORES = listOf('stores', 'memory,sqlite,redis,postgres') as StoreKind[];
const EVENT_LOGS = listOf('event-log', '0,100').map(Number);
const ROUNDS = Number(value('rounds') ?? 5);
const JSON_OUT = args.includes('--json');
// The pure part from the built package with --dist (see bench/running-calls.ts on tsx's `__name`).
const from = args.includes('--dist') ? '../dist/core' : '../src/core';
const { compileOrchestration } = (await import(`${from}/compile.js`)) as typeof Compile;
const { createState } = (await import(`${from}/state.js`)) as typeof State;
const { transition } = (await import(`${from}/transition.js`)) as typeof Transition;
const REDIS_URL = process.env.BATON_BENCH_REDIS ?? 'redis://127.0.0.1:6379';
const POSTGRES_URL = process.env.BATON_BENCH_POSTGRES ?? 'postgres://postgres@127.0.0.1:5432/test';

const agentdock = loadAgent(AGENTDOCK_TEMPLATE_URL, 'agentdock');
const TOOLS = [...agentdock.tools];
const QUESTION = 'How many electric vehicles will be on the road by 2030?';
const MESSAGE = { key: 'm1', text: QUESTION, lower: QUESTION.toLowerCase() };
const MESSAGES = [{ role: 'user' as const, content: QUESTION }];

const TEMPLATES: Record<string, OrchestrationConfig> = {
  plain: { steps: [{ name: 'Work', isDefault: true }] },
  agentdock: agentdock.orchestration,
  tool_used: {
    steps: [
      {
        name: 'Review',
        conditions: [{ type: 'tool_used', value: 'publish' }],
        availableTools: { allowed: ['search'] },
      },
      { name: 'Work', isDefault: true },
    ],
  },
};

/** A history of `length` tools (the agent's, round-robin; never `publish`). */
function history(length: number): string[] {
  return Array.from({ length }, (_, i) => TOOLS[i % TOOLS.length]!);
}

/** µs per run of `fn`, over at least 20 ms (and at least 3 runs). */
function microsPer(fn: (i: number) => void): number {
  let runs = 0;
  const start = performance.now();
  let elapsed = 0;
  while (runs < 3 || elapsed < 20) {
    fn(runs++);
    elapsed = performance.now() - start;
  }
  return (elapsed * 1000) / runs;
}

// ---------------------------------------------------------------------------------------------
// 1. The pure transition

interface PureCell {
  template: string;
  limit: number;
  full: boolean;
  decide: number[];
  commit: number[];
}

function pureSetup(template: string, limit: number, full: boolean) {
  const config = { ...TEMPLATES[template]!, historyLimit: limit };
  const plan = compileOrchestration(config);
  const context = { now: 1_000, leaseMs: 3_600_000, message: MESSAGE, historyLimit: limit };
  const base: OrchestrationState = { ...createState('bench', 0), recentlyUsedTools: full ? history(limit) : [] };
  const state = transition(plan, base, { type: 'user-message' }, context).state;
  const step = transition(plan, state, { type: 'step-started', agentTools: TOOLS }, context).decision as {
    allowedTools: readonly string[];
  };
  const tool = step.allowedTools[0];
  if (tool === undefined) throw new Error(`${template}: no tool allowed`);
  const request = (id: string) => ({ type: 'tool-requested' as const, tool, toolCallId: id, agentTools: TOOLS });
  const reserved = transition(plan, state, request('held'), context);
  if ((reserved.decision as { allowed?: boolean }).allowed !== true) throw new Error(`${template}: ${tool} refused`);
  return {
    decide: (i: number) => {
      const decision = transition(plan, state, request(`c${i}`), context).decision as { allowed?: boolean };
      if (decision.allowed !== true) throw new Error('refused');
    },
    commit: () => {
      const next = transition(plan, reserved.state, { type: 'tool-completed', toolCallId: 'held' }, context).state;
      if (next.pending !== undefined) throw new Error('not committed');
    },
  };
}

function runPure(): PureCell[] {
  const cells: PureCell[] = [];
  for (const template of Object.keys(TEMPLATES)) {
    for (const limit of LIMITS) {
      for (const full of [false, true]) cells.push({ template, limit, full, decide: [], commit: [] });
    }
  }
  const setups = cells.map((c) => pureSetup(c.template, c.limit, c.full));
  for (const s of setups) {
    microsPer(s.decide); // warm up
    microsPer(s.commit);
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < cells.length; k++) {
      const i = (k + round) % cells.length;
      cells[i]!.decide.push(microsPer(setups[i]!.decide));
      cells[i]!.commit.push(microsPer(setups[i]!.commit));
    }
  }
  return cells;
}

// ---------------------------------------------------------------------------------------------
// 2. Per write on each store

interface StoreCell {
  store: StoreKind;
  limit: number;
  eventLog: number;
  request: number[];
  complete: number[];
  stateBytes: number;
  /** Bytes of the event log the store keeps for the session after the run (its entries as JSON). */
  logBytes: number;
  logEntries: number;
}

/** Calls per cell and round: fewer where one write carries a large history. */
const pairsFor = (limit: number) => (limit >= 100_000 ? 3 : limit >= 10_000 ? 10 : 40);

async function runStore(kind: StoreKind): Promise<StoreCell[]> {
  const harness = await open(kind, REDIS_URL, POSTGRES_URL);
  const run = randomUUID().slice(0, 8);
  const cells: StoreCell[] = [];
  const sessions: {
    manager: ReturnType<typeof createOrchestrationManager>;
    id: string;
    config: typeof agentdock.template;
  }[] = [];
  try {
    for (const limit of LIMITS) {
      for (const eventLog of EVENT_LOGS) {
        const config = { ...agentdock.template, orchestration: { ...agentdock.orchestration, historyLimit: limit } };
        const manager = createOrchestrationManager({ store: harness.store, historyLimit: limit, eventLog });
        const id = `bench-history-${run}-${limit}-${eventLog}`;
        await manager.updateState(id, { recentlyUsedTools: history(limit) });
        sessions.push({ manager, id, config });
        cells.push({
          store: kind,
          limit,
          eventLog,
          request: [],
          complete: [],
          stateBytes: 0,
          logBytes: 0,
          logEntries: 0,
        });
      }
    }
    let n = 0;
    const pair = async (c: number, into?: StoreCell) => {
      const { manager, id, config } = sessions[c]!;
      const allowed = await manager.getAllowedTools(config, MESSAGES, id, TOOLS);
      const toolCallId = `c${n++}`;
      const t0 = performance.now();
      const decision = await manager.requestTool(config, MESSAGES, id, {
        tool: allowed[0]!,
        toolCallId,
        agentTools: TOOLS,
      });
      const t1 = performance.now();
      if (!decision.allowed) throw new Error(`${kind}: refused: ${decision.reason.message}`);
      await manager.completeTool(config, MESSAGES, id, toolCallId);
      const t2 = performance.now();
      into?.request.push(t1 - t0);
      into?.complete.push(t2 - t1);
    };
    for (let c = 0; c < cells.length; c++) await pair(c); // warm up
    for (let round = 0; round < ROUNDS; round++) {
      for (let k = 0; k < cells.length; k++) {
        const c = (k + round) % cells.length;
        for (let p = 0; p < pairsFor(cells[c]!.limit); p++) await pair(c, cells[c]);
      }
    }
    for (let c = 0; c < cells.length; c++) {
      const { manager, id } = sessions[c]!;
      const state = await manager.getState(id);
      if (state?.recentlyUsedTools.length !== cells[c]!.limit) throw new Error(`${kind}: history not at its limit`);
      cells[c]!.stateBytes = JSON.stringify(state).length;
      const log = (await harness.store.readLog?.(id)) ?? [];
      cells[c]!.logEntries = log.length;
      cells[c]!.logBytes = JSON.stringify(log).length;
      await harness.store.delete(id);
    }
  } finally {
    await harness.close();
  }
  return cells;
}

// ---------------------------------------------------------------------------------------------

const fmt = (v: number) => (v < 10 ? v.toFixed(2) : v < 1000 ? v.toFixed(1) : v.toFixed(0));
const int = (v: number) => Math.round(v).toLocaleString('en-US');
console.log(
  `history cost: limits ${LIMITS.join(' / ')}, ${ROUNDS} rounds; ${cpus().length} × ${cpus()[0]?.model ?? '?'}, ` +
    `load ${loadavg()[0]!.toFixed(2)}, Node ${process.version}`,
);
const out: { pure?: unknown; stores?: unknown; skipped?: unknown } = {};

if (!args.includes('--no-pure')) {
  const cells = runPure();
  console.log('\nIn memory, pure transition(): µs per input (nothing running), x = ratio to the same row at 10');
  console.log(`| template | history | ${LIMITS.map((l) => `limit ${int(l)}: decide | commit`).join(' | ')} |`);
  console.log(`|---|---|${LIMITS.map(() => '---:|---:').join('|')}|`);
  const rows: Record<string, Record<string, unknown>> = {};
  for (const template of Object.keys(TEMPLATES)) {
    for (const full of [false, true]) {
      const row = cells.filter((c) => c.template === template && c.full === full);
      const base = row[0]!;
      const d0 = median(base.decide);
      const c0 = median(base.commit);
      const cellsText = row.map((c) => {
        const d = median(c.decide);
        const w = median(c.commit);
        const key = `${template}.${full ? 'full' : 'empty'}.${c.limit}`;
        rows[key] = { decide: d, commit: w };
        return `${fmt(d)} (x${(d / d0).toFixed(2)}) | ${fmt(w)} (x${(w / c0).toFixed(2)})`;
      });
      console.log(`| ${template} | ${full ? 'full' : 'empty'} | ${cellsText.join(' | ')} |`);
    }
  }
  out.pure = rows;
}

if (!args.includes('--no-stores')) {
  const all: StoreCell[] = [];
  const skipped: Record<string, string> = {};
  for (const kind of STORES) {
    const reason = await unavailable(kind, REDIS_URL, POSTGRES_URL);
    if (reason !== undefined) {
      skipped[kind] = reason;
      continue;
    }
    all.push(...(await runStore(kind)));
  }
  console.log(
    '\nPer write through the manager, history full (agentdock template): ms per requestTool (decide + reserve) and completeTool (commit)',
  );
  console.log(
    '| store | event log | limit | state bytes | log kept: entries, bytes | requestTool ms | x | completeTool ms | x |',
  );
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
  const rows: Record<string, unknown>[] = [];
  for (const cell of all) {
    const base = all.find((c) => c.store === cell.store && c.eventLog === cell.eventLog)!;
    const r = median(cell.request);
    const w = median(cell.complete);
    console.log(
      `| ${cell.store} | ${cell.eventLog} | ${int(cell.limit)} | ${int(cell.stateBytes)} | ${cell.logEntries}, ${int(cell.logBytes)} | ${r.toFixed(3)} | ` +
        `${(r / median(base.request)).toFixed(1)} | ${w.toFixed(3)} | ${(w / median(base.complete)).toFixed(1)} |`,
    );
    rows.push({
      store: cell.store,
      eventLog: cell.eventLog,
      limit: cell.limit,
      stateBytes: cell.stateBytes,
      logBytes: cell.logBytes,
      requestMs: r,
      completeMs: w,
    });
  }
  for (const [kind, reason] of Object.entries(skipped)) console.log(`SKIPPED ${kind}: ${reason}`);
  out.stores = rows;
  out.skipped = skipped;
}
if (JSON_OUT) console.log(`BENCH_JSON ${JSON.stringify(out)}`);
