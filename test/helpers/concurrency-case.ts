/**
 * Concurrent turns on one session with a model that calls anything, shared by the in-process
 * and the cross-process property tests: the random cases, and the runner that plays some of a
 * case's turns through a manager and logs every store update. It does not import vitest, so the
 * cross-process workers can use it; concurrency-verify.ts checks the logs.
 */
import fc from 'fast-check';
import { compileOrchestration } from '../../src/core/compile.js';
import type { MessageInfo } from '../../src/core/conditions.js';
import type { ChatMessage } from '../../src/core/messages.js';
import type { OrchestrationConfig } from '../../src/core/schema.js';
import type { OrchestrationState } from '../../src/core/state.js';
import type { ToolDecision, TransitionInput } from '../../src/core/transition.js';
import { messageOf, type OrchestrationManager, waitsOf } from '../../src/orchestration/orchestration-manager.js';
import { messageTextArb, orchestrationConfigArb, TOOL_POOL, UNKNOWN_TOOLS } from '../../src/testing/arbitraries.js';

/** One tool call a turn's model makes. */
export interface CallScript {
  tool: string;
  id: string;
  fails: boolean;
  /** Event-loop turns to wait before requesting, and before finishing. */
  before: number;
  during: number;
}

/** One turn: the conversation it brings and the calls its model makes. */
export interface TurnScript {
  /** Which conversation the turn brings (turns that share one bring the same message). */
  conversation: number;
  calls: CallScript[];
}

/** A random case: a config, the agent's tools, 1-2 user texts and 2-4 racing turns. */
export interface Case {
  config: OrchestrationConfig;
  agentTools: string[];
  texts: string[];
  turns: TurnScript[];
}

/** Random cases with repeating call ids (within and across turns) and tools that throw. */
export const caseArb: fc.Arbitrary<Case> = fc
  .record({
    config: orchestrationConfigArb(),
    agentTools: fc.shuffledSubarray([...TOOL_POOL], { minLength: 1 }),
    texts: fc.array(messageTextArb, { minLength: 1, maxLength: 2 }),
  })
  .chain(({ config, agentTools, texts }) => {
    const callArb = fc.record({
      tool: fc.oneof(
        { weight: 6, arbitrary: fc.constantFrom(...agentTools) },
        { weight: 1, arbitrary: fc.constantFrom(...TOOL_POOL, ...UNKNOWN_TOOLS) },
      ),
      id: fc.constantFrom('c0', 'c1', 'c2', 'c3', 'c4', 'c5', 'c6', 'c7', 'c8', 'c9'),
      fails: fc.integer({ min: 0, max: 9 }).map((n) => n < 2),
      before: fc.nat(3),
      during: fc.nat(3),
    });
    const turnArb = fc.record({
      conversation: fc.nat(texts.length - 1),
      calls: fc.array(callArb, { minLength: 1, maxLength: 5 }),
    });
    return fc.record({
      config: fc.constant(config),
      agentTools: fc.constant(agentTools),
      texts: fc.constant(texts),
      turns: fc.array(turnArb, { minLength: 2, maxLength: 4 }),
    });
  });

/** One logged input and what the store answered; calls are named by turn and position. */
export type Logged =
  | { kind: 'message'; turn: number; version: number; changed: boolean }
  | { kind: 'request'; turn: number; call: number; decision: ToolDecision; version: number; changed: boolean }
  | { kind: 'finish'; turn: number; call: number; version: number; changed: boolean };

/** Waits `n` event-loop turns: enough to interleave turns within one process. */
export const yieldTurns = async (n: number): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
};

/** Conversation i: i filler messages, then the user's text, so each has its own position. */
export function conversations(texts: readonly string[]): ChatMessage[][] {
  return texts.map((text, i) => [
    ...Array.from({ length: i }, (): ChatMessage => ({ role: 'assistant', content: 'ok' })),
    { role: 'user', content: text },
  ]);
}

/**
 * Plays the turns `turnIndexes` of `c` at once on `sessionId` through `managerFor(turn)`,
 * logging every update with the version it left (with `wait`, a request whose answer depends on
 * a running call waits for it, as a turn's does, and only its final answer is logged). `pause(n)` runs before each request and
 * before each call finishes (default: n event-loop turns). `onApplied` sees every state an
 * update left, with the message of the turn that made it.
 */
export async function playTurns(
  c: Case,
  turnIndexes: readonly number[],
  managerFor: (turn: number) => OrchestrationManager,
  sessionId: string,
  pause: (n: number) => Promise<void> = yieldTurns,
  onApplied?: (state: OrchestrationState, message: MessageInfo | undefined) => void,
  /** A request that depends on a running call waits for it and asks again (else it is logged as refused). */
  wait = false,
): Promise<Logged[]> {
  const plan = compileOrchestration(c.config);
  const convs = conversations(c.texts);
  const log: Logged[] = [];
  await Promise.all(
    turnIndexes.map(async (t) => {
      const turn = c.turns[t]!;
      const message = messageOf(convs[turn.conversation]);
      const apply = async (inputs: TransitionInput[]) => {
        const applied = await managerFor(t).apply(plan, message, sessionId, inputs);
        onApplied?.(applied.state, message);
        return applied;
      };
      const begun = await apply([{ type: 'user-message' }]);
      log.push({ kind: 'message', turn: t, version: begun.state.version, changed: begun.changed });
      for (const [k, call] of turn.calls.entries()) {
        await pause(call.before);
        const input: TransitionInput = {
          type: 'tool-requested',
          tool: call.tool,
          toolCallId: call.id,
          agentTools: c.agentTools,
        };
        let requested = await apply([input]);
        let decision = requested.decisions[0] as ToolDecision;
        // As a Turn does: a request that depends on a running call waits for it, then asks again.
        while (wait && !decision.allowed && decision.waitFor !== undefined) {
          const manager = managerFor(t);
          const now = Date.now();
          await waitsOf(manager).wait(sessionId, decision.waitFor, now + 10_000, now);
          requested = await apply([input]);
          decision = requested.decisions[0] as ToolDecision;
        }
        log.push({
          kind: 'request',
          turn: t,
          call: k,
          decision,
          version: requested.state.version,
          changed: requested.changed,
        });
        if (!decision.allowed) continue;
        await pause(call.during);
        const finished = await apply([{ type: call.fails ? 'tool-failed' : 'tool-completed', toolCallId: call.id }]);
        log.push({ kind: 'finish', turn: t, call: k, version: finished.state.version, changed: finished.changed });
      }
    }),
  );
  return log;
}
