/**
 * The package as an app gets it, for the tests that install it (test/package-consumer.test.ts,
 * test/next-app.test.ts): `npm pack` builds the tarball (its `prepack` runs the real build, in a
 * private copy of the project so concurrent builds cannot interfere), cached by a hash of its
 * inputs so a rerun without changes skips the build. Test files run in parallel, so one packs at
 * a time, under a lock.
 */
import { type SpawnSyncReturns, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, parse, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const ROOT = new URL('../..', import.meta.url).pathname;
const CACHE = join(ROOT, 'node_modules/.cache/baton-package-consumer');
const LOCK = join(CACHE, '.lock');
/**
 * A new, empty folder for an app that installs the package. Node resolves a package from every
 * ancestor's node_modules too, so a stray `node_modules` in the temporary folder or above it
 * would hand the app packages it never installed (the missing-package tests would then see them
 * installed); that is refused here with the folder to remove, instead of as a confusing failure.
 */
export function appDirectory(prefix: string): string {
  const app = mkdtempSync(join(tmpdir(), prefix));
  for (let dir = dirname(app); ; dir = dirname(dir)) {
    const stray = join(dir, 'node_modules');
    if (existsSync(stray)) {
      rmSync(app, { recursive: true, force: true });
      throw new Error(`${stray} makes packages resolvable from the test apps under ${tmpdir()}: remove it`);
    }
    if (dir === parse(dir).root) return app;
  }
}

/** How long a command of these tests (an install, a build) may take. */
export const NPM_TIMEOUT_MS = 240_000;

/** What the project's build and tarball depend on: a change to any of these repacks. */
const PACK_INPUTS = [
  'src',
  'web',
  'schema',
  'examples',
  'docs',
  'package.json',
  'tsconfig.json',
  'tsconfig.build.json',
  'README.md',
  'LICENSE',
];

/** The environment of child processes: this Node.js first on PATH, nothing of the npm or vitest run around us. */
export function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(npm_|VITEST|NODE_ENV$|NODE_OPTIONS$|TSX_)/i.test(key)) continue;
    env[key] = value;
  }
  env.PATH = [dirname(process.execPath), process.env.PATH].join(delimiter);
  env.NO_COLOR = '1';
  return env;
}

/** Runs a command to its end with {@link childEnv}. */
export function run(
  command: string,
  args: readonly string[],
  cwd: string,
  timeout = NPM_TIMEOUT_MS,
): SpawnSyncReturns<string> {
  return spawnSync(command, args, { cwd, env: childEnv(), encoding: 'utf8', timeout, maxBuffer: 64 * 1024 * 1024 });
}

/** Runs a command that must succeed; its output is the failure message otherwise. */
export function runOk(command: string, args: readonly string[], cwd: string, timeout?: number): string {
  const result = run(command, args, cwd, timeout);
  if (result.status !== 0) {
    throw new Error(
      `${command} ${args.join(' ')} (in ${cwd}) failed with ${result.status ?? result.signal}:\n${result.stdout}\n${result.stderr}`,
    );
  }
  return result.stdout;
}

function filesUnder(path: string): string[] {
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path, { withFileTypes: true })
    .filter((entry) => entry.name !== 'node_modules' && entry.name !== 'dist')
    .flatMap((entry) => filesUnder(join(path, entry.name)));
}

function inputsHash(): string {
  const hash = createHash('sha256');
  for (const input of PACK_INPUTS) {
    for (const file of filesUnder(join(ROOT, input)).sort()) {
      hash.update(relative(ROOT, file)).update('\0').update(readFileSync(file)).update('\0');
    }
  }
  return hash.digest('hex').slice(0, 16);
}

/** Whether the process that holds `lock` (its `pid` file) is gone. */
function lockAbandoned(lock: string): boolean {
  try {
    process.kill(Number(readFileSync(join(lock, 'pid'), 'utf8')), 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/**
 * `npm pack` in a private copy of the project (its node_modules linked), which runs `prepack`
 * (the build) as a release would. Returns the tarball, reused while the inputs are unchanged.
 */
export async function packTarball(): Promise<string> {
  mkdirSync(CACHE, { recursive: true });
  const deadline = Date.now() + NPM_TIMEOUT_MS;
  for (;;) {
    try {
      // mkdir is atomic: whoever creates the directory packs.
      mkdirSync(LOCK);
      writeFileSync(join(LOCK, 'pid'), String(process.pid));
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      if (lockAbandoned(LOCK)) rmSync(LOCK, { recursive: true, force: true });
      else if (Date.now() > deadline) throw new Error(`${LOCK} is still held after ${NPM_TIMEOUT_MS} ms`);
      else await sleep(250);
    }
  }
  try {
    const name = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string }).name;
    const tarball = join(CACHE, `${name}-${inputsHash()}.tgz`);
    if (existsSync(tarball)) return tarball;
    const stage = mkdtempSync(join(tmpdir(), 'baton-pack-'));
    try {
      for (const input of PACK_INPUTS) cpSync(join(ROOT, input), join(stage, input), { recursive: true });
      symlinkSync(join(ROOT, 'node_modules'), join(stage, 'node_modules'), 'dir');
      const out = join(stage, 'out');
      mkdirSync(out);
      runOk('npm', ['pack', '--pack-destination', out, '--loglevel=error'], stage);
      const [packed] = readdirSync(out).filter((file) => file.endsWith('.tgz'));
      if (!packed) throw new Error(`npm pack wrote no tarball in ${out}`);
      for (const old of readdirSync(CACHE)) if (old.endsWith('.tgz')) rmSync(join(CACHE, old), { force: true });
      cpSync(join(out, packed), tarball);
      return tarball;
    } finally {
      rmSync(stage, { recursive: true, force: true });
    }
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}

/** The version of a package installed in the repository, so an app can install that very one (from npm's cache). */
export function installedVersion(name: string): string {
  return (JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string })
    .version;
}
