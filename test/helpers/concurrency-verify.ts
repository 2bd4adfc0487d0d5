/**
 * The check of a merged log of concurrent turns (test/helpers/concurrency-case.ts) against the
 * SPEC oracle; see test/concurrency.property.test.ts for what it asserts.
 */
import { expect } from 'vitest';
import type { ChatMessage } from '../../src/core/messages.js';
import type { SessionLogEntry } from '../../src/core/session-log.js';
import type { OrchestrationState } from '../../src/core/state.js';
import { type Case, conversations, type Logged } from './concurrency-case.js';
import { Oracle } from './spec-oracle.js';

/**
 * Checks a case's merged log and the session it left against the SPEC oracle, replaying the
 * writes in version order (each write adds one to the version, in whatever process it ran).
 */
export function verifyCase(
  c: Case,
  log: readonly Logged[],
  final: OrchestrationState | null | undefined,
  /** The session's event log as its store keeps it, when the managers keep one. */
  events?: readonly SessionLogEntry[],
): void {
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
  if (final?.log && events) verifyEventLog(final, events);
}

/**
 * The session's event log, written by racing turns, must still read as one story: seqs without
 * gaps up to the state's counter, the history at its last entry equal to the session's, every
 * tool use in the history recorded in order, and no call id reserved twice.
 */
function verifyEventLog(final: OrchestrationState, entries: readonly SessionLogEntry[]): void {
  const log = final.log!;
  const seqs = entries.map((entry) => entry.seq);
  expect(seqs, 'the log has gaps or is out of order').toEqual(seqs.map((_, i) => log.seq - seqs.length + 1 + i));
  expect(entries.length).toBeLessThanOrEqual(log.capacity);
  if (entries.length === 0) return;
  expect(entries.at(-1)!.history, 'the log lost a change of the history').toEqual(final.recentlyUsedTools);
  if (entries[0]!.seq !== 1) return;
  const recorded = entries.flatMap((entry) => (entry.event.type === 'tool-recorded' ? [entry.event.tool] : []));
  expect(recorded.slice(recorded.length - final.recentlyUsedTools.length)).toEqual(final.recentlyUsedTools);
  const reserved = entries.flatMap((entry) => (entry.event.type === 'tool-reserved' ? [entry.event.toolCallId] : []));
  expect(new Set(reserved).size, 'a call id was reserved twice').toBe(reserved.length);
}
