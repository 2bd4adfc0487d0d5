/**
 * Limit rules against every way a call may have run without being recorded: random mixes of
 * reservations, completions, failures, abandons (`tool-abandoned`), lease expiries, session
 * resets while calls run, new user messages and step changes, under per-session, per-turn,
 * per-step and rolling-window limits. The oracle is the serial run (docs/behaviour.md, "The
 * guarantee"): the same reservations one at a time, in the order they were made, each ending at
 * once as it ended (an expired or reset-released call as abandoned). Every call the racing
 * session let run (any that did not fail) must be allowed in the serial run; and a call it
 * refused as over a limit must be refused there too (it saw every outcome of what still ran).
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { latestUserMessage } from '../src/core/messages.js';
import type { OrchestrationConfig, Rule } from '../src/core/schema.js';
import type { ToolDecision, TransitionInput } from '../src/core/transition.js';
import { createOrchestrationManager, type OrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { memoryStore } from '../src/stores/memory.js';

const TOOLS = ['pay', 'search', 'free'];
const LEASE_MS = 1_000;

type End = 'tool-completed' | 'tool-failed' | 'tool-abandoned';

type Action =
  | { kind: 'request'; tool: string }
  /** `quiet`: written without a message (the seed API's `completeTool(config, undefined, …)`). */
  | { kind: 'finish'; pick: number; end: End; quiet: boolean }
  | { kind: 'tick'; ms: number }
  | { kind: 'message' }
  /** `ask`: a new question follows the reset at once (else the running turn goes on). */
  | { kind: 'reset'; ask: boolean };

interface Case {
  rules: Rule[];
  actions: Action[];
}

const periodArb = fc.constantFrom('session', 'turn', 'step', '2s');

const ruleArb: fc.Arbitrary<Rule> = fc.record({
  tools: fc.constantFrom<string[]>(['pay'], ['pay', 'free'], ['*'], ['search']),
  limit: fc.record({ max: fc.integer({ min: 0, max: 2 }), per: periodArb }),
  reason: fc.constant('enough'),
});

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('request' as const), tool: fc.constantFrom(...TOOLS) }) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('finish' as const),
      pick: fc.nat(7),
      end: fc.constantFrom<End>('tool-completed', 'tool-completed', 'tool-failed', 'tool-abandoned'),
      quiet: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('tick' as const), ms: fc.constantFrom(300, 700, 1_200) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'message' as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('reset' as const), ask: fc.boolean() }) },
);

const caseArb: fc.Arbitrary<Case> = fc.record({
  rules: fc.array(ruleArb, { minLength: 1, maxLength: 3 }),
  actions: fc.array(actionArb, { minLength: 1, maxLength: 30 }),
});

/** Steps a completed call moves between: "search" leads to Found, "pay" to Paid. */
function configOf(rules: Rule[]): OrchestrationConfig {
  return {
    rules,
    steps: [
      { name: 'Paid', conditions: [{ type: 'tool_used', value: 'pay' }] },
      { name: 'Found', conditions: [{ type: 'tool_used', value: 'search' }] },
      { name: 'Start', isDefault: true },
    ],
  };
}

function messageOf(n: number): ReturnType<typeof latestUserMessage> {
  return latestUserMessage([{ role: 'user', content: `ask ${n}`, id: `m${n}` }]);
}

/** One reservation: when it was made, and how it ended. */
interface Reserved {
  id: string;
  tool: string;
  at: number;
  message: number;
  /** Resets before it, in the order of all actions. */
  resetsBefore: number;
  end?: End;
}

/** What the serial run is told, in order. */
type SerialStep =
  | { kind: 'call'; call: Reserved }
  | { kind: 'message'; n: number; at: number }
  | { kind: 'reset'; at: number }
  | { kind: 'refused'; id: string; tool: string; at: number; message: number };

function manager(clock: () => number, expired?: Set<string>): OrchestrationManager {
  return createOrchestrationManager({
    store: memoryStore(),
    clock,
    leaseMs: LEASE_MS,
    onEvent: (event) => {
      if (event.type === 'tool-released' && event.reason === 'expired') expired?.add(event.toolCallId);
    },
  });
}

