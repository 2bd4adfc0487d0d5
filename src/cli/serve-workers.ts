/**
 * `baton serve --workers N`: N processes (node:cluster) serving one port. A chat turn is CPU
 * work in a single-threaded process (about 12 ms with the offline model), so one process tops
 * out near one core; workers use the others. Sessions live in the store, and every state change
 * is one atomic update there, so any worker may serve any turn of any session, provided the store
 * is one they all share (SQLite, Redis, PostgreSQL; not `memory:`).
 *
 * The primary listens and hands each connection to a worker (see {@link startServeWorkers}); it
 * runs no turn itself. It prints one banner once all workers serve, starts another worker when
 * one dies (before the start as after it, a bounded number of times), and stops them all when it
 * is stopped. Each worker is `baton serve` with the same flags (cluster re-runs the same command
 * line), told apart by `cluster.isWorker`.
 *
 * Every worker must accept the tool approvals the others asked for, so they share the approval
 * key: `BATON_APPROVAL_KEYS` when set, else (with stored sessions) one the primary makes at start
 * and hands each worker it forks in that variable; stateless workers derive theirs from the state
 * keys they share.
 */
import cluster, { type Worker } from 'node:cluster';
import { type AddressInfo, createServer, Socket } from 'node:net';
import { generateApprovalKey } from '../server/approval-keys.js';
import { redact } from '../stores/resolve-store.js';
import { listen, type RunningServer, type ServeOptions, ServeSetupError, startServer, urlOf } from './serve.js';

/** Most workers restarted within {@link RESTART_WINDOW_MS} before the primary gives up. */
export const MAX_WORKER_RESTARTS = 5;
/** The window of {@link MAX_WORKER_RESTARTS}. */
export const RESTART_WINDOW_MS = 60_000;
/** How long the primary waits for a worker to stop cleanly before killing it. */
const STOP_GRACE_MS = 10_000;

/** From the primary to a worker: stop serving and exit. */
const STOP = 'baton-stop';
/** From the primary to a worker, with a connection: serve it (after confirming it with `baton-took`). */
interface Handover {
  type: 'baton-connection';
  id: number;
}
/** How the primary tells a worker the URL it listens at (in the worker's environment, set at fork). */
const PRIMARY_URL_ENV = 'BATON_PRIMARY_URL';

/** From a worker to the primary. */
type WorkerReport =
  | { type: 'baton-serving'; banner: readonly string[] }
  | { type: 'baton-took'; id: number }
  | { type: 'baton-setup-failed'; message: string };

function isReport(message: unknown): message is WorkerReport {
  const type = (message as { type?: unknown } | null)?.type;
  return type === 'baton-serving' || type === 'baton-took' || type === 'baton-setup-failed';
}

