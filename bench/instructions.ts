/**
 * Instructions per research turn of each model-loop variant (bench/ai-sdk.ts: bare `streamText`,
 * the filter written by hand, the same over converted schemas, `orchestrate()`), counted by
 * callgrind on the compiled bench, memory store. A count repeats from run to run (within 0.03%
 * for the orchestrated turn), where a wall-clock figure of a few µs per step drowns in a shared
 * machine's noise: it shows whether a change to Baton's per-turn work made it cheaper, and by
 * how much, even when the per-step timings cannot. Time also depends on how the instructions run
 * (cache misses above all), so the timings stay the measure of speed.
 *
 *   npx tsx bench/instructions.ts [--variants=hand,hand-converted,orchestrated] [--against <git ref>] [--cache-sim]
 *
 * Each variant runs alone in its own process, twice (120 and 480 turns, warm-up included); the
 * difference of the two counts over the 360 turns between them is the steady per-turn cost, free
 * of start-up and compilation. Node runs with `--predictable --single-threaded` (no concurrent
 * compiler or GC threads). `--against` counts another commit's build the same way, for a
 * before/after: its library code under this checkout's harness (bench/ai-sdk.ts and its helpers).
 * `--cache-sim` also counts simulated cache misses per turn (callgrind's model of this machine's
 * caches: first-level instruction and data misses, last-level misses), about twice as slow.
 * Needs valgrind (`apt-get install valgrind`); about 2 minutes per variant and build on 2 cores.
 * A benchmark, never part of `npm test`.
 */
import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
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
}

/** Counts of one run of `variant` for `turns` measured turns. */
async function count(bench: string, variant: Variant, turns: number, cacheSim: boolean): Promise<Counts> {
  const out = join(CACHE, `callgrind-${process.pid}-${variant}-${turns}.out`);
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
    return {
      instructions,
      i1: figure(/I1 {2}misses: +([\d,]+)/),
      d1: figure(/D1 {2}misses: +([\d,]+)/),
      ll: figure(/LL misses: +([\d,]+)/),
    };
  } finally {
    rmSync(out, { force: true });
  }
}

/** Steady counts per turn of `variant`: the two runs at once (2 cores), their difference per turn. */
async function perTurn(bench: string, variant: Variant, cacheSim: boolean): Promise<Counts> {
  const [short, long] = await Promise.all([
    count(bench, variant, SHORT, cacheSim),
    count(bench, variant, LONG, cacheSim),
  ]);
  const turns = totalTurns(LONG) - totalTurns(SHORT);
  return {
    instructions: (long.instructions - short.instructions) / turns,
    i1: (long.i1 - short.i1) / turns,
    d1: (long.d1 - short.d1) / turns,
    ll: (long.ll - short.ll) / turns,
  };
}

const { values } = parseArgs({
  options: {
    variants: { type: 'string', default: 'hand,hand-converted,orchestrated' },
    against: { type: 'string' },
    'cache-sim': { type: 'boolean', default: false },
  },
});
const cacheSim = values['cache-sim'];
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
for (const build of builds) {
  const figures = new Map<Variant, number>();
  for (const variant of variants) {
    const counts = await perTurn(build.bench, variant, cacheSim);
    figures.set(variant, counts.instructions);
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
