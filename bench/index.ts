/**
 * `npm run bench` (which builds the package first): AgentDock's harness workload on the built
 * package beside AgentDock's own `OrchestrationManager` (bench/seed-turns.ts, each in its own
 * process, alternating), the cost of one orchestration turn (`getAllowedTools` then
 * `processToolUsage`) on Baton's own workloads, the heap kept per idle session, how the cost
 * per turn grows with steps, agent tools and historyLimit, the stores (bench/stores.ts), the
 * model loop's overhead (bench/ai-sdk.ts) and the store round trips per research turn
 * (bench/round-trips.ts). A benchmark, never part of `npm test`. Every ratio it prints was
 * measured in the same run.
 *
 * Flags (for profiling): `--only=harness|turns|memory|growth|stores|ai-sdk|round-trips` runs one
 * section; `--agent=agentdock|example` runs one of the two turn workloads; `--quick` runs fewer
 * repetitions.
 */
import { cpus, platform, release } from 'node:os';
import { Bench } from 'tinybench';
import {
  compileOrchestration,
  latestUserMessage,
  type OrchestrationConfig,
  type OrchestrationState,
} from '../src/index.js';
import { allowedTools, createState, handleMessage, recordToolUse } from '../src/internal.js';
import { type AiSdkBenchResult, formatAiSdkBench, runAiSdkBench } from './ai-sdk.js';
import {
  AGENTDOCK_TEMPLATE_URL,
  EXAMPLE_TEMPLATE_URL,
  getGc,
  loadAgent,
  makeSessions,
  makeWorkload,
  manyStepsConfig,
  median,
  messagesAt,
  paddedTools,
  pickTool,
  prefillHistory,
  quantile,
  type ReferenceAgent,
  runTurns,
  type Session,
  sessionId,
  settledHeap,
  TURNS_PER_MESSAGE,
  timerOverheadMicros,
  turn,
  type Workload,
  withHistoryLimit,
} from './core.js';
import { formatRoundTrips, type RoundTrips, runRoundTrips } from './round-trips.js';
import { HARNESS, type HarnessResult, runAlternating } from './seed-turns.js';
import { formatStoreBench, runStoreBench, type StoreBenchResult } from './stores.js';

const args = process.argv.slice(2);
const only = args.find((a) => a.startsWith('--only='))?.slice('--only='.length);
const quick = args.includes('--quick');
const agentFilter = args.find((a) => a.startsWith('--agent='))?.slice('--agent='.length);
const runs = (section: string) => only === undefined || only === section;

/** The workload. */
const SESSIONS = 1_000;
const TURNS = 20;
const WARMUP_REPS = quick ? 1 : 3;
const MEASURED_REPS = quick ? 3 : 9;
/** Idle sessions for the heap figure, and the turns each gets first. */
const IDLE_SESSIONS = 10_000;
const IDLE_TURNS = 3;
/** Growth table: sessions x turns per repetition, repetitions per cell. */
const GROWTH_SESSIONS = 50;
const GROWTH_REPS = quick ? 1 : 5;
const GROWTH_WARMUP_SESSIONS = 10;

/** Targets (µs, bytes, and the factor over AgentDock on its own harness). */
const TARGET_MEDIAN_MICROS = 3;
const TARGET_BYTES_PER_SESSION = 400;
const TARGET_AGENTDOCK_FACTOR = 12;
/** AgentDock's harness: alternating rounds (each implementation in its own process per round). */
const HARNESS_ROUNDS = quick ? 1 : 3;
const HARNESS_REPS = quick ? 3 : 7;

// ---------------------------------------------------------------------------------------------
// Formatting

function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(headers), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

const fmt = (n: number, digits = 2) =>
  n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const int = (n: number) => Math.round(n).toLocaleString('en-US');
const yes = (ok: boolean) => (ok ? 'MET' : 'MISSED');

