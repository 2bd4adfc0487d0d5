/**
 * An upstream that crashes, hangs or answers garbage, and a client that cancels or disconnects
 * mid-call: the client gets a clear error within a bound, the reservation is released, and the
 * gateway keeps serving. A call whose answer never came (cancelled, timed out, upstream gone) may
 * have run: limit rules count it; one the upstream answered with garbage did not, and is not. The upstream is a small SDK server (test/fixtures/mcp-faulty-upstream.ts)
 * that writes every call it starts to a file: what reached it is counted there.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { connectStdio, ROOT, type StdioGateway, templateFile, textOf, workDir } from './helpers/mcp-gateway.js';

const FAULTY = ['--', process.execPath, '--import', 'tsx', join(ROOT, 'test/fixtures/mcp-faulty-upstream.ts')];
/**
 * One call may run per session: a call whose reservation was not released makes the next one
 * wait (`pending`), and a call that counted refuses it with the limit's reason.
 */
const ONE_CALL = templateFile({
  id: 'faulty',
  tools: ['ok', 'crash', 'hang', 'garbage', 'slow'],
  orchestration: {
    steps: [],
    rules: [{ tools: ['*'], limit: { max: 1, per: 'session' }, reason: 'One call per session' }],
  },
});

describe('a faulty upstream', () => {
  const gateways: StdioGateway[] = [];
  afterEach(async () => {
    await Promise.all(gateways.map((gateway) => gateway.close()));
    gateways.length = 0;
  });

  const start = async (timeoutMs: number, extra: readonly string[] = [], calls = join(workDir(), 'calls.txt')) => {
    const gateway = await connectStdio([ONE_CALL, '--call-timeout', String(timeoutMs), ...extra, ...FAULTY], {
      env: { CALLS_FILE: calls },
    });
    gateways.push(gateway);
    return {
      client: gateway.client,
      gateway,
      calls: () => (existsSync(calls) ? readFileSync(calls, 'utf8').split('\n').filter(Boolean) : []),
    };
  };

  it('that answers garbage or hangs: a clear error within the bound; only the hung call counts', async () => {
    const { client, calls } = await start(1_000);
    const garbage = await client.callTool({ name: 'garbage', arguments: {} });
    expect(garbage.isError).toBe(true);
    expect(textOf(garbage)).toMatch(/^Tool "garbage" failed at the upstream MCP server: /);
    // The garbage answer was released and not counted: the session's one call is still free.
    const began = Date.now();
    const hung = await client.callTool({ name: 'hang', arguments: {} });
    expect(Date.now() - began).toBeLessThan(5_000);
    expect(hung.isError).toBe(true);
    expect(textOf(hung)).toMatch(/^Tool "hang" failed at the upstream MCP server: .*timed out/i);
    // The hung call was released (the next one is decided, not kept waiting), but it may have
    // run: the limit counted it.
    expect(textOf(await client.callTool({ name: 'ok', arguments: {} }))).toContain('One call per session');
    expect(calls()).toEqual(['garbage', 'hang']);
  }, 60_000);

  it('that crashes: a clear error, and the gateway keeps answering', async () => {
    const { client, calls } = await start(5_000);
    const crashed = await client.callTool({ name: 'crash', arguments: {} });
    expect(crashed.isError).toBe(true);
    expect(textOf(crashed)).toMatch(/^Tool "crash" failed at the upstream MCP server: /);
    await client.ping();
    // The call that crashed the upstream may have run before it died: the limit counted it, so
    // nothing is offered any more, and a call is refused with the limit's reason.
    expect((await client.listTools()).tools).toEqual([]);
    const after = await client.callTool({ name: 'ok', arguments: {} });
    expect(after.isError).toBe(true);
    expect(textOf(after)).toContain('One call per session');
    expect(calls()).toEqual(['crash']);
  }, 60_000);

  it('passes progress through, and a cancelled call releases its reservation but counts', async () => {
    const { client, calls } = await start(10_000);
    const progress: number[] = [];
    const done = await client.callTool({ name: 'slow', arguments: { ms: 400 } }, undefined, {
      onprogress: (p) => progress.push(p.progress),
    });
    expect(textOf(done)).toBe('slow done');
    // The SDK's client may drop the one that arrives with the result (see mcp-everything.test.ts).
    expect(progress.length).toBeGreaterThanOrEqual(3);
    expect(progress).toEqual([1, 2, 3, 4].slice(0, progress.length));
    // The session's one call is spent: a second one is refused.
    expect(textOf(await client.callTool({ name: 'ok', arguments: {} }))).toContain('One call per session');

    const fresh = await start(10_000);
    const abort = new AbortController();
    const cancelled = fresh.client.callTool({ name: 'slow', arguments: { ms: 4_000 } }, undefined, {
      signal: abort.signal,
    });
    await expect.poll(() => fresh.calls()).toEqual(['slow']);
    abort.abort('changed my mind');
    await expect(cancelled).rejects.toThrow();
    // Released (the next call is decided, not kept waiting behind it), and counted: the upstream
    // may finish a call it was told to cancel, so cancelling each call once sent cannot get a
    // client past a limit.
    await expect
      .poll(async () => textOf(await fresh.client.callTool({ name: 'ok', arguments: {} })), { timeout: 5_000 })
      .toContain('One call per session');
    expect(fresh.calls()).toEqual(['slow']);
    expect(calls()).toEqual(['slow']);
  }, 60_000);

  it('a client that disconnects mid-call: its reservation is released at once, not after the lease, and counts', async () => {
    const dir = workDir();
    const calls = join(dir, 'calls.txt');
    const shared = ['--store', `sqlite:${join(dir, 'state.db')}`, '--session', 'left-mid-call', '--lease', '60000'];
    const first = await start(30_000, shared, calls);
    const running = first.client.callTool({ name: 'slow', arguments: { ms: 20_000 } }).catch(() => undefined);
    await expect.poll(() => first.calls()).toEqual(['slow']);
    await first.gateway.transport.close(); // the client goes away: the gateway's stdin ends
    await running;
    const second = await start(30_000, shared, calls);
    // Released: refused by the limit, well within the 60 s lease, not kept waiting behind it.
    await expect
      .poll(async () => textOf(await second.client.callTool({ name: 'ok', arguments: {} })), { timeout: 10_000 })
      .toContain('One call per session');
    expect(second.calls()).toEqual(['slow']);
  }, 60_000);

  it('a call slower than its lease keeps its place: the lease is renewed while the upstream works', async () => {
    const { client, calls } = await start(30_000, ['--lease', '400']);
    const slow = client.callTool({ name: 'slow', arguments: { ms: 2_000 } });
    await expect.poll(() => calls()).toEqual(['slow']);
    await new Promise((resolve) => setTimeout(resolve, 1_000)); // 2.5 leases into the call
    // The running call still holds the session's one call: another is refused, and never sent.
    expect(textOf(await client.callTool({ name: 'ok', arguments: {} }))).toContain('was not run');
    expect(textOf(await slow)).toBe('slow done');
    expect(textOf(await client.callTool({ name: 'ok', arguments: {} }))).toContain('One call per session');
    expect(calls()).toEqual(['slow']);
  }, 60_000);
});
