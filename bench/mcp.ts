/**
 * `npm run bench:mcp`: what the MCP gateway adds to a `tools/call`. The same SDK client calls the
 * same upstream (a no-op server, and the reference filesystem server reading a small file)
 * directly, and through the gateway: in this process (the policy's cost: decide, reserve, commit,
 * one extra hop in memory) on the memory store and on Redis, and as the `baton mcp` process a
 * desktop client starts (one more stdio hop). Every target runs in each round, in rotated order,
 * so machine noise falls on all alike; medians over the rounds.
 *
 * Flags: `--quick` (fewer calls), `--rounds=<n>`, `--no-redis`.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
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
const quick = args.has('--quick');
const rounds = Number([...args].find((a) => a.startsWith('--rounds='))?.split('=')[1] ?? (quick ? 3 : 7));
const SEQUENTIAL = quick ? 200 : 600;
const PARALLEL = quick ? 800 : 2400;
/** Calls in flight for throughput: a session runs at most 8 calls at once. */
const IN_FLIGHT = 8;
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
const UPSTREAMS: Upstream[] = [
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
  close(): Promise<void>;
}

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

async function cliProcess(upstream: Upstream): Promise<Target> {
  const templateFile = join(dir, `${upstream.tool}.json`);
  writeFileSync(templateFile, JSON.stringify(template(upstream.tool)));
  const client = new Client({ name: 'bench', version: '1' });
  await client.connect(
    new StdioClientTransport({
      command: process.execPath,
      args: [
        '--import',
        'tsx',
        join(ROOT, 'src/cli/index.ts'),
        'mcp',
        templateFile,
        '--',
        upstream.spec.command,
        ...upstream.spec.args,
      ],
      stderr: 'ignore',
    }),
  );
  return { name: 'baton mcp process (stdio), memory', client, close: () => client.close() };
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

/** Calls per second with IN_FLIGHT calls at a time. */
async function throughput(target: Target, upstream: Upstream, n: number): Promise<number> {
  let next = 0;
  let refused = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next++ < n) {
        const result = await target.client.callTool({ name: upstream.tool, arguments: upstream.args });
        if (result.isError) refused++;
      }
    }),
  );
  if (refused > 0) throw new Error(`${target.name}: ${refused} calls refused`);
  return n / ((performance.now() - start) / 1000);
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

const withRedis = await redisAnswers();
console.log(
  `MCP gateway: ${rounds} rounds, ${SEQUENTIAL} sequential calls and ${PARALLEL} calls ${IN_FLIGHT} at a time per target and round; Node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? '?'}${withRedis ? '' : '; Redis skipped'}`,
);
for (const upstream of UPSTREAMS) {
  const targets: Target[] = [
    await direct(upstream),
    await inProcess(upstream, 'memory'),
    ...(withRedis ? [await inProcess(upstream, 'redis')] : []),
    await cliProcess(upstream),
  ];
  const lat = new Map<string, number[]>(targets.map((t) => [t.name, []]));
  const thr = new Map<string, number[]>(targets.map((t) => [t.name, []]));
  for (const target of targets) await latency(target, upstream, 100); // warm up
  for (let round = 0; round < rounds; round++) {
    const order = targets.map((_, i) => targets[(i + round) % targets.length]!);
    for (const target of order) {
      lat.get(target.name)!.push(await latency(target, upstream, SEQUENTIAL));
      thr.get(target.name)!.push(await throughput(target, upstream, PARALLEL));
    }
  }
  const base = median(lat.get('direct')!);
  const baseThr = median(thr.get('direct')!);
  console.log(`\n${upstream.name} (${upstream.tool})`);
  console.log('| path | median ms per call | added ms | calls/s, 8 in flight | vs direct |');
  console.log('|---|---:|---:|---:|---:|');
  for (const target of targets) {
    const ms = median(lat.get(target.name)!);
    const cps = median(thr.get(target.name)!);
    console.log(
      `| ${target.name} | ${ms.toFixed(3)} | ${target.name === 'direct' ? '' : `+${(ms - base).toFixed(3)}`} | ${cps.toFixed(0)} | ${(cps / baseThr).toFixed(2)}× |`,
    );
  }
  await Promise.all(targets.map((target) => target.close()));
}