function heading(title: string): void {
  console.log(`\n== ${title} ${'='.repeat(Math.max(0, 86 - title.length))}`);
}

// ---------------------------------------------------------------------------------------------
// 1. The workload: 1,000 sessions x 20 turns

interface RepResult {
  turnsPerSec: number;
  p50: number;
  p99: number;
  mean: number;
  blocked: number;
}

async function workloadRep(agent: ReferenceAgent): Promise<RepResult> {
  const sessions = makeSessions(SESSIONS, agent.prompts);
  const w = makeWorkload(agent.template, agent.tools, sessions);
  const { samples, wallMs } = await runTurns(w, TURNS);
  await w.manager.close();
  let sum = 0;
  for (const s of samples) sum += s;
  return {
    turnsPerSec: (samples.length / wallMs) * 1000,
    p50: quantile(samples, 0.5),
    p99: quantile(samples, 0.99),
    mean: sum / samples.length,
    blocked: w.blocked,
  };
}

/** The same turns through the pure engine functions (no store, no promises): the floor. Median µs/turn. */
function engineOnlyRep(agent: ReferenceAgent): number {
  const plan = compileOrchestration(agent.template);
  const sessions = makeSessions(SESSIONS, agent.prompts);
  const states = new Map<string, OrchestrationState>();
  const samples = new Float64Array(SESSIONS * TURNS);
  let k = 0;
  const now = Date.now();
  for (let t = 0; t < TURNS; t++) {
    for (const session of sessions) {
      const messages = messagesAt(session, t);
      const t0 = performance.now();
      const message = latestUserMessage(messages);
      let state = states.get(session.id) ?? createState(session.id, now);
      state = handleMessage(plan, state, message).state;
      const allowed = allowedTools(plan, state, agent.tools).tools;
      const tool = pickTool(session, allowed);
      state = handleMessage(plan, state, message).state;
      state = recordToolUse(plan, state, { tool, message, historyLimit: 50 }).state;
      states.set(session.id, state);
      samples[k++] = (performance.now() - t0) * 1000;
    }
  }
  return quantile(samples, 0.5);
}

interface WorkloadSummary {
  agent: string;
  sessions: number;
  turnsPerSession: number;
  repetitions: number;
  turnsPerSec: number;
  p50Micros: number;
  p99Micros: number;
  meanMicros: number;
  spread: { turnsPerSec: [number, number]; p50Micros: [number, number]; p99Micros: [number, number] };
  timerOverheadMicros: number;
  engineOnlyMicros: number;
  blockedTurns: number;
}

