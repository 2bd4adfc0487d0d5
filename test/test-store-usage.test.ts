/**
 * `testStore()` as a store author first writes it. The obvious `create: () => memoryStore()`
 * drops the options the suite passes (its fake clock, maxSessions) and is not shared between
 * instances; each test that fails because of that must say so and say what to pass, instead of
 * a bare assertion failure. Runs the suite in a vitest of its own, as the author would.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = new URL('..', import.meta.url).pathname;
const DIR = join(ROOT, '.tmp', `test-store-usage-${process.pid}`);
afterAll(() => rmSync(DIR, { recursive: true, force: true }));

interface JsonReport {
  numTotalTests: number;
  testResults: { assertionResults: { title: string; status: string; failureMessages: string[] }[] }[];
}

/** Runs `testStore(<call>)` in a vitest of its own; the titles and first lines of its failures. */
function runSuite(call: string): { total: number; failures: Map<string, string> } {
  mkdirSync(DIR, { recursive: true });
  writeFileSync(
    join(DIR, 'vitest.config.ts'),
    "import { defineConfig } from 'vitest/config';\nexport default defineConfig({ test: { include: ['*.test.ts'] } });\n",
  );
  writeFileSync(
    join(DIR, 'store.test.ts'),
    [
      "import { memoryStore } from '../../src/stores/memory.js';",
      "import { testStore } from '../../src/testing/test-store.js';",
      `testStore(${call});`,
    ].join('\n'),
  );
  const report = join(DIR, 'report.json');
  const child = spawnSync(
    process.execPath,
    [join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', '--reporter=json', `--outputFile=${report}`],
    { cwd: DIR, encoding: 'utf8', timeout: 120_000, env: { ...process.env, VITEST: undefined, NO_COLOR: '1' } },
  );
  const parsed = JSON.parse(readFileSync(report, 'utf8')) as JsonReport;
  if (parsed.numTotalTests === 0) throw new Error(`the suite did not run:\n${child.stdout}\n${child.stderr}`);
  const failures = new Map<string, string>();
  for (const result of parsed.testResults) {
    for (const test of result.assertionResults) {
      if (test.status === 'failed') failures.set(test.title, test.failureMessages[0]?.split('\n')[0] ?? '');
    }
  }
  return { total: parsed.numTotalTests, failures };
}

describe('testStore used the obvious way', () => {
  it('fails only where the dropped options matter, each failure saying what to pass', () => {
    const { total, failures } = runSuite("{ name: 'memory', create: () => memoryStore() }");
    expect(total).toBeGreaterThan(15);
    expect([...failures.keys()].sort()).toEqual(
      [
        'evicts the least recently used session beyond maxSessions',
        'expires a session after its sliding TTL, renewed by writes only',
        'expires and sweeps the log with its session',
        'never expires a session whose ttl is 0, and sweeps expired ones',
        'reads in one instance what another instance wrote',
      ].sort(),
    );
    for (const [title, message] of failures) {
      expect(message, title).toContain('`create: (options) => yourStore(options)`');
    }
    expect(failures.get('reads in one instance what another instance wrote')).toContain('pass shared: false');
    expect(failures.get('expires a session after its sliding TTL, renewed by writes only')).toContain("clock: 'real'");
  });

  it('passes as the README shows it', () => {
    const { failures } = runSuite("{ name: 'memory', create: (options) => memoryStore(options), shared: false }");
    expect([...failures.keys()]).toEqual([]);
  });
});
