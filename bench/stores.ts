/**
 * `npx tsx bench/stores.ts`: state changes per second, and round trips per change, of every
 * store (memory, SQLite, Redis, PostgreSQL) in one run. A state change is one
 * `store.update(sessionId, fn)` that appends a tool to the history, trimmed to 50 as
 * `processToolUsage` does; each cell runs 1 or 32 sessions, one change in flight per session,
 * for a fixed time after a warm-up, and reports the median of its repetitions. A last cell per
 * store measures `manager.processToolUsage` itself with 32 sessions.
 *
 * Round trips are counted, not estimated: every command the ioredis client sends (its
 * `sendCommand`) and every query of every pooled PostgreSQL connection (their `query`). The
 * Redis store lets concurrent commands share one socket write; those writes are reported separately.
 *
 * Flags: `--quick` (shorter cells), `--stores=memory,sqlite,redis,postgres`.
 * Redis and PostgreSQL are skipped, and said so, when unreachable.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type Command, Redis } from 'ioredis';
import { createOrchestrationManager, type OrchestrationConfig } from '../src/index.js';
import { createState } from '../src/internal.js';
import { memoryStore } from '../src/stores/memory.js';
import { postgresStore } from '../src/stores/postgres.js';
import { redisStore } from '../src/stores/redis.js';
import { sqliteStore } from '../src/stores/sqlite.js';
import type { SessionStore, StateUpdater } from '../src/stores/types.js';
import { countPostgresStatements, dropPostgresTables } from '../test/helpers/counted-stores.js';
import { pingPostgres, pingRedis } from '../test/helpers/services.js';
import { median } from './core.js';

/** Options of {@link runStoreBench}. */
export interface StoreBenchOptions {
  /** Stores to measure (default all four). */
  stores?: readonly StoreKind[];
  /** Concurrent sessions per `store.update` cell (default 1 and 32). */
  sessions?: readonly number[];
  /** Sessions of the `processToolUsage` cell (default 32). */
  managerSessions?: number;
  /** Measured repetitions per cell (default 3); the median is reported. */
  repetitions?: number;
  /** Length of one repetition in ms (default 2,000). */
  repetitionMs?: number;
  /** Warm-up before each cell in ms (default 500). */
  warmupMs?: number;
  /** Print the table and the `BENCH_STORES_JSON` line (default true). */
  print?: boolean;
  /** Redis URL (default `redis://127.0.0.1:6379`). */
  redisUrl?: string;
  /** PostgreSQL URL (default `postgres://postgres@127.0.0.1:5432/test`). */
  postgresUrl?: string;
}

/** A store this benchmark knows how to open and instrument. */
export type StoreKind = 'memory' | 'sqlite' | 'redis' | 'postgres';

/** One measured cell: a store, a workload and a number of concurrent sessions. */
export interface StoreBenchCell {
  store: StoreKind;
  workload: 'store.update' | 'processToolUsage';
  sessions: number;
  /** Median over the repetitions. */
  changesPerSec: number;
  /** Every repetition, in order. */
  repetitions: number[];
  /** Commands (Redis) or queries (PostgreSQL) per change; 0 for in-process stores. */
  roundTripsPerChange: number;
  /** Redis only: socket writes per change (the store batches concurrent commands into one write). */
  socketWritesPerChange?: number;
  /** CPU time of this (client) process per change, in µs: user plus system, the driver's syscalls included. */
  clientCpuMicrosPerChange: number;
}

/** A throughput target and whether it was met. */
export interface StoreBenchTarget {
  store: StoreKind;
  sessions: number;
  target: number;
  measured: number;
  met: boolean;
}

/** Everything {@link runStoreBench} measured. */
export interface StoreBenchResult {
  node: string;
  cpus: number;
  loadBefore: string;
  loadAfter: string;
  settings: { repetitions: number; repetitionMs: number; warmupMs: number; historyLimit: number };
  cells: StoreBenchCell[];
  targets: StoreBenchTarget[];
  skipped: { store: StoreKind; reason: string }[];
}

