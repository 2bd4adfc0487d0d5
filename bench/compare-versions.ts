/**
 * The AgentDock-comparison workload (one turn = `getAllowedTools` then `processToolUsage`, the
 * AgentDock cognitive-reasoner template, memory store) through this checkout and through another
 * checkout of Baton, alternating in one process, so a change can be measured against the
 * previous version side by side: `npx tsx bench/compare-versions.ts <other-checkout> [rounds]`.
 * Make the other checkout with `git worktree add /tmp/baton-before <commit>` (it can share this
 * checkout's node_modules through a symlink). A benchmark, never part of `npm test`.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { median } from './core.js';

interface ManagerModule {
  createOrchestrationManager(): {
    getAllowedTools(config: object, messages: object[], sessionId: string, tools: string[]): Promise<string[]>;
    processToolUsage(config: object, messages: object[], sessionId: string, tool: string): Promise<void>;
    close(): Promise<void>;
  };
}

const other = process.argv[2];
if (other === undefined) throw new Error('usage: bench/compare-versions.ts <other-checkout> [rounds]');
const rounds = Number(process.argv[3] ?? 12);
const load = (root: string) =>
  import(resolve(root, 'src/orchestration/orchestration-manager.ts')) as Promise<ManagerModule>;
const versions = { this: await load(resolve(import.meta.dirname, '..')), other: await load(other) };
const template = JSON.parse(
  readFileSync(new URL('./fixtures/agentdock-cognitive-reasoner.json', import.meta.url), 'utf8'),
) as { nodes: string[] };
const tools = template.nodes.filter((node) => !node.startsWith('llm.'));
const prompts = [
  'research the history of EVs',
  'critique this plan',
  'brainstorm ideas',
  'compare A vs B',
  'how can I solve this problem',
  'hello',
];

/** Median µs per turn of 300 sessions x 20 turns, a new user message every 10 turns. */
async function run(module: ManagerModule): Promise<number> {
  const manager = module.createOrchestrationManager();
  const samples: number[] = [];
  for (let s = 0; s < 300; s++) {
    let messages = [{ role: 'user', content: prompts[s % prompts.length]! }];
    for (let t = 0; t < 20; t++) {
      if (t % 10 === 0)
        messages = [...messages, { role: 'user', content: `${prompts[(s + t) % prompts.length]} ${t}` }];
      const t0 = performance.now();
      const allowed = await manager.getAllowedTools(template, messages, `s${s}`, tools);
      if (allowed.length > 0)
        await manager.processToolUsage(template, messages, `s${s}`, allowed[(s + t) % allowed.length]!);
      samples.push(performance.now() - t0);
    }
  }
  await manager.close();
  return median(samples) * 1000;
}

const results = { this: [] as number[], other: [] as number[] };
for (let i = 0; i < rounds; i++) {
  // Alternate which goes first, so neither always runs on a warmer machine.
  for (const name of i % 2 === 0 ? (['other', 'this'] as const) : (['this', 'other'] as const)) {
    results[name].push(await run(versions[name]));
  }
}
const mine = median(results.this);
const theirs = median(results.other);
console.log(
  `p50 µs per turn over ${rounds} alternating rounds: this checkout ${mine.toFixed(2)}, ${other} ${theirs.toFixed(2)}, ratio ${(mine / theirs).toFixed(3)}`,
);
