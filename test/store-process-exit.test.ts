/**
 * A script that uses a Redis or PostgreSQL store ends when its work is done, without calling
 * close(): the store's connections keep the process alive only while a command waits for its
 * reply. Each store runs in a child process that starts an update without awaiting it, later
 * reads the session back after the connection was idle, and never closes the store.
 */
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { deleteRedisKeys, pingPostgres, pingRedis, serviceAvailable } from './helpers/services.js';

const ROOT = new URL('..', import.meta.url).pathname;
const REDIS_URL = 'redis://127.0.0.1:6379';
const POSTGRES_URL = 'postgres://postgres@127.0.0.1:5432/test';
const RUN = randomUUID().replaceAll('-', '').slice(0, 10);
const DIR = join(ROOT, '.tmp', `store-exit-${RUN}`);
mkdirSync(DIR, { recursive: true });

const redisSkip = await serviceAvailable('redis', () => pingRedis(REDIS_URL));
const postgresSkip = await serviceAvailable('postgres', () => pingPostgres(POSTGRES_URL));
const REDIS_PREFIX = `baton-test:${RUN}:exit:`;
const TABLE = `baton_test_exit_${RUN}`;

afterAll(async () => {
  rmSync(DIR, { recursive: true, force: true });
  if (!redisSkip) await deleteRedisKeys(REDIS_URL, REDIS_PREFIX);
  if (!postgresSkip) {
    const admin = new pg.Client({ connectionString: POSTGRES_URL });
    await admin.connect();
    for (const suffix of ['_log', '_migrations', ''])
      await admin.query(`DROP TABLE IF EXISTS ${TABLE}${suffix} CASCADE`);
    await admin.end();
  }
});

/**
 * Runs a script that makes a store with `create` (an expression) and uses it without closing
 * it; resolves to what it printed and how long after its last result it exited.
 */
function runScript(name: string, imports: string, create: string) {
  const file = join(DIR, `${name}.mts`);
  writeFileSync(
    file,
    `${imports}
import { createState } from ${JSON.stringify(join(ROOT, 'src/core/state.ts'))};
const store = ${create};
let last = 0;
const done = (line) => { console.log(line); last = performance.now(); };
// Not awaited: the command in flight must keep the process alive until its reply.
store.update('s', () => createState('s', Date.now(), 60_000)).then((state) => done('stored ' + state.version));
// After the connection was idle (and let go of the process), it is used again.
setTimeout(() => void store.get('s').then((state) => done('read ' + state.version)), 500);
process.on('exit', () => console.log('exited ' + Math.round(performance.now() - last) + ' ms after the last result'));
`,
  );
  const child = spawnSync(process.execPath, ['--import', 'tsx', file], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { status: child.status, signal: child.signal, stdout: child.stdout, stderr: child.stderr };
}

function expectPromptExit(run: ReturnType<typeof runScript>) {
  expect(run.signal, `killed after 30 s: the store kept the process alive\n${run.stdout}${run.stderr}`).toBeNull();
  expect(run.status, run.stderr).toBe(0);
  const lines = run.stdout.trim().split('\n');
  expect(lines.slice(0, 2)).toEqual(['stored 1', 'read 1']);
  const waited = Number(/^exited (\d+) ms/.exec(lines[2] ?? '')?.[1]);
  expect(waited, lines[2]).toBeLessThan(1_000);
}

describe('a script that never closes its store', () => {
  it.skipIf(redisSkip)('ends when its work is done: Redis', () => {
    const imports = `import { redisStore } from ${JSON.stringify(join(ROOT, 'src/stores/redis.ts'))};`;
    expectPromptExit(
      runScript(
        'redis',
        imports,
        `redisStore({ url: ${JSON.stringify(REDIS_URL)}, prefix: ${JSON.stringify(REDIS_PREFIX)} })`,
      ),
    );
  });

  it.skipIf(postgresSkip)('ends when its work is done: PostgreSQL', () => {
    const imports = `import { postgresStore } from ${JSON.stringify(join(ROOT, 'src/stores/postgres.ts'))};`;
    expectPromptExit(
      runScript(
        'postgres',
        imports,
        `postgresStore({ connectionString: ${JSON.stringify(POSTGRES_URL)}, table: ${JSON.stringify(TABLE)} })`,
      ),
    );
  });
});
