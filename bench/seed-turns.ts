/**
 * AgentDock's harness workload for the seed API, run on a built package or on AgentDock itself:
 * one turn = `getAllowedTools` then `processToolUsage`, AgentDock's cognitive-reasoner
 * orchestration (bench/fixtures/agentdock-cognitive-reasoner.json), one fixed user message, the
 * default memory store, 1,000 sessions x 20 turns interleaved round-robin, and the tool of turn
 * `t` is `allowed[t % allowed.length]` (the harness's rotation).
 *
 * Each measurement runs in its own process, so two implementations (or two builds of Baton) never
 * share a heap or the JIT's feedback; {@link runAlternating} alternates them and takes medians.
 *
 * As a child: `tsx bench/seed-turns.ts --impl baton --root <checkout> | --impl agentdock`
 * prints `SEED_TURNS <json>`. As a command:
 * `tsx bench/seed-turns.ts --compare <checkoutA> <checkoutB> [--rounds 5]`.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

/** The two calls of a seed-API turn. */
export interface SeedApi {
  getAllowedTools(config: object, messages: object[], sessionId: string, allToolIds: string[]): Promise<string[]>;
  processToolUsage(config: object, messages: object[], sessionId: string, toolName: string): Promise<void>;
}

/** The harness's shape. */
export const HARNESS = { sessions: 1_000, turns: 20 } as const;

const FIXTURE = new URL('./fixtures/agentdock-cognitive-reasoner.json', import.meta.url);

/** The orchestration, tools and the one user message of the harness. */
export function harnessInput(): { config: object; tools: string[]; messages: object[] } {
  const template = JSON.parse(readFileSync(FIXTURE, 'utf8')) as {
    orchestration: object;
    nodes: string[];
    chatSettings: { chatPrompts: string[] };
  };
  return {
    config: template.orchestration,
    tools: template.nodes.filter((node) => !node.startsWith('llm.')),
    messages: [{ role: 'user', content: template.chatSettings.chatPrompts[0]! }],
  };
}

/** One repetition's figures. */
export interface HarnessRep {
  turnsPerSec: number;
  /** Median µs of one turn (both calls), including one `performance.now()` pair. */
  p50Micros: number;
}

/** 1,000 sessions x 20 turns on a new manager. */
export async function harnessRep(create: () => SeedApi): Promise<HarnessRep> {
  const { config, tools, messages } = harnessInput();
  const manager = create();
  const ids = Array.from({ length: HARNESS.sessions }, (_, i) => `session-${i}`);
  const samples = new Float64Array(HARNESS.sessions * HARNESS.turns);
  let k = 0;
  const start = performance.now();
  for (let t = 0; t < HARNESS.turns; t++) {
    for (let s = 0; s < ids.length; s++) {
      const id = ids[s]!;
      const t0 = performance.now();
      const allowed = await manager.getAllowedTools(config, messages, id, tools);
      if (allowed.length > 0) await manager.processToolUsage(config, messages, id, allowed[t % allowed.length]!);
      samples[k++] = performance.now() - t0;
    }
  }
  const wallMs = performance.now() - start;
  samples.sort();
  const closable = manager as { close?: () => Promise<void> };
  if (typeof closable.close === 'function') await closable.close();
  return { turnsPerSec: (samples.length / wallMs) * 1000, p50Micros: samples[samples.length >> 1]! * 1000 };
}

