/**
 * Limits on calls under 10 concurrent AI SDK turns of one session, on every store (two store
 * instances on the durable ones, as two processes would race): each turn's model calls `pay`
 * and `search` again and again, and the tool bodies that really ran never exceed a limit, per
 * session, per rolling window or per turn (the turns answer one user message, so they share a
 * turn). Calls still running count, so no two turns can take the last unit of a limit together.
 */
import { randomUUID } from 'node:crypto';
import { generateText, isStepCount, tool } from 'ai';
import { expect, it } from 'vitest';
import { z } from 'zod';
import { orchestrate } from '../src/ai-sdk/orchestrate.js';
import type { OrchestrationConfig } from '../src/core/schema.js';
import { createOrchestrationManager, type OrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { mockModel } from './helpers/mock-model.js';
import { describeEachStore } from './helpers/store-kinds.js';

const CONFIG: OrchestrationConfig = {
  rules: [
    { tools: ['pay'], limit: { max: 4, per: '1h' }, reason: 'Four payments an hour' },
    { tools: ['search'], limit: { max: 6, per: 'session' }, reason: 'Six searches per conversation' },
    { tools: ['*'], limit: { max: 9, per: 'turn' }, reason: 'Nine calls per question' },
  ],
  steps: [{ name: 'Work', isDefault: true }],
};
const messages = [{ role: 'user' as const, content: 'pay and search, as much as you can' }];

/** One turn whose model calls pay and search in every step while they are offered. */
async function greedyTurn(manager: OrchestrationManager, sessionId: string, turn: number, ran: string[]) {
  let ids = 0;
  const { model } = mockModel((call) => ({
    calls: call.offered.map((name) => ({ tool: name, id: `t${turn}-${name}-${++ids}`, input: {} })),
  }));
  const body = (name: string) => async () => {
    ran.push(name);
    await new Promise((resolve) => setTimeout(resolve, 2)); // a real tool takes a while: calls overlap
    return 'ok';
  };
  const tools = {
    pay: tool({ inputSchema: z.object({}), execute: body('pay') }),
    search: tool({ inputSchema: z.object({}), execute: body('search') }),
  };
  const orchestration = orchestrate({ manager, config: CONFIG, sessionId, tools, messages, onError: () => undefined });
  await generateText({ model, messages, stopWhen: isStepCount(8), ...orchestration });
  await orchestration.settled();
}

describeEachStore('limits under 10 concurrent AI SDK turns', (open, kind) => {
  it('are never exceeded by the tools that ran', async () => {
    const managers =
      kind === 'memory'
        ? [createOrchestrationManager({ store: open() })]
        : [createOrchestrationManager({ store: open() }), createOrchestrationManager({ store: open() })];
    const sessionId = `limits-${kind}-${randomUUID()}`;
    const ran: string[] = [];
    await Promise.all(
      Array.from({ length: 10 }, (_, i) => greedyTurn(managers[i % managers.length]!, sessionId, i, ran)),
    );
    const pays = ran.filter((name) => name === 'pay').length;
    const searches = ran.filter((name) => name === 'search').length;
    expect(pays).toBeLessThanOrEqual(4);
    expect(searches).toBeLessThanOrEqual(6);
    expect(ran.length).toBeLessThanOrEqual(9);
    expect(ran.length).toBeGreaterThan(0);
    // What the session recorded is what ran, and its counts agree.
    const state = await managers[0]!.getStateManager().getState(sessionId);
    expect(state?.pending).toBeUndefined();
    expect([...(state?.recentlyUsedTools ?? [])].sort()).toEqual([...ran].sort());
    expect(state?.counts?.['rules[0]']?.n ?? 0).toBe(pays);
    expect(state?.counts?.['rules[1]']?.n ?? 0).toBe(searches);
    // And nothing more once spent, from either instance.
    const late = await managers.at(-1)!.requestTool(CONFIG, messages, sessionId, {
      tool: 'pay',
      toolCallId: 'late',
      agentTools: ['pay', 'search'],
    });
    if (pays === 4) expect(late).toMatchObject({ allowed: false, reason: { code: 'limit' } });
  }, 90_000);
});
