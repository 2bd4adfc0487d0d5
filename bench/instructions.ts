/**
 * Instructions per research turn of each model-loop variant (bench/ai-sdk.ts: bare `streamText`,
 * the filter written by hand, the same over converted schemas, `orchestrate()`), counted by
 * callgrind on the compiled bench, memory store. A count repeats from run to run (within 0.03%
 * for the orchestrated turn), where a wall-clock figure of a few µs per step drowns in a shared
 * machine's noise: it shows whether a change to Baton's per-turn work made it cheaper, and by
 * how much, even when the per-step timings cannot. Time also depends on how the instructions run
 * (cache misses above all), so the timings stay the measure of speed.
 *
 *   npx tsx bench/instructions.ts [--variants=hand,hand-converted,orchestrated] [--against <git ref>] [--cache-sim] [--by-function]
 *
 * Each variant runs alone in its own process, twice (120 and 480 turns, warm-up included); the
 * difference of the two counts over the 360 turns between them is the steady per-turn cost, free
 * of start-up and compilation. Node runs with `--predictable --single-threaded` (no concurrent
 * compiler or GC threads). `--against` counts another commit's build the same way, for a
 * before/after: its library code under this checkout's harness (bench/ai-sdk.ts and its helpers).
 * `--cache-sim` also counts simulated cache misses per turn (callgrind's model of this machine's
 * caches: first-level instruction and data misses, last-level misses), about twice as slow.
 * `--by-function` also says where a turn's instructions go: Node writes the names of the code it
 * compiles (`--perf-basic-prof`), callgrind_annotate gives each function's own count, and the
 * counts are summed per part (Baton's code, the AI SDK's, Node's, the garbage collector, the
 * compilers, V8's builtins and runtime), each a steady per-turn figure as above, with Baton's
 * costliest functions.
 * Needs valgrind (`apt-get install valgrind`); about 2 minutes per variant and build on 2 cores.
 * A benchmark, never part of `npm test`.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { parseVariants, type Variant, warmupTurns } from './ai-sdk.js';
import { CACHE, type CompiledBench, compiledAt, compiledHere } from './compiled.js';

const NODE = process.execPath;
/** Measured turns of the two runs (bench/ai-sdk.ts runs its warm-up before them). */
const SHORT = 100;
const LONG = 400;
const totalTurns = (turns: number) => turns + warmupTurns(turns);

const run = promisify(execFile);

/** What callgrind counted in one run: instructions, and with `--cache-sim` the simulated cache misses. */
interface Counts {
  instructions: number;
  /** First-level instruction and data cache misses, last-level misses (NaN without `--cache-sim`). */
  i1: number;
  d1: number;
  ll: number;
  /** With `--by-function`: instructions per function (JIT code named from Node's perf map). */
  functions?: Map<string, number>;
}

/** The parts of a turn `--by-function` sums functions into. */
const PARTS = [
  'Baton',
  'AI SDK',
  'Node (JS)',
  'other JS',
  'builtins and ICs',
  'V8 runtime',
  'GC',
  'compilers',
  'other native',
];

/** Which part a function (as callgrind_annotate or Node's perf map names it) belongs to. */
function partOf(name: string): string {
  if (name.startsWith('JS:')) {
    // The build's own src/ (a dependency's src/ is under node_modules).
    if (name.includes('/src/') && !name.includes('/node_modules/')) return 'Baton';
    if (/node_modules\/(ai|@ai-sdk)\//.test(name)) return 'AI SDK';
    if (name.includes(' node:')) return 'Node (JS)';
    return 'other JS';
  }
  if (/^(Builtins_|Builtin:|BytecodeHandler:|Stub:|RegExp:)/.test(name)) return 'builtins and ICs';
  if (
    /Scaveng|Marking|MarkCompact|Sweep|Evacuat|Heap::|RecordMigrated|WriteBarrier|Worklist|Remembered|SlotSet/.test(
      name,
    )
  )
    return 'GC';
  if (
    /compiler::|maglev::|turboshaft|interpreter::|Scanner|Parser|AstValue|Bytecode|SourcePosition|Compil|Deoptimiz/.test(
      name,
    )
  )
    return 'compilers';
  if (name.startsWith('v8::')) return 'V8 runtime';
  return 'other native';
}

/** Node's perf map (`--perf-basic-prof`): the start, length and name of each piece of code it made. */
function readPerfMap(path: string): { starts: number[]; ends: number[]; names: string[] } {
  const rows = readFileSync(path, 'utf8')
    .split('\n')
    .map((line) => /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line))
    .filter((m) => m !== null)
    .map((m) => ({
      start: Number.parseInt(m[1]!, 16),
      end: Number.parseInt(m[1]!, 16) + Number.parseInt(m[2]!, 16),
      name: m[3]!,
    }))
    .sort((a, b) => a.start - b.start);
  return { starts: rows.map((r) => r.start), ends: rows.map((r) => r.end), names: rows.map((r) => r.name) };
}

