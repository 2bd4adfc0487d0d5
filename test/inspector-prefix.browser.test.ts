/**
 * The inspector under a path prefix, in Chromium: mounted by another Hono app
 * (`app.route('/baton', batonApp)`, where requests keep the prefix) and behind a proxy that
 * strips it (as nginx's `location /proxied/ { proxy_pass http://baton/; }` does). Either way the
 * page loads its assets, lists the agents, chats, and manages its session through the prefixed
 * API. Skipped loudly without Chromium, a failure under BATON_REQUIRE_SERVICES=1.
 */
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOfflineModel } from '../src/ai-sdk/offline-model.js';
import { type BatonApp, createApp } from '../src/server/create-app.js';
import { loadTemplate } from '../src/templates/load-template.js';
import {
  assertChromium,
  browserTestsRun,
  buildInspector,
  CHROMIUM,
  CHROMIUM_ARGS,
  collectErrors,
} from './helpers/browser.js';

const ROOT = new URL('..', import.meta.url).pathname;
const QUESTION = 'How many electric vehicles will be on the road by 2030?';
const runs = browserTestsRun('inspector prefix browser tests');

describe.skipIf(!runs)('the inspector under a path prefix, in Chromium', { timeout: 60_000 }, () => {
  let browser: Browser | undefined;
  let baton: BatonApp | undefined;
  let close: (() => Promise<void>) | undefined;
  let origin = '';
  /** Paths that reached the server outside the prefixes: the page asked for something absolute. */
  const strays: string[] = [];

  beforeAll(async () => {
    assertChromium();
    await buildInspector();
    const agents = await Promise.all(
      ['cognitive-reasoner', 'study-buddy'].map((name) => loadTemplate(`${ROOT}examples/agents/${name}.json`)),
    );
    const app = createApp({ agents, model: createOfflineModel({ delayMs: 2 }), webRoot: `${ROOT}dist/web` });
    baton = app;
    const site = new Hono()
      .route('/baton', app)
      // A proxy that strips its prefix: Baton sees `/api/...`, the browser `/proxied/api/...`.
      .all('/proxied/*', (c) => {
        const url = new URL(c.req.url);
        url.pathname = url.pathname.slice('/proxied'.length);
        return app.fetch(new Request(url, c.req.raw));
      })
      .all('*', (c) => {
        strays.push(c.req.path);
        return c.text('not here', 404);
      });
    const listening = serve({ fetch: site.fetch, port: 0, hostname: '127.0.0.1' });
    await new Promise<void>((resolve) => listening.once('listening', () => resolve()));
    origin = `http://127.0.0.1:${(listening.address() as AddressInfo).port}`;
    close = () => new Promise<void>((resolve) => listening.close(() => resolve()));
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  });

  afterAll(async () => {
    await browser?.close();
    await close?.();
    await baton?.close();
  });

  /** Chats once on the page at `path`, then resets the session, all through the prefixed API. */
  async function chatAndReset(path: string, expectedUrl: string): Promise<void> {
    const context = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
    const page: Page = await context.newPage();
    const errors = collectErrors(page);
    await page.goto(`${origin}${path}`);
    expect(page.url()).toBe(`${origin}${expectedUrl}`);

    const picker = page.getByTestId('agent-picker');
    await expect
      .poll(() => picker.locator('option').evaluateAll((options) => options.map((o) => (o as HTMLOptionElement).value)))
      .toEqual(['cognitive-reasoner', 'study-buddy']);
    await page.locator('[data-testid=graph-node][data-step=ResearchMode]').waitFor();

    await page.getByRole('button', { name: QUESTION }).click();
    await page
      .getByTestId('message-assistant')
      .getByTestId('message-text')
      .filter({ hasText: 'I worked through this with search, then think, then reflect.' })
      .waitFor();
    await expect
      .poll(() => page.locator('[data-testid=graph-node][data-active=true]').getAttribute('data-step'))
      .toBe('ResearchMode');
    await expect.poll(() => page.getByTestId('timeline-entry').count(), { timeout: 10_000 }).toBeGreaterThan(3);
    expect(await page.getByTestId('active-step').getAttribute('data-step')).toBe('ResearchMode');

    await page.getByRole('button', { name: 'Reset' }).click();
    // The reset session starts over, in the default step.
    await expect
      .poll(() => page.getByTestId('active-step').getAttribute('data-step', { timeout: 5_000 }))
      .toBe('DefaultMode');

    expect(await page.getByTestId('error-notice').count()).toBe(0);
    expect(errors).toEqual([]);
    await context.close();
  }

  it('works mounted by another Hono app under /baton/ (and /baton redirects there)', async () => {
    await chatAndReset('/baton/', '/baton/');
    await chatAndReset('/baton', '/baton/');
    expect(strays).toEqual([]);
  });

  it('works behind a proxy that strips /proxied/', async () => {
    await chatAndReset('/proxied/', '/proxied/');
    expect(strays).toEqual([]);
  });
});
