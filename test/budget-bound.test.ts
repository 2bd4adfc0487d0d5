/**
 * A token budget bounds spending, not just tools. Once a session's budget is spent no further
 * model call is made for it: the step gets Baton's stand-in answer, which says so. Steps already
 * in flight count, so concurrent turns overshoot by at most the one step each has in flight.
 * (Before, every turn made one more model call after the budget was spent, and every later turn
 * another: 8 concurrent turns spent 720 of 290 tokens, and it kept growing.)
 */
import { isStepCount, streamText, tool } from 'ai';
import { expect, it } from 'vitest';
import { z } from 'zod';
import { budgetSpentText } from '../src/ai-sdk/budget-spent-model.js';
import { orchestrate } from '../src/ai-sdk/orchestrate.js';
import type { OrchestrationConfig } from '../src/core/schema.js';
import { createOrchestrationManager, type OrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { mockModel } from './helpers/mock-model.js';
import { describeEachStore } from './helpers/store-kinds.js';

const BUDGET = 290;
const STEP_TOKENS = 30;
const CONFIG: OrchestrationConfig = { budget: { totalTokens: BUDGET }, steps: [] };

/** A turn whose model calls `search` at every step, 30 tokens a step, until the loop stops. */
async function greedyTurn(manager: OrchestrationManager, sessionId: string, turn: number) {
  let ids = 0;
  const mock = mockModel(() => ({
    calls: [{ tool: 'search', id: `t${turn}-${++ids}` }],
    inputTokens: 20,
    outputTokens: 10,
  }));
  const tools = { search: tool({ inputSchema: z.object({}), execute: async () => 'found' }) };
  const messages = [{ role: 'user' as const, content: 'search everything' }];
  const orchestration = orchestrate({ manager, config: CONFIG, sessionId, tools, messages });
  const result = streamText({ model: mock.model, messages, stopWhen: isStepCount(100), ...orchestration });
  const text = await result.text;
  await orchestration.settled();
  return { modelCalls: mock.calls.length, text, last: orchestration.lastStep() };
}

describeEachStore('a token budget', (open, kind) => {
  it('stops model calls once spent: one turn overshoots by at most one step, a later turn makes none', async () => {
    const manager = createOrchestrationManager({ store: open() });
    const sessionId = `budget-one-${kind}-${Date.now()}`;
    const first = await greedyTurn(manager, sessionId, 0);
    const spent = (await manager.getState(sessionId))!.cumulativeTokenUsage.totalTokens;
    expect(spent).toBeGreaterThanOrEqual(BUDGET);
    expect(spent).toBeLessThanOrEqual(BUDGET + STEP_TOKENS);
    expect(first.modelCalls).toBe(spent / STEP_TOKENS);
    expect(first.text).toContain('token budget of this conversation is spent');
    const later = await greedyTurn(manager, sessionId, 1);
    expect(later.modelCalls).toBe(0);
    expect(later.text).toBe(budgetSpentText({ scope: 'session', step: undefined, limit: BUDGET, used: spent }));
    expect(later.last?.budget).toMatchObject({ scope: 'session', used: spent, limit: BUDGET });
    expect((await manager.getState(sessionId))!.cumulativeTokenUsage.totalTokens).toBe(spent);
  }, 30_000);

  it('holds 8 concurrent turns to one in-flight step each beyond the budget', async () => {
    // Two instances on the durable stores: the turns race as if from two processes.
    const managers = [createOrchestrationManager({ store: open() }), createOrchestrationManager({ store: open() })];
    const sessionId = `budget-eight-${kind}-${Date.now()}`;
    const turns = await Promise.all(Array.from({ length: 8 }, (_, i) => greedyTurn(managers[i % 2]!, sessionId, i)));
    const spent = (await managers[0]!.getState(sessionId))!.cumulativeTokenUsage.totalTokens;
    const calls = turns.reduce((sum, turn) => sum + turn.modelCalls, 0);
    expect(spent).toBe(calls * STEP_TOKENS);
    expect(spent).toBeGreaterThanOrEqual(BUDGET);
    expect(spent).toBeLessThanOrEqual(BUDGET + 8 * STEP_TOKENS);
    for (const turn of turns) expect(turn.text).toContain('is spent');
    // And nothing more, however many turns come after.
    for (let i = 0; i < 3; i++) expect((await greedyTurn(managers[i % 2]!, sessionId, 8 + i)).modelCalls).toBe(0);
    expect((await managers[1]!.getState(sessionId))!.cumulativeTokenUsage.totalTokens).toBe(spent);
  }, 60_000);
});
