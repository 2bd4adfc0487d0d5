/**
 * redis-server processes that a test starts, kills and restarts itself (outages on purpose),
 * never the machine's shared server.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';

/** The redis-server binary (`REDIS_SERVER`, else the one on the PATH). */
export const REDIS_SERVER = process.env.REDIS_SERVER ?? 'redis-server';

/** Throws unless the redis-server binary runs (for `serviceAvailable`). */
export async function redisServerRuns(): Promise<void> {
  await promisify(execFile)(REDIS_SERVER, ['--version']);
}

/**
 * Starts redis-server in the foreground on `port`, keeping its files in `dir`, and resolves once
 * it answers PING (after replaying its append-only file, when it has one). `onStart` hears of the
 * child at once, so a caller can stop it however the start ends.
 */
export async function startRedisServer(
  port: number,
  dir: string,
  extra: readonly string[] = [],
  onStart?: (child: ChildProcess) => void,
): Promise<ChildProcess> {
  const child = spawn(
    REDIS_SERVER,
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--daemonize', 'no', ...extra],
    { stdio: 'ignore' },
  );
  onStart?.(child);
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`redis-server on port ${port} exited with ${child.exitCode}`);
    const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, retryStrategy: () => null });
    probe.on('error', () => undefined);
    try {
      await probe.connect();
      await probe.ping(); // fails with LOADING while the append-only file is replayed
      return child;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      probe.disconnect();
    }
  }
}

/** Stops a child process with `signal` (default SIGKILL) and resolves once it exited. */
export async function stopProcess(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill(signal);
  await exited;
}
