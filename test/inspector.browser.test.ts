/**
 * The inspector in a real browser (Debian's Chromium through playwright-core) against
 * `baton serve` started as a user starts it, with the offline model. Skipped loudly when
 * Chromium is missing, unless BATON_REQUIRE_SERVICES=1 (CI), where that is a failure.
 *
 * Screenshots go to .tmp/inspector/; with BATON_UPDATE_SCREENSHOTS=1 they also replace
 * docs/inspector.png and docs/inspector-mobile.png (not on every run: the session id on
 * them changes each time, which would leave the tree dirty).
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOfflineModel } from '../src/ai-sdk/offline-model.js';
import type { SessionResponse } from '../src/server/api-types.js';
import { createApp } from '../src/server/create-app.js';
import { loadTemplate } from '../src/templates/load-template.js';
import { startServeProcess, stopServeProcess } from './helpers/serve-process.js';
import { servicesRequired } from './helpers/services.js';

const ROOT = new URL('..', import.meta.url).pathname;
const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];
const QUESTION = 'How many electric vehicles will be on the road by 2030?';
const SHOTS = join(ROOT, '.tmp', 'inspector');
const UPDATE_DOCS = process.env.BATON_UPDATE_SCREENSHOTS === '1';

const hasChromium = existsSync(CHROMIUM);
if (!hasChromium && !servicesRequired()) {
  console.warn(
    `SKIPPING inspector browser tests: ${CHROMIUM} is missing (apt-get install chromium); set BATON_REQUIRE_SERVICES=1 to make this a failure`,
  );
}

/** Runs a command to completion; rejects with its output when it fails. */
function run(args: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, FORCE_COLOR: '0' } });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`${args.join(' ')} exited with ${code}:\n${output}`)),
    );
  });
}

