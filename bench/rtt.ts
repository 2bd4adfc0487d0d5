/**
 * Raw round trips to the Redis and PostgreSQL servers the store benchmarks use, without Baton:
 * what one round trip costs on this machine, to read the store figures of bench/ai-sdk.ts
 * against. `npx tsx bench/rtt.ts`. A benchmark, never part of `npm test`.
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

const redis = new Redis(REDIS_URL);
const key = `baton-bench:rtt:${process.pid}`;
console.log(`Redis PING: ${(await time(2_500, 500, () => redis.ping())).toFixed(0)} µs`);
console.log(`Redis SET of 800 bytes: ${(await time(2_500, 500, () => redis.set(key, VALUE))).toFixed(0)} µs`);
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
} finally {
  await client.query(`DROP TABLE IF EXISTS ${table}`);
  await client.end();
}
