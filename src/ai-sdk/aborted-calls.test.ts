/**
 * A call aborted while its tool runs (the client left, a timeout) may have done its work before
 * the tool stopped: limit rules count it, though nothing is recorded, so a client that aborts
 * each call once it started cannot get past a limit. A tool that fails on its own is not counted.
 */
import { isStepCount, streamText, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { OrchestrationConfig } from '../core/schema.js';
import { createOrchestrationManager, type OrchestrationManager } from '../orchestration/orchestration-manager.js';
import { ScriptedModel } from '../testing/scripted-model.js';
import { orchestrate } from './orchestrate.js';

const config: OrchestrationConfig = {
  rules: [{ tools: ['pay'], limit: { max: 1, per: 'session' }, reason: 'One payment per session' }],
  steps: [{ name: 'Checkout', isDefault: true }],
};
const messages = [{ role: 'user' as const, content: 'pay the invoice' }];

/** One turn whose model calls `pay` once; `abortWhenPaying` aborts it while `pay` runs. */
async function payTurn(
  manager: OrchestrationManager,
  id: string,
  paid: string[],
  how: 'abort' | 'fail' | 'complete',
): Promise<void> {
  const controller = new AbortController();
  const pay = tool({
    inputSchema: z.object({}),
    execute: async (_input, { abortSignal }) => {
      paid.push(id); // the payment left: whatever happens next, it may go through
      if (how === 'fail') throw new Error('card declined');
      if (how === 'abort') {
        controller.abort(new Error('the client left'));
        abortSignal?.throwIfAborted();
      }
      return 'paid';
    },
  });
  const orchestration = orchestrate({ manager, config, sessionId: 's', tools: { pay }, messages });
  const result = streamText({
    model: new ScriptedModel([{ toolCalls: [{ toolName: 'pay', input: {}, toolCallId: id }] }, { text: 'done' }]),
    messages,
    abortSignal: controller.signal,
    stopWhen: isStepCount(3),
    // Once the limit is spent `pay` is not offered, and the scripted model's call of it anyway
    // ends the stream with an error: expected here, not worth a log line.
    onError: () => undefined,
    ...orchestration,
  });
  await Promise.allSettled([result.consumeStream()]);
  await Promise.allSettled([orchestration.settled()]);
}

describe('a call aborted while its tool runs', () => {
  it('counts for limit rules, so aborting each payment once it started cannot pay twice', async () => {
    const manager = createOrchestrationManager();
    const paid: string[] = [];
    await payTurn(manager, 'p1', paid, 'abort');
    const state = await manager.getStateManager().getState('s');
    // Nothing recorded (it did not complete), nothing left running, but counted.
    expect(state?.recentlyUsedTools).toEqual([]);
    expect(state?.pending).toBeUndefined();
    expect(state?.counts).toEqual({ 'rules[0]': { n: 1 } });
    await payTurn(manager, 'p2', paid, 'complete');
    expect(paid).toEqual(['p1']);
  });

  it('does not count a tool that failed on its own', async () => {
    const manager = createOrchestrationManager();
    const paid: string[] = [];
    await payTurn(manager, 'p1', paid, 'fail');
    await payTurn(manager, 'p2', paid, 'complete');
    expect(paid).toEqual(['p1', 'p2']);
    const state = await manager.getStateManager().getState('s');
    expect(state?.recentlyUsedTools).toEqual(['pay']);
  });
});
