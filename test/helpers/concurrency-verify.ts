/**
 * The check of a merged log of concurrent turns (test/helpers/concurrency-case.ts) against the
 * SPEC oracle; see test/concurrency.property.test.ts for what it asserts.
 */
import { expect } from 'vitest';
import type { ChatMessage } from '../../src/core/messages.js';
import type { OrchestrationState } from '../../src/core/state.js';
import { type Case, conversations, type Logged } from './concurrency-case.js';
import { Oracle } from './spec-oracle.js';

/**
 * Checks a case's merged log and the session it left against the SPEC oracle, replaying the
 * writes in version order (each write adds one to the version, in whatever process it ran).
 */
export function verifyCase(c: Case, log: readonly Logged[], final: OrchestrationState | null | undefined): void {
  const convs = conversations(c.texts);
  const writes = log.filter((entry) => entry.changed).sort((a, b) => a.version - b.version);
  expect(new Set(writes.map((w) => w.version)).size, 'two writes left the same version').toBe(writes.length);

  const callOf = (turn: number, call: number) => c.turns[turn]!.calls[call]!;
  const oracle = new Oracle(c.config, undefined);
  const seenIds = new Set<string>();
  let conversation: ChatMessage[] = [];
  for (const write of writes) {
    if (write.kind === 'message') {
      conversation = convs[c.turns[write.turn]!.conversation]!;
      oracle.observe(conversation, []);
    } else if (write.kind === 'request') {
      const call = callOf(write.turn, write.call);
      const { decision } = write;
      if (decision.allowed) {
        expect(seenIds.has(call.id), `call id ${call.id} ran twice`).toBe(false);
        expect(oracle.allowed(c.agentTools), `"${call.tool}" ran where a serial run forbids it`).toContain(call.tool);
        if (!call.fails) oracle.record(call.tool, conversation, []);
      } else {
        const code = decision.reason.code;
        if (code === 'duplicate-call') expect(seenIds.has(call.id)).toBe(true);
        if (code === 'sequence' || code === 'denied' || code === 'not-allowed' || code === 'no-such-tool') {
          expect(
            oracle.allowed(c.agentTools),
            `"${call.tool}" refused (${code}) where a serial run allows it`,
          ).not.toContain(call.tool);
        }
      }
      seenIds.add(call.id);
    }
  }
  // Refusals that wrote nothing were repeats of ids already seen.
  for (const entry of log) {
    if (entry.kind === 'request' && !entry.changed) expect(entry.decision).toMatchObject({ allowed: false });
  }
  expect(final?.pending).toBeUndefined();
  expect(final?.recentlyUsedTools).toEqual(oracle.history);
  expect(final?.sequenceIndex).toBe(oracle.index);
  expect(final?.activeStep).toBe(oracle.active);
}
