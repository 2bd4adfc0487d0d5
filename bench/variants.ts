/**
 * The model-loop variants of bench/ai-sdk.ts (bare `streamText`, the filter written by hand, the
 * same over converted schemas, `orchestrate()`), each alone in its own process, as an app runs
 * one of them, alternating over rounds. `bench/ai-sdk.ts` rotates all of them turn by turn in one
 * process, which cancels drift but lets each variant's turns shape the code the AI SDK's
 * functions are compiled to for the others: there the orchestrated turn pays for sharing its
 * process with turns that are not orchestrated, which no app that orchestrates its loop does.
 * Both figures are reported (docs/benchmarks.md).
 *
 *   npx tsx bench/variants.ts [--stores=memory] [--rounds=3] [--turns=2000] [--variants=...]
 *
 * Runs the compiled bench (`tsc` output under bench/.cache/), the starting variant rotating from
 * round to round; prints each run, the medians per variant, and orchestrated minus each other
 * variant per round, in µs per model step. A benchmark, never part of `npm test`.
 */
import { execFileSync } from 'node:child_process';
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { type AiSdkBenchResult, DEFAULT_VARIANTS, parseVariants, type Variant } from './ai-sdk.js';
import { compiledHere } from './compiled.js';
import { median } from './core.js';

const { values } = parseArgs({
  options: {
    stores: { type: 'string', default: 'memory' },
    rounds: { type: 'string', default: '3' },
    turns: { type: 'string' },
    variants: { type: 'string', default: DEFAULT_VARIANTS.join(',') },
  },
});
const rounds = Number(values.rounds);
if (!Number.isInteger(rounds) || rounds < 1)
  throw new Error(`--rounds must be a positive integer, got ${values.rounds}`);
const variants = parseVariants(values.variants);

/** µs per model step of one variant's run, per store. */
const FIELD: Record<Variant, keyof AiSdkBenchResult['cells'][number]> = {
  bare: 'bareMicrosPerStep',
  hand: 'handMicrosPerStep',
  'hand-converted': 'handConvertedMicrosPerStep',
  orchestrated: 'orchestratedMicrosPerStep',
  'hand-hooks': 'handHooksMicrosPerStep',
};

const build = compiledHere('variants');
console.log(
  `Node ${process.version}, ${cpus()[0]?.model ?? 'unknown CPU'}; ${build.label}; each variant alone in its own process, ${rounds} alternating rounds; µs per model step`,
);
/** figures[store][variant][round] */
const figures = new Map<string, Map<Variant, number[]>>();
for (let round = 0; round < rounds; round++) {
  for (let k = 0; k < variants.length; k++) {
    const variant = variants[(round + k) % variants.length]!;
    const output = execFileSync(
      process.execPath,
      [
        build.bench,
        `--stores=${values.stores}`,
        `--variants=${variant}`,
        '--json',
        ...(values.turns ? [`--turns=${values.turns}`] : []),
      ],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const result = JSON.parse(output.trim().split('\n').at(-1)!) as AiSdkBenchResult;
    for (const skipped of result.skipped) console.log(`  ${skipped.store}: skipped (${skipped.reason})`);
    for (const cell of result.cells) {
      const micros = cell[FIELD[variant]] as number;
      const byVariant = figures.get(cell.store) ?? new Map<Variant, number[]>();
      figures.set(cell.store, byVariant);
      byVariant.set(variant, [...(byVariant.get(variant) ?? []), micros]);
      console.log(
        `  round ${round + 1}  ${cell.store.padEnd(9)} ${variant.padEnd(15)} ${micros.toFixed(1).padStart(8)}`,
      );
    }
  }
}
const fmt = (n: number) => n.toFixed(1);
for (const [store, byVariant] of figures) {
  console.log(`\n${store}: median of ${rounds} rounds`);
  for (const variant of variants) {
    const runs = byVariant.get(variant) ?? [];
    console.log(`  ${variant.padEnd(15)} ${fmt(median(runs)).padStart(8)}   (${runs.map(fmt).join(' / ')})`);
  }
  const orchestrated = byVariant.get('orchestrated');
  if (orchestrated === undefined) continue;
  for (const other of variants) {
    if (other === 'orchestrated') continue;
    const base = byVariant.get(other) ?? [];
    const diffs = orchestrated.map((micros, round) => micros - (base[round] ?? Number.NaN));
    console.log(
      `  orchestrated - ${other.padEnd(15)} ${diffs.map(fmt).join(' / ')} per round (median ${fmt(median(diffs))})`,
    );
  }
}
