/**
 * `npm run loadtest`: the HTTP server under load. Starts `baton serve examples/agents --model
 * offline` in a child process (port 0, request log off), then runs autocannon against
 * `POST /api/chat/cognitive-reasoner`: every request a new session and a research question,
 * so every one is a whole orchestrated turn (search, think, reflect, each a model step, then
 * the streamed answer) read to the end of its stream. A benchmark, never part of `npm test`.
 *
 * Reports requests/s, latency p50/p90/p99/max, errors, timeouts and non-2xx, the server's CPU
 * per request (all its processes, workers included, from /proc), and checks the responses:
 * every one must be a complete stream, and every 20th is parsed to see its final
 * `data-orchestration` part report the ResearchMode sequence completed. Exits 1 when any
 * request failed or any check did not hold.
 *
 * Flags:
 * - `--store <url>` (default `memory:`; e.g. `sqlite:/tmp/baton-load.db`), `--connections <n>`
 *   (50), `--duration <s>` (10);
 * - `--workers <n>` (`baton serve --workers`), `--max-turns <n>` and `--max-queued-turns <n>`
 *   (the turn limiter), passed to the server;
 * - `--healthz`: first the same load on `GET /healthz` (the HTTP overhead without the model loop);
 * - `--compare-bare`: alternates, in one run, Baton and a bare AI SDK server (bench/bare-server.ts:
 *   Hono + streamText + toUIMessageStreamResponse, the same offline model and tools, no
 *   orchestration), `--rounds <n>` times each (default 3), and prints both side by side with
 *   the ratios of their medians;
 * - `--compare-workers <n>`: alternates Baton with one worker and with `n` workers, the same way;
 * - `--cpu-prof <dir>`: write V8 CPU profiles of the server processes there (with `--compare-bare`,
 *   both servers: Baton's starts first, so its file has the lower process id). Each covers the
 *   server's whole life (start, warm-up, every run, idle time while the other server ran); the
 *   profiler slows a server by a different factor than the other, so compare where their time
 *   goes, and take the CPU per request from a run without it.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import type { OrchestrationSnapshot } from '../src/server/api-types.js';
import { type ServeProcess, startServeProcess, stopServeProcess } from '../test/helpers/serve-process.js';
import { median } from './core.js';

const AGENT = 'cognitive-reasoner';
const QUESTION = 'How many electric vehicles will be on the road by 2030?';
const EXPECTED_TOOLS = ['search', 'think', 'reflect'];
/** Every how many-th response is parsed in full (the parse costs client CPU the server shares). */
const SAMPLE_EVERY = 20;

const { values: flags } = parseArgs({
  options: {
    store: { type: 'string', default: 'memory:' },
    connections: { type: 'string', default: '50' },
    duration: { type: 'string', default: '10' },
    workers: { type: 'string' },
    'max-turns': { type: 'string' },
    'max-queued-turns': { type: 'string' },
    healthz: { type: 'boolean', default: false },
    'compare-bare': { type: 'boolean', default: false },
    'compare-workers': { type: 'string' },
    rounds: { type: 'string', default: '3' },
    'cpu-prof': { type: 'string' },
  },
});
const connections = positiveInteger('--connections', flags.connections);
const duration = positiveInteger('--duration', flags.duration);
const rounds = positiveInteger('--rounds', flags.rounds);