async function benchWorkload(agent: ReferenceAgent): Promise<WorkloadSummary> {
  heading(`Workload: ${int(SESSIONS)} sessions x ${TURNS} turns, ${agent.label}`);
  const conditionTypes = [
    ...new Set(agent.orchestration.steps.flatMap((step) => (step.conditions ?? []).map((c) => c.type))),
  ];
  console.log(
    `${agent.orchestration.steps.length} steps (conditions: ${conditionTypes.join(', ')}); tools ${agent.tools.join(', ')}`,
  );
  console.log(
    'one turn = getAllowedTools(config, messages, sessionId, agentTools) + processToolUsage(... allowed tool)',
  );
  console.log(
    `sessions interleaved round-robin; a new user message every ${TURNS_PER_MESSAGE} turns; memory store (default)`,
  );
  for (let i = 0; i < WARMUP_REPS; i++) await workloadRep(agent);
  for (let i = 0; i < WARMUP_REPS; i++) engineOnlyRep(agent);
  const reps: RepResult[] = [];
  const engine: number[] = [];
  for (let i = 0; i < MEASURED_REPS; i++) {
    reps.push(await workloadRep(agent));
    engine.push(engineOnlyRep(agent));
  }
  const overhead = timerOverheadMicros();
  console.log(
    table(
      ['repetition', 'turns/s', 'p50 µs', 'p99 µs', 'mean µs'],
      reps.map((r, i) => [String(i + 1), int(r.turnsPerSec), fmt(r.p50), fmt(r.p99), fmt(r.mean)]),
    ),
  );
  const pick = (f: (r: RepResult) => number) => reps.map(f);
  const range = (xs: number[]): [number, number] => [Math.min(...xs), Math.max(...xs)];
  const summary: WorkloadSummary = {
    agent: agent.label,
    sessions: SESSIONS,
    turnsPerSession: TURNS,
    repetitions: MEASURED_REPS,
    turnsPerSec: median(pick((r) => r.turnsPerSec)),
    p50Micros: median(pick((r) => r.p50)),
    p99Micros: median(pick((r) => r.p99)),
    meanMicros: median(pick((r) => r.mean)),
    spread: {
      turnsPerSec: range(pick((r) => r.turnsPerSec)),
      p50Micros: range(pick((r) => r.p50)),
      p99Micros: range(pick((r) => r.p99)),
    },
    timerOverheadMicros: overhead,
    engineOnlyMicros: median(engine),
    blockedTurns: reps.reduce((a, r) => a + r.blocked, 0),
  };
  console.log(`\nmedian of ${MEASURED_REPS} repetitions (after ${WARMUP_REPS} warm-up):`);
  console.log(
    table(
      ['figure', 'median', 'min', 'max'],
      [
        ['turns/s', int(summary.turnsPerSec), int(summary.spread.turnsPerSec[0]), int(summary.spread.turnsPerSec[1])],
        ['p50 µs/turn', fmt(summary.p50Micros), fmt(summary.spread.p50Micros[0]), fmt(summary.spread.p50Micros[1])],
        ['p99 µs/turn', fmt(summary.p99Micros), fmt(summary.spread.p99Micros[0]), fmt(summary.spread.p99Micros[1])],
      ],
    ),
  );
  console.log(`timer overhead (one performance.now() pair, included above): ${fmt(overhead, 3)} µs`);
  console.log(
    `same turns through the pure engine functions (no store, no await): p50 ${fmt(summary.engineOnlyMicros)} µs/turn`,
  );
  if (summary.blockedTurns > 0) console.log(`turns with no allowed tool: ${summary.blockedTurns}`);
  return summary;
}

// ---------------------------------------------------------------------------------------------
// 0. AgentDock's harness, on the built package and on AgentDock itself

interface HarnessSummary {
  baton: HarnessResult;
  agentdock: HarnessResult | undefined;
  /** Baton's turns/s over AgentDock's, medians of the rounds; undefined when AgentDock was not found. */
  ratio: number | undefined;
  agentdockMissing: string | undefined;
  rounds: HarnessResult[][];
}