/**
 * Each function's own instructions in a callgrind profile. JIT code, which callgrind knows only by
 * address, is named from the perf map (the last code made at that address: Node frees and reuses
 * code space, and the latest code at an address is the one that ran most); JS names lose their
 * tier mark (`*` optimized, `~` interpreted...) so a function's tiers add up.
 */
function functionCounts(profile: string, perfMap: string): Map<string, number> {
  const map = readPerfMap(perfMap);
  const nameAt = (address: number): string => {
    let lo = 0;
    let hi = map.starts.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (map.starts[mid]! <= address) lo = mid + 1;
      else hi = mid - 1;
    }
    for (let i = hi; i >= 0 && i > hi - 64; i--)
      if (map.starts[i]! <= address && address < map.ends[i]!) return map.names[i]!;
    return 'JIT code without a name';
  };
  const text = execFileSync('callgrind_annotate', ['--inclusive=no', '--threshold=100', profile], {
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  const counts = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^\s*([\d,]+) \([^)]*\)\s+(.*?)(?: \[[^\]]*\])?$/.exec(line);
    if (m === null || m[2]!.startsWith('PROGRAM TOTALS')) continue;
    let name = m[2]!.replace(/^\?\?\?:/, '').replace(/'\d+$/, '');
    if (/^0x[0-9a-f]+$/.test(name)) name = nameAt(Number.parseInt(name, 16));
    name = name.replace(/^JS:[*~^+]?'?/, 'JS:');
    counts.set(name, (counts.get(name) ?? 0) + Number(m[1]!.replaceAll(',', '')));
  }
  return counts;
}

/** Counts of one run of `variant` for `turns` measured turns. */
async function count(
  bench: string,
  variant: Variant,
  turns: number,
  cacheSim: boolean,
  byFunction: boolean,
): Promise<Counts> {
  const out = join(CACHE, `callgrind-${process.pid}-${variant}-${turns}.out`);
  let perfMap: string | undefined;
  try {
    const { stderr } = await run(
      'valgrind',
      [
        '--tool=callgrind',
        `--cache-sim=${cacheSim ? 'yes' : 'no'}`,
        `--callgrind-out-file=${out}`,
        NODE,
        '--predictable',
        '--single-threaded',
        ...(byFunction ? ['--perf-basic-prof'] : []),
        bench,
        '--stores=memory',
        `--variants=${variant}`,
        `--turns=${turns}`,
      ],
      { maxBuffer: 64 * 1024 * 1024 },
    );
    const figure = (label: RegExp) => {
      const found = label.exec(stderr)?.[1];
      return found === undefined ? Number.NaN : Number(found.replaceAll(',', ''));
    };
    const instructions = figure(/Collected : ([\d,]+)/);
    if (Number.isNaN(instructions)) {
      throw new Error(`callgrind printed no count for ${variant}:\n${stderr.slice(-2000)}`);
    }
    let functions: Map<string, number> | undefined;
    if (byFunction) {
      // valgrind runs Node in its own process: the pid on callgrind's lines is Node's.
      const pid = /^==(\d+)==/m.exec(stderr)?.[1];
      perfMap = `/tmp/perf-${pid}.map`;
      if (pid === undefined || !existsSync(perfMap))
        throw new Error(`--by-function: Node wrote no perf map (${perfMap})`);
      functions = functionCounts(out, perfMap);
    }
    return {
      instructions,
      i1: figure(/I1 {2}misses: +([\d,]+)/),
      d1: figure(/D1 {2}misses: +([\d,]+)/),
      ll: figure(/LL misses: +([\d,]+)/),
      ...(functions ? { functions } : {}),
    };
  } finally {
    rmSync(out, { force: true });
    if (perfMap !== undefined) rmSync(perfMap, { force: true });
  }
}

/** Steady counts per turn of `variant`: the two runs at once (2 cores), their difference per turn. */
async function perTurn(bench: string, variant: Variant, cacheSim: boolean, byFunction: boolean): Promise<Counts> {
  const [short, long] = await Promise.all([
    count(bench, variant, SHORT, cacheSim, byFunction),
    count(bench, variant, LONG, cacheSim, byFunction),
  ]);
  const turns = totalTurns(LONG) - totalTurns(SHORT);
  let functions: Map<string, number> | undefined;
  if (short.functions && long.functions) {
    functions = new Map();
    for (const name of new Set([...short.functions.keys(), ...long.functions.keys()])) {
      functions.set(name, ((long.functions.get(name) ?? 0) - (short.functions.get(name) ?? 0)) / turns);
    }
  }
  return {
    instructions: (long.instructions - short.instructions) / turns,
    i1: (long.i1 - short.i1) / turns,
    d1: (long.d1 - short.d1) / turns,
    ll: (long.ll - short.ll) / turns,
    ...(functions ? { functions } : {}),
  };
}

/** Sums per-function counts into {@link PARTS}. */
function partsOf(functions: ReadonlyMap<string, number>): Map<string, number> {
  const parts = new Map<string, number>(PARTS.map((part) => [part, 0]));
  for (const [name, n] of functions) {
    const part = partOf(name);
    parts.set(part, parts.get(part)! + n);
  }
  return parts;
}

