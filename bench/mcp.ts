/**
 * `npm run bench:mcp`: what the MCP gateway adds to a `tools/call`. The same SDK client calls the
 * same upstream (a no-op server, and the reference filesystem server reading a small file)
 * directly, and through the gateway: in this process (the policy's cost: decide, reserve, commit,
 * one extra hop in memory) on the memory store and on Redis, and as the `baton mcp` process a
 * desktop client starts (one more stdio hop). Every target runs in each round, in rotated order,
 * so machine noise falls on all alike; medians over the rounds. Throughput is measured with
 * `--in-flight` calls at a time, all on the one MCP session (so on one orchestration session);
 * a call the gateway refuses is counted, not thrown (an older build refused calls beyond 8
 * running as `pending`). With it, the CPU time per call of every process of the benchmark (this
 * client, the gateways, the upstreams; read from /proc, so Linux only) and of the `baton mcp`
 * process alone: on a machine with fewer cores than processes, throughput follows the CPU.
 *
 * Flags: `--quick` (fewer calls), `--rounds=<n>`, `--no-redis`, `--in-flight=8,32` (default 8),
 * `--targets=direct,memory,redis,cli` (default all), `--upstreams=noop,filesystem` (default both),
 * `--no-latency` (throughput only), `--dist` (`baton mcp` from the built package,
 * `dist/cli/index.js` run by node, as installed; default: `src/` through tsx), and
 * `--other=<checkout>` (also that checkout's `baton mcp`, its `dist/` with `--dist`, in the
 * same rounds: an A/B of two builds behind one client), `--cpu-prof=<dir>` (each `baton mcp`
 * process writes a CPU profile there as it exits). For the A/B of the calls in flight:
 *
 *   npx tsx bench/mcp.ts --dist --other=<old checkout> --in-flight=8,32 --targets=direct,cli --no-latency
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { validateTemplate } from '../src/core/validate-template.js';
import { McpGateway } from '../src/mcp/gateway.js';
import type { UpstreamSpec } from '../src/mcp/gateway-upstream.js';
import { createOrchestrationManager, type OrchestrationManager } from '../src/orchestration/orchestration-manager.js';

const ROOT = new URL('..', import.meta.url).pathname;
const args = new Set(process.argv.slice(2));
const value = (name: string) => [...args].find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const listOf = (name: string, fallback: string) => (value(name) ?? fallback).split(',').filter((v) => v !== '');
const quick = args.has('--quick');
const rounds = Number(value('rounds') ?? (quick ? 3 : 7));
const SEQUENTIAL = quick ? 200 : 600;
const PARALLEL = quick ? 800 : 2400;
/** Calls in flight on the one session, for throughput. */
const IN_FLIGHT = listOf('in-flight', '8').map(Number);
const TARGETS = new Set(listOf('targets', 'direct,memory,redis,cli'));
const LATENCY = !args.has('--no-latency');
const DIST = args.has('--dist');
const OTHER = value('other');
/** `--cpu-prof=<dir>`: each `baton mcp` process writes a CPU profile there when it exits. */
const CPU_PROF = value('cpu-prof');
const REDIS_URL = process.env.BATON_BENCH_REDIS ?? 'redis://127.0.0.1:6379';

const dir = mkdtempSync(join(tmpdir(), 'baton-bench-mcp-'));
const file = join(dir, 'note.txt');
writeFileSync(file, 'a small file\n');

interface Upstream {
  name: string;
  spec: UpstreamSpec & { command: string; args: readonly string[] };
  tool: string;
  args: Record<string, unknown>;
}
const ALL_UPSTREAMS: Upstream[] = [
  {
    name: 'no-op server',
    spec: { command: process.execPath, args: ['--import', 'tsx', join(ROOT, 'bench/mcp-noop-server.ts')] },
    tool: 'noop',
    args: {},
  },
  {
    name: 'filesystem server',
    spec: { command: join(ROOT, 'node_modules/.bin/mcp-server-filesystem'), args: [dir] },
    tool: 'read_text_file',
    args: { path: file },
  },
];
const UPSTREAMS = ALL_UPSTREAMS.filter((u) =>
  listOf('upstreams', 'noop,filesystem').includes(u.tool === 'noop' ? 'noop' : 'filesystem'),
);

/** A template with a step, so every call is really decided (allowed list, history, limits). */
function template(tool: string) {
  const parsed = validateTemplate({
    id: 'bench',
    tools: [tool],
    orchestration: {
      steps: [{ name: 'Work', isDefault: true, availableTools: { allowed: [tool] } }],
      rules: [{ tools: [tool], limit: { max: 1_000_000, per: 'session' }, reason: 'counted' }],
    },
  });
  if (!parsed.success) throw new Error(JSON.stringify(parsed.issues));
  return parsed.template;
}

interface Target {
  name: string;
  client: Client;
  /** The `baton mcp` process, whose own CPU is reported. */
  gatewayPid?: number | undefined;
  close(): Promise<void>;
}