async function benchHarness(): Promise<HarnessSummary> {
  heading(
    `AgentDock's harness: ${int(HARNESS.sessions)} sessions x ${HARNESS.turns} turns, built package vs AgentDock`,
  );
  console.log(
    "one turn = getAllowedTools + processToolUsage(allowed[t % allowed.length]); AgentDock's cognitive-reasoner " +
      'orchestration, one fixed user message, memory store',
  );
  console.log(
    `${HARNESS_ROUNDS} alternating rounds; in each, every implementation runs in its own process: ` +
      `${quick ? 1 : 3} warm-up + ${HARNESS_REPS} measured repetitions, medians`,
  );
  const { loadAgentDock } = await import('./agentdock.js');
  const found = await loadAgentDock();
  const root = new URL('..', import.meta.url).pathname;
  const impls = found.ok
    ? ([{ kind: 'baton', root }, { kind: 'agentdock' }] as const)
    : ([{ kind: 'baton', root }] as const);
  if (found.ok) console.log(`AgentDock: ${found.source} at ${found.commit.slice(0, 12)}`);
  else console.log(`${found.reason}: no AgentDock figure or ratio is printed`);
  const { rounds, medians } = await runAlternating(impls, {
    rounds: HARNESS_ROUNDS,
    reps: HARNESS_REPS,
    warmup: quick ? 1 : 3,
    onRound: (round) =>
      console.log(
        round
          .map(
            (r) =>
              `${r.impl === 'agentdock' ? 'AgentDock' : 'Baton'} ${int(r.turnsPerSec)} turns/s (p50 ${fmt(r.p50Micros)} µs)`,
          )
          .join('  |  '),
      ),
  });
  const baton = medians[0]!;
  const agentdock = medians[1];
  const ratio = agentdock === undefined ? undefined : baton.turnsPerSec / agentdock.turnsPerSec;
  const rows = [['Baton (dist/)', int(baton.turnsPerSec), fmt(baton.p50Micros)]];
  if (agentdock !== undefined) rows.push(['AgentDock', int(agentdock.turnsPerSec), fmt(agentdock.p50Micros)]);
  console.log(table(['median of rounds', 'turns/s', 'p50 µs/turn'], rows));
  if (ratio !== undefined) {
    const perRound = rounds.map((r) => `${fmt(r[0]!.turnsPerSec / r[1]!.turnsPerSec, 1)}x`).join(', ');
    console.log(`Baton / AgentDock: ${fmt(ratio, 1)}x (per round: ${perRound})`);
  }
  return {
    baton,
    agentdock,
    ratio,
    agentdockMissing: found.ok ? undefined : found.reason,
    rounds,
  };
}

// ---------------------------------------------------------------------------------------------
// 2. Heap per idle session

interface MemorySummary {
  sessions: number;
  turnsEach: number;
  bytesPerSession: number;
  bytesPerSessionWithIds: number;
}

async function idleSessions(agent: ReferenceAgent, ids: readonly string[]): Promise<Workload> {
  const w = makeWorkload(agent.template, agent.tools, []);
  let sessions: Session[] | undefined = makeSessions(ids.length, agent.prompts, { ids, messages: 1 });
  for (let t = 0; t < IDLE_TURNS; t++) for (const s of sessions) await turn(w, s, t);
  sessions = undefined; // the conversations belong to the caller; only the store keeps anything
  return w;
}

async function benchMemory(agent: ReferenceAgent): Promise<MemorySummary> {
  heading(
    `Heap per idle session (${agent.label}): ${int(IDLE_SESSIONS)} sessions, ${IDLE_TURNS} turns each, then gc()`,
  );
  const gc = getGc();
  // Warm up the same path so code and inline caches are not counted.
  const warm = await idleSessions(
    agent,
    Array.from({ length: 1_000 }, (_, i) => sessionId(i, 'warm')),
  );
  await warm.manager.close();
  const before = settledHeap(gc);
  const ids = Array.from({ length: IDLE_SESSIONS }, (_, i) => sessionId(i, 'idle'));
  const withIds = settledHeap(gc);
  const w = await idleSessions(agent, ids);
  const after = settledHeap(gc);
  const summary: MemorySummary = {
    sessions: IDLE_SESSIONS,
    turnsEach: IDLE_TURNS,
    bytesPerSession: (after - withIds) / IDLE_SESSIONS,
    bytesPerSessionWithIds: (after - before) / IDLE_SESSIONS,
  };
  // Keep the store (and the ids) reachable until measured.
  const live = (await w.manager.getState(ids[ids.length - 1]!)) !== null;
  await w.manager.close();
  console.log(
    table(
      ['figure', 'bytes'],
      [
        ['heapUsed delta / session (store only; ids are the caller’s)', int(summary.bytesPerSession)],
        ['heapUsed delta / session (counting the session-id strings)', int(summary.bytesPerSessionWithIds)],
      ],
    ),
  );
  if (!live) console.log('warning: the last session was not found after the measurement');
  return summary;
}

// ---------------------------------------------------------------------------------------------
// 3. Growth table (tinybench)

