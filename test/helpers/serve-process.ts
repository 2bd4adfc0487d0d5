/**
 * `baton serve` in a child process, as a user runs it: started from the repository's source
 * with tsx, ready once it prints `Baton listening on <url>`, stopped with a signal.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';

const ROOT = new URL('../..', import.meta.url).pathname;

/** A running `baton serve`. */
export interface ServeProcess {
  /** Names this server in errors (e.g. `A`, `B`). */
  name: string;
  /** `http://127.0.0.1:<port>`, no trailing slash. */
  url: string;
  child: ChildProcessWithoutNullStreams;
  /** Everything it printed so far, stdout and stderr. */
  output(): string;
}

/** Options of {@link startServeProcess}. */
export interface StartServeOptions {
  name?: string;
  /** Environment of the child (default: this process's, with FORCE_COLOR=0). */
  env?: NodeJS.ProcessEnv;
  /** Node flags before `--import tsx` (e.g. `--cpu-prof`). */
  nodeFlags?: readonly string[];
  /** Give up after this long (default 30 s). */
  timeoutMs?: number;
  /**
   * Another server to run instead of `baton serve` (a script and its arguments, run with tsx;
   * `args` are appended), and the line it prints once it listens, capturing its URL.
   */
  entry?: { script: readonly string[]; ready: RegExp };
  /** Called with the child as soon as it is spawned, before it listens (to watch or kill its own children). */
  onSpawn?: (child: ChildProcessWithoutNullStreams) => void;
}

const BATON_READY = /^Baton listening on (http:\/\/\S+)$/m;

/** Starts `baton serve <args>` and resolves once it listens; rejects with its output if it exits or stalls. */
export function startServeProcess(args: readonly string[], options: StartServeOptions = {}): Promise<ServeProcess> {
  const name = options.name ?? 'baton serve';
  const child = spawn(
    process.execPath,
    [
      ...(options.nodeFlags ?? []),
      '--import',
      'tsx',
      ...(options.entry?.script ?? ['src/cli/index.ts', 'serve']),
      ...args,
    ],
    { cwd: ROOT, env: options.env ?? { ...process.env, FORCE_COLOR: '0' }, stdio: ['pipe', 'pipe', 'pipe'] },
  );
  options.onSpawn?.(child);
  let output = '';
  const timeoutMs = options.timeoutMs ?? 30_000;
  return new Promise<ServeProcess>((resolve, reject) => {
    const giveUp = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${name} did not start within ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    const onData = (chunk: string) => {
      output += chunk;
      const url = (options.entry?.ready ?? BATON_READY).exec(output)?.[1];
      if (url) {
        clearTimeout(giveUp);
        resolve({ name, url: url.replace(/\/$/, ''), child, output: () => output });
      }
    };
    child.stdout.setEncoding('utf8').on('data', onData);
    child.stderr.setEncoding('utf8').on('data', onData);
    child.once('error', (error) => {
      clearTimeout(giveUp);
      reject(error);
    });
    child.once('exit', (code, signal) => {
      clearTimeout(giveUp);
      reject(new Error(`${name} exited (${signal ?? `code ${code}`}) before listening:\n${output}`));
    });
  });
}

/** Stops the server as Ctrl-C or a supervisor would, and kills it if it has not stopped in `graceMs`. */
export async function stopServeProcess(
  server: Pick<ServeProcess, 'child'>,
  signal: NodeJS.Signals = 'SIGTERM',
  graceMs = 5_000,
): Promise<void> {
  const { child } = server;
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill(signal);
  const force = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(force);
}