/** The median of `values`. */
export function medianOf(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** What one child process measured: medians of its repetitions. */
export interface HarnessResult {
  impl: string;
  turnsPerSec: number;
  p50Micros: number;
  reps: number;
}

/** Which implementation a child runs. */
export type Impl = { kind: 'baton'; root: string } | { kind: 'agentdock' };

async function factory(impl: Impl): Promise<() => SeedApi> {
  if (impl.kind === 'agentdock') {
    const { loadAgentDock } = await import('./agentdock.js');
    const loaded = await loadAgentDock();
    if (!loaded.ok) throw new Error(loaded.reason);
    return loaded.create;
  }
  const dist = pathToFileURL(resolve(impl.root, 'dist/index.js')).href;
  const mod = (await import(dist)) as { createOrchestrationManager: () => SeedApi };
  return () => mod.createOrchestrationManager();
}

/** Runs the harness `warmup + reps` times in this process; medians of the measured ones. */
export async function measure(impl: Impl, reps: number, warmup: number): Promise<HarnessResult> {
  const create = await factory(impl);
  for (let i = 0; i < warmup; i++) await harnessRep(create);
  const results: HarnessRep[] = [];
  for (let i = 0; i < reps; i++) results.push(await harnessRep(create));
  return {
    impl: impl.kind === 'baton' ? impl.root : 'agentdock',
    turnsPerSec: medianOf(results.map((r) => r.turnsPerSec)),
    p50Micros: medianOf(results.map((r) => r.p50Micros)),
    reps,
  };
}

/** Runs {@link measure} in a child process (the same Node, through tsx). */
export function measureInChild(impl: Impl, reps: number, warmup: number): Promise<HarnessResult> {
  const args = ['--import', 'tsx', resolve(import.meta.dirname, 'seed-turns.ts'), '--reps', String(reps)];
  args.push('--warmup', String(warmup));
  if (impl.kind === 'baton') args.push('--impl', 'baton', '--root', impl.root);
  else args.push('--impl', 'agentdock');
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.on('error', fail);
    child.on('close', (code) => {
      const line = out.split('\n').find((l) => l.startsWith('SEED_TURNS '));
      if (code !== 0 || line === undefined) fail(new Error(`seed-turns child exited ${code}: ${out.slice(-500)}`));
      else done(JSON.parse(line.slice('SEED_TURNS '.length)) as HarnessResult);
    });
  });
}

/** Medians per implementation over `rounds` rounds, each round running every one in its own process. */
export async function runAlternating(
  impls: readonly Impl[],
  options: { rounds: number; reps: number; warmup: number; onRound?: (round: HarnessResult[]) => void },
): Promise<{ rounds: HarnessResult[][]; medians: HarnessResult[] }> {
  const rounds: HarnessResult[][] = [];
  for (let r = 0; r < options.rounds; r++) {
    // Alternate which goes first, so neither always runs on a warmer or quieter machine.
    const order = r % 2 === 0 ? impls.map((_, i) => i) : impls.map((_, i) => impls.length - 1 - i);
    const round: HarnessResult[] = new Array(impls.length);
    for (const i of order) round[i] = await measureInChild(impls[i]!, options.reps, options.warmup);
    rounds.push(round);
    options.onRound?.(round);
  }
  const medians = impls.map((_, i) => ({
    impl: rounds[0]![i]!.impl,
    turnsPerSec: medianOf(rounds.map((round) => round[i]!.turnsPerSec)),
    p50Micros: medianOf(rounds.map((round) => round[i]!.p50Micros)),
    reps: options.reps * options.rounds,
  }));
  return { rounds, medians };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      impl: { type: 'string' },
      root: { type: 'string' },
      reps: { type: 'string', default: '7' },
      warmup: { type: 'string', default: '3' },
      rounds: { type: 'string', default: '3' },
      compare: { type: 'boolean', default: false },
    },
  });
  const reps = Number(values.reps);
  const warmup = Number(values.warmup);
  if (values.compare) {
    const impls: Impl[] = positionals.map((p) =>
      p === 'agentdock' ? { kind: 'agentdock' } : { kind: 'baton', root: resolve(p) },
    );
    const { medians } = await runAlternating(impls, {
      rounds: Number(values.rounds),
      reps,
      warmup,
      onRound: (round) =>
        console.log(round.map((r) => `${r.impl}: ${Math.round(r.turnsPerSec)} turns/s`).join('  |  ')),
    });
    for (const m of medians)
      console.log(`median ${m.impl}: ${Math.round(m.turnsPerSec)} turns/s, p50 ${m.p50Micros.toFixed(2)} µs`);
  } else {
    const impl: Impl =
      values.impl === 'agentdock' ? { kind: 'agentdock' } : { kind: 'baton', root: resolve(values.root ?? '.') };
    console.log(`SEED_TURNS ${JSON.stringify(await measure(impl, reps, warmup))}`);
    // AgentDock's state manager keeps a cleanup interval running; the measurement is done.
    process.exit(0);
  }
}