const { values } = parseArgs({
  options: {
    variants: { type: 'string', default: 'hand,hand-converted,orchestrated' },
    against: { type: 'string' },
    'cache-sim': { type: 'boolean', default: false },
    'by-function': { type: 'boolean', default: false },
  },
});
const cacheSim = values['cache-sim'];
const byFunction = values['by-function'];
const variants = parseVariants(values.variants);
try {
  execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
} catch {
  console.error('bench/instructions.ts needs valgrind (callgrind): apt-get install valgrind');
  process.exit(1);
}

mkdirSync(CACHE, { recursive: true });
const builds: CompiledBench[] = [compiledHere('instructions')];
if (values.against !== undefined) builds.push(compiledAt(values.against));

console.log(
  `Node ${process.version}, callgrind; memory store; instructions per research turn (4 model steps, 3 tools)`,
);
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const results = new Map<string, Map<Variant, number>>();
const breakdowns: { label: string; variant: Variant; functions: Map<string, number> }[] = [];
for (const build of builds) {
  const figures = new Map<Variant, number>();
  for (const variant of variants) {
    const counts = await perTurn(build.bench, variant, cacheSim, byFunction);
    figures.set(variant, counts.instructions);
    if (counts.functions) breakdowns.push({ label: build.label, variant, functions: counts.functions });
    const misses = cacheSim ? `   I1 misses ${fmt(counts.i1)}, D1 ${fmt(counts.d1)}, LL ${fmt(counts.ll)}` : '';
    console.log(`  ${build.label.padEnd(36)} ${variant.padEnd(15)} ${fmt(counts.instructions).padStart(12)}${misses}`);
  }
  results.set(build.label, figures);
}
for (const [label, figures] of results) {
  const orchestrated = figures.get('orchestrated');
  if (orchestrated === undefined) continue;
  for (const base of ['hand', 'hand-converted'] as const) {
    const other = figures.get(base);
    if (other === undefined) continue;
    console.log(
      `${label}: orchestrated - ${base} = ${fmt(orchestrated - other)} per turn (${fmt((orchestrated - other) / 4)} per step, x${(orchestrated / other).toFixed(3)})`,
    );
  }
}
if (builds.length === 2) {
  const [now, then] = builds.map((b) => results.get(b.label)!);
  for (const variant of variants) {
    const a = now!.get(variant)!;
    const b = then!.get(variant)!;
    console.log(`${variant}: this checkout / ${builds[1]!.label} = x${(a / b).toFixed(4)} (${fmt(a - b)} per turn)`);
  }
}

if (breakdowns.length > 0) {
  // A part's figure moves with where a major GC or a recompilation falls between the two runs:
  // read the parts as where the instructions go, the totals above as what a change saved.
  console.log('\nInstructions per turn by part (steady: the 480-turn run minus the 120-turn one):');
  const parts = breakdowns.map((b) => partsOf(b.functions));
  // With --against, the other build's columns are marked "(ref)".
  const column = (b: (typeof breakdowns)[number]) => (b.label === builds[0]!.label ? b.variant : `${b.variant} (ref)`);
  console.log(`  ${'part'.padEnd(18)}${breakdowns.map((b) => column(b).padStart(22)).join('')}`);
  for (const part of PARTS) {
    console.log(`  ${part.padEnd(18)}${parts.map((p) => fmt(p.get(part)!).padStart(22)).join('')}`);
  }
  for (const { label, variant, functions } of breakdowns) {
    const baton = [...functions].filter(([name]) => partOf(name) === 'Baton').sort((a, b) => b[1] - a[1]);
    if (baton.length === 0) continue;
    console.log(`\nBaton's costliest functions per turn, ${variant} (${label}):`);
    for (const [name, n] of baton.slice(0, 15)) {
      const where = / (?:file:\/\/)?\S*\/(src\/\S+)$/.exec(name)?.[1] ?? '';
      console.log(`  ${fmt(n).padStart(9)}  ${name.slice(3).split(' ')[0]} ${where}`);
    }
  }
}

// Which functions make the difference: with two variants of one build, every function's count in
// the second minus the first (builtins, runtime and collector included), largest first.
const ofHere = breakdowns.filter((b) => b.label === builds[0]!.label);
if (ofHere.length === 2) {
  const [first, second] = ofHere as [(typeof breakdowns)[number], (typeof breakdowns)[number]];
  const names = new Set([...first.functions.keys(), ...second.functions.keys()]);
  const deltas = [...names]
    .map((name) => [name, (second.functions.get(name) ?? 0) - (first.functions.get(name) ?? 0)] as const)
    .sort((a, b) => Math.abs(b[1]) - Math.abs(a[1]));
  console.log(`\nFunctions whose count differs most per turn, ${second.variant} - ${first.variant}:`);
  for (const [name, n] of deltas.slice(0, 40)) {
    console.log(`  ${fmt(n).padStart(9)}  ${partOf(name).padEnd(17)} ${name.slice(0, 110)}`);
  }
}
