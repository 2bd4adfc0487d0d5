/**
 * `baton serve` as a process around the app: what it prints, what it refuses to start with,
 * and that it stops when asked.
 */
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { type ServeOptions, startServer } from './serve.js';

const scratch = mkdtempSync(join(tmpdir(), 'baton-serve-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function capture() {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (chunk: Buffer) => {
    text += chunk.toString('utf8');
  });
  return { stream, text: () => text };
}

function options(overrides: Partial<ServeOptions> = {}) {
  const stdout = capture();
  const stderr = capture();
  const abort = new AbortController();
  const opts: ServeOptions = {
    agentsPath: 'examples/agents',
    port: 0,
    host: '127.0.0.1',
    store: 'memory:',
    model: undefined,
    stateless: false,
    corsOrigins: [],
    offlineDelayMs: 0,
    logLevel: 'silent',
    env: {},
    stdout: stdout.stream,
    stderr: stderr.stream,
    signal: abort.signal,
    ...overrides,
  };
  return { opts, stdout, stderr, abort };
}

describe('baton serve', () => {
  it('prints its URL and each agent with the model it got, serves, and stops on abort', async () => {
    const { opts, stdout, abort } = options();
    const running = await startServer(opts);
    const out = stdout.text();
    expect(out.split('\n')[0]).toBe(`Baton listening on ${running.url}`);
    // No API keys in this environment: every template's model falls back, and it says so.
    expect(out).toMatch(/cognitive-reasoner\s+offline\s+\(the template's model anthropic:/);
    expect(out).toContain('ANTHROPIC_API_KEY is not set');
    const agents = (await (await fetch(`${running.url}/api/agents`)).json()) as { agents: { id: string }[] };
    expect(agents.agents.map((a) => a.id)).toEqual(['cognitive-reasoner', 'research-assistant', 'study-buddy']);
    abort.abort();
    await running.closed;
    await expect(fetch(`${running.url}/healthz`)).rejects.toThrow();
  });

  it('refuses to start when a template is broken, listing every problem of every file', async () => {
    const dir = join(scratch, 'broken');
    mkdirSync(dir);
    writeFileSync(
      join(dir, 'a.json'),
      '{ "id": "a", "tools": ["x"], "orchestration": { "steps": [{ "name": "s", "sequnce": [] }] } }',
    );
    writeFileSync(join(dir, 'b.json'), '{ "id": "b", ');
    await expect(startServer(options({ agentsPath: dir }).opts)).rejects.toThrow(
      /a\.json:1:\d+: error: [\s\S]*sequnce[\s\S]*did you mean "sequence"[\s\S]*b\.json:1:\d+: error/,
    );
  });

  it('says what is wrong with a missing folder, an empty one, duplicate ids, and stateless without keys', async () => {
    await expect(startServer(options({ agentsPath: join(scratch, 'nope') }).opts)).rejects.toThrow(
      /no such file or folder/,
    );
    const empty = join(scratch, 'empty');
    mkdirSync(empty, { recursive: true });
    await expect(startServer(options({ agentsPath: empty }).opts)).rejects.toThrow(/no agent templates/);
    const twins = join(scratch, 'twins');
    mkdirSync(twins, { recursive: true });
    copyFileSync('examples/agents/study-buddy.json', join(twins, 'one.json'));
    copyFileSync('examples/agents/study-buddy.json', join(twins, 'two.json'));
    await expect(startServer(options({ agentsPath: twins }).opts)).rejects.toThrow(/two templates have the id/);
    await expect(startServer(options({ stateless: true }).opts)).rejects.toThrow(/BATON_STATE_KEYS/);
    await expect(startServer(options({ stateless: true, env: { BATON_STATE_KEYS: 'short' } }).opts)).rejects.toThrow(
      /BATON_STATE_KEYS: .*32/,
    );
    await expect(
      startServer(options({ env: { BATON_APPROVAL_KEYS: `${'k'.repeat(32)},short` } }).opts),
    ).rejects.toThrow(/BATON_APPROVAL_KEYS\[1\]: the key is 5 bytes long; use at least 32/);
  });

  it('refuses a headers timeout longer than the request timeout, naming both flags', async () => {
    await expect(startServer(options({ headersTimeoutMs: 5_000, requestTimeoutMs: 1_000 }).opts)).rejects.toThrow(
      '--headers-timeout (5000 ms) must not exceed --request-timeout (1000 ms)',
    );
    // 0 is no request timeout at all, so any headers timeout fits.
    const { opts, abort } = options({ headersTimeoutMs: 5_000, requestTimeoutMs: 0 });
    const running = await startServer(opts);
    expect((await fetch(`${running.url}/healthz`)).status).toBe(200);
    abort.abort();
    await running.closed;
  });

  it('says when the port is taken, and when the store cannot be opened', async () => {
    const first = options();
    const running = await startServer(first.opts);
    const port = Number(new URL(running.url).port);
    await expect(startServer(options({ port }).opts)).rejects.toThrow(/port \d+ on 127\.0\.0\.1 is in use/);
    first.abort.abort();
    await running.closed;
    await expect(startServer(options({ store: 'mysql://x' }).opts)).rejects.toThrow(/cannot open the store/);
  });

  it('serves statelessly with BATON_STATE_KEYS', async () => {
    const { opts, stdout, abort } = options({ stateless: true, env: { BATON_STATE_KEYS: 'k'.repeat(32) } });
    const running = await startServer(opts);
    expect(stdout.text()).toContain('Store: none (stateless');
    const health = (await (await fetch(`${running.url}/healthz`)).json()) as { store: string };
    expect(health.store).toBe('stateless');
    abort.abort();
    await running.closed;
  });
});