function isHandover(message: unknown): message is Handover {
  return (message as { type?: unknown } | null)?.type === 'baton-connection';
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

/**
 * The primary: listens, forks `workers` workers, and resolves once all of them serve.
 *
 * It accepts every connection itself and hands it to the next serving worker, keeping its own
 * copy until the worker confirms it has it; a connection handed to a worker that dies before
 * confirming goes to another worker. node:cluster's own round robin does not: a connection in
 * flight to a worker that dies stays open in the primary, never handed on and never closed, so
 * its client waits forever (Node keeps it until the dead worker acknowledges it). Its other
 * policy, every worker accepting from the shared socket, keeps nothing in flight, but one
 * worker's accept loop takes a whole burst of connections while the others idle.
 */
export async function startServeWorkers(options: ServeOptions, workers: number): Promise<RunningWorkers> {
  checkSharedStore(options, workers);
  const { stdout, stderr } = options;
  // Listening first: a port in use stops the start before any worker is forked.
  const listener = createServer({ pauseOnConnect: true });
  await listen(listener, options);
  const url = urlOf(listener.address() as AddressInfo);
  // An accept error (out of file descriptors) is reported; the listener keeps listening.
  listener.on('error', (error) => stderr.write(`baton serve: accepting a connection failed: ${error.message}\n`));

  const live = new Set<Worker>();
  /** Workers that serve, in the order they are handed connections. */
  const serving: Worker[] = [];
  let next = 0;
  /** Connections handed to a worker that has not confirmed them yet, by handover id. */
  const inFlight = new Map<number, { socket: Socket; worker: Worker }>();
  let handovers = 0;
  const restarts: number[] = [];
  let started = false;
  let stopping = false;
  let failure: ServeSetupError | undefined;
  // Made once, so that a worker started to replace one that died accepts the same approvals.
  const approvalEnv =
    options.stateless || options.env.BATON_APPROVAL_KEYS !== undefined
      ? undefined
      : { BATON_APPROVAL_KEYS: generateApprovalKey() };

  let settleStarted!: { resolve: (running: RunningWorkers) => void; reject: (error: unknown) => void };
  let settleClosed!: { resolve: () => void; reject: (error: unknown) => void };
  const closed = new Promise<void>((resolve, reject) => {
    settleClosed = { resolve, reject };
  });
  // Awaited by the caller only after a successful start; a failure before is reported by `started`.
  closed.catch(() => undefined);

  const finish = () => {
    if (!started) settleStarted.reject(failure ?? new ServeSetupError('stopped before the workers served'));
    else if (failure) settleClosed.reject(failure);
    else settleClosed.resolve();
  };

  const unserve = (worker: Worker) => {
    const index = serving.indexOf(worker);
    if (index === -1) return;
    serving.splice(index, 1);
    if (index < next) next--;
  };

  /** Hands a connection to the next serving worker; with none (all died, or stopping), closes it. */
  const handOff = (socket: Socket): void => {
    if (socket.destroyed) return;
    if (stopping || serving.length === 0) {
      socket.destroy();
      return;
    }
    next %= serving.length;
    const worker = serving[next]!;
    next = (next + 1) % serving.length;
    if (!worker.isConnected()) {
      // Its exit is on the way; until then it gets nothing more.
      unserve(worker);
      handOff(socket);
      return;
    }
    const id = handovers++;
    inFlight.set(id, { socket, worker });
    // keepOpen: this copy stays open until the worker confirms (`baton-took`) or dies.
    tell(worker, { type: 'baton-connection', id } satisfies Handover, socket, (error) => {
      if (!error) return;
      unserve(worker);
      reclaim(id);
    });
  };

  /** A connection a worker will not confirm goes to another one. */
  const reclaim = (id: number) => {
    const entry = inFlight.get(id);
    if (!entry) return;
    inFlight.delete(id);
    handOff(entry.socket);
  };

  listener.on('connection', handOff);

  const stopAll = (reason?: ServeSetupError) => {
    if (stopping) return;
    stopping = true;
    failure = reason;
    listener.close();
    serving.length = 0;
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
    const worker = cluster.fork({ ...approvalEnv, [PRIMARY_URL_ENV]: url });
    live.add(worker);
    worker.on('message', (message: unknown) => {
      if (isReport(message)) onReport(worker, message);
    });
    worker.once('exit', (code, signal) => onExit(worker, code, signal));
  };

  const onReport = (worker: Worker, report: WorkerReport) => {
    if (report.type === 'baton-took') {
      // The worker holds the connection now; the primary's copy goes (the connection stays open).
      inFlight.get(report.id)?.socket.destroy();
      inFlight.delete(report.id);
      return;
    }
    if (report.type === 'baton-setup-failed') {
      // The same flags fail the same way in every worker: report it once and stop. After the
      // start (a restarted worker whose store went away), the exit that follows counts as a crash.
      if (!started) stopAll(new ServeSetupError(report.message));
      else stderr.write(`baton serve: worker ${worker.id} could not start: ${report.message}\n`);
      return;
    }
    if (stopping || !live.has(worker)) return;
    serving.push(worker);
    if (started) {
      stderr.write(`baton serve: worker ${worker.id} (pid ${worker.process.pid}) serving.\n`);
      return;
    }
    if (serving.length < workers) return;
    started = true;
    const pids = [...serving]
      .sort((a, b) => a.id - b.id)
      .map((w) => w.process.pid)
      .join(', ');
    // One write: whoever reads the banner finds it whole, with the workers that serve it.
    stdout.write(
      [...report.banner, `Workers: ${workers} (pids ${pids}), primary pid ${process.pid}`]
        .map((line) => `${line}\n`)
        .join(''),
    );
    settleStarted.resolve({ url, closed });
  };

  const onExit = (worker: Worker, code: number | null, signal: string | null) => {
    live.delete(worker);
    unserve(worker);
    // Connections it never confirmed go to the others; collected first, as reclaiming adds entries.
    const unconfirmed = [...inFlight].filter(([, entry]) => entry.worker === worker).map(([id]) => id);
    for (const id of unconfirmed) reclaim(id);
    const how = signal ? `signal ${signal}` : `code ${code}`;
    if (stopping) {
      if (live.size === 0) finish();
      return;
    }
    // Before the start as after it: a worker that dies is replaced, a bounded number of times.
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
 * A worker: `baton serve` as one process would run it, but serving the connections the primary
 * hands it instead of listening, reporting to the primary instead of printing its banner, and
 * stopping when the primary says so (or on its own signal).
 */
export async function runServeWorker(options: ServeOptions, setExitCode: (code: number) => void): Promise<void> {
  const worker = cluster.worker;
  const primaryUrl = options.env[PRIMARY_URL_ENV];
  if (!worker || !primaryUrl) throw new Error('runServeWorker runs in a worker forked by startServeWorkers');
  const stop = new AbortController();
  let running: RunningServer | undefined;
  const onMessage = (message: unknown, socket: unknown) => {
    if (message === STOP) stop.abort();
    else if (isHandover(message)) {
      // Confirmed before this process reads a byte of it: until then the primary keeps its copy
      // and hands it to another worker if this one dies.
      tell(worker, { type: 'baton-took', id: message.id } satisfies WorkerReport);
      // No socket: the client closed the connection while it was handed over.
      if (!(socket instanceof Socket)) return;
      if (running) running.accept(socket);
      else socket.destroy();
    }
  };
  worker.on('message', onMessage);
  try {
    running = await startServer({
      ...options,
      worker: worker.id,
      primaryUrl,
      signal: AbortSignal.any([options.signal, stop.signal]),
    });
    tell(worker, { type: 'baton-serving', banner: running.banner } satisfies WorkerReport);
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

/**
 * Sends a message (and a connection, which the sender keeps open) over a worker's IPC channel,
 * if it is still open; `onError` hears of a send that failed.
 */
function tell(worker: Worker, message: unknown, socket?: Socket, onError?: (error: Error) => void): void {
  if (!worker.isConnected()) {
    if (onError) onError(new Error('the IPC channel is closed'));
    return;
  }
  // With a callback, a channel that closes mid-send (EPIPE: the worker was just killed) is
  // reported here; without one, Node emits it as an 'error' event that nothing listens to,
  // and the primary crashed on it while stopping workers that kept dying.
  const done = (error: Error | null) => {
    if (error) onError?.(error);
  };
  try {
    const payload = message as Parameters<Worker['send']>[0];
    if (socket) worker.send(payload, socket, { keepOpen: true }, done);
    else worker.send(payload, done);
  } catch (error) {
    // The channel closed in between: the worker is exiting anyway.
    onError?.(error instanceof Error ? error : new Error(String(error)));
  }
}