/** CPU ms (user + system) of process `pid` so far, 0 when it is gone (Linux: /proc). */
function cpuMsOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS;
  } catch {
    return 0;
  }
}

/** Pids of the children of `pid` (Linux: /proc), and theirs. */
function descendantsOf(pid: number): number[] {
  let out: number[] = [];
  try {
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      const children = readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim();
      if (children === '') continue;
      for (const child of children.split(' ').map(Number)) out = out.concat(child, descendantsOf(child));
    }
  } catch {
    // Not Linux, or the process is gone: its CPU is not counted.
  }
  return out;
}

/** CPU ms of this process and every process under it (client, gateways, upstreams). */
function cpuMsOfTree(): number {
  return cpuMsOf(process.pid) + descendantsOf(process.pid).reduce((sum, pid) => sum + cpuMsOf(pid), 0);
}
/** Clock ticks per second of /proc's CPU times (USER_HZ: 100 on Linux). */
const TICKS = 100;

async function direct(upstream: Upstream): Promise<Target> {
  const client = new Client({ name: 'bench', version: '1' });
  await client.connect(new StdioClientTransport({ ...upstream.spec, args: [...upstream.spec.args], stderr: 'ignore' }));
  return { name: 'direct', client, close: () => client.close() };
}

async function inProcess(upstream: Upstream, store: 'memory' | 'redis'): Promise<Target> {
  const manager: OrchestrationManager = createOrchestrationManager({
    store: store === 'memory' ? 'memory:' : REDIS_URL,
  });
  const gateway = new McpGateway({
    template: template(upstream.tool),
    upstreams: [upstream.spec],
    manager,
    upstreamStderr: 'ignore',
  });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await gateway.connect(serverSide, { sessionId: `bench-${randomUUID()}` });
  const client = new Client({ name: 'bench', version: '1' });
  await client.connect(clientSide);
  return {
    name: `gateway in process, ${store}`,
    client,
    close: async () => {
      await client.close();
      await gateway.close();
      await manager.close();
    },
  };
}

/** `baton mcp` of the checkout at `root` (this one by default), started as a client starts it. */
async function cliProcess(upstream: Upstream, root = ROOT, label = ''): Promise<Target> {
  const templateFile = join(dir, `${upstream.tool}.json`);
  writeFileSync(templateFile, JSON.stringify(template(upstream.tool)));
  const cli = DIST ? [join(root, 'dist/cli/index.js')] : ['--import', 'tsx', join(root, 'src/cli/index.ts')];
  if (CPU_PROF !== undefined) cli.unshift('--cpu-prof', `--cpu-prof-dir=${CPU_PROF}`);
  const client = new Client({ name: 'bench', version: '1' });
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [...cli, 'mcp', templateFile, '--', upstream.spec.command, ...upstream.spec.args],
    cwd: root,
    stderr: 'ignore',
  });
  await client.connect(transport);
  return {
    name: `baton mcp process (stdio${DIST ? ', dist' : ''}), memory${label}`,
    client,
    gatewayPid: transport.pid ?? undefined,
    close: () => client.close(),
  };
}

/** Median ms per call of `n` calls one after another. */
async function latency(target: Target, upstream: Upstream, n: number): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const start = performance.now();
    const result = await target.client.callTool({ name: upstream.tool, arguments: upstream.args });
    times.push(performance.now() - start);
    if (result.isError) throw new Error(`${target.name}: ${JSON.stringify(result.content)}`);
  }
  return median(times);
}

/** Calls answered per second with `inFlight` calls at a time on the target's one session, and how many were refused. */
async function throughput(
  target: Target,
  upstream: Upstream,
  n: number,
  inFlight: number,
): Promise<{ perSec: number; refused: number; reason?: string; cpu: number; gatewayCpu: number }> {
  let next = 0;
  let refused = 0;
  let reason: string | undefined;
  const cpuBefore = cpuMsOfTree();
  const gatewayBefore = target.gatewayPid === undefined ? 0 : cpuMsOf(target.gatewayPid);
  const start = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next++ < n) {
        const result = await target.client.callTool({ name: upstream.tool, arguments: upstream.args });
        if (result.isError) {
          refused++;
          reason ??= JSON.stringify(result.content).slice(0, 160);
        }
      }
    }),
  );
  const perSec = n / ((performance.now() - start) / 1000);
  // CPU ms of the whole run, every process of the benchmark (idle targets' processes use ~none).
  const cpu = cpuMsOfTree() - cpuBefore;
  const gatewayCpu = target.gatewayPid === undefined ? 0 : cpuMsOf(target.gatewayPid) - gatewayBefore;
  const measured = { perSec, refused, cpu, gatewayCpu };
  return reason === undefined ? measured : { ...measured, reason };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

async function redisAnswers(): Promise<boolean> {
  if (args.has('--no-redis')) return false;
  const manager = createOrchestrationManager({ store: REDIS_URL });
  try {
    await manager.getStateManager().getState('bench-probe');
    return true;
  } catch {
    return false;
  } finally {
    await manager.close().catch(() => undefined);
  }
}

