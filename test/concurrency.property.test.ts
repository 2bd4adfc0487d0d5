/**
 * Concurrent turns on one session, with a model that calls anything: random valid configs,
 * 2-4 turns racing on one session, each making 1-5 tool calls of any tool (the agent's, others
 * and unknown ones) with call ids drawn from a small pool (so ids repeat, within and across
 * turns), tools that sometimes throw, and turns that bring different user messages.
 *
 * Every store update is logged with the version it wrote. Replaying the writes in version
 * order through the SPEC oracle (test/helpers/spec-oracle.ts) must show:
 * - every executed call was allowed at its reservation, in the serial order of the writes, and
 *   its id had never been used;
 * - every refusal for a SPEC reason (sequence, denied, not allowed, no such tool) is one the
 *   oracle makes too; a refusal as duplicate names an id already used;
 * - the final session equals the oracle's: every completed call is in the history, in order
 *   (nothing allowed is lost), with the same active step and sequence position.
 *
 * It runs on all four stores; on the durable ones, the turns alternate between two store
 * instances, as two processes would (separate caches and queues, racing compare-and-set).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { compileOrchestration } from '../src/core/compile.js';
import type { ChatMessage } from '../src/core/messages.js';
import type { OrchestrationConfig } from '../src/core/schema.js';
import type { ToolDecision, TransitionInput } from '../src/core/transition.js';
import {
  createOrchestrationManager,
  messageOf,
  type OrchestrationManager,
} from '../src/orchestration/orchestration-manager.js';
import { memoryStore } from '../src/stores/memory.js';
import { postgresStore } from '../src/stores/postgres.js';
import { redisStore } from '../src/stores/redis.js';
import { sqliteStore } from '../src/stores/sqlite.js';
import type { SessionStore } from '../src/stores/types.js';
import { messageTextArb, orchestrationConfigArb, TOOL_POOL, UNKNOWN_TOOLS } from '../src/testing/arbitraries.js';
import { deleteRedisKeys, pingPostgres, pingRedis, serviceAvailable } from './helpers/services.js';
import { Oracle } from './helpers/spec-oracle.js';

const REDIS_URL = 'redis://127.0.0.1:6379';
const POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';
const RUN = randomUUID().slice(0, 8);

interface CallScript {
  tool: string;
  id: string;
  fails: boolean;
  /** Event-loop turns to wait before requesting, and before finishing. */
  before: number;
  during: number;
}

interface TurnScript {
  /** Which conversation the turn brings (turns that share one bring the same message). */
  conversation: number;
  calls: CallScript[];
}

interface Case {
  config: OrchestrationConfig;
  agentTools: string[];
  texts: string[];
  turns: TurnScript[];
}

const caseArb: fc.Arbitrary<Case> = fc
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
      fails: fc.boolean().map((b) => b && Math.random() < 0.3),
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

/** One logged input and what the store answered. */
type Logged =
  | { kind: 'message'; conversation: number; version: number; changed: boolean }
  | { kind: 'request'; call: CallScript; decision: ToolDecision; version: number; changed: boolean }
  | { kind: 'finish'; call: CallScript; version: number; changed: boolean };

const yieldTurns = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
};

/** Conversation i: i filler messages, then the user's text, so each has its own position. */
function conversations(texts: readonly string[]): ChatMessage[][] {
  return texts.map((text, i) => [
    ...Array.from({ length: i }, (): ChatMessage => ({ role: 'assistant', content: 'ok' })),
    { role: 'user', content: text },
  ]);
}

