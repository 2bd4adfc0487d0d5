/**
 * `npm run loadtest`: the HTTP server under load. Starts `baton serve examples/agents --model
 * offline` in a child process (port 0, request log off), then runs autocannon against
 * `POST /api/chat/cognitive-reasoner`: every request a new session and a research question,
 * so every one is a whole orchestrated turn (search, think, reflect, each a model step, then
 * the streamed answer) read to the end of its stream. A benchmark, never part of `npm test`.
 *
 * Reports requests/s, latency p50/p90/p99, errors, timeouts and non-2xx, and checks the
 * responses: every one must be a complete stream, and every 20th is parsed to see its final
 * `data-orchestration` part report the ResearchMode sequence completed. Exits 1 when any
 * request failed or any check did not hold.
 *
 * Flags: `--store <url>` (default `memory:`; e.g. `sqlite:/tmp/baton-load.db`),
 * `--connections <n>` (50), `--duration <s>` (10), `--healthz` (first the same load on
 * `GET /healthz`: the server's HTTP overhead without the model loop), `--cpu-prof <dir>`
 * (write a V8 CPU profile of the server there).
 */
import { readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import type { OrchestrationSnapshot } from '../src/server/api-types.js';
import { type ServeProcess, startServeProcess, stopServeProcess } from '../test/helpers/serve-process.js';

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
    healthz: { type: 'boolean', default: false },
    'cpu-prof': { type: 'string' },
  },
});
const connections = positiveInteger('--connections', flags.connections);
const duration = positiveInteger('--duration', flags.duration);