const withRedis = TARGETS.has('redis') && (await redisAnswers());
console.log(
  `MCP gateway: ${rounds} rounds, ${LATENCY ? `${SEQUENTIAL} sequential calls and ` : ''}${PARALLEL} calls ${IN_FLIGHT.join(' / ')} at a time on one session per target and round; ` +
    `Node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? '?'}, load ${loadavg()[0]!.toFixed(2)}${withRedis || !TARGETS.has('redis') ? '' : '; Redis skipped'}`,
);
const json: Record<string, unknown>[] = [];
for (const upstream of UPSTREAMS) {
  const targets: Target[] = [];
  if (TARGETS.has('direct')) targets.push(await direct(upstream));
  if (TARGETS.has('memory')) targets.push(await inProcess(upstream, 'memory'));
  if (withRedis) targets.push(await inProcess(upstream, 'redis'));
  if (TARGETS.has('cli')) targets.push(await cliProcess(upstream));
  if (OTHER !== undefined) targets.push(await cliProcess(upstream, OTHER, `, ${OTHER}`));
  const lat = new Map<string, number[]>(targets.map((t) => [t.name, []]));
  const thr = new Map<string, number[]>(targets.flatMap((t) => IN_FLIGHT.map((k) => [`${t.name}@${k}`, []])));
  const refusals = new Map<
    string,
    { refused: number; calls: number; reason?: string; cpuMs: number; gatewayCpuMs: number }
  >();
  for (const target of targets) await latency(target, upstream, 100); // warm up
  for (let round = 0; round < rounds; round++) {
    const order = targets.map((_, i) => targets[(i + round) % targets.length]!);
    for (const target of order) {
      if (LATENCY) lat.get(target.name)!.push(await latency(target, upstream, SEQUENTIAL));
      for (const k of IN_FLIGHT) {
        const measured = await throughput(target, upstream, PARALLEL, k);
        thr.get(`${target.name}@${k}`)!.push(measured.perSec);
        const seen = refusals.get(`${target.name}@${k}`) ?? { refused: 0, calls: 0, cpuMs: 0, gatewayCpuMs: 0 };
        seen.refused += measured.refused;
        seen.calls += PARALLEL;
        seen.cpuMs += measured.cpu;
        seen.gatewayCpuMs += measured.gatewayCpu;
        seen.reason ??= measured.reason;
        refusals.set(`${target.name}@${k}`, seen);
      }
    }
  }
  const base = LATENCY && TARGETS.has('direct') ? median(lat.get('direct')!) : undefined;
  const baseThr = (k: number) => (TARGETS.has('direct') ? median(thr.get(`direct@${k}`)!) : undefined);
  console.log(`\n${upstream.name} (${upstream.tool})`);
  const head = ['path', ...(LATENCY ? ['median ms per call', 'added ms'] : [])];
  for (const k of IN_FLIGHT)
    head.push(`calls/s, ${k} in flight`, 'vs direct', 'refused', 'CPU µs/call (all / baton mcp)');
  console.log(`| ${head.join(' | ')} |`);
  console.log(
    `|---|${head
      .slice(1)
      .map(() => '---:')
      .join('|')}|`,
  );
  for (const target of targets) {
    const cells = [target.name];
    const row: Record<string, unknown> = { upstream: upstream.tool, target: target.name };
    if (LATENCY) {
      const ms = median(lat.get(target.name)!);
      cells.push(ms.toFixed(3), target.name === 'direct' || base === undefined ? '' : `+${(ms - base).toFixed(3)}`);
      row.msPerCall = ms;
    }
    for (const k of IN_FLIGHT) {
      const cps = median(thr.get(`${target.name}@${k}`)!);
      const direct = baseThr(k);
      const seen = refusals.get(`${target.name}@${k}`)!;
      cells.push(
        cps.toFixed(0),
        direct === undefined ? '' : `${(cps / direct).toFixed(2)}×`,
        seen.refused === 0 ? '0' : `${seen.refused} of ${seen.calls}`,
        `${((seen.cpuMs * 1000) / seen.calls).toFixed(0)}${target.gatewayPid === undefined ? '' : ` / ${((seen.gatewayCpuMs * 1000) / seen.calls).toFixed(0)}`}`,
      );
      row[`cpuMicrosPerCall${k}`] = (seen.cpuMs * 1000) / seen.calls;
      if (target.gatewayPid !== undefined) row[`gatewayCpuMicrosPerCall${k}`] = (seen.gatewayCpuMs * 1000) / seen.calls;
      row[`perSec${k}`] = cps;
      if (direct !== undefined) row[`vsDirect${k}`] = cps / direct;
      row[`refused${k}`] = seen.refused;
      if (seen.reason !== undefined) console.log(`  (${target.name}, ${k} in flight, refused: ${seen.reason})`);
    }
    console.log(`| ${cells.join(' | ')} |`);
    json.push(row);
  }
  await Promise.all(targets.map((target) => target.close()));
}
console.log(`BENCH_JSON ${JSON.stringify(json)}`);
