/**
 * `baton serve --workers N`: N processes (node:cluster) serving one port. A chat turn is CPU
 * work in a single-threaded process (about 12 ms with the offline model), so one process tops
 * out near one core; workers use the others. Sessions live in the store, and every state change
 * is one atomic update there, so any worker may serve any turn of any session, provided the store
 * is one they all share (SQLite, Redis, PostgreSQL; not `memory:`).
 *
 * The primary serves nothing itself: it forks the workers, prints one banner once all of them
 * listen, starts another worker when one dies (a bounded number of times), and stops them all
 * when it is stopped. Each worker is `baton serve` with the same flags (cluster re-runs the same
 * command line), told apart by `cluster.isWorker`.
 */
import cluster, { type Worker } from 'node:cluster';
import { redact } from '../stores/resolve-store.js';
import { type ServeOptions, ServeSetupError, startServer } from './serve.js';

/** Most workers restarted within {@link RESTART_WINDOW_MS} before the primary gives up. */
export const MAX_WORKER_RESTARTS = 5;
/** The window of {@link MAX_WORKER_RESTARTS}. */
export const RESTART_WINDOW_MS = 60_000;
/** How long the primary waits for a worker to stop cleanly before killing it. */
const STOP_GRACE_MS = 10_000;

/** From the primary to a worker: stop serving and exit. */
const STOP = 'baton-stop';

/** From a worker to the primary. */
type WorkerReport =
  | { type: 'baton-listening'; url: string; banner: readonly string[] }
  | { type: 'baton-setup-failed'; message: string };

function isReport(message: unknown): message is WorkerReport {
  return (
    typeof message === 'object' &&
    message !== null &&
    ((message as WorkerReport).type === 'baton-listening' || (message as WorkerReport).type === 'baton-setup-failed')
  );
}

/** Running workers: the URL they share, and when they all stopped. */
export interface RunningWorkers {
  url: string;
  /**
   * Resolves once every worker stopped after `signal` aborted; rejects with a
   * {@link ServeSetupError} when workers kept dying and the primary gave up.
   */
  closed: Promise<void>;
}

/**
 * Refuses a store the workers would not share: each worker would keep its own sessions, and a
 * session would change state depending on which worker a request reached.
 */
export function checkSharedStore(options: Pick<ServeOptions, 'store' | 'stateless'>, workers: number): void {
  if (workers <= 1) return;
  const store = options.store.trim().toLowerCase();
  const inMemory = store.startsWith('memory:') || (store.startsWith('sqlite:') && store.includes(':memory:'));
  if (!inMemory) return;
  const what = options.stateless ? 'the stateless replay marks' : 'sessions';
  throw new ServeSetupError(
    `--workers ${workers} needs a store all workers share, but ${redact(options.store)} keeps ${what} inside one process; ` +
      'use --store sqlite:<file>, redis://… or postgres://…, or --workers 1.',
  );
}