function positiveInteger(name: string, value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${name} must be a whole number >= 1, got ${value}`);
  return n;
}

type Server = ServeProcess;

/** Starts `baton serve` and resolves once it printed where it listens. */
function startServer(store: string): Promise<Server> {
  const nodeFlags = flags['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', resolve(flags['cpu-prof'])] : [];
  // BATON_* from the shell (an API key, a model) would change what is measured.
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('BATON_')));
  return startServeProcess(
    ['examples/agents', '--model', 'offline', '--store', store, '--port', '0', '--log-level', 'silent'],
    { env, nodeFlags },
  );
}

/** SIGINT, as Ctrl-C would: the server closes its store, and writes its CPU profile when asked. */
const stopServer = (server: Server) => stopServeProcess(server, 'SIGINT', 10_000);

/** What the response checks found. */
interface Checks {
  responses: number;
  /** Responses with status 200 (the others autocannon counts as non-2xx). */
  ok: number;
  /** Responses whose body did not end the UI message stream (`data: [DONE]`). */
  incomplete: number;
  sampled: number;
  /** Sampled responses whose final snapshot did not show the research sequence completed. */
  sampleFailures: string[];
  bodyBytes: number;
}

/** Why a sampled chat response is not a whole orchestrated research turn, or null when it is. */
function sampleProblem(body: string): string | null {
  const chunks = body
    .split('\n')
    .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
    .map((line) => JSON.parse(line.slice('data: '.length)) as { type: string; data?: unknown; toolCallId?: string });
  if (chunks.some((chunk) => chunk.type === 'error')) return 'the stream has an error chunk';
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
  const outputs = chunks.filter((chunk) => chunk.type === 'tool-output-available').length;
  if (outputs !== EXPECTED_TOOLS.length) return `${outputs} tool outputs streamed, not ${EXPECTED_TOOLS.length}`;
  if (chunks.at(-1)?.type !== 'finish') return 'the stream does not end with finish';
  return null;
}

/**
 * CPU time the server process has used, in ms (user + system, from /proc; Linux counts it in
 * ticks of 10 ms), or undefined elsewhere. Divided by the requests of a run it says how much
 * server CPU one request costs, which the latency under a saturated core cannot show.
 */
function serverCpuMs(pid: number | undefined): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return undefined;
  }
}

/** One autocannon run, with the server CPU it cost. */
async function measured(options: autocannon.Options): Promise<autocannon.Result & { cpuMsPerRequest?: number }> {
  const before = serverCpuMs(server.child.pid);
  const result = await run(options);
  const after = serverCpuMs(server.child.pid);
  if (before === undefined || after === undefined || result.requests.total === 0) return result;
  return Object.assign(result, { cpuMsPerRequest: (after - before) / result.requests.total });
}

function run(options: autocannon.Options): Promise<autocannon.Result> {
  return autocannon(options);
}

function describeResult(title: string, result: autocannon.Result & { cpuMsPerRequest?: number }): string {
  const seconds = (result.finish.getTime() - result.start.getTime()) / 1000;
  const cpu =
    result.cpuMsPerRequest === undefined
      ? []
      : [`  server CPU per request: ${result.cpuMsPerRequest.toFixed(result.cpuMsPerRequest < 1 ? 3 : 1)} ms`];
  return [
    `${title}`,
    `  requests: ${result.requests.total} in ${seconds.toFixed(1)} s = ${(result.requests.total / seconds).toFixed(1)} req/s (per-second mean ${result.requests.average.toFixed(1)})`,
    `  latency ms: p50 ${result.latency.p50}, p90 ${result.latency.p90}, p99 ${result.latency.p99}, max ${result.latency.max}, mean ${result.latency.average.toFixed(1)}`,
    `  errors: ${result.errors} (timeouts ${result.timeouts}), non-2xx: ${result.non2xx}`,
    ...cpu,
  ].join('\n');
}

const server = await startServer(flags.store);
let failed = false;
try {
  const before = loadavg();
  console.log(
    `baton serve ${flags.store} (offline model) at ${server.url}; ${connections} connections, ${duration} s per run; ` +
      `${cpus().length} cores, load average before ${before.map((n) => n.toFixed(2)).join(' ')}`,
  );

  // Warm-up: module loading, JIT and the store's first writes are not what is measured.
  await run({ url: `${server.url}/healthz`, connections: 5, duration: 1 });
  await run({
    url: `${server.url}/api/chat/${AGENT}`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: chatBody(),
    connections: 5,
    amount: 200,
  });

  if (flags.healthz) {
    const health = await measured({ url: `${server.url}/healthz`, connections, duration });
    console.log(describeResult('GET /healthz (HTTP overhead, no model loop)', health));
    failed ||= health.errors > 0 || health.non2xx > 0;
  }

  const checks: Checks = { responses: 0, ok: 0, incomplete: 0, sampled: 0, sampleFailures: [], bodyBytes: 0 };
  const chat = await measured({
    url: `${server.url}/api/chat/${AGENT}`,
    connections,
    duration,
    // A turn streams for a while under load; the default 10 s timeout would count a slow one as an error.
    timeout: 30,
    requests: [
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        // No sessionId: the server starts a new session for every request.
        body: chatBody(),
        onResponse: (status, body) => {
          checks.responses += 1;
          checks.bodyBytes += Buffer.byteLength(body);
          if (status !== 200) return;
          checks.ok += 1;
          if (!body.trimEnd().endsWith('data: [DONE]')) checks.incomplete += 1;
          if (checks.responses % SAMPLE_EVERY === 0) {
            checks.sampled += 1;
            const problem = sampleProblem(body);
            if (problem) checks.sampleFailures.push(problem);
          }
        },
      },
    ],
  });
  console.log(describeResult(`POST /api/chat/${AGENT} (new session, 3-tool research turn, whole stream)`, chat));
  console.log(
    `  200 responses read to the end of the stream: ${checks.ok - checks.incomplete}/${checks.ok}` +
      ` (mean ${Math.round(checks.bodyBytes / Math.max(1, checks.responses))} bytes);` +
      ` sampled every ${SAMPLE_EVERY}th: ${checks.sampled - checks.sampleFailures.length}/${checks.sampled} ResearchMode sequences completed`,
  );
  for (const problem of new Set(checks.sampleFailures)) console.log(`  sample failure: ${problem}`);
  const p99Target = 100;
  console.log(
    `  target p99 < ${p99Target} ms: ${chat.latency.p99 < p99Target ? 'met' : `missed (p99 ${chat.latency.p99} ms)`}`,
  );
  const after = loadavg();
  console.log(`load average after: ${after.map((n) => n.toFixed(2)).join(' ')}`);
  failed ||=
    chat.errors > 0 ||
    chat.non2xx > 0 ||
    checks.incomplete > 0 ||
    checks.sampleFailures.length > 0 ||
    checks.sampled === 0 ||
    checks.responses === 0;
} finally {
  await stopServer(server);
}
if (failed) {
  console.log('FAILED: some requests failed or some responses were not whole orchestrated turns.');
  process.exitCode = 1;
}

function chatBody(): string {
  return JSON.stringify({ messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: QUESTION }] }] });
}
