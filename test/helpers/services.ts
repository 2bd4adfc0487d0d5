/**
 * Decides whether an integration test that needs a real service (Redis, PostgreSQL) runs.
 * Tests never mock these services: when one is unreachable the test is skipped loudly, or
 * fails when `BATON_REQUIRE_SERVICES=1` (CI, where a silent skip would hide a regression).
 */

/** True when the environment demands that every service-backed test actually runs. */
export function servicesRequired(): boolean {
  return process.env.BATON_REQUIRE_SERVICES === '1';
}

/**
 * Runs `check` (which should throw when the service is unusable) and resolves to `false` when
 * the service is available, or to a skip reason. Throws instead of skipping when
 * `BATON_REQUIRE_SERVICES=1`.
 */
export async function serviceAvailable(
  name: 'redis' | 'postgres',
  check: () => Promise<void>,
): Promise<string | false> {
  try {
    await check();
    return false;
  } catch (error) {
    const reason = `${name} is unreachable (${error instanceof Error ? error.message : String(error)})`;
    if (servicesRequired()) {
      throw new Error(`BATON_REQUIRE_SERVICES=1 but ${reason}`, { cause: error });
    }
    console.warn(`SKIPPING ${name} tests: ${reason}; set BATON_REQUIRE_SERVICES=1 to make this a failure`);
    return reason;
  }
}

/** Throws unless a Redis server answers PING at `url` within about a second. */
export async function pingRedis(url: string): Promise<void> {
  const { Redis } = await import('ioredis');
  const probe = new Redis(url, { lazyConnect: true, connectTimeout: 1_000, retryStrategy: () => null });
  probe.on('error', () => undefined);
  try {
    await probe.connect();
    await probe.ping();
  } finally {
    probe.disconnect();
  }
}

/** Throws unless a PostgreSQL server accepts a connection at `url` within two seconds. */
export async function pingPostgres(url: string): Promise<void> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  await client.connect();
  await client.end();
}

/** Deletes every Redis key under `prefix` (test data of one run), scanning rather than KEYS. */
export async function deleteRedisKeys(url: string, prefix: string): Promise<void> {
  const { Redis } = await import('ioredis');
  const admin = new Redis(url);
  try {
    const keys: string[] = [];
    for await (const batch of admin.scanStream({ match: `${prefix}*`, count: 500 })) keys.push(...(batch as string[]));
    if (keys.length > 0) await admin.del(...keys);
  } finally {
    admin.disconnect();
  }
}
