/**
 * Raw round trips to the Redis and PostgreSQL servers the store benchmarks use, without Baton:
 * what one round trip costs on this machine, to read the store figures of bench/ai-sdk.ts
 * against. `npx tsx bench/rtt.ts`. A benchmark, never part of `npm test`.
 *
 * Back to back, a round trip is the cheapest it gets. Inside a model turn the process works for
 * a few hundred µs between two store calls, and the server sits idle meanwhile; on a virtual
 * machine waking an idle server (and then the client) can cost more than the round trip itself.
 * So each round trip is also timed after the process kept its core busy for a while (the
 * gaps, interleaved): what a store call inside a turn can at best cost on this machine.
 */
import { Redis } from 'ioredis';
import pg from 'pg';
import { median } from './core.js';

const REDIS_URL = process.env.BATON_BENCH_REDIS ?? 'redis://127.0.0.1:6379';
const POSTGRES_URL = process.env.BATON_BENCH_POSTGRES ?? 'postgres://postgres@127.0.0.1:5432/test';
/** About the size of a research session's stored state. */
const VALUE = 'y'.repeat(800);

/** Median µs of `count` sequential calls of `call`, after `warmup` unmeasured ones. */
async function time(count: number, warmup: number, call: () => Promise<unknown>): Promise<number> {
  const micros: number[] = [];
  for (let i = 0; i < warmup + count; i++) {
    const t0 = performance.now();
    await call();
    if (i >= warmup) micros.push((performance.now() - t0) * 1000);
  }
  return median(micros);
}

/** Keeps this thread busy for `micros` µs, as a model step's work between two store calls does. */
function spin(micros: number): void {
  const end = performance.now() + micros / 1000;
  while (performance.now() < end);
}

/** Busy gaps before a round trip, in µs: none (back to back) up to a model step's work. */
const GAPS = [0, 200, 400, 800] as const;

/** Median µs of `call` after each gap, the gaps interleaved so drift hits all alike. */
async function timeAfterGaps(rounds: number, call: () => Promise<unknown>): Promise<string> {
  const micros = new Map<number, number[]>(GAPS.map((gap) => [gap, []]));
  for (let i = 0; i < rounds; i++) {
    for (const gap of GAPS) {
      spin(gap);
      const t0 = performance.now();
      await call();
      if (i >= rounds / 5) micros.get(gap)?.push((performance.now() - t0) * 1000);
    }
  }
  const medians = GAPS.map((gap) => median(micros.get(gap) ?? []).toFixed(0));
  return `${GAPS.join(' / ')} µs: ${medians.join(' / ')} µs`;
}

const redis = new Redis(REDIS_URL);
const key = `baton-bench:rtt:${process.pid}`;
console.log(`Redis PING: ${(await time(2_500, 500, () => redis.ping())).toFixed(0)} µs`);
console.log(`Redis SET of 800 bytes: ${(await time(2_500, 500, () => redis.set(key, VALUE))).toFixed(0)} µs`);
console.log(`Redis PING after the process worked for ${await timeAfterGaps(600, () => redis.ping())}`);
await redis.del(key);
await redis.quit();

const client = new pg.Client(POSTGRES_URL);
await client.connect();
const table = `baton_bench_rtt_${process.pid}`;
try {
  console.log(`PostgreSQL SELECT 1: ${(await time(1_700, 300, () => client.query('SELECT 1'))).toFixed(0)} µs`);
  await client.query(`CREATE TABLE ${table} (k text PRIMARY KEY, v text)`);
  const upsert = () =>
    client.query(`INSERT INTO ${table} VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v`, ['k', VALUE]);
  console.log(`PostgreSQL committed upsert of 800 bytes: ${(await time(800, 200, upsert)).toFixed(0)} µs`);
  console.log(
    `PostgreSQL SELECT 1 after the process worked for ${await timeAfterGaps(500, () => client.query('SELECT 1'))}`,
  );
  console.log(`PostgreSQL committed upsert after the process worked for ${await timeAfterGaps(300, upsert)}`);
} finally {
  await client.query(`DROP TABLE IF EXISTS ${table}`);
  await client.end();
}
