/**
 * The `baton` command as a process: the only place that touches `process` (argv, env, stdio,
 * signals, exit code). Loaded by the bin (index.ts) once it has checked the Node.js version.
 */
import { readFileSync } from 'node:fs';
import { createProgram } from './program.js';

const abort = new AbortController();
let signals = 0;
const onSignal = (signal: NodeJS.Signals) => {
  // The first Ctrl-C asks the running command to stop cleanly; a second one forces the exit.
  if (++signals > 1) process.exit(signal === 'SIGINT' ? 130 : 143);
  abort.abort(new Error(signal));
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);
// `baton chat ... | head`: once the reader is gone there is nobody left to answer; stop quietly.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
  process.exit(typeof process.exitCode === 'number' ? process.exitCode : 0);
});

const program = createProgram(
  {
    env: process.env,
    stdin: process.stdin,
    stdout: process.stdout,
    stderr: process.stderr,
    signal: abort.signal,
    setExitCode: (code) => {
      process.exitCode = code;
    },
  },
  packageVersion(),
);

try {
  await program.parseAsync(process.argv);
} catch (error) {
  process.stderr.write(`baton: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
} finally {
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
  // stdin may still be open when a command stops early (/exit); it must not keep the process alive.
  process.stdin.unref?.();
}

function packageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version?: string;
    };
    return pkg.version ?? '0.0.0';
  } catch {
    return '0.0.0';
  }
}
