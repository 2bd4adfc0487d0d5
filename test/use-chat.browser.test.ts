/**
 * An app's own chat page (`useChat` with the default transport, test/fixtures/use-chat-page,
 * built with Vite) against `baton serve`, in Chromium, as a developer builds one: the page on its
 * own origin, the server allowing it with `--cors`. The chat id is the session: a second message
 * continues it (the research assistant's fact-check step needs the first answer's search), and so
 * does a message after a reload that keeps the chat id.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { extname, join, normalize } from 'node:path';
import react from '@vitejs/plugin-react';
import { type Browser, chromium, type Page } from 'playwright-core';
import { build } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OrchestrationSnapshot } from '../src/ai-sdk/index.js';
import { assertChromium, browserTestsRun, CHROMIUM, CHROMIUM_ARGS, collectErrors } from './helpers/browser.js';
import { type ServeProcess, startServeProcess, stopServeProcess } from './helpers/serve-process.js';

const ROOT = new URL('..', import.meta.url).pathname;
const PAGE = join(ROOT, 'test/fixtures/use-chat-page');
const QUESTION = 'What is CRISPR and what has it been used for?';
const DOUBT = 'Are you sure? Please double-check that.';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
};

/** Serves the built page's files, as any static host would. */
function servePage(dir: string): Promise<Server> {
  const server = createServer((request, response) => {
    const path = normalize(new URL(request.url ?? '/', 'http://x').pathname).replace(/^(\.\.[/\\])+/, '');
    const file = join(dir, path === '/' ? 'index.html' : path);
    try {
      const body = readFileSync(file);
      response.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' });
      response.end(body);
    } catch {
      response.writeHead(404).end();
    }
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** Sends a message and waits for its answer's final orchestration part. */
async function ask(page: Page, text: string, answers: number): Promise<OrchestrationSnapshot> {
  await page.getByTestId('input').fill(text);
  await page.getByRole('button', { name: 'Send' }).click();
  await page.waitForFunction(
    (count) =>
      document.querySelectorAll('[data-role=assistant]').length === count &&
      document.querySelector('[data-testid=status]')?.textContent === 'ready' &&
      (document.querySelector('[data-testid=orchestration]')?.textContent ?? '').includes('"final":true'),
    answers,
    { timeout: 20_000 },
  );
  return JSON.parse((await page.getByTestId('orchestration').textContent()) ?? '') as OrchestrationSnapshot;
}

describe.skipIf(!browserTestsRun('useChat page browser tests'))('a useChat page against baton serve', () => {
  let out = '';
  let pageServer: Server;
  let server: ServeProcess;
  let browser: Browser;
  let pageUrl = '';

  beforeAll(async () => {
    assertChromium();
    out = mkdtempSync(join(tmpdir(), 'baton-use-chat-page-'));
    await build({
      configFile: false,
      root: PAGE,
      base: './',
      logLevel: 'warn',
      plugins: [react()],
      build: { outDir: out, emptyOutDir: true, chunkSizeWarningLimit: 2048 },
    });
    pageServer = await servePage(out);
    const origin = `http://127.0.0.1:${(pageServer.address() as AddressInfo).port}`;
    server = await startServeProcess([
      'examples/agents',
      '--model',
      'offline',
      '--store',
      'memory:',
      '--port',
      '0',
      '--cors',
      origin,
    ]);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    pageUrl = `${origin}/?api=${encodeURIComponent(server.url)}`;
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    if (server) await stopServeProcess(server);
    await new Promise((resolve) => (pageServer ? pageServer.close(resolve) : resolve(undefined)));
    if (out) rmSync(out, { recursive: true, force: true });
  });

  it('continues one session across messages and across a reload, with no Baton-specific code in the page', async () => {
    const page = await browser.newPage();
    const errors = collectErrors(page);
    await page.goto(pageUrl);
    const chatId = new URL(page.url()).searchParams.get('chat');
    expect(chatId).toMatch(/^[A-Za-z0-9]{16}$/); // useChat's own kind of id

    const first = await ask(page, QUESTION, 1);
    expect(first.sessionId).toBe(chatId);
    expect(first.activeStep).toBe('Research');
    expect(first.recentlyUsedTools).toContain('search');

    // The fact-check step needs a search earlier in the session: it is chosen only because the
    // second message continues the first one's session.
    const second = await ask(page, DOUBT, 2);
    expect(second.sessionId).toBe(chatId);
    expect(second.activeStep).toBe('FactCheck');
    expect(second.recentlyUsedTools.slice(0, first.recentlyUsedTools.length)).toEqual(first.recentlyUsedTools);
    expect(second.tokenUsage.totalTokens).toBeGreaterThan(first.tokenUsage.totalTokens);

    // A reload keeps the chat id (in the URL) but not the transcript: the session goes on.
    await page.reload();
    expect(new URL(page.url()).searchParams.get('chat')).toBe(chatId);
    expect(await page.getByTestId('message').count()).toBe(0);
    const third = await ask(page, DOUBT, 1);
    expect(third.sessionId).toBe(chatId);
    expect(third.activeStep).toBe('FactCheck');
    expect(third.recentlyUsedTools.slice(0, second.recentlyUsedTools.length)).toEqual(second.recentlyUsedTools);
    expect(third.tokenUsage.totalTokens).toBeGreaterThan(second.tokenUsage.totalTokens);

    const session = (await (await fetch(`${server.url}/api/sessions/${chatId}`)).json()) as {
      state: OrchestrationSnapshot;
    };
    expect(session.state.tokenUsage).toEqual(third.tokenUsage);
    expect(errors).toEqual([]);
    await page.close();
  });
});
