/**
 * CI's guard against a gross slowdown of the seed turn: AgentDock's harness workload
 * (bench/seed-turns.ts) on this checkout's build against the previous release's build, each in
 * its own process, alternating, 5 rounds. It fails only when this checkout's median p50 µs per
 * turn is more than 1.5x the baseline's. The p50 of 20,000 turns moves by under 15% from run to
 * run on a loaded machine, where turns/s (which counts garbage collection and preemption) moved
 * 3x in one round: a gross slip fails, noise cannot.
 *
 * The baseline ("the previous release"): `$BATON_GUARD_BASELINE` when set, else the newest tag
 * `v*` that is not HEAD, else `HEAD~1` (the previous commit of main, present in any clone with
 * history). When the baseline cannot be found or built, the guard says why and passes: it
 * guards speed, not the clone.
 *
 * `npx tsx bench/regression-guard.ts` (run by .ci/run after the tests; about 30 s).
 */
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { compareWith, removeCheckout } from './compare-versions.js';

/** Slower than this factor on the median fails the guard. */
export const REGRESSION_FACTOR = 1.5;
const ROUNDS = 5;

function git(args: readonly string[]): string | undefined {
  try {
    return execFileSync('git', args, {
      cwd: resolve(import.meta.dirname, '..'),
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return undefined;
  }
}

/** The baseline ref, and how it was chosen. */
function baseline(): { ref: string; why: string } | undefined {
  const forced = process.env.BATON_GUARD_BASELINE;
  if (forced) return { ref: forced, why: 'BATON_GUARD_BASELINE' };
  const head = git(['rev-parse', 'HEAD']);
  const tags = git(['tag', '--list', 'v*', '--sort=-creatordate', '--merged', 'HEAD'])?.split('\n') ?? [];
  for (const tag of tags) {
    if (tag !== '' && git(['rev-parse', `${tag}^{commit}`]) !== head) return { ref: tag, why: 'newest release tag' };
  }
  if (git(['rev-parse', '--verify', 'HEAD~1^{commit}']) !== undefined) {
    return { ref: 'HEAD~1', why: 'no release tag: the previous commit' };
  }
  return undefined;
}

const chosen = baseline();
if (chosen === undefined) {
  console.log('regression guard: no baseline (no v* tag and no previous commit in this clone); not run');
  process.exit(0);
}
console.log(`regression guard: this checkout against ${chosen.ref} (${chosen.why}), ${ROUNDS} alternating rounds`);
let result: Awaited<ReturnType<typeof compareWith>>;
try {
  result = await compareWith(chosen.ref, { rounds: ROUNDS, reps: 5, warmup: 2, log: (l) => console.log(`  ${l}`) });
} catch (error) {
  console.log(`regression guard: the baseline ${chosen.ref} could not be built or run; not run:`);
  console.log(`  ${(error as Error).message.split('\n')[0]}`);
  process.exit(0);
}
// The baseline's checkout is not kept: the guard leaves no worktree behind.
try {
  removeCheckout(result.root);
} catch {
  // Already gone, or git refused: nothing depends on it.
}
const slower = result.mine.p50Micros / result.theirs.p50Micros;
console.log(
  `regression guard: median p50 ${result.mine.p50Micros.toFixed(2)} µs per turn here ` +
    `(${Math.round(result.mine.turnsPerSec)} turns/s), ${result.theirs.p50Micros.toFixed(2)} µs at ${chosen.ref} ` +
    `(${result.commit.slice(0, 7)}, ${Math.round(result.theirs.turnsPerSec)} turns/s): ` +
    `${slower > 1 ? `${slower.toFixed(2)}x slower` : `${(1 / slower).toFixed(2)}x as fast`} ` +
    `(fails beyond ${REGRESSION_FACTOR}x slower)`,
);
if (slower > REGRESSION_FACTOR) {
  console.error(
    `regression guard: FAILED: the seed turn is ${slower.toFixed(2)}x slower than at ${chosen.ref}; ` +
      'profile with `npx tsx bench/seed-turns.ts --compare . <checkout>` and docs/benchmarks.md',
  );
  process.exit(1);
}