/** Targets with 32 sessions on the reference two-core machine, in changes per second. */
const TARGETS: Partial<Record<StoreKind, number>> = { sqlite: 10_000, redis: 5_000, postgres: 2_000 };
const HISTORY_LIMIT = 50;
const TTL_MS = 60 * 60 * 1000;
const TOOLS = ['search', 'think', 'summarize'] as const;
const ALL_STORES: readonly StoreKind[] = ['memory', 'sqlite', 'redis', 'postgres'];

/** A step with a sequence, so each `processToolUsage` also runs the sequencer and step selection. */
const CONFIG: OrchestrationConfig = {
  defaultStep: 'research',
  steps: [{ name: 'research', sequence: ['search', 'think', 'summarize'] }],
};
const MESSAGES = [{ role: 'user' as const, content: 'research the topic' }];

/** An open store with its round-trip counters. */
export interface Harness {
  store: SessionStore;
  roundTrips(): number;
  socketWrites?(): number;
  close(): Promise<void>;
}

/** Appends `tool` to the history, trimmed to {@link HISTORY_LIMIT}: the change `processToolUsage` makes. */
function appendTool(sessionId: string, tool: string): StateUpdater {
  return (current) => {
    const now = Date.now();
    const base = current ?? createState(sessionId, now, TTL_MS);
    const history = base.recentlyUsedTools;
    const drop = Math.max(0, history.length + 1 - HISTORY_LIMIT);
    return { ...base, recentlyUsedTools: [...history.slice(drop), tool], lastAccessed: now };
  };
}

async function openMemory(): Promise<Harness> {
  const store = memoryStore();
  return { store, roundTrips: () => 0, close: () => store.close() };
}

