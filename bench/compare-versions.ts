/**
 * The seed turn of this checkout against another commit, both built (`dist/`) and each measured
 * in its own process, alternating (bench/seed-turns.ts: AgentDock's harness workload):
 *
 *   npx tsx bench/compare-versions.ts <git ref> [--rounds 5] [--reps 5]
 *
 * The other commit is checked out with `git worktree add` under bench/.cache/ (sharing this
 * checkout's node_modules) and built with its own tsconfig.build.json, and kept for the next
 * comparison (`git worktree remove` it when done). Also the machinery of the CI regression guard
 * (bench/regression-guard.ts). A benchmark, never part of `npm test`.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { checkoutOf, git, ROOT } from './compiled.js';
import { type HarnessResult, runAlternating } from './seed-turns.js';

/** Builds the package of the checkout at `root` (its own tsconfig.build.json). */
export function buildCheckout(root: string): void {
  execFileSync(join(ROOT, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.build.json'], {
    cwd: root,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
}

/** A built checkout of `ref` (a worktree under bench/.cache/, reused when it exists). */
export function builtCheckout(ref: string): { root: string; commit: string } {
  const checkout = checkoutOf(ref);
  if (!existsSync(join(checkout.root, 'dist', 'index.js'))) buildCheckout(checkout.root);
  return checkout;
}

/** Removes a checkout made by {@link builtCheckout} (and git's record of it). */
export function removeCheckout(root: string): void {
  git(['worktree', 'remove', '--force', root]);
}

/** Medians of `rounds` alternating rounds of this checkout (built first) and `ref`. */
export async function compareWith(
  ref: string,
  options: { rounds: number; reps: number; warmup: number; log?: (line: string) => void },
): Promise<{ mine: HarnessResult; theirs: HarnessResult; commit: string; root: string; rounds: HarnessResult[][] }> {
  const other = builtCheckout(ref);
  buildCheckout(ROOT);
  const log = options.log ?? (() => undefined);
  const { medians, rounds } = await runAlternating(
    [
      { kind: 'baton', root: ROOT },
      { kind: 'baton', root: other.root },
    ],
    {
      ...options,
      onRound: (round) =>
        log(
          `this checkout ${Math.round(round[0]!.turnsPerSec)} turns/s (p50 ${round[0]!.p50Micros.toFixed(2)} µs) | ` +
            `${ref} ${Math.round(round[1]!.turnsPerSec)} turns/s (p50 ${round[1]!.p50Micros.toFixed(2)} µs)`,
        ),
    },
  );
  return { mine: medians[0]!, theirs: medians[1]!, commit: other.commit, root: other.root, rounds };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      rounds: { type: 'string', default: '5' },
      reps: { type: 'string', default: '5' },
      warmup: { type: 'string', default: '2' },
    },
  });
  const ref = positionals[0];
  if (ref === undefined) throw new Error('usage: bench/compare-versions.ts <git ref> [--rounds 5] [--reps 5]');
  const { mine, theirs, commit } = await compareWith(ref, {
    rounds: Number(values.rounds),
    reps: Number(values.reps),
    warmup: Number(values.warmup),
    log: console.log,
  });
  console.log(
    `median of ${values.rounds} alternating rounds: this checkout ${Math.round(mine.turnsPerSec)} turns/s ` +
      `(p50 ${mine.p50Micros.toFixed(2)} µs), ${ref} (${commit.slice(0, 7)}) ${Math.round(theirs.turnsPerSec)} turns/s ` +
      `(p50 ${theirs.p50Micros.toFixed(2)} µs): this / that = ${(mine.turnsPerSec / theirs.turnsPerSec).toFixed(2)}x`,
  );
}
