/**
 * A tool slower than its lease. A lease exists so that a dead process cannot hold a call's place
 * for ever, not to expire live work: the turn that runs a call renews its reservation until the
 * completion is written, so a once-only `pay` that runs three times longer than the lease runs
 * once, whether the next turn comes after it or overlaps it, on every store. (Before, the lease
 * expired mid-call, the late completion was dropped, and the next turn paid again.)
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { streamText, tool } from 'ai';
import { expect, it } from 'vitest';
import { z } from 'zod';
import { orchestrate } from '../src/ai-sdk/orchestrate.js';
import { createOrchestrationManager, type OrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { PAY_ONCE } from './fixtures/pay-once.js';
import { mockModel } from './helpers/mock-model.js';
import { describeEachStore } from './helpers/store-kinds.js';

// A second: a renewal (every quarter lease) then has 750 ms to land before the lease ends. With
// 500 ms the PostgreSQL case failed once under the full suite's load, a commit stalled that long.
const LEASE_MS = 1_000;
const PAY_MS = 3 * LEASE_MS;

/** A turn whose model calls `pay` once, then answers; resolves when its writes are stored. */
async function payTurn(manager: OrchestrationManager, sessionId: string, callId: string, pays: string[]) {
  const errors: unknown[] = [];
  const tools = {
    pay: tool({
      inputSchema: z.object({}),
      execute: async () => {
        pays.push(callId);
        await sleep(PAY_MS);
        return 'paid';
      },
    }),
    think: tool({ inputSchema: z.object({}), execute: async () => 'thought' }),
  };
  const { model } = mockModel((call) =>
    call.index === 0 ? { calls: [{ tool: 'pay', id: callId }] } : { text: 'done' },
  );
  const messages = [{ role: 'user' as const, content: `pay the invoice (${callId})` }];
  const orchestration = orchestrate({
    manager,
    config: PAY_ONCE,
    sessionId,
    tools,
    messages,
    onError: (error) => errors.push(error),
  });
  const result = streamText({ model, messages, ...orchestration });
  await result.consumeStream();
  await orchestration.settled();
  return { errors };
}

describeEachStore('a once-only tool three times slower than its lease', (open, kind) => {
  const managers = () => [
    createOrchestrationManager({ store: open(), leaseMs: LEASE_MS }),
    // On the durable stores the second turn runs in another instance, as another process would.
    createOrchestrationManager({ store: open(), leaseMs: LEASE_MS }),
  ];

  it('runs once when the next turn comes after it, and is recorded', async () => {
    const [first, second] = managers() as [OrchestrationManager, OrchestrationManager];
    const sessionId = `slow-serial-${kind}-${Date.now()}`;
    const pays: string[] = [];
    const a = await payTurn(first, sessionId, 'pay-1', pays);
    const b = await payTurn(second, sessionId, 'pay-2', pays);
    expect(pays).toEqual(['pay-1']);
    expect(a.errors).toEqual([]);
    expect(b.errors).toEqual([]);
    const state = await first.getStateManager().getState(sessionId);
    expect(state).toMatchObject({ recentlyUsedTools: ['pay'], activeStep: 'Done' });
    expect(state?.pending).toBeUndefined();
  }, 20_000);

  it('runs once when the next turn starts after its first lease would have ended', async () => {
    const [first, second] = managers() as [OrchestrationManager, OrchestrationManager];
    const sessionId = `slow-overlap-${kind}-${Date.now()}`;
    const pays: string[] = [];
    const a = payTurn(first, sessionId, 'pay-1', pays);
    await sleep(LEASE_MS + 200);
    const b = payTurn(second, sessionId, 'pay-2', pays);
    await Promise.all([a, b]);
    expect(pays).toEqual(['pay-1']);
    const state = await first.getStateManager().getState(sessionId);
    expect(state).toMatchObject({ recentlyUsedTools: ['pay'], activeStep: 'Done' });
  }, 20_000);

  it("keeps every turn's calls renewed while the manager's other turns end, and again for later turns", async () => {
    // One manager's turns share its renewals: a turn that ends must not stop another's.
    const [shared, other] = managers() as [OrchestrationManager, OrchestrationManager];
    const stamp = Date.now();
    const pays: string[] = [];
    const a = payTurn(shared, `slow-shared-a-${kind}-${stamp}`, 'pay-a', pays);
    await sleep(2 * LEASE_MS);
    const sessionB = `slow-shared-b-${kind}-${stamp}`;
    const b = payTurn(shared, sessionB, 'pay-b', pays);
    // a ends at 3 leases; unrenewed since then, b's reservation would end at 4: try at 4.4.
    await sleep(2.4 * LEASE_MS);
    const c = payTurn(other, sessionB, 'pay-c', pays);
    await Promise.all([a, b, c]);
    expect(pays).toEqual(['pay-a', 'pay-b']);
    // Nothing held: the renewals stop. A later turn of the same manager is renewed again.
    await sleep(LEASE_MS);
    const sessionD = `slow-shared-d-${kind}-${stamp}`;
    const d = payTurn(shared, sessionD, 'pay-d', pays);
    await sleep(LEASE_MS + 200);
    const e = payTurn(other, sessionD, 'pay-e', pays);
    await Promise.all([d, e]);
    expect(pays).toEqual(['pay-a', 'pay-b', 'pay-d']);
  }, 30_000);

  it('reports a call whose reservation ended while it ran (a reset), and does not record it', async () => {
    const [first] = managers() as [OrchestrationManager];
    const sessionId = `slow-reset-${kind}-${Date.now()}`;
    const pays: string[] = [];
    const turn = payTurn(first, sessionId, 'pay-1', pays);
    await sleep(LEASE_MS);
    await first.resetState(sessionId);
    const { errors } = await turn;
    expect(pays).toEqual(['pay-1']);
    expect(errors).toEqual([expect.objectContaining({ code: 'lease-lost', toolCallId: 'pay-1', sessionId })]);
    expect((await first.getStateManager().getState(sessionId))?.recentlyUsedTools).toEqual([]);
  }, 20_000);
});
