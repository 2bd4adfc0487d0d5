/**
 * An upstream that re-declares what its tools are mid-session (test/fixtures/mcp-redeclaring-upstream.ts):
 * a session judges each tool by what it first declared, so a re-declaration cannot widen a
 * `@readOnly` template; one that narrows is taken; `--trust-annotation-changes` takes them all.
 * What reached the upstream is counted in the file the fixture writes.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { connectStdio, ROOT, type StdioGateway, templateFile, textOf, workDir } from './helpers/mcp-gateway.js';

const REDECLARING = [
  '--',
  process.execPath,
  '--import',
  'tsx',
  join(ROOT, 'test/fixtures/mcp-redeclaring-upstream.ts'),
];
const READ_ONLY = templateFile({ id: 'read-only', tools: ['@readOnly'], orchestration: { steps: [] } });

describe('an upstream that re-declares its tools’ annotations', () => {
  const gateways: StdioGateway[] = [];
  afterEach(async () => {
    await Promise.all(gateways.map((gateway) => gateway.close()));
    gateways.length = 0;
  });

  const start = async (template: string, flags: readonly string[] = []) => {
    const calls = join(workDir(), 'calls.txt');
    let changes = 0;
    const gateway = await connectStdio([template, ...flags, ...REDECLARING], {
      env: { CALLS_FILE: calls },
      onClient: (client) =>
        client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
          changes++;
        }),
    });
    gateways.push(gateway);
    const { client } = gateway;
    return {
      client,
      gateway,
      changes: () => changes,
      calls: () => (existsSync(calls) ? readFileSync(calls, 'utf8').split('\n').filter(Boolean) : []),
      listed: async () => (await client.listTools()).tools.map((tool) => tool.name),
      redeclare: async (tool: string, annotations: object) => {
        const result = await client.callTool({ name: 'redeclare', arguments: { tool, annotations } });
        expect(textOf(result)).toBe(`${tool} re-declared`);
      },
    };
  };

  const ignoredNotice =
    /session "mcp-[^"]+": upstream "[^"]*mcp-redeclaring-upstream\.ts" re-declared tool "peek" as \{"readOnlyHint":true\} after \{"readOnlyHint":false,"destructiveHint":true\}; ignored, as it would widen what tools lets the tool do/;

  it('cannot widen a @readOnly template: the writing tool stays hidden and never runs, and the operator hears of it once', async () => {
    const { client, gateway, listed, redeclare, calls, changes } = await start(READ_ONLY);
    expect(await listed()).toEqual(['redeclare', 'tidy']);
    await redeclare('peek', { readOnlyHint: true });
    // Then a change that narrows (taken, and announced): once the client hears of it, the
    // gateway has also read the upstream's list after the first re-declaration.
    await redeclare('tidy', { readOnlyHint: false });
    await expect.poll(() => changes()).toBe(1);
    expect(await listed()).toEqual(['redeclare']);
    const peek = await client.callTool({ name: 'peek', arguments: {} });
    expect(peek.isError).toBe(true);
    expect(textOf(peek)).toMatch(/^Tool "peek" was not run: /);
    const tidy = await client.callTool({ name: 'tidy', arguments: {} });
    expect(textOf(tidy)).toMatch(/^Tool "tidy" was not run: /);
    expect(gateway.stderr()).toMatch(ignoredNotice);
    // The same again; then tidy declared read-only once more, which would widen what it was
    // judged by since it narrowed: ignored too. Once that is said, peek's was read as well.
    await redeclare('peek', { readOnlyHint: true });
    await redeclare('tidy', { readOnlyHint: true });
    await expect
      .poll(() => gateway.stderr())
      .toMatch(/re-declared tool "tidy" as \{"readOnlyHint":true\} after \{"readOnlyHint":false\}/);
    expect(await listed()).toEqual(['redeclare']);
    expect(gateway.stderr().match(new RegExp(ignoredNotice, 'g'))).toHaveLength(1);
    expect(changes()).toBe(1);
    expect(calls()).toEqual(['redeclare', 'redeclare', 'redeclare', 'redeclare']);
  }, 60_000);

  it('cannot lift a rule: a tool first declared destructive stays under the rule on destructive tools', async () => {
    const template = templateFile({
      id: 'no-destruction',
      tools: ['*'],
      orchestration: {
        steps: [],
        rules: [{ tools: ['@destructive'], effect: 'approve', reason: 'A person approves destructive tools' }],
      },
    });
    const { client, gateway, redeclare, calls } = await start(template);
    await redeclare('peek', { readOnlyHint: true });
    // tidy is offered from the start; declared destructive it falls under the rule (taken,
    // since it narrows): once its annotations change in the list, peek's re-declaration was read.
    await redeclare('tidy', { readOnlyHint: false });
    await expect
      .poll(async () => (await client.listTools()).tools.find((tool) => tool.name === 'tidy')?.annotations)
      .toEqual({ readOnlyHint: false });
    // Offered (the template names every tool) with what it is judged by, and still needs a
    // person (this client cannot be asked, so the call is refused).
    const peek = (await client.listTools()).tools.find((tool) => tool.name === 'peek');
    expect(peek?.annotations).toEqual({ readOnlyHint: false, destructiveHint: true });
    const result = await client.callTool({ name: 'peek', arguments: {} });
    expect(textOf(result)).toContain('A person approves destructive tools');
    expect(gateway.stderr()).toMatch(/re-declared tool "peek".*orchestration\.rules\[0\]\.tools/);
    expect(calls()).toEqual(['redeclare', 'redeclare']);
  }, 60_000);

  it('takes every re-declaration with --trust-annotation-changes', async () => {
    const { client, gateway, listed, redeclare, changes } = await start(READ_ONLY, ['--trust-annotation-changes']);
    await redeclare('peek', { readOnlyHint: true });
    await expect.poll(() => changes()).toBe(1);
    expect(await listed()).toEqual(['redeclare', 'peek', 'tidy']);
    expect(textOf(await client.callTool({ name: 'peek', arguments: {} }))).toBe('peeked');
    expect(gateway.stderr()).not.toMatch(/re-declared/);
  }, 60_000);
});
