/**
 * `npm run bench:rules`: what rules on calls cost per call. The same call (decided and reserved
 * with `requestTool`, then committed with `completeTool`, on the memory store) against a template
 * without rules and against the same template with 10 rules that name the tool and read its
 * arguments (4 `deny` and 2 `approve` whose conditions do not hold, 3 `allow` whose conditions
 * hold, 1 limit per session that is never reached), so every rule is evaluated on every call.
 * The two alternate in rounds within one run, so machine noise hits both alike; the figures are
 * the medians of the rounds. Also the pure decision (`decideToolCall`, no store), alike.
 *
 *   npm run bench:rules [-- --rounds=40 --calls=500]
 */
import { cpus, loadavg } from 'node:os';
import type { Rule } from '../src/core/schema.js';
import { createState } from '../src/core/state.js';
import { decideToolCall } from '../src/core/transition.js';
import { compileOrchestration, createOrchestrationManager, type OrchestrationConfig } from '../src/index.js';

const args = process.argv.slice(2);
const flag = (name: string, fallback: number) => {
  const value = args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  return value === undefined ? fallback : Number(value);
};
const ROUNDS = flag('rounds', 40);
const CALLS = flag('calls', 500);

const TOOLS = ['search', 'pay', 'think', 'reflect', 'send_email'];
const RULES: Rule[] = [
  { tools: ['pay'], when: 'args.amount > 1000000', effect: 'deny', reason: 'too much' },
  { tools: ['pay', 'transfer_*'], when: "args.to == 'mallory'", effect: 'deny', reason: 'blocked payee' },
  { tools: ['pa*'], when: "args.currency != 'EUR' && args.currency != 'USD'", effect: 'deny', reason: 'currency' },
  { tools: ['*'], when: "context.role == 'guest'", effect: 'deny', reason: 'guests call nothing' },
  { tools: ['pay'], when: 'args.amount >= 0', effect: 'allow', reason: 'no negative payments' },
  { tools: ['pay'], when: "context.role in ['buyer', 'admin']", effect: 'allow', reason: 'buyers pay' },
  { tools: ['pay'], when: "state.activeStep == 'Checkout'", effect: 'allow', reason: 'pay at checkout' },
  { tools: ['pay'], limit: { max: 1_000_000_000, per: 'session' }, reason: 'a billion payments' },
  { tools: ['pay'], when: 'args.amount > 500000', effect: 'approve', reason: 'large payments' },
  { tools: ['pay'], when: "args.to.startsWith('new-')", effect: 'approve', reason: 'new payees' },
];
const withoutRules: OrchestrationConfig = {
  steps: [{ name: 'Checkout', isDefault: true, availableTools: { allowed: TOOLS } }],
};
const withRules: OrchestrationConfig = { ...withoutRules, rules: RULES };
const input = { to: 'acme', amount: 120, currency: 'EUR' };
const context = { role: 'buyer' };

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/** µs per call of `calls` calls of `run`. */
async function time(calls: number, run: (i: number) => unknown): Promise<number> {
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) await run(i);
  return Number(process.hrtime.bigint() - start) / 1_000 / calls;
}

/** One call through the manager on the memory store: decided and reserved, then committed. */
function storeCall(config: OrchestrationConfig) {
  const manager = createOrchestrationManager();
  let n = 0;
  return async () => {
    const toolCallId = `c${n++}`;
    const sessionId = `s${n >> 7}`; // a fresh session every 128 calls: the same state shape throughout
    const decision = await manager.requestTool(config, undefined, sessionId, {
      tool: 'pay',
      toolCallId,
      agentTools: TOOLS,
      args: input,
      context,
    });
    if (!decision.allowed) throw new Error(`the benchmark's call was refused: ${decision.reason.message}`);
    await manager.completeTool(config, undefined, sessionId, toolCallId);
  };
}

/** The pure decision of one call on a fixed state (no store, nothing written). */
function pureDecision(config: OrchestrationConfig) {
  const plan = compileOrchestration(config);
  const state = { ...createState('s', 0), activeStep: 'Checkout' };
  let n = 0;
  return () => {
    const decision = decideToolCall(
      plan,
      state,
      { tool: 'pay', toolCallId: `c${n++}`, agentTools: TOOLS, args: input },
      { now: 0, ruleContext: context },
    );
    if (!decision.allowed) throw new Error(`the benchmark's call was refused: ${decision.reason.message}`);
  };
}

async function compare(label: string, make: (config: OrchestrationConfig) => (i: number) => unknown) {
  const plain = make(withoutRules);
  const ruled = make(withRules);
  // Warm both up (JIT, plan caches) before measuring.
  await time(CALLS * 4, plain);
  await time(CALLS * 4, ruled);
  const a: number[] = [];
  const b: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    // Alternate which goes first, so neither always runs on a warmer machine.
    if (round % 2 === 0) {
      a.push(await time(CALLS, plain));
      b.push(await time(CALLS, ruled));
    } else {
      b.push(await time(CALLS, ruled));
      a.push(await time(CALLS, plain));
    }
  }
  const none = median(a);
  const ten = median(b);
  return { label, none, ten, extra: ten - none, ratio: ten / none };
}

const results = [await compare('requestTool + completeTool, memory store', storeCall)];
results.push(await compare('decision only (decideToolCall)', pureDecision));

console.log(`rules on calls: ${ROUNDS} alternating rounds of ${CALLS} calls each, medians`);
console.log(
  `${cpus()[0]?.model ?? 'cpu'} x${cpus().length}, load ${loadavg()[0]!.toFixed(2)}, node ${process.version}`,
);
console.log('| what | no rules µs/call | 10 rules µs/call | extra µs/call | ratio |');
console.log('|---|---|---|---|---|');
for (const r of results) {
  console.log(
    `| ${r.label} | ${r.none.toFixed(2)} | ${r.ten.toFixed(2)} | ${r.extra.toFixed(2)} | ${r.ratio.toFixed(2)}x |`,
  );
}
