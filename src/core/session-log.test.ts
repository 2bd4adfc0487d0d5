/**
 * The session event log's entries, as the manager makes them for a store to append: numbered
 * without gaps, turns counted per new message, each entry a whole picture of the state it was
 * logged with, whatever the history did in between.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  appendToLog,
  assertLogEntry,
  type LogItem,
  logEntriesOf,
  MAX_LOGGED_FACT_CHARACTERS,
  type SessionLogEntry,
  sessionLogProblem,
  stateAtEntry,
} from './session-log.js';
import { createState, type OrchestrationState } from './state.js';
import { assertState } from './state-check.js';

const tool = fc.constantFrom('search', 'think', 'reflect', 'write');

describe('the session event log', () => {
  it('numbers entries without gaps, counts turns per message, and replays each to its state', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            message: fc.integer({ min: 0, max: 3 }),
            histories: fc.array(fc.array(tool, { maxLength: 5 }), { minLength: 1, maxLength: 3 }),
          }),
          { minLength: 1, maxLength: 20 },
        ),
        (writes) => {
          let state: OrchestrationState = createState('s', 0);
          const appended: SessionLogEntry[] = [];
          const truth: OrchestrationState[] = [];
          let tokens = 0;
          let turns = 0;
          let lastMessage: number | undefined;
          for (const [w, write] of writes.entries()) {
            const items: LogItem[] = write.histories.map((history) => {
              tokens += 7;
              state = {
                ...state,
                recentlyUsedTools: history,
                sequenceIndex: history.length,
                activeStep: history.length % 2 === 0 ? 'even' : undefined,
                cumulativeTokenUsage: { promptTokens: tokens, completionTokens: 1, totalTokens: tokens + 1 },
              };
              truth.push(state);
              return { event: { type: 'session-reset' }, state };
            });
            if (write.message !== lastMessage) turns++;
            lastMessage = write.message;
            state = appendToLog(state, 50, items, w, `message-${write.message}`);
            appended.push(...(logEntriesOf(state) ?? []));
          }
          expect(appended.map((entry) => entry.seq)).toEqual(truth.map((_, i) => i + 1));
          expect(state.log).toMatchObject({ capacity: 50, seq: truth.length, turn: turns });
          for (const [i, entry] of appended.entries()) {
            // Entries survive a store's JSON round trip and its check.
            const stored = assertLogEntry(JSON.parse(JSON.stringify(entry)), `entries[${i}]`);
            const at = stateAtEntry(state, stored);
            expect(at.recentlyUsedTools).toEqual(truth[i]!.recentlyUsedTools);
            expect(at.sequenceIndex).toBe(truth[i]!.sequenceIndex);
            expect(at.activeStep).toBe(truth[i]!.activeStep);
            expect(at.cumulativeTokenUsage).toEqual(truth[i]!.cumulativeTokenUsage);
          }
          // The counters travel in the state, and pass its check.
          expect(assertState(JSON.parse(JSON.stringify(state))).log).toEqual(state.log);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('keeps the entries of two logs onto one state in a row (a reset right after a turn)', () => {
    const first = appendToLog(
      createState('s', 0),
      10,
      [{ event: { type: 'session-reset' }, state: createState('s', 0) }],
      1,
      'a',
    );
    const second = appendToLog(first, 10, [{ event: { type: 'session-reset' }, state: first }], 2, 'a');
    expect(logEntriesOf(second)?.map((entry) => entry.seq)).toEqual([1, 2]);
    // A copy of the state is a new object: the entries are not attached to it.
    expect(logEntriesOf({ ...second })).toBeUndefined();
  });

  it('keeps the facts and labels of each entry, a long value only by its length, read back as unknown', () => {
    const long = 'x'.repeat(MAX_LOGGED_FACT_CHARACTERS);
    const short: OrchestrationState = {
      ...createState('s', 0),
      facts: { ids: { value: ['a'] }, broken: { unknown: 'its value could not be computed' } },
    };
    // A fact may be named __proto__: it stays a fact, not the entry's prototype.
    const facts = JSON.parse(`{"ids": {"value": ["a"]}, "__proto__": {"value": "${long}"}}`);
    const after: OrchestrationState = { ...short, facts, labels: ['confidential'] };
    const logged = appendToLog(
      createState('s', 0),
      10,
      [
        { event: { type: 'session-reset' }, state: short },
        { event: { type: 'session-reset' }, state: after },
        { event: { type: 'session-reset' }, state: after },
      ],
      1,
      'a',
    );
    const raw = logEntriesOf(logged) ?? [];
    expect(Object.getPrototypeOf(raw[1]?.facts)).toBe(Object.prototype);
    expect(Object.keys(raw[1]?.facts ?? {})).toEqual(['ids', '__proto__']);
    const [first, second, third] = raw.map((entry, i) =>
      assertLogEntry(JSON.parse(JSON.stringify(entry)), `entries[${i}]`),
    );
    expect(first?.facts).toEqual(short.facts);
    expect(first).not.toHaveProperty('labels');
    expect(Object.entries(second?.facts ?? {})).toEqual([
      ['ids', { value: ['a'] }],
      ['__proto__', { omitted: long.length + 2 }],
    ]);
    expect(second?.labels).toEqual(['confidential']);
    expect(third).toEqual({ ...second, seq: 3 });
    // Judged from the log, a value it left out is unknown, never taken as absent or as some value.
    const at = stateAtEntry(after, second!);
    expect(Object.entries(at.facts ?? {})).toEqual([
      ['ids', { value: ['a'] }],
      ['__proto__', { unknown: expect.stringContaining('not kept in the event log') }],
    ]);
    expect(at.labels).toEqual(['confidential']);
    expect(stateAtEntry(after, first!)).toMatchObject({ facts: short.facts, labels: undefined });
  });

  it('names what is wrong with damaged counters or entries', () => {
    const state = { ...createState('s', 0), log: { capacity: -1, seq: 0, turn: 0 } };
    expect(() => assertState(state)).toThrow(/state\.log.*capacity, seq and turn/);
    expect(sessionLogProblem('nope')).toBe('expected an object');
    expect(() => assertLogEntry({ seq: 1 }, 'log[3]')).toThrow(/log\[3\] is not an event log entry/);
    const entry = { seq: 1, at: 0, turn: 1, event: { type: 'session-reset' }, index: 0, history: [], usage: [0, 0, 0] };
    expect(assertLogEntry({ ...entry, labels: ['a'], facts: { f: { omitted: 300 } } }, 'log[0]')).toBeDefined();
    expect(() => assertLogEntry({ ...entry, labels: [1] }, 'log[0]')).toThrow(/not an event log entry/);
    expect(() => assertLogEntry({ ...entry, facts: { f: 'a value' } }, 'log[0]')).toThrow(/not an event log entry/);
  });
});