/** The primary: forks `workers` workers and resolves once all of them listen. */
export function startServeWorkers(options: ServeOptions, workers: number): Promise<RunningWorkers> {
  checkSharedStore(options, workers);
  const { stdout, stderr } = options;
  const live = new Set<Worker>();
  const restarts: number[] = [];
  let listening = 0;
  let started = false;
  let stopping = false;
  let failure: ServeSetupError | undefined;
  let url = '';

  let settleStarted!: { resolve: (running: RunningWorkers) => void; reject: (error: unknown) => void };
  let settleClosed!: { resolve: () => void; reject: (error: unknown) => void };
  const closed = new Promise<void>((resolve, reject) => {
    settleClosed = { resolve, reject };
  });
  // Awaited by the caller only after a successful start; a failure before is reported by `started`.
  closed.catch(() => undefined);

  const finish = () => {
    if (!started) settleStarted.reject(failure ?? new ServeSetupError('stopped before the workers listened'));
    else if (failure) settleClosed.reject(failure);
    else settleClosed.resolve();
  };

  const stopAll = (reason?: ServeSetupError) => {
    if (stopping) return;
    stopping = true;
    failure = reason;
    if (live.size === 0) {
      finish();
      return;
    }
    for (const worker of live) {
      tell(worker, STOP);
      const kill = setTimeout(() => worker.process.kill('SIGKILL'), STOP_GRACE_MS);
      kill.unref();
      worker.once('exit', () => clearTimeout(kill));
    }
  };

  const fork = () => {
    const worker = cluster.fork();
    live.add(worker);
    worker.on('message', (message: unknown) => {
      if (isReport(message)) onReport(worker, message);
    });
    worker.once('exit', (code, signal) => onExit(worker, code, signal));
  };

  const onReport = (worker: Worker, report: WorkerReport) => {
    if (report.type === 'baton-setup-failed') {
      // The same flags fail the same way in every worker: report it once and stop. After the
      // start (a restarted worker whose store went away), the exit that follows counts as a crash.
      if (!started) stopAll(new ServeSetupError(report.message));
      else stderr.write(`baton serve: worker ${worker.id} could not start: ${report.message}\n`);
      return;
    }
    if (stopping) return;
    if (started) {
      stderr.write(`baton serve: worker ${worker.id} (pid ${worker.process.pid}) listening.\n`);
      return;
    }
    if (listening === 0) {
      url = report.url;
      for (const line of report.banner) stdout.write(`${line}\n`);
    }
    listening++;
    if (listening === workers) {
      started = true;
      const pids = [...live].map((w) => w.process.pid).join(', ');
      stdout.write(`Workers: ${workers} (pids ${pids}), primary pid ${process.pid}\n`);
      settleStarted.resolve({ url, closed });
    }
  };

  const onExit = (worker: Worker, code: number | null, signal: string | null) => {
    live.delete(worker);
    const how = signal ? `signal ${signal}` : `code ${code}`;
    if (stopping) {
      if (live.size === 0) finish();
      return;
    }
    if (!started) {
      stopAll(new ServeSetupError(`worker ${worker.id} exited (${how}) before it listened; its output is above.`));
      return;
    }
    const now = Date.now();
    while (restarts.length > 0 && now - restarts[0]! > RESTART_WINDOW_MS) restarts.shift();
    if (restarts.length >= MAX_WORKER_RESTARTS) {
      stopAll(
        new ServeSetupError(
          `workers keep exiting: worker ${worker.id} exited (${how}) after ${restarts.length} restarts in ` +
            `${RESTART_WINDOW_MS / 1000} s; stopping. Their output is above.`,
        ),
      );
      return;
    }
    restarts.push(now);
    stderr.write(`baton serve: worker ${worker.id} (pid ${worker.process.pid}) exited (${how}); starting another.\n`);
    fork();
  };

  return new Promise<RunningWorkers>((resolve, reject) => {
    settleStarted = { resolve, reject };
    if (options.signal.aborted) {
      stopAll();
      return;
    }
    options.signal.addEventListener('abort', () => stopAll(), { once: true });
    for (let i = 0; i < workers; i++) fork();
  });
}

/**
 * A worker: `baton serve` as one process would run it, reporting to the primary instead of
 * printing its banner, and stopping when the primary says so (or on its own signal).
 */
export async function runServeWorker(options: ServeOptions, setExitCode: (code: number) => void): Promise<void> {
  const worker = cluster.worker;
  if (!worker) throw new Error('runServeWorker runs in a cluster worker');
  const stop = new AbortController();
  const onMessage = (message: unknown) => {
    if (message === STOP) stop.abort();
  };
  worker.on('message', onMessage);
  try {
    const running = await startServer({
      ...options,
      worker: worker.id,
      signal: AbortSignal.any([options.signal, stop.signal]),
    });
    tell(worker, { type: 'baton-listening', url: running.url, banner: running.banner } satisfies WorkerReport);
    await running.closed;
  } catch (error) {
    if (!ServeSetupError.isInstance(error) || error.code !== 'serve-setup') throw error;
    // The primary prints it once for all workers.
    tell(worker, { type: 'baton-setup-failed', message: error.message } satisfies WorkerReport);
    setExitCode(1);
  } finally {
    worker.off('message', onMessage);
    // The IPC channel would keep this process alive after its server closed.
    if (worker.isConnected()) worker.disconnect();
  }
}

/** Sends a message over a worker's IPC channel, if it is still open. */
function tell(worker: Worker, message: unknown): void {
  if (!worker.isConnected()) return;
  try {
    // With a callback, a channel that closes mid-send (EPIPE: the worker was just killed) is
    // reported here; without one, Node emits it as an 'error' event that nothing listens to,
    // and the primary crashed on it while stopping workers that kept dying.
    worker.send(message as Parameters<Worker['send']>[0], ignoreSendError);
  } catch {
    // The channel closed in between: the worker is exiting anyway.
  }
}

/** A send to a worker that is exiting may fail; the worker's exit is handled on its own. */
function ignoreSendError(): void {}