interface Cell {
  value: number;
  p50Micros: number;
  p99Micros: number;
  ratio: number;
}

interface Row {
  label: string;
  cells: Cell[];
}

interface CellSetup {
  config: OrchestrationConfig;
  agentTools: readonly string[];
  historyLimit?: number;
  prefill?: number;
}

async function makeCellWorkload(
  agent: ReferenceAgent,
  setup: CellSetup,
  prefix: string,
  count: number,
): Promise<Workload> {
  const ids = Array.from({ length: count }, (_, i) => sessionId(i, prefix));
  const sessions = makeSessions(count, agent.prompts, { ids });
  const w = makeWorkload(
    setup.config,
    setup.agentTools,
    sessions,
    setup.historyLimit === undefined ? {} : { historyLimit: setup.historyLimit },
  );
  if (setup.prefill !== undefined) await prefillHistory(w, agent.tools, setup.prefill);
  return w;
}

/** One tinybench run of `count` sessions x {@link TURNS} turns (round-robin) on a new manager: p50 and p99 in µs. */
async function runCell(
  agent: ReferenceAgent,
  setup: CellSetup,
  prefix: string,
  count: number,
): Promise<{ p50: number; p99: number }> {
  const w = await makeCellWorkload(agent, setup, prefix, count);
  let i = 0;
  const bench = new Bench({ time: 0, iterations: count * TURNS, warmup: false, throws: true });
  bench.add('turn', async () => {
    const s = i % count;
    const t = Math.floor(i / count);
    i++;
    await turn(w, w.sessions[s]!, t);
  });
  await bench.run();
  await w.manager.close();
  const result = bench.tasks[0]!.result;
  if (!('latency' in result)) throw new Error(`tinybench run did not complete: ${result.state}`);
  return { p50: result.latency.p50 * 1000, p99: result.latency.p99 * 1000 };
}

interface CellSpec {
  readonly row: string;
  readonly value: number;
  readonly setup: CellSetup;
}

