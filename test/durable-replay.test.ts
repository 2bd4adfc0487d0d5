/**
 * Replays under a real durable-execution engine: an orchestrated AI SDK turn runs as a DBOS
 * workflow (model calls and tool bodies are DBOS steps, Baton is told the workflow id as
 * `turnId`), on PostgreSQL, in a child process that is killed (SIGKILL) right after a tool ran.
 * A new process launches DBOS, which recovers the workflow and replays it: the recorded model
 * answers come back with the same call ids, and Baton must answer every hook as the original run
 * did. Compared with the same turn run without a crash: every tool body ran exactly once, the
 * model was offered the same tools and told the same outcome of every call, and the session's
 * state and event log are the same, with one entry per decision.
 *
 * Crash points: after the first tool of the first model step (its reservation still held by
 * the dead process), after the first tool of the second step (the first step's calls, refusal
 * and token usage already stored), through streamText after the second tool of the first, and
 * after the first tool with a recovery that comes once the dead run's reservation expired.
 *
 * The README's sample of this wiring (README.md, "Under a durable-execution engine") is the fixture's.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SessionLogEntry } from '../src/core/session-log.js';
import type { OrchestrationState } from '../src/core/state.js';
import { postgresStore } from '../src/stores/postgres.js';
import { checkedSampleLines } from './helpers/checked-sample.js';
import { pingPostgres, serviceAvailable } from './helpers/services.js';

const ROOT = new URL('..', import.meta.url).pathname;
const ADMIN_URL = 'postgres://postgres@127.0.0.1:5432/postgres';
const database = `baton_durable_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
const DATABASE_URL = `postgres://postgres@127.0.0.1:5432/${database}`;

const skip = await serviceAvailable('postgres', () => pingPostgres(ADMIN_URL));

interface Line {
  kind: 'offer' | 'ran' | 'result';
  step?: number;
  tools?: string[];
  id?: string;
  outcome?: Record<string, unknown>[];
}

/**
 * Runs the fixture; with `killAfter`, kills it (SIGKILL) once it printed that the call's body
 * ran. Resolves to the lines it printed.
 */
function runTurn(
  sessionId: string,
  mode: 'run' | 'recover',
  { killAfter, stream = false, leaseMs }: { killAfter?: string; stream?: boolean; leaseMs?: number } = {},
): Promise<Line[]> {
  const args = ['--import', 'tsx', 'test/fixtures/durable-turn.ts', DATABASE_URL, sessionId, mode];
  if (killAfter !== undefined) args.push(killAfter);
  const env = { ...process.env, DURABLE_STREAM: stream ? '1' : '0', DURABLE_LEASE_MS: leaseMs ? String(leaseMs) : '' };
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: Line[] = [];
  let errors = '';
  let buffered = '';
  return new Promise((resolve, reject) => {
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      buffered += chunk;
      let newline = buffered.indexOf('\n');
      while (newline >= 0) {
        const line = JSON.parse(buffered.slice(0, newline)) as Line;
        buffered = buffered.slice(newline + 1);
        lines.push(line);
        if (line.kind === 'ran' && line.id === killAfter) child.kill('SIGKILL');
        newline = buffered.indexOf('\n');
      }
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      errors += chunk;
    });
    child.once('exit', (code, signal) => {
      if (killAfter !== undefined ? signal === 'SIGKILL' : code === 0) resolve(lines);
      else reject(new Error(`the turn process ended (${code ?? signal}):\n${errors}`));
    });
  });
}

/** What the model was told of each call, without the AI SDK's random approval ids. */
function outcomeOf(lines: readonly Line[]): unknown[] {
  const result = lines.find((line) => line.kind === 'result');
  if (result?.outcome === undefined) throw new Error('the turn printed no result');
  return result.outcome.map(({ approvalId: _id, ...part }) => part);
}

const offersOf = (lines: readonly Line[]) => lines.filter((line) => line.kind === 'offer');

/** The session as stored, without what differs between two sessions by nature. */
async function sessionOf(sessionId: string) {
  const store = postgresStore({ connectionString: DATABASE_URL });
  try {
    const state = (await store.get(sessionId)) as OrchestrationState;
    const log = (await store.readLog?.(sessionId)) ?? [];
    const {
      sessionId: _id,
      createdAt: _created,
      lastAccessed: _accessed,
      version: _version,
      log: _counters,
      replay,
      ...rest
    } = state;
    return { state: rest, replay: { ...replay, turn: undefined }, log: log.map(entryOf) };
  } finally {
    await store.close?.();
  }
}

/** A log entry as a decision: what happened, to which call, and the session right after. */
function entryOf(entry: SessionLogEntry) {
  const event = entry.event as { type: string; toolCallId?: string; tools?: readonly string[] };
  return {
    type: event.type,
    call: event.toolCallId,
    tools: event.tools,
    history: entry.history,
    usage: entry.usage,
  };
}

async function effects(sessionId: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    const { rows } = await client.query<{ call_id: string }>(
      'SELECT call_id FROM effects WHERE session = $1 ORDER BY call_id',
      [sessionId],
    );
    return rows.map((row) => row.call_id);
  } finally {
    await client.end();
  }
}