async function openSqlite(): Promise<Harness> {
  const directory = mkdtempSync(join(tmpdir(), 'baton-bench-sqlite-'));
  const store = sqliteStore({ path: join(directory, 'state.db') });
  return {
    store,
    roundTrips: () => 0,
    async close() {
      await store.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

async function openRedis(url: string): Promise<Harness> {
  // The options the store gives a client it creates itself, so the figures are the store's own.
  const client = new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 2_000,
    retryStrategy: () => null,
    enableAutoPipelining: false,
  });
  client.on('error', () => undefined);
  await client.connect();
  let commands = 0;
  let writes = 0;
  const sendCommand = client.sendCommand.bind(client);
  client.sendCommand = (command: Command, stream?: Parameters<Redis['sendCommand']>[1]) => {
    commands++;
    return sendCommand(command, stream);
  };
  // What reaches the kernel: `_write` for one chunk, `_writev` for the chunks the store held
  // back and released together (see `batchWrites` in src/stores/redis.ts), not every `write()`.
  const socket = client.stream as typeof client.stream & Record<'_write' | '_writev', (...args: unknown[]) => void>;
  for (const name of ['_write', '_writev'] as const) {
    const flush = socket[name].bind(socket);
    socket[name] = (...args: unknown[]) => {
      writes++;
      flush(...args);
    };
  }
  const prefix = `baton-bench:${randomUUID().slice(0, 8)}:`;
  const store = redisStore({ client, prefix });
  return {
    store,
    roundTrips: () => commands,
    socketWrites: () => writes,
    async close() {
      await store.close();
      const keys: string[] = [];
      for await (const batch of client.scanStream({ match: `${prefix}*`, count: 1_000 }))
        keys.push(...(batch as string[]));
      for (let i = 0; i < keys.length; i += 500) await client.del(...keys.slice(i, i + 500));
      client.disconnect();
    },
  };
}

async function openPostgres(connectionString: string): Promise<Harness> {
  // The store makes its own pool, as an app's `postgresStore({ connectionString })` does: it
  // treats its own pool differently from one the app passes in (see its kept client).
  const table = `baton_bench_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  const counting = countPostgresStatements(connectionString, `baton-bench-${table.slice(-12)}`);
  const store = postgresStore({ connectionString: counting.connectionString, table });
  await store.get('bench:migrate'); // creates the table outside the measured time
  return {
    store,
    roundTrips: () => counting.count.sent,
    async close() {
      await store.close();
      counting.stop();
      await dropPostgresTables(connectionString, table);
    },
  };
}

/** Why `kind` cannot run here, or undefined when it can. */
export async function unavailable(kind: StoreKind, redisUrl: string, postgresUrl: string): Promise<string | undefined> {
  try {
    if (kind === 'redis') await pingRedis(redisUrl);
    else if (kind === 'postgres') await pingPostgres(postgresUrl);
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/** Opens a store of `kind` with its round-trip counters (for the model-loop bench too). */
export function open(kind: StoreKind, redisUrl: string, postgresUrl: string): Promise<Harness> {
  switch (kind) {
    case 'memory':
      return openMemory();
    case 'sqlite':
      return openSqlite();
    case 'redis':
      return openRedis(redisUrl);
    case 'postgres':
      return openPostgres(postgresUrl);
  }
}

/**
 * Runs `sessions` closed loops, one per session, each starting its next change when the last
 * one resolved, until `durationMs` have passed; resolves to changes made and the time taken.
 */
async function drive(
  sessions: readonly string[],
  durationMs: number,
  change: (sessionId: string, n: number) => Promise<unknown>,
): Promise<{ changes: number; seconds: number }> {
  const start = performance.now();
  const until = start + durationMs;
  let changes = 0;
  await Promise.all(
    sessions.map(async (sessionId) => {
      for (let n = 0; performance.now() < until; n++) {
        await change(sessionId, n);
        changes++;
      }
    }),
  );
  return { changes, seconds: (performance.now() - start) / 1_000 };
}

/** Measures one cell: warm-up, then the repetitions, counting round trips over the measured ones. */
async function measure(
  harness: Harness,
  kind: StoreKind,
  workload: StoreBenchCell['workload'],
  sessionCount: number,
  settings: StoreBenchResult['settings'],
  change: (sessionId: string, n: number) => Promise<unknown>,
): Promise<StoreBenchCell> {
  const run = randomUUID().slice(0, 8);
  const sessions = Array.from({ length: sessionCount }, (_, i) => `bench-${run}-${i}`);
  // The warm-up also fills each history to its limit, so every measured change is alike.
  await drive(sessions, settings.warmupMs, change);
  const trips0 = harness.roundTrips();
  const writes0 = harness.socketWrites?.() ?? 0;
  const cpu0 = process.cpuUsage();
  const repetitions: number[] = [];
  let total = 0;
  for (let r = 0; r < settings.repetitions; r++) {
    const { changes, seconds } = await drive(sessions, settings.repetitionMs, change);
    repetitions.push(changes / seconds);
    total += changes;
  }
  const cell: StoreBenchCell = {
    store: kind,
    workload,
    sessions: sessionCount,
    changesPerSec: median(repetitions),
    repetitions,
    roundTripsPerChange: (harness.roundTrips() - trips0) / total,
    clientCpuMicrosPerChange: cpuMicros(process.cpuUsage(cpu0)) / total,
  };
  if (harness.socketWrites) cell.socketWritesPerChange = (harness.socketWrites() - writes0) / total;
  await Promise.all(sessions.map((id) => harness.store.delete(id)));
  return cell;
}

function cpuMicros(usage: NodeJS.CpuUsage): number {
  return usage.user + usage.system;
}

function readLoad(): string {
  try {
    return readFileSync('/proc/loadavg', 'utf8').trim();
  } catch {
    return 'unknown';
  }
}

function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells.map((c, i) => (i <= 1 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(headers), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

const whole = (n: number) => Math.round(n).toLocaleString('en-US');

/** Formats a result as the table `runStoreBench` prints. */
export function formatStoreBench(result: StoreBenchResult): string {
  const rows = result.cells.map((c) => [
    c.store,
    c.workload,
    String(c.sessions),
    whole(c.changesPerSec),
    `${whole(Math.min(...c.repetitions))}-${whole(Math.max(...c.repetitions))}`,
    c.roundTripsPerChange.toFixed(2),
    c.socketWritesPerChange === undefined ? '-' : c.socketWritesPerChange.toFixed(2),
    c.clientCpuMicrosPerChange.toFixed(1),
  ]);
  const lines = [
    `Stores: ${result.settings.repetitions} x ${result.settings.repetitionMs} ms per cell after ${result.settings.warmupMs} ms warm-up; Node ${result.node}, ${result.cpus} CPUs`,
    `load before: ${result.loadBefore}`,
    table(
      [
        'store',
        'workload',
        'sessions',
        'changes/s (median)',
        'range',
        'round trips/change',
        'socket writes/change',
        'client CPU µs/change',
      ],
      rows,
    ),
  ];
  for (const s of result.skipped) lines.push(`SKIPPED ${s.store}: ${s.reason}`);
  for (const t of result.targets) {
    lines.push(
      `target ${t.store} ${t.sessions} sessions >= ${whole(t.target)}/s: ${whole(t.measured)}/s ${t.met ? 'MET' : 'NOT MET'}`,
    );
  }
  lines.push(`load after: ${result.loadAfter}`);
  return lines.join('\n');
}

/** Measures every store's changes per second and round trips per change; see the file's comment. */
export async function runStoreBench(options: StoreBenchOptions = {}): Promise<StoreBenchResult> {
  const redisUrl = options.redisUrl ?? 'redis://127.0.0.1:6379';
  const postgresUrl = options.postgresUrl ?? 'postgres://postgres@127.0.0.1:5432/test';
  const settings = {
    repetitions: options.repetitions ?? 3,
    repetitionMs: options.repetitionMs ?? 2_000,
    warmupMs: options.warmupMs ?? 500,
    historyLimit: HISTORY_LIMIT,
  };
  const result: StoreBenchResult = {
    node: process.versions.node,
    cpus: cpus().length,
    loadBefore: readLoad(),
    loadAfter: '',
    settings,
    cells: [],
    targets: [],
    skipped: [],
  };
  for (const kind of options.stores ?? ALL_STORES) {
    const reason = await unavailable(kind, redisUrl, postgresUrl);
    if (reason !== undefined) {
      result.skipped.push({ store: kind, reason });
      continue;
    }
    const harness = await open(kind, redisUrl, postgresUrl);
    try {
      for (const sessions of options.sessions ?? [1, 32]) {
        result.cells.push(
          await measure(harness, kind, 'store.update', sessions, settings, (id, n) =>
            harness.store.update(id, appendTool(id, TOOLS[n % TOOLS.length]!)),
          ),
        );
      }
      const manager = createOrchestrationManager({ store: harness.store, historyLimit: HISTORY_LIMIT });
      result.cells.push(
        await measure(harness, kind, 'processToolUsage', options.managerSessions ?? 32, settings, (id, n) =>
          manager.processToolUsage(CONFIG, MESSAGES, id, TOOLS[n % TOOLS.length]!),
        ),
      );
    } finally {
      await harness.close();
    }
  }
  for (const cell of result.cells) {
    const target = TARGETS[cell.store];
    if (target === undefined || cell.workload !== 'store.update' || cell.sessions !== 32) continue;
    result.targets.push({
      store: cell.store,
      sessions: 32,
      target,
      measured: cell.changesPerSec,
      met: cell.changesPerSec >= target,
    });
  }
  result.loadAfter = readLoad();
  if (options.print ?? true) {
    console.log(formatStoreBench(result));
    console.log(`BENCH_STORES_JSON ${JSON.stringify(result)}`);
  }
  return result;
}

const entry = process.argv[1];
if (entry !== undefined && import.meta.url === pathToFileURL(resolve(entry)).href) {
  const args = process.argv.slice(2);
  const quick = args.includes('--quick');
  const only = args.find((a) => a.startsWith('--stores='))?.slice('--stores='.length);
  const stores = only?.split(',').filter((s): s is StoreKind => (ALL_STORES as readonly string[]).includes(s));
  await runStoreBench({
    ...(stores === undefined ? {} : { stores }),
    ...(quick ? { repetitionMs: 500, warmupMs: 200 } : {}),
  });
}
