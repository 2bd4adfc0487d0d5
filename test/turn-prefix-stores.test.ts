/**
 * A turn hands the store what it already applied of its buffer; the store takes it only when it
 * still holds the state the turn started from. On every store, with a second store instance
 * standing for another process that writes the session in between: the turn's write must be
 * decided on what the store holds (on Redis and PostgreSQL, after its compare-and-set finds the
 * turn's copy stale), so neither process's change is lost.
 */
import { expect, it } from 'vitest';
import type { OrchestrationConfig } from '../src/core/schema.js';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { Turn } from '../src/orchestration/turn.js';
import { describeEachStore } from './helpers/store-kinds.js';

const config: OrchestrationConfig = {
  steps: [{ name: 'Work', isDefault: true, sequence: ['a', 'b'], requireSequence: true }],
};
const agentTools = ['a', 'b'];
const messages = [{ role: 'user', content: 'work on it' }];

describeEachStore('a turn whose session another process wrote since it applied its buffer', (open, kind) => {
  it('keeps both changes: the other process’s usage and the turn’s completion', async () => {
    const sessionId = `prefix-${kind}-${Math.random().toString(36).slice(2)}`;
    const here = createOrchestrationManager({ store: open() });
    const there = createOrchestrationManager({ store: open() });
    const turn = new Turn({ manager: here, config, sessionId, agentTools, messages });
    const first = await turn.stepStarted(0);
    expect((await turn.request('a', 'a-1', first.decision.allowedTools)).allowed).toBe(true);
    turn.completed('a-1');
    turn.usage({ inputTokens: 10, outputTokens: 5, totalTokens: 15 });
    // Applied here, for the next model step (the turn's copy of the session moves on)...
    expect((await turn.stepStarted(1)).decision.allowedTools).toEqual(['b']);
    // ...while the other process writes the session.
    await there.addTokenUsage(sessionId, { inputTokens: 100, outputTokens: 50, totalTokens: 150 });
    await turn.end();

    const state = await there.getStateManager().getState(sessionId);
    expect(state?.recentlyUsedTools).toEqual(['a']);
    expect(state?.pending).toBeUndefined();
    expect(state?.cumulativeTokenUsage).toEqual({ promptTokens: 110, completionTokens: 55, totalTokens: 165 });
  });
});
