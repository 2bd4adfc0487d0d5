/**
 * The inspector served by `baton mcp --http` opens an MCP session by its `Mcp-Session-Id`, like a
 * chat session: its step, its recent tools and its timeline (a person's decline included), in Chromium.
 */
import { join } from 'node:path';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  assertChromium,
  browserTestsRun,
  buildInspector,
  CHROMIUM,
  CHROMIUM_ARGS,
  collectErrors,
} from './helpers/browser.js';
import {
  FILESYSTEM_SERVER,
  type HttpGatewayProcess,
  ROOT,
  startHttpGateway,
  templateFile,
  textOf,
  workDir,
} from './helpers/mcp-gateway.js';

const runs = browserTestsRun('MCP inspector browser test');

describe.runIf(runs)('the inspector of baton mcp --http', () => {
  let gateway: HttpGatewayProcess;
  let browser: Browser;
  let dir: string;

  beforeAll(async () => {
    assertChromium();
    await buildInspector();
    dir = workDir();
    gateway = await startHttpGateway([
      join(ROOT, 'examples/mcp/careful-editor.json'),
      '--http',
      '0',
      '--',
      FILESYSTEM_SERVER,
      dir,
    ]);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await gateway?.stop();
  });

  it('resumes an MCP session by its id and shows where it stands', async () => {
    const client = await gateway.connect();
    await client.callTool({ name: 'list_directory', arguments: { path: dir } });
    const sessionId = (client.transport as StreamableHTTPClientTransport).sessionId!;

    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const errors = collectErrors(page);
    await page.goto(`${gateway.url}/`);
    await page.getByLabel('Resume session').fill(sessionId);
    await page.getByRole('button', { name: 'Resume', exact: true }).click();
    await expect.poll(() => page.getByTestId('session-id').textContent()).toBe(sessionId);
    await expect.poll(() => page.getByTestId('active-step').getAttribute('data-step')).toBe('Look');
    await expect.poll(() => page.getByTestId('recent-tools').first().textContent()).toContain('list_directory');
    expect(errors).toEqual([]);
    await page.close();
    await client.close();
  }, 60_000);

  it("shows a person's decline through elicitation in the session's timeline, apart from refusals", async () => {
    const asking = templateFile({
      id: 'asking-lister',
      tools: ['list_directory'],
      orchestration: {
        steps: [{ name: 'Look', isDefault: true, availableTools: { allowed: ['list_directory'] } }],
        rules: [{ tools: ['list_directory'], effect: 'approve', reason: 'A person checks each listing' }],
      },
    });
    const approving = await startHttpGateway([asking, '--http', '0', '--', FILESYSTEM_SERVER, dir]);
    const client = await approving.connect({ client: { capabilities: { elicitation: {} } } });
    client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'decline' }));
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    try {
      const declined = await client.callTool({ name: 'list_directory', arguments: { path: dir } });
      expect(textOf(declined)).toMatch(/^Tool "list_directory" was not run: a person declined this call; do not ask/);
      const sessionId = (client.transport as StreamableHTTPClientTransport).sessionId!;

      const errors = collectErrors(page);
      await page.goto(`${approving.url}/`);
      await page.getByLabel('Resume session').fill(sessionId);
      await page.getByRole('button', { name: 'Resume', exact: true }).click();
      const entries = page.getByTestId('session-timeline').getByTestId('timeline-entry');
      const entry = (type: string) => entries.and(page.locator(`[data-type=${type}]`));
      await expect
        .poll(() => entry('approval-declined').textContent())
        .toMatch(/a person declined list_directory \(asked by rules\[0\]\)$/);
      expect(await entry('approval-declined').getAttribute('class')).toContain('event-decline');
      // The question before it, and the rule's own refusal of the unapproved call, each as what it is.
      expect(await entry('approval-requested').textContent()).toMatch(/asked a person to approve list_directory/);
      expect(await entry('tool-rejected').getAttribute('class')).toContain('event-refusal');
      expect(errors).toEqual([]);
    } finally {
      await page.close();
      await client.close();
      await approving.stop();
    }
  }, 60_000);
});
