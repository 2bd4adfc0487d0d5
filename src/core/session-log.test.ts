/**
 * The session event log's compact encoding: whatever the history does (grow, trim at the
 * front, clear, be replaced), and however small the log's capacity, every entry kept replays to
 * exactly the state it was logged with.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  appendToLog,
  droppedEntries,
  type LogItem,
  replayLog,
  type SessionLog,
  sessionLogProblem,
} from './session-log.js';
import { assertState, createState, type OrchestrationState } from './state.js';

const tool = fc.constantFrom('search', 'think', 'reflect', 'write', 'a', 'b');

/** How the history changes between two entries. */
const change = fc.oneof(
  fc.record({ kind: fc.constant('append' as const), tools: fc.array(tool, { maxLength: 3 }) }),
  fc.record({ kind: fc.constant('clear' as const) }),
  fc.record({ kind: fc.constant('replace' as const), tools: fc.array(tool, { maxLength: 6 }) }),
);

describe('the session event log', () => {
  it('replays every entry it keeps to the state it was logged with', () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(change, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 25 }),
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 6 }),
        (writes, capacity, historyLimit) => {
          let state: OrchestrationState = createState('s', 0);
          let log: SessionLog | undefined;
          const truth: OrchestrationState[] = [];
          let tokens = 0;
          for (const [w, changes] of writes.entries()) {
            const items: LogItem[] = [];
            for (const c of changes) {
              let history = state.recentlyUsedTools;
              if (c.kind === 'append') history = [...history, ...c.tools].slice(-historyLimit);
              else if (c.kind === 'clear') history = [];
              else history = c.tools.slice(-historyLimit);
              tokens += 7;
              state = {
                ...state,
                recentlyUsedTools: history,
                sequenceIndex: history.length,
                activeStep: history.length % 2 === 0 ? 'even' : undefined,
                cumulativeTokenUsage: { promptTokens: tokens, completionTokens: 0, totalTokens: tokens },
              };
              items.push({ event: { type: 'session-reset' }, state });
              truth.push(state);
            }
            log = appendToLog(log, capacity, items, w, `message-${Math.floor(w / 3)}`);
          }
          const final: OrchestrationState = { ...state, log };
          // The log survives a store's JSON round trip and its validation.
          const stored = assertState(JSON.parse(JSON.stringify(final)));
          const replayed = replayLog(stored);
          const kept = truth.slice(-capacity);
          expect(replayed).toHaveLength(kept.length);
          expect(droppedEntries(log)).toBe(truth.length - kept.length);
          for (const [i, { entry, state: at }] of replayed.entries()) {
            const expected = kept[i]!;
            expect(entry.seq).toBe(truth.length - kept.length + i + 1);
            expect(at.recentlyUsedTools).toEqual(expected.recentlyUsedTools);
            expect(at.sequenceIndex).toBe(expected.sequenceIndex);
            expect(at.activeStep).toBe(expected.activeStep);
            expect(at.cumulativeTokenUsage).toEqual(expected.cumulativeTokenUsage);
          }
          // A turn is counted per new message: writes 0-2 are turn 1, 3-5 turn 2, ...
          expect(log!.turn).toBe(Math.floor((writes.length - 1) / 3) + 1);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('names what is wrong with a damaged log read back from a store', () => {
    const state = { ...createState('s', 0), log: { capacity: 5, seq: 1, turn: 1, base: [], tail: [], entries: [{}] } };
    expect(() => assertState(state)).toThrow(/state\.log.*entries\[0\] is not a log entry/);
    expect(sessionLogProblem({ capacity: -1 })).toMatch(/capacity, seq and turn/);
    expect(sessionLogProblem('nope')).toBe('expected an object');
  });
});