describe.skipIf(skip)('an orchestrated turn as a DBOS workflow, killed and recovered', () => {
  let reference: { lines: Line[]; session: Awaited<ReturnType<typeof sessionOf>> };

  beforeAll(async () => {
    const admin = new pg.Client({ connectionString: ADMIN_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${database}`);
    await admin.end();
    // The same turn without a crash: what every recovered run must match.
    const lines = await runTurn('reference', 'run');
    reference = { lines, session: await sessionOf('reference') };
  }, 120_000);

  afterAll(async () => {
    const admin = new pg.Client({ connectionString: ADMIN_URL });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  });

  it('the turn without a crash: limits, a deny and an allow rule decided as the template says', () => {
    expect(offersOf(reference.lines)).toEqual([
      { kind: 'offer', step: 0, tools: ['search', 'pay'] },
      // Two searches per turn: spent, so no longer offered.
      { kind: 'offer', step: 1, tools: ['pay'] },
      { kind: 'offer', step: 2, tools: ['pay'] },
    ]);
    const outcome = outcomeOf(reference.lines) as { type: string; toolCallId?: string; reason?: string }[];
    expect(outcome.filter((part) => part.type === 'tool-result').map((part) => part.toolCallId)).toEqual([
      's1',
      's2',
      'p1',
    ]);
    const refusals = outcome.filter((part) => part.type === 'tool-approval-response').map((part) => part.reason);
    expect(refusals).toEqual([
      expect.stringContaining('Two searches per question (at most 2 per turn; 2 used)'),
      expect.stringContaining('Payments over 1000 are refused'),
    ]);
  });

  for (const [crashAfter, where, stream] of [
    ['s1', 'after the first tool of the first model step', false],
    ['p1', 'after the first tool of the second model step', false],
    ['s2', 'after the second tool of the first model step, streaming (streamText)', true],
  ] as const) {
    it(`killed ${where}: recovered, every tool ran once and every decision is the original's`, async () => {
      const sessionId = `crash-${crashAfter}${stream ? '-stream' : ''}`;
      const killed = await runTurn(sessionId, 'run', { killAfter: crashAfter, stream });
      expect(killed.at(-1)).toEqual({ kind: 'ran', id: crashAfter });
      // What the killed run was offered is what the reference was offered, step for step.
      expect(offersOf(reference.lines)).toEqual(expect.arrayContaining(offersOf(killed)));

      const recovered = await runTurn(sessionId, 'recover', { stream });
      // The replay saw what the original run saw, and finished as the reference did.
      expect(offersOf(recovered)).toEqual(offersOf(reference.lines));
      // (streamText lists a step's parts in the order they finished: compared as a set.)
      const keyOf = (part: unknown) => {
        const p = part as { type: string; toolCallId?: string; toolCall?: { toolCallId: string } };
        return `${p.toolCallId ?? p.toolCall?.toolCallId}:${p.type}`;
      };
      const inOrder = (parts: unknown[]) =>
        stream ? [...parts].sort((a, b) => keyOf(a).localeCompare(keyOf(b))) : parts;
      expect(inOrder(outcomeOf(recovered))).toEqual(inOrder(outcomeOf(reference.lines)));
      // Every tool body ran exactly once, across both processes.
      expect(await effects(sessionId)).toEqual(['p1', 's1', 's2']);

      const session = await sessionOf(sessionId);
      // The same state: history, limit counts, token usage (each model step counted once).
      expect(session.state).toEqual(reference.session.state);
      expect(session.replay).toEqual(reference.session.replay);
      // One log entry per decision, in the reference's order: nothing reported twice.
      expect(session.log).toEqual(reference.session.log);
    }, 120_000);
  }

  it("recovered after the dead run's reservation ended: the call is decided again, and still runs once", async () => {
    const sessionId = 'crash-after-the-lease';
    const leaseMs = 1_000;
    await runTurn(sessionId, 'run', { killAfter: 's1', leaseMs });
    await sleep(leaseMs + 300);
    const recovered = await runTurn(sessionId, 'recover', { leaseMs });
    expect(outcomeOf(recovered)).toEqual(outcomeOf(reference.lines));
    expect(await effects(sessionId)).toEqual(['p1', 's1', 's2']);
    const session = await sessionOf(sessionId);
    expect(session.state).toEqual(reference.session.state);
    expect(session.replay).toEqual(reference.session.replay);
    // The log has what happened: the dead run's reservation of s1 expired, and the replay
    // reserved s1 again; everything else once, as in the reference.
    const key = (entry: { type: string; call?: string | undefined }) => `${entry.type}:${entry.call ?? ''}`;
    const extra = session.log.map(key);
    for (const expected of reference.session.log.map(key)) {
      const at = extra.indexOf(expected);
      expect(at, expected).toBeGreaterThanOrEqual(0);
      extra.splice(at, 1);
    }
    expect(extra.sort()).toEqual(['tool-released:s1', 'tool-reserved:s1']);
  }, 120_000);

  it("the README's sample is the fixture's wiring", () => {
    const fixture = readFileSync(`${ROOT}test/fixtures/durable-turn.ts`, 'utf8');
    const code = checkedSampleLines('README.md', 'test/durable-replay.test.ts');
    expect(code.length).toBeGreaterThan(10);
    for (const line of code) expect(fixture, line).toContain(line);
  });
});
