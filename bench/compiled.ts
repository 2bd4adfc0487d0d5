/**
 * The bench compiled as an app runs the package: `tsc` output of a checkout (src and bench), run
 * by plain Node. Shared by the benchmarks that start the model-loop bench in processes of its own
 * (bench/variants.ts, bench/instructions.ts); its worktrees of other commits also serve the seed
 * turn's before/after (bench/compare-versions.ts, the CI guard).
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, symlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** This checkout. */
export const ROOT = resolve(import.meta.dirname, '..');
/** Where builds and other checkouts are kept (ignored by git). */
export const CACHE = join(ROOT, 'bench', '.cache');
/** The model-loop bench's files, compiled from this checkout into another commit's build too. */
const HARNESS = ['ai-sdk.ts', 'core.ts', 'stores.ts'];

/** Runs git in this checkout; its output, trimmed. */
export function git(args: readonly string[]): string {
  return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

/** Compiles the checkout at `root` (src and bench) into `outDir` with its own tsconfig.json. */
function compile(root: string, outDir: string): void {
  execFileSync(
    join(ROOT, 'node_modules', '.bin', 'tsc'),
    ['-p', 'tsconfig.json', '--noEmit', 'false', '--outDir', outDir],
    {
      cwd: root,
      stdio: ['ignore', 'inherit', 'inherit'],
    },
  );
}

/** A compiled model-loop bench: its label and the path of its `bench/ai-sdk.js`. */
export interface CompiledBench {
  label: string;
  bench: string;
}

/** This checkout, compiled (under bench/.cache/, named after `purpose`). */
export function compiledHere(purpose: string): CompiledBench {
  const out = join(CACHE, `${purpose}-build`);
  mkdirSync(CACHE, { recursive: true });
  compile(ROOT, out);
  const dirty = git(['status', '--porcelain', '--untracked-files=no']) !== '';
  return {
    label: `this checkout (${git(['rev-parse', '--short', 'HEAD'])}${dirty ? ', modified' : ''})`,
    bench: join(out, 'bench', 'ai-sdk.js'),
  };
}

/**
 * A worktree of `ref` under bench/.cache/ (reused when it exists) that shares this checkout's
 * dependencies (a symlink is enough for tsc and for Node).
 */
export function checkoutOf(ref: string): { root: string; commit: string } {
  const commit = git(['rev-parse', '--verify', `${ref}^{commit}`]);
  const root = join(CACHE, `version-${commit.slice(0, 12)}`);
  if (!existsSync(join(root, 'package.json'))) {
    mkdirSync(CACHE, { recursive: true });
    git(['worktree', 'add', '--detach', '--force', root, commit]);
  }
  if (!existsSync(join(root, 'node_modules'))) symlinkSync(join(ROOT, 'node_modules'), join(root, 'node_modules'));
  return { root, commit };
}

/**
 * Another commit, compiled ({@link checkoutOf}), with this checkout's model-loop bench files over
 * its own, so both sides run the same harness over their own library code.
 */
export function compiledAt(ref: string): CompiledBench {
  const { root, commit } = checkoutOf(ref);
  for (const file of HARNESS) copyFileSync(join(ROOT, 'bench', file), join(root, 'bench', file));
  const out = join(root, '.bench-build');
  compile(root, out);
  return { label: `${ref} (${commit.slice(0, 7)})`, bench: join(out, 'bench', 'ai-sdk.js') };
}