async function play(c: Case): Promise<void> {
  const config = configOf(c.rules);
  let now = 1_000_000;
  /** Calls whose lease ended before they finished: abandoned, whatever came later. */
  const expired = new Set<string>();
  const racing = manager(() => now, expired);
  const plan = racing.plan(config);
  const sessionId = 'racing';
  let messageNumber = 1;
  let resets = 0;
  /**
   * A turn went on after a reset, without a new question. The racing session then counts the
   * calls the reset released where it stands after the reset, and the serial run where each
   * ended: a call completed behind a running one counts there before its step changed. So
   * refusals may be stricter than serial ones (never looser: what ran is still checked).
   */
  let goesOnAfterReset = false;
  const running: Reserved[] = [];
  const reserved: Reserved[] = [];
  const serial: SerialStep[] = [];
  const decisions = new Map<string, ToolDecision>();
  const apply = (inputs: TransitionInput[], quiet = false) =>
    racing.apply(plan, quiet ? undefined : messageOf(messageNumber), sessionId, inputs);
  await apply([{ type: 'user-message' }]);
  serial.push({ kind: 'message', n: messageNumber, at: now });
  /** Calls the racing session released on its own (lease expired): they end as abandoned. */
  const releasedNow = async () => {
    const state = await racing.getStateManager().getState(sessionId);
    const stillRunning = new Set((state?.pending ?? []).flatMap((e) => (e.kind === 'call' ? [e.id] : [])));
    for (const call of [...running]) {
      if (stillRunning.has(call.id)) continue;
      call.end ??= 'tool-abandoned';
      running.splice(running.indexOf(call), 1);
    }
  };
  let n = 0;
  for (const action of c.actions) {
    if (action.kind === 'request') {
      const id = `c${n++}`;
      const { decisions: made } = await apply([
        { type: 'tool-requested', tool: action.tool, toolCallId: id, agentTools: TOOLS },
      ]);
      const decision = made[0] as ToolDecision;
      decisions.set(id, decision);
      await releasedNow();
      if (decision.allowed) {
        const call: Reserved = { id, tool: action.tool, at: now, message: messageNumber, resetsBefore: resets };
        running.push(call);
        reserved.push(call);
        serial.push({ kind: 'call', call });
      } else {
        serial.push({ kind: 'refused', id, tool: action.tool, at: now, message: messageNumber });
      }
    } else if (action.kind === 'finish') {
      if (running.length === 0) continue;
      const call = running[action.pick % running.length]!;
      running.splice(running.indexOf(call), 1);
      await apply([{ type: action.end, toolCallId: call.id }], action.quiet);
      // A completion after the lease ended or a reset is late: the call was already abandoned.
      call.end ??= expired.has(call.id) ? 'tool-abandoned' : action.end;
      await releasedNow();
    } else if (action.kind === 'tick') {
      now += action.ms;
    } else if (action.kind === 'message') {
      messageNumber++;
      await apply([{ type: 'user-message' }]);
      await releasedNow();
      serial.push({ kind: 'message', n: messageNumber, at: now });
    } else {
      await racing.getStateManager().resetState(sessionId);
      resets++;
      // Every call running now was released by the reset: it may have run.
      for (const call of running.splice(0)) call.end ??= 'tool-abandoned';
      serial.push({ kind: 'reset', at: now });
      // A new question may start again from the reset session, or the running turn goes on.
      if (!action.ask) goesOnAfterReset = true;
      if (action.ask) {
        messageNumber++;
        await apply([{ type: 'user-message' }]);
        await releasedNow();
        serial.push({ kind: 'message', n: messageNumber, at: now });
      }
    }
  }
  // Whatever still runs at the end is cut off: it may have run.
  for (const call of running.splice(0)) call.end ??= 'tool-abandoned';

  // The serial run: each reservation ends as it ended before the next one starts.
  let serialNow = 0;
  const oracle = manager(() => serialNow);
  const serialPlan = oracle.plan(config);
  let serialMessage = 1;
  const serialApply = (inputs: TransitionInput[]) =>
    oracle.apply(serialPlan, messageOf(serialMessage), 'serial', inputs);
  for (const step of serial) {
    serialNow = step.kind === 'call' ? step.call.at : step.at;
    if (step.kind === 'message') {
      serialMessage = step.n;
      await serialApply([{ type: 'user-message' }]);
    } else if (step.kind === 'reset') {
      await oracle.getStateManager().resetState('serial');
    } else if (step.kind === 'refused') {
      const racingDecision = decisions.get(step.id)!;
      const code = racingDecision.allowed ? undefined : racingDecision.reason.code;
      const { decisions: made } = await serialApply([
        { type: 'tool-requested', tool: step.tool, toolCallId: step.id, agentTools: TOOLS },
      ]);
      const decision = made[0] as ToolDecision;
      // Refused as over a limit while calls ran: over it in the outcome that happened too. (A
      // window counts a call when it commits, later than the serial run does: only exact for
      // the other periods.)
      if (code === 'limit' && !goesOnAfterReset && !c.rules.some((rule) => rule.limit?.per === '2s')) {
        expect(decision.allowed, `${step.id} (${step.tool}) refused as over a limit, allowed serially`).toBe(false);
      }
      // Whatever the serial run decided, the refused call did not run: release it there.
      if (decision.allowed) await serialApply([{ type: 'tool-failed', toolCallId: step.id }]);
    } else {
      const { call } = step;
      const { decisions: made } = await serialApply([
        { type: 'tool-requested', tool: call.tool, toolCallId: call.id, agentTools: TOOLS },
      ]);
      const decision = made[0] as ToolDecision;
      if (call.end !== 'tool-failed') {
        expect(
          decision,
          `${call.id} (${call.tool}, ${call.end}) ran while the serial run refuses it: ${JSON.stringify(c)}`,
        ).toMatchObject({ allowed: true });
      }
      if (decision.allowed) await serialApply([{ type: call.end!, toolCallId: call.id }]);
    }
  }
}

it('no mix of racing, failing, abandoned, expired and reset calls gets past a limit the serial run keeps', async () => {
  await fc.assert(
    fc.asyncProperty(caseArb, (c) => play(c)),
    { numRuns: 5_000 },
  );
}, 300_000);