async function runCase(c: Case, managers: readonly OrchestrationManager[]): Promise<void> {
  const plan = compileOrchestration(c.config);
  const sessionId = `prop-${randomUUID()}`;
  const convs = conversations(c.texts);
  const log: Logged[] = [];

  await Promise.all(
    c.turns.map(async (turn, t) => {
      const manager = managers[t % managers.length]!;
      const message = messageOf(convs[turn.conversation]);
      const apply = (inputs: TransitionInput[]) => manager.apply(plan, message, sessionId, inputs);
      const begun = await apply([{ type: 'user-message' }]);
      log.push({
        kind: 'message',
        conversation: turn.conversation,
        version: begun.state.version,
        changed: begun.changed,
      });
      for (const call of turn.calls) {
        await yieldTurns(call.before);
        const requested = await apply([
          { type: 'tool-requested', tool: call.tool, toolCallId: call.id, agentTools: c.agentTools },
        ]);
        const decision = requested.decisions[0] as ToolDecision;
        log.push({ kind: 'request', call, decision, version: requested.state.version, changed: requested.changed });
        if (!decision.allowed) continue;
        await yieldTurns(call.during);
        const finished = await apply([{ type: call.fails ? 'tool-failed' : 'tool-completed', toolCallId: call.id }]);
        log.push({ kind: 'finish', call, version: finished.state.version, changed: finished.changed });
      }
    }),
  );

  // The serial order: every write, by the version it produced (each write adds one).
  const writes = log.filter((entry) => entry.changed).sort((a, b) => a.version - b.version);
  expect(new Set(writes.map((w) => w.version)).size).toBe(writes.length);

  const executed = log.filter(
    (e): e is Extract<Logged, { kind: 'request' }> => e.kind === 'request' && e.decision.allowed,
  );
  const completed = new Set(executed.filter((e) => !e.call.fails).map((e) => e.call));
  const oracle = new Oracle(c.config, undefined);
  const seenIds = new Set<string>();
  let conversation: ChatMessage[] = [];
  for (const write of writes) {
    if (write.kind === 'message') {
      conversation = convs[write.conversation]!;
      oracle.observe(conversation, []);
    } else if (write.kind === 'request') {
      const { call, decision } = write;
      if (decision.allowed) {
        expect(seenIds.has(call.id), `call id ${call.id} ran twice`).toBe(false);
        expect(oracle.allowed(c.agentTools), `"${call.tool}" ran where a serial run forbids it`).toContain(call.tool);
        if (completed.has(call)) oracle.record(call.tool, conversation, []);
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

  const final = await managers[0]!.getStateManager().getState(sessionId);
  expect(final?.pending).toBeUndefined();
  expect(final?.recentlyUsedTools).toEqual(oracle.history);
  expect(final?.sequenceIndex).toBe(oracle.index);
  expect(final?.activeStep).toBe(oracle.active);
}

const property = (managers: () => readonly OrchestrationManager[], numRuns: number) =>
  fc.assert(
    fc.asyncProperty(caseArb, (c) => runCase(c, managers())),
    { numRuns },
  );

describe('concurrent turns on one session: executions equal a serial run of reservations', () => {
  it('memory store', async () => {
    const manager = createOrchestrationManager({ store: memoryStore() });
    await property(() => [manager], 300);
    await manager.close();
  }, 120_000);

  describe('sqlite store (two instances on one file)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'baton-concurrency-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    it('holds', async () => {
      const path = join(dir, 'sessions.db');
      const stores: SessionStore[] = [sqliteStore({ path }), sqliteStore({ path })];
      const managers = stores.map((store) => createOrchestrationManager({ store }));
      await property(() => managers, 60);
      for (const store of stores) await store.close();
    }, 180_000);
  });

  describe('redis store (two instances)', async () => {
    const skip = await serviceAvailable('redis', () => pingRedis(REDIS_URL));
    const prefix = `baton-test:concurrency:${RUN}:`;
    afterAll(async () => {
      if (!skip) await deleteRedisKeys(REDIS_URL, prefix);
    });
    it.skipIf(skip)(
      'holds',
      async () => {
        const stores: SessionStore[] = [redisStore({ url: REDIS_URL, prefix }), redisStore({ url: REDIS_URL, prefix })];
        const managers = stores.map((store) => createOrchestrationManager({ store }));
        await property(() => managers, 40);
        for (const store of stores) await store.close();
      },
      180_000,
    );
  });

  describe('postgres store (two instances)', async () => {
    const skip = await serviceAvailable('postgres', () => pingPostgres(POSTGRES_URL));
    const table = `baton_concurrency_${RUN}`;
    afterAll(async () => {
      if (skip) return;
      const client = new pg.Client({ connectionString: POSTGRES_URL });
      await client.connect();
      await client.query(`DROP TABLE IF EXISTS "${table}"`);
      await client.end();
    });
    it.skipIf(skip)(
      'holds',
      async () => {
        const stores: SessionStore[] = [
          postgresStore({ connectionString: POSTGRES_URL, table }),
          postgresStore({ connectionString: POSTGRES_URL, table }),
        ];
        const managers = stores.map((store) => createOrchestrationManager({ store }));
        await property(() => managers, 25);
        for (const store of stores) await store.close();
      },
      180_000,
    );
  });
});
