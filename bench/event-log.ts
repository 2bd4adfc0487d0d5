/**
 * What the session event log costs: the same research turn (4 model steps, 3 tools, through the
 * `Turn` every model loop uses) on a long-lived session whose log is full, by a manager keeping
 * 100 entries and by one keeping none, alternating turn by turn on one store, so drift hits both
 * alike. Also prints the stored state's size with and without the log.
 *
 * `npx tsx bench/event-log.ts [--stores=memory,sqlite,redis,postgres] [--turns=400]`. A benchmark, never part of `npm test`.
 */
import { cpus, platform, release } from 'node:os';
import type { OrchestrationConfig } from '../src/core/schema.js';
import { createOrchestrationManager, type OrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { Turn } from '../src/orchestration/turn.js';
import { median } from './core.js';
import { open, type StoreKind, unavailable } from './stores.js';

const TOOLS = ['search', 'think', 'reflect'] as const;
const config: OrchestrationConfig = {
  steps: [
    {
      name: 'ResearchMode',
      conditions: [{ type: 'message_regex', value: 'research' }],
      availableTools: { allowed: [...TOOLS] },
      sequence: [...TOOLS],
      resetSequenceOn: ['new_message'],
    },
    { name: 'DefaultMode', isDefault: true },
  ],
};
const USAGE = { inputTokens: 120, outputTokens: 12 };

let callIds = 0;
/** One research turn as a model loop drives it: offer, reserve, complete, usage, end. */
async function researchTurn(manager: OrchestrationManager, sessionId: string, question: number): Promise<void> {
  const turn = new Turn({
    manager,
    config,
    sessionId,
    agentTools: TOOLS,
    messages: [{ id: `q${question}`, role: 'user', content: `Please research topic ${question}` }],
  });
  for (const tool of TOOLS) {
    const step = await turn.stepStarted();
    if (!step.decision.allowedTools.includes(tool)) throw new Error(`${tool} was not offered`);
    const id = `call-${++callIds}`;
    const decision = await turn.request(tool, id, step.decision.allowedTools);
    if (!decision.allowed) throw new Error(`${tool} was refused: ${decision.reason.message}`);
    turn.completed(id);
    turn.usage(USAGE);
  }
  await turn.stepStarted();
  turn.usage(USAGE);
  await turn.end();
}

interface Cell {
  store: StoreKind;
  turns: number;
  withoutLog: number;
  withLog: number;
  bytesWithout: number;
  bytesWith: number;
}

async function runCell(kind: StoreKind, turns: number): Promise<Cell> {
  const harness = await open(kind, 'redis://127.0.0.1:6379', 'postgres://postgres@127.0.0.1:5432/test');
  try {
    const plain = createOrchestrationManager({ store: harness.store });
    const logged = createOrchestrationManager({ store: harness.store, eventLog: 100 });
    const run = `${process.pid}-${Date.now()}`;
    const sessions = { plain: `log-bench-plain-${run}`, logged: `log-bench-logged-${run}` };
    // Warm up until the log is full: its size from then on is what a long session pays.
    for (let i = 0; i < 20; i++) {
      await researchTurn(plain, sessions.plain, i);
      await researchTurn(logged, sessions.logged, i);
    }
    const without: number[] = [];
    const withLog: number[] = [];
    const time = async (manager: OrchestrationManager, sessionId: string, i: number, into: number[]) => {
      const t0 = performance.now();
      await researchTurn(manager, sessionId, i);
      into.push((performance.now() - t0) * 1000);
    };
    for (let i = 20; i < 20 + turns; i++) {
      if (i % 2 === 0) {
        await time(plain, sessions.plain, i, without);
        await time(logged, sessions.logged, i, withLog);
      } else {
        await time(logged, sessions.logged, i, withLog);
        await time(plain, sessions.plain, i, without);
      }
    }
    const size = async (sessionId: string) =>
      Buffer.byteLength(JSON.stringify(await harness.store.get(sessionId)), 'utf8');
    const cell: Cell = {
      store: kind,
      turns,
      withoutLog: median(without),
      withLog: median(withLog),
      bytesWithout: await size(sessions.plain),
      bytesWith: await size(sessions.logged),
    };
    await plain.removeSession(sessions.plain);
    await logged.removeSession(sessions.logged);
    return cell;
  } finally {
    await harness.close();
  }
}

const args = process.argv.slice(2);
const storesArg = args.find((a) => a.startsWith('--stores='))?.slice('--stores='.length);
const turnsArg = args.find((a) => a.startsWith('--turns='))?.slice('--turns='.length);
const turns = turnsArg === undefined ? 400 : Number(turnsArg);
if (!Number.isInteger(turns) || turns < 1) throw new Error(`--turns must be a positive integer, got ${turnsArg}`);
const stores = (storesArg?.split(',') ?? ['memory', 'sqlite', 'redis', 'postgres']) as StoreKind[];

console.log(`Node ${process.version} on ${platform()} ${release()}, ${cpus()[0]?.model ?? 'unknown CPU'}`);
console.log('A research turn (4 model steps, 3 tools) on a long session, event log of 100 entries vs none,');
console.log('alternating turn by turn; medians in µs per turn, stored state in bytes\n');
console.log('store      turns   no log µs   log µs   ratio   state bytes (no log / log)');
for (const kind of stores) {
  const reason = await unavailable(kind, 'redis://127.0.0.1:6379', 'postgres://postgres@127.0.0.1:5432/test');
  if (reason !== undefined) {
    console.log(`${kind}: skipped (${reason})`);
    continue;
  }
  const c = await runCell(kind, turns);
  console.log(
    [
      c.store.padEnd(9),
      String(c.turns).padStart(6),
      c.withoutLog.toFixed(1).padStart(11),
      c.withLog.toFixed(1).padStart(8),
      `x${(c.withLog / c.withoutLog).toFixed(2)}`.padStart(7),
      `   ${c.bytesWithout} / ${c.bytesWith}`,
    ].join(' '),
  );
}