function positiveInteger(name: string, value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${name} must be a whole number >= 1, got ${value}`);
  return n;
}

/** A server under test: how to start it and what a right answer looks like. */
interface Target {
  name: string;
  server: ServeProcess;
  /** Why a sampled response is not a whole turn, or null when it is. */
  sampleProblem(body: string): string | null;
}

// BATON_* from the shell (an API key, a model) would change what is measured.
const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('BATON_')));
const nodeFlags = flags['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', resolve(flags['cpu-prof'])] : [];

/** Starts `baton serve` and resolves once it printed where it listens. */
async function startBaton(workers: string | undefined): Promise<Target> {
  const args = [
    'examples/agents',
    '--model',
    'offline',
    '--store',
    flags.store,
    '--port',
    '0',
    '--log-level',
    'silent',
  ];
  if (workers !== undefined) args.push('--workers', workers);
  if (flags['max-turns'] !== undefined) args.push('--max-turns', flags['max-turns']);
  if (flags['max-queued-turns'] !== undefined) args.push('--max-queued-turns', flags['max-queued-turns']);
  const server = await startServeProcess(args, { env, nodeFlags, timeoutMs: 120_000 });
  // With workers the URL is printed once the first listens; the banner ends when all do.
  if (workers !== undefined && workers !== '1') await until(() => /^Workers: /m.test(server.output()), 120_000);
  const name = workers !== undefined && workers !== '1' ? `Baton, ${workers} workers` : 'Baton';
  return { name, server, sampleProblem: batonSampleProblem };
}

/** Starts bench/bare-server.ts. */
async function startBare(): Promise<Target> {
  const server = await startServeProcess(['--port', '0'], {
    env,
    nodeFlags,
    entry: { script: ['bench/bare-server.ts'], ready: /^Bare AI SDK server listening on (http:\/\/\S+)$/m },
  });
  return { name: 'bare AI SDK', server, sampleProblem: bareSampleProblem };
}

/** SIGINT, as Ctrl-C would: the server closes its store, and writes its CPU profile when asked. */
const stop = (target: Target) => stopServeProcess(target.server, 'SIGINT', 15_000);

async function until(condition: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((done) => setTimeout(done, 50));
  }
}

function chunksOf(body: string) {
  return body
    .split('\n')
    .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
    .map((line) => JSON.parse(line.slice('data: '.length)) as { type: string; data?: unknown; toolCallId?: string });
}

/** The checks both servers' answers must pass: no error, the three tools ran, a finish. */
function commonProblem(chunks: ReturnType<typeof chunksOf>): string | null {
  if (chunks.some((chunk) => chunk.type === 'error')) return 'the stream has an error chunk';
  const outputs = chunks.filter((chunk) => chunk.type === 'tool-output-available').length;
  if (outputs !== EXPECTED_TOOLS.length) return `${outputs} tool outputs streamed, not ${EXPECTED_TOOLS.length}`;
  if (chunks.at(-1)?.type !== 'finish') return 'the stream does not end with finish';
  return null;
}

/** Why a sampled chat response is not a whole orchestrated research turn, or null when it is. */
function batonSampleProblem(body: string): string | null {
  const chunks = chunksOf(body);
  const common = commonProblem(chunks);
  if (common) return common;
  const snapshots = chunks
    .filter((chunk) => chunk.type === 'data-orchestration')
    .map((chunk) => chunk.data as OrchestrationSnapshot);
  const final = snapshots.at(-1);
  if (!final?.final) return 'no final data-orchestration part';
  if (final.activeStep !== 'ResearchMode') return `active step ${final.activeStep}, not ResearchMode`;
  if (!final.sequence?.completed) return `sequence not completed (${final.sequence?.index}/${final.sequence?.length})`;
  if (JSON.stringify(final.recentlyUsedTools) !== JSON.stringify(EXPECTED_TOOLS)) {
    return `tools used ${JSON.stringify(final.recentlyUsedTools)}`;
  }
  return null;
}

function bareSampleProblem(body: string): string | null {
  return commonProblem(chunksOf(body));
}

/**
 * CPU time, in ms, that a process and all its descendants (the workers of `--workers`) have
 * used (user + system, from /proc; Linux counts it in ticks of 10 ms), or undefined elsewhere.
 * Divided by the requests of a run it says how much server CPU one request costs, which the
 * latency under a saturated core cannot show.
 */
function treeCpuMs(root: number | undefined): number | undefined {
  if (root === undefined) return undefined;
  try {
    const stats = new Map<number, { parent: number; ticks: number }>();
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const fields = readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]!.split(' ');
        stats.set(Number(entry), { parent: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) });
      } catch {
        // It ended while we looked.
      }
    }
    if (!stats.has(root)) return undefined;
    let ticks = 0;
    const pending = [root];
    while (pending.length > 0) {
      const pid = pending.pop()!;
      ticks += stats.get(pid)?.ticks ?? 0;
      for (const [child, stat] of stats) if (stat.parent === pid) pending.push(child);
    }
    return ticks * 10;
  } catch {
    return undefined;
  }
}

/** One chat run, with what its checks found and the server CPU it cost. */
interface ChatRun {
  target: string;
  result: autocannon.Result;
  seconds: number;
  requestsPerSecond: number;
  cpuMsPerRequest: number | undefined;
  /** CPU of this process (autocannon and the checks) per request: it shares the machine's cores. */
  clientCpuMsPerRequest: number;
  responses: number;
  ok: number;
  incomplete: number;
  sampled: number;
  sampleFailures: string[];
  bodyBytes: number;
}

async function chatRun(target: Target, runDuration = duration): Promise<ChatRun> {
  const run: Omit<ChatRun, 'result' | 'seconds' | 'requestsPerSecond' | 'cpuMsPerRequest' | 'clientCpuMsPerRequest'> = {
    target: target.name,
    responses: 0,
    ok: 0,
    incomplete: 0,
    sampled: 0,
    sampleFailures: [],
    bodyBytes: 0,
  };
  const before = treeCpuMs(target.server.child.pid);
  const clientBefore = process.cpuUsage();
  const result = await autocannon({
    url: `${target.server.url}/api/chat/${AGENT}`,
    connections,
    duration: runDuration,
    // A turn streams for a while under load; the default 10 s timeout would count a slow one as an error.
    timeout: 30,
    requests: [
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        // No sessionId: the server starts a new session for every request.
        body: chatBody(),
        onResponse: (status, body) => {
          run.responses += 1;
          run.bodyBytes += Buffer.byteLength(body);
          if (status !== 200) return;
          run.ok += 1;
          if (!body.trimEnd().endsWith('data: [DONE]')) run.incomplete += 1;
          if (run.responses % SAMPLE_EVERY === 0) {
            run.sampled += 1;
            const problem = target.sampleProblem(body);
            if (problem) run.sampleFailures.push(problem);
          }
        },
      },
    ],
  });
  const after = treeCpuMs(target.server.child.pid);
  const client = process.cpuUsage(clientBefore);
  const clientCpuMsPerRequest = (client.user + client.system) / 1000 / Math.max(1, result.requests.total);
  const seconds = (result.finish.getTime() - result.start.getTime()) / 1000;
  const cpuMsPerRequest =
    before === undefined || after === undefined || result.requests.total === 0
      ? undefined
      : (after - before) / result.requests.total;
  return {
    ...run,
    result,
    seconds,
    requestsPerSecond: result.requests.total / seconds,
    cpuMsPerRequest,
    clientCpuMsPerRequest,
  };
}

function failedRun(run: ChatRun): boolean {
  return (
    run.result.errors > 0 ||
    run.result.non2xx > 0 ||
    run.incomplete > 0 ||
    run.sampleFailures.length > 0 ||
    run.sampled === 0 ||
    run.responses === 0
  );
}

function describeRun(title: string, run: ChatRun): string {
  const { result } = run;
  const cpu =
    run.cpuMsPerRequest === undefined
      ? []
      : [
          `  server CPU per request: ${run.cpuMsPerRequest.toFixed(run.cpuMsPerRequest < 1 ? 3 : 1)} ms` +
            ` (load-test client: ${run.clientCpuMsPerRequest.toFixed(1)} ms)`,
        ];
  const lines = [
    title,
    `  requests: ${result.requests.total} in ${run.seconds.toFixed(1)} s = ${run.requestsPerSecond.toFixed(1)} req/s`,
    `  latency ms: p50 ${result.latency.p50}, p90 ${result.latency.p90}, p99 ${result.latency.p99}, max ${result.latency.max}, mean ${result.latency.average.toFixed(1)}`,
    `  errors: ${result.errors} (timeouts ${result.timeouts}), non-2xx: ${result.non2xx}`,
    ...cpu,
    `  200 responses read to the end of the stream: ${run.ok - run.incomplete}/${run.ok}` +
      ` (mean ${Math.round(run.bodyBytes / Math.max(1, run.responses))} bytes);` +
      ` sampled every ${SAMPLE_EVERY}th: ${run.sampled - run.sampleFailures.length}/${run.sampled} whole turns`,
    ...[...new Set(run.sampleFailures)].map((problem) => `  sample failure: ${problem}`),
  ];
  return lines.join('\n');
}

/** The fairness goal of issue 12 at 50 connections: p99 <= 3x p50 and no request over 2 s. */
function fairness(run: ChatRun): string {
  const { p50, p99, max } = run.result.latency;
  const met = p99 <= 3 * p50 && max <= 2000;
  return `  fairness (p99 <= 3x p50, max <= 2 s): ${met ? 'met' : 'missed'} (p99/p50 ${(p99 / Math.max(1, p50)).toFixed(2)}, max ${max} ms)`;
}

/** The runs of two targets side by side: every run, then medians and the ratio a / b. */
function sideBySide(a: ChatRun[], b: ChatRun[]): string {
  const row = (run: ChatRun) =>
    `| ${run.target} | ${run.requestsPerSecond.toFixed(1)} | ${run.result.latency.p50} | ${run.result.latency.p99} | ${run.result.latency.max} | ${run.cpuMsPerRequest?.toFixed(1) ?? '?'} | ${run.result.errors} / ${run.result.non2xx} |`;
  const stat = (runs: ChatRun[], pick: (run: ChatRun) => number) => median(runs.map(pick));
  const metrics: [string, (run: ChatRun) => number, number][] = [
    ['req/s', (run) => run.requestsPerSecond, 1],
    ['p50 ms', (run) => run.result.latency.p50, 0],
    ['p99 ms', (run) => run.result.latency.p99, 0],
    ['max ms', (run) => run.result.latency.max, 0],
    ['CPU ms / request', (run) => run.cpuMsPerRequest ?? Number.NaN, 1],
  ];
  const nameA = a[0]!.target;
  const nameB = b[0]!.target;
  return [
    '| run | req/s | p50 ms | p99 ms | max ms | CPU ms / request | errors / non-2xx |',
    '|---|---|---|---|---|---|---|',
    ...a.flatMap((run, i) => [row(run), ...(b[i] ? [row(b[i]!)] : [])]),
    '',
    `| median of ${a.length} | ${nameA} | ${nameB} | ${nameA} / ${nameB} |`,
    '|---|---|---|---|',
    ...metrics.map(([label, pick, digits]) => {
      const x = stat(a, pick);
      const y = stat(b, pick);
      return `| ${label} | ${x.toFixed(digits)} | ${y.toFixed(digits)} | ${(x / y).toFixed(2)}x |`;
    }),
  ].join('\n');
}

/** Module loading, JIT and the store's first writes are not what is measured. */
async function warmUp(target: Target): Promise<void> {
  await autocannon({ url: `${target.server.url}/healthz`, connections: 5, duration: 1 });
  await autocannon({
    url: `${target.server.url}/api/chat/${AGENT}`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: chatBody(),
    connections: 5,
    amount: 200,
  });
}

function chatBody(): string {
  return JSON.stringify({ messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: QUESTION }] }] });
}

function header(what: string): void {
  const load = loadavg();
  console.log(
    `${what}; store ${flags.store}, offline model, ${connections} connections, ${duration} s per run; ` +
      `${cpus().length} cores, load average before ${load.map((n) => n.toFixed(2)).join(' ')}`,
  );
}

let failed = false;
const started: Target[] = [];
try {
  if (flags['compare-bare'] || flags['compare-workers'] !== undefined) {
    const pair = flags['compare-bare']
      ? [await startBaton(flags.workers), await startBare()]
      : [await startBaton('1'), await startBaton(flags['compare-workers'])];
    started.push(...pair);
    const [a, b] = pair as [Target, Target];
    header(`${a.name} (${a.server.url}) vs ${b.name} (${b.server.url}), ${rounds} alternating rounds`);
    await warmUp(a);
    await warmUp(b);
    const runsA: ChatRun[] = [];
    const runsB: ChatRun[] = [];
    for (let round = 0; round < rounds; round++) {
      // Alternating, and each round in the other order, so a drift in the machine's load
      // (other jobs) weighs on both alike.
      const order: [Target, ChatRun[]][] =
        round % 2 === 0
          ? [
              [a, runsA],
              [b, runsB],
            ]
          : [
              [b, runsB],
              [a, runsA],
            ];
      for (const [target, runs] of order) {
        const run = await chatRun(target);
        console.log(describeRun(`round ${round + 1}: ${target.name}`, run));
        console.log(fairness(run));
        failed ||= failedRun(run);
        runs.push(run);
      }
    }
    console.log('');
    console.log(sideBySide(runsA, runsB));
  } else {
    const target = await startBaton(flags.workers);
    started.push(target);
    header(`${target.name} at ${target.server.url}`);
    await warmUp(target);
    if (flags.healthz) {
      const before = treeCpuMs(target.server.child.pid);
      const health = await autocannon({ url: `${target.server.url}/healthz`, connections, duration });
      const after = treeCpuMs(target.server.child.pid);
      const seconds = (health.finish.getTime() - health.start.getTime()) / 1000;
      console.log('GET /healthz (HTTP overhead, no model loop)');
      console.log(
        `  requests: ${health.requests.total} in ${seconds.toFixed(1)} s = ${(health.requests.total / seconds).toFixed(1)} req/s`,
      );
      console.log(
        `  latency ms: p50 ${health.latency.p50}, p90 ${health.latency.p90}, p99 ${health.latency.p99}, max ${health.latency.max}`,
      );
      console.log(`  errors: ${health.errors} (timeouts ${health.timeouts}), non-2xx: ${health.non2xx}`);
      if (before !== undefined && after !== undefined && health.requests.total > 0) {
        console.log(`  server CPU per request: ${((after - before) / health.requests.total).toFixed(3)} ms`);
      }
      failed ||= health.errors > 0 || health.non2xx > 0;
    }
    const run = await chatRun(target);
    console.log(describeRun(`POST /api/chat/${AGENT} (new session, 3-tool research turn, whole stream)`, run));
    console.log(fairness(run));
    failed ||= failedRun(run);
  }
  console.log(
    `load average after: ${loadavg()
      .map((n) => n.toFixed(2))
      .join(' ')}`,
  );
} finally {
  await Promise.all(started.map(stop));
}
if (failed) {
  console.log('FAILED: some requests failed or some responses were not whole turns.');
  process.exitCode = 1;
}