/** Console errors and uncaught exceptions of a page, collected from the start. */
function collectErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(`console: ${message.text()}`);
  });
  page.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`));
  return errors;
}

/** Whether the page scrolls sideways (it should not, at any width). */
async function overflowsHorizontally(page: Page): Promise<boolean> {
  return page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
}

/** Saves a screenshot under .tmp/inspector, and to docs/ when asked to. */
async function screenshot(page: Page, name: string, fullPage = false): Promise<void> {
  const path = join(SHOTS, name);
  await page.screenshot({ path, fullPage });
  if (UPDATE_DOCS) copyFileSync(path, join(ROOT, 'docs', name));
}

describe.skipIf(!hasChromium && !servicesRequired())('inspector in Chromium', { timeout: 60_000 }, () => {
  let server: ChildProcessWithoutNullStreams | undefined;
  let url = '';
  let browser: Browser | undefined;

  beforeAll(async () => {
    if (!hasChromium) {
      throw new Error(`BATON_REQUIRE_SERVICES=1 but ${CHROMIUM} is missing: apt-get install -y chromium`);
    }
    mkdirSync(SHOTS, { recursive: true });
    // The page under test is the one `npm run build:web` produces, served from dist/web.
    await run([
      join(ROOT, 'node_modules/vite/bin/vite.js'),
      'build',
      '--config',
      'web/vite.config.ts',
      '--logLevel',
      'warn',
    ]);
    // A small delay per streamed chunk, so the page renders each model step as a user sees it.
    ({ child: server, url } = await startServeProcess([
      'examples/agents',
      '--model',
      'offline',
      '--store',
      'memory:',
      '--port',
      '0',
      '--offline-delay',
      '15',
    ]));
    // launch() gives the browser a fresh temporary profile of its own, removed on close.
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  });

  afterAll(async () => {
    await browser?.close();
    if (server) await stopServeProcess({ child: server });
  });

  async function open(context: BrowserContext, base: string): Promise<{ page: Page; errors: string[] }> {
    const page = await context.newPage();
    const errors = collectErrors(page);
    await page.goto(`${base}/`);
    return { page, errors };
  }

  it('chats with cognitive-reasoner and shows the orchestration as the answer streams', async () => {
    const context = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
    const { page, errors } = await open(context, url);

    const picker = page.getByTestId('agent-picker');
    await expect
      .poll(() => picker.locator('option').evaluateAll((options) => options.map((o) => (o as HTMLOptionElement).value)))
      .toContain('cognitive-reasoner');
    await picker.selectOption('cognitive-reasoner');
    await page.locator('[data-testid=graph-node][data-step=ResearchMode]').waitFor();

    // Record every configuration the sequence strip goes through (after each DOM change).
    await page.evaluate(() => {
      const seen: string[] = [];
      (window as unknown as { stripStates: string[] }).stripStates = seen;
      const record = () => {
        const positions = Array.from(document.querySelectorAll('[data-testid=sequence-position]'));
        if (positions.length === 0) return;
        const state = positions.map((p) => `${p.getAttribute('data-tool')}:${p.getAttribute('data-state')}`).join(',');
        if (seen.at(-1) !== state) seen.push(state);
      };
      new MutationObserver(record).observe(document.body, {
        subtree: true,
        childList: true,
        attributes: true,
        attributeFilter: ['data-state'],
      });
    });

    // Keyboard only: Tab reaches the message box, then the send button; Enter sends.
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    let reached = false;
    for (let i = 0; i < 40 && !reached; i++) {
      await page.keyboard.press('Tab');
      reached = await page.evaluate(() => document.activeElement?.getAttribute('data-testid') === 'message-input');
    }
    expect(reached, 'Tab reaches the message box').toBe(true);
    await page.keyboard.type(QUESTION);
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.getAttribute('data-testid'))).toBe('send');
    await page.keyboard.press('Shift+Tab');
    await page.keyboard.press('Enter');

    // The answer streams in; the turn is over when the final snapshot closes the timeline.
    await page.getByTestId('message-user').filter({ hasText: QUESTION }).waitFor();
    await page.getByTestId('turn-timeline').getByText('End of turn').waitFor();
    await page.getByTestId('send').waitFor();
    await expect
      .poll(() => page.getByTestId('message-assistant').getByTestId('message-text').count())
      .toBeGreaterThan(0);
    const answer = await page.getByTestId('message-assistant').getByTestId('message-text').last().textContent();
    expect(answer).toContain('I worked through this with search, then think, then reflect.');

    // The graph highlights the step the API reports for the session the page shows.
    const sessionId = (await page.getByTestId('session-id').textContent())?.trim() ?? '';
    expect(sessionId).not.toBe('');
    const response = await fetch(`${url}/api/sessions/${encodeURIComponent(sessionId)}`);
    expect(response.status).toBe(200);
    const session = (await response.json()) as SessionResponse;
    expect(session.state.activeStep).toBe('ResearchMode');
    const active = page.locator('[data-testid=graph-node][data-active=true]');
    await expect.poll(() => active.count()).toBe(1);
    expect(await active.getAttribute('data-step')).toBe(session.state.activeStep);
    expect(await active.getAttribute('aria-current')).toBe('step');

    // The strip advanced while the answer streamed: every configuration it showed is one of
    // these, in this order, and it ended with all three done. (A loaded machine may render two
    // snapshots at once, so not every configuration is necessarily seen.)
    const strip = await page.evaluate(() => (window as unknown as { stripStates: string[] }).stripStates);
    const progression = [
      'search:current,think:todo,reflect:todo',
      'search:done,think:current,reflect:todo',
      'search:done,think:done,reflect:current',
      'search:done,think:done,reflect:done',
    ];
    const positions = strip.map((state) => progression.indexOf(state));
    expect(positions, JSON.stringify(strip)).not.toContain(-1);
    expect(positions, JSON.stringify(strip)).toEqual([...positions].sort((a, b) => a - b));
    expect(strip.length, JSON.stringify(strip)).toBeGreaterThanOrEqual(2);
    expect(strip.at(-1)).toBe(progression[3]);
    // Each model step, as the stream reported it: search, then think, then reflect offered alone.
    expect(await page.getByTestId('turn-timeline').textContent()).toMatch(
      /Model step 1ResearchModesequence 0\/3offered: search(?!,)[\s\S]*sequence 1\/3offered: think(?!,)[\s\S]*sequence 2\/3offered: reflect(?!,)[\s\S]*End of turn/,
    );
    expect(await page.getByTestId('sequence-summary').textContent()).toContain('complete (3 of 3)');

    // Every tool call is a card, done.
    for (const tool of ['search', 'think', 'reflect']) {
      expect(await page.locator(`[data-testid=tool-card][data-tool=${tool}]`).getAttribute('data-state')).toBe('done');
    }

    // The tool list matches the API: blocked tools with their reasons.
    const blocked = session.tools.filter((t) => !t.allowed);
    expect(blocked.map((t) => t.tool).sort()).toEqual(['brainstorm', 'compare', 'critique', 'debate']);
    for (const { tool, reason } of session.tools) {
      const row = page.locator(`[data-testid=tool-status][data-tool=${tool}]`);
      await expect.poll(() => row.getAttribute('data-allowed')).toBe(String(!reason));
      if (reason) expect(await row.getByTestId('tool-reason').textContent()).toContain(reason.message);
    }
    expect(await page.locator('[data-testid=tool-status][data-tool=compare]').textContent()).toContain(
      'allows only search, think, reflect',
    );
    expect(await page.getByTestId('token-total').textContent()).toBe(
      session.state.tokenUsage.totalTokens.toLocaleString('en-US'),
    );

    expect(await overflowsHorizontally(page)).toBe(false);
    await screenshot(page, 'inspector.png');

    await page.setViewportSize({ width: 390, height: 844 });
    await expect.poll(() => page.getByTestId('step-graph').getAttribute('data-compact')).toBe('true');
    expect(await overflowsHorizontally(page)).toBe(false);
    await screenshot(page, 'inspector-mobile.png', true);

    expect(errors).toEqual([]);
    await context.close();
  });

  it('resets, starts, resumes and deletes sessions, and shows the template with its issues', async () => {
    const context = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
    const { page, errors } = await open(context, url);
    await page.getByTestId('agent-picker').selectOption('cognitive-reasoner');
    await page.getByRole('button', { name: 'Critique the argument that remote work improves productivity' }).click();
    await page.getByTestId('turn-timeline').getByText('End of turn').waitFor();
    const sessionId = (await page.getByTestId('session-id').textContent())?.trim() ?? '';
    expect(await page.getByTestId('active-step').getAttribute('data-step')).toBe('EvaluationMode');

    await page.getByRole('button', { name: 'Reset' }).click();
    await expect.poll(() => page.getByTestId('recent-tools').count()).toBe(0);
    const reset = (await (await fetch(`${url}/api/sessions/${sessionId}`)).json()) as SessionResponse;
    expect(reset.state.recentlyUsedTools).toEqual([]);
    expect(await page.getByTestId('active-step').getAttribute('data-step')).toBe(reset.state.activeStep ?? '');

    await page.getByRole('button', { name: 'New session' }).click();
    await page.getByTestId('session-id-none').waitFor();
    expect(await page.getByTestId('message-user').count()).toBe(0);

    await page.getByLabel('Resume session').fill(sessionId);
    await page.getByRole('button', { name: 'Resume', exact: true }).click();
    await expect.poll(() => page.getByTestId('session-id').textContent()).toBe(sessionId);

    await page.getByRole('button', { name: 'Delete' }).click();
    await page.getByTestId('session-id-none').waitFor();
    expect((await fetch(`${url}/api/sessions/${sessionId}`)).status).toBe(404);

    await page.getByRole('button', { name: 'Template' }).click();
    await page.getByTestId('template-json').waitFor();
    expect(await page.getByTestId('template-json').textContent()).toContain('"ResearchMode"');
    expect(await page.getByTestId('template-no-issues').count()).toBe(1);
    await page.keyboard.press('Escape');
    await expect.poll(() => page.evaluate(() => document.querySelector('dialog')?.open)).toBe(false);

    expect(errors).toEqual([]);
    await context.close();
  });

  it('shows a tool call the model made against the orchestration as a rejected card', async () => {
    // baton serve has no misbehaving model, so this server runs in-process with createApp.
    const template = await loadTemplate(join(ROOT, 'examples/agents/cognitive-reasoner.json'));
    const app = createApp({ agents: [{ template }], model: createOfflineModel({ misbehave: true }) });
    const listening = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
    await new Promise<void>((resolve) => listening.once('listening', () => resolve()));
    const { port } = listening.address() as AddressInfo;
    try {
      const context = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
      const { page, errors } = await open(context, `http://127.0.0.1:${port}`);
      await page.getByTestId('message-input').fill(QUESTION);
      await page.getByTestId('message-input').press('Enter');
      const rejected = page.locator('[data-testid=tool-card][data-state=rejected]').first();
      await rejected.waitFor();
      // The guard's refusal, as the model got it: the tool was not offered; search was.
      expect(await rejected.textContent()).toMatch(
        /rejected by orchestration[\s\S]*Why it was not run[\s\S]*unavailable tool[\s\S]*Available tools: search\./,
      );
      await page.getByTestId('turn-timeline').getByText('End of turn').waitFor();
      expect(errors).toEqual([]);
      await context.close();
    } finally {
      await new Promise((resolve) => listening.close(resolve));
      await app.close();
    }
  });
});