async function benchGrowth(agent: ReferenceAgent): Promise<Row[]> {
  heading('Cost per turn as the configuration grows (tinybench; median of p50 over repetitions)');
  console.log(`agent tools and historyLimit rows: ${agent.label}`);
  console.log(
    `${GROWTH_SESSIONS} sessions x ${TURNS} turns per run; ${GROWTH_REPS} repetitions, each running every cell once ` +
      '(so load changes hit all cells alike); one warm-up run per cell',
  );
  const reference = agent.orchestration;
  const specs: CellSpec[] = [];
  for (const n of [10, 100, 1_000]) {
    specs.push({
      row: 'steps (last one matches)',
      value: n,
      setup: { config: manyStepsConfig(n, agent.tools), agentTools: agent.tools },
    });
  }
  for (const n of [10, 100, 1_000]) {
    specs.push({ row: 'agent tools', value: n, setup: { config: reference, agentTools: paddedTools(agent.tools, n) } });
  }
  for (const n of [10, 1_000, 100_000]) {
    specs.push({
      row: 'historyLimit, fresh sessions',
      value: n,
      setup: { config: withHistoryLimit(reference, n), agentTools: agent.tools, historyLimit: n },
    });
  }
  for (const n of [10, 1_000, 100_000]) {
    specs.push({
      row: 'historyLimit, history pre-filled to it',
      value: n,
      setup: { config: withHistoryLimit(reference, n), agentTools: agent.tools, historyLimit: n, prefill: n },
    });
  }
  for (const spec of specs) await runCell(agent, spec.setup, 'warm', GROWTH_WARMUP_SESSIONS);
  const p50s = specs.map((): number[] => []);
  const p99s = specs.map((): number[] => []);
  for (let rep = 0; rep < GROWTH_REPS; rep++) {
    for (let c = 0; c < specs.length; c++) {
      const { p50, p99 } = await runCell(agent, specs[c]!.setup, `rep${rep}`, GROWTH_SESSIONS);
      p50s[c]!.push(p50);
      p99s[c]!.push(p99);
    }
  }
  // Compile time: a new config object each time (plans are cached by object identity).
  const compileRows: string[][] = [];
  for (const n of [10, 100, 1_000]) {
    const times: number[] = [];
    for (let rep = 0; rep < (quick ? 3 : 7); rep++) {
      const config = manyStepsConfig(n, agent.tools);
      const t0 = performance.now();
      compileOrchestration(config);
      times.push(performance.now() - t0);
    }
    compileRows.push([int(n), fmt(median(times), 2)]);
  }
  console.log(table(['steps', 'compile ms (median)'], compileRows));
  const rows: Row[] = [];
  specs.forEach((spec, c) => {
    let row = rows.find((r) => r.label === spec.row);
    if (row === undefined) {
      row = { label: spec.row, cells: [] };
      rows.push(row);
    }
    const p50 = median(p50s[c]!);
    row.cells.push({
      value: spec.value,
      p50Micros: p50,
      p99Micros: median(p99s[c]!),
      ratio: p50 / (row.cells[0]?.p50Micros ?? p50),
    });
  });
  console.log(
    table(
      ['dimension', 'value', 'p50 µs/turn', 'p99 µs/turn', 'p50 ratio'],
      rows.flatMap((r) =>
        r.cells.map((c, i) => [
          i === 0 ? r.label : '',
          int(c.value),
          fmt(c.p50Micros),
          fmt(c.p99Micros),
          `${fmt(c.ratio)}x`,
        ]),
      ),
    ),
  );
  return rows;
}

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const agentdock = loadAgent(AGENTDOCK_TEMPLATE_URL, 'cognitive-reasoner (AgentDock original)');
  const example = loadAgent(EXAMPLE_TEMPLATE_URL, 'cognitive-reasoner (examples/agents)');
  const cpu = cpus();
  const started = performance.now();
  console.log('Baton benchmark');
  console.log(`node ${process.version} (V8 ${process.versions.v8}), ${platform()} ${release()}`);
  console.log(`CPU: ${cpu[0]?.model ?? 'unknown'} x ${cpu.length}`);

  const harness = runs('harness') ? await benchHarness() : undefined;
  const workloads: WorkloadSummary[] = [];
  if (runs('turns')) {
    if (agentFilter === undefined || agentFilter === 'agentdock') workloads.push(await benchWorkload(agentdock));
    if (agentFilter === undefined || agentFilter === 'example') workloads.push(await benchWorkload(example));
  }
  const memory = runs('memory') ? await benchMemory(agentdock) : undefined;
  const growth = runs('growth') ? await benchGrowth(agentdock) : undefined;

  const historyRow = growth?.find((r) => r.label.startsWith('historyLimit, history pre-filled'));
  const historyRatio = historyRow ? historyRow.cells[historyRow.cells.length - 1]!.ratio : undefined;
  const targets = {
    medianTurnMicros: workloads.map((w) => ({
      agent: w.agent,
      target: TARGET_MEDIAN_MICROS,
      value: w.p50Micros,
      met: w.p50Micros <= TARGET_MEDIAN_MICROS,
    })),
    bytesPerIdleSession: memory
      ? {
          target: TARGET_BYTES_PER_SESSION,
          value: memory.bytesPerSession,
          met: memory.bytesPerSession <= TARGET_BYTES_PER_SESSION,
        }
      : undefined,
    // "Does not grow": the largest pre-filled history costs at most 1.5x the smallest (noise margin).
    flatInHistoryLimit: historyRatio === undefined ? undefined : { maxRatio: historyRatio, met: historyRatio <= 1.5 },
  };

  // The stores and the model loop (issues 3 and 4), in the same run.
  let stores: StoreBenchResult | undefined;
  if (runs('stores')) {
    heading('Stores: state changes per second and round trips per change');
    stores = await runStoreBench({ print: false, ...(quick ? { repetitionMs: 500, warmupMs: 200 } : {}) });
    console.log(formatStoreBench(stores));
  }
  let aiSdk: AiSdkBenchResult | undefined;
  if (runs('ai-sdk')) {
    heading('Model loop: overhead per model step against bare streamText, and store round trips per turn');
    aiSdk = await runAiSdkBench({ quick });
    console.log(formatAiSdkBench(aiSdk));
  }

  let roundTrips: Awaited<ReturnType<typeof runRoundTrips>> | undefined;
  if (runs('round-trips')) {
    heading('Store round trips per 3-tool research turn (counted on the wire)');
    roundTrips = await runRoundTrips();
    console.log(formatRoundTrips(roundTrips));
  }

  heading('Targets');
  const rows: string[][] = [];
  if (harness?.ratio !== undefined)
    rows.push([
      `>= ${TARGET_AGENTDOCK_FACTOR}x AgentDock on its harness (median of ${HARNESS_ROUNDS} rounds)`,
      `${fmt(harness.ratio, 1)}x`,
      yes(harness.ratio >= TARGET_AGENTDOCK_FACTOR),
    ]);
  for (const r of roundTrips?.results ?? []) {
    const worst = Math.max(r.library, r.serverNewSession, r.serverContinued);
    rows.push([
      `<= 4 round trips per research turn (${r.store}, library on a known session, server)`,
      String(worst),
      yes(worst <= 4),
    ]);
    rows.push([`<= 4 writes per research turn (${r.store}, every path)`, String(r.mostWrites), yes(r.mostWrites <= 4)]);
  }
  for (const c of aiSdk?.cells ?? []) {
    if (c.met !== undefined)
      rows.push([
        `orchestrated model step <= ${c.budgetMicrosPerStep} µs over bare streamText (${c.store})`,
        `${fmt(c.overheadMicrosPerStep)} µs`,
        yes(c.met),
      ]);
    if (c.noSlowerThanHand !== undefined)
      rows.push([
        `orchestrated model step no slower than the same filter by hand (${c.store})`,
        `${c.orchestratedMicrosPerStep >= c.handMicrosPerStep ? '+' : ''}${fmt(c.orchestratedMicrosPerStep - c.handMicrosPerStep)} µs`,
        yes(c.noSlowerThanHand),
      ]);
  }
  for (const t of targets.medianTurnMicros) {
    rows.push([`median turn <= ${TARGET_MEDIAN_MICROS} µs (${t.agent})`, `${fmt(t.value)} µs`, yes(t.met)]);
  }
  if (targets.bytesPerIdleSession)
    rows.push([
      `<= ${TARGET_BYTES_PER_SESSION} bytes per idle session`,
      `${int(targets.bytesPerIdleSession.value)} B`,
      yes(targets.bytesPerIdleSession.met),
    ]);
  if (targets.flatInHistoryLimit)
    rows.push([
      'cost per turn flat in historyLimit (pre-filled, <= 1.5x)',
      `${fmt(targets.flatInHistoryLimit.maxRatio)}x`,
      yes(targets.flatInHistoryLimit.met),
    ]);
  console.log(table(['target', 'measured', 'result'], rows));
  console.log(`\ntotal bench time ${fmt((performance.now() - started) / 1000, 1)} s`);

  const json = {
    node: process.version,
    v8: process.versions.v8,
    cpu: cpu[0]?.model ?? 'unknown',
    cores: cpu.length,
    workloads,
    memory,
    growth: growth?.map((r) => ({ dimension: r.label, cells: r.cells })),
    targets,
    stores,
    aiSdk,
    harness,
    roundTrips: roundTrips?.results satisfies RoundTrips[] | undefined,
  };
  console.log(`BENCH_JSON ${JSON.stringify(json)}`);
}

await main();
