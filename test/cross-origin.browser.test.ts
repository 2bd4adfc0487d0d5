/**
 * A page of another origin against a `baton serve` on the user's machine, in Chromium. The
 * server allows browsers of other origins only with `--cors` (README: "`--cors <origins>` allows
 * browsers on other origins"), so a site the user happens to visit must not change a session: not
 * with a CORS "simple" request, which the browser sends without asking first (a `POST` with a
 * `text/plain` body, or with none), nor with one the browser preflights (`DELETE`, JSON). Reads
 * stay the browser's business (no CORS headers, so the page never sees an answer). A page of an
 * origin given to `--cors` may do all of it. Skipped loudly without Chromium, a failure under
 * BATON_REQUIRE_SERVICES=1.
 */
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assertChromium, browserTestsRun, buildInspector, CHROMIUM, CHROMIUM_ARGS } from './helpers/browser.js';
import { type ServeProcess, startServeProcess, stopServeProcess } from './helpers/serve-process.js';

const ROOT = new URL('..', import.meta.url).pathname;
const AGENT = 'cognitive-reasoner';
const runs = browserTestsRun('cross-origin browser tests');

/** A user message as `useChat` sends it. */
function userMessage(text: string) {
  return { id: crypto.randomUUID(), role: 'user', parts: [{ type: 'text', text }] };
}

describe.skipIf(!runs)('a page of another origin against baton serve, in Chromium', { timeout: 60_000 }, () => {
  let browser: Browser | undefined;
  let baton: ServeProcess | undefined;
  const closeSites: (() => Promise<void>)[] = [];
  /** The attacker's site: another port of 127.0.0.1 (same site, other origin). */
  let sameSite = '';
  /** The attacker's site under another host name, `localhost` (another site). */
  let crossSite = '';
  /** A site given to `--cors`. */
  let allowed = '';

  /** Serves a blank page on a free port of 127.0.0.1; returns the port. */
  async function blankSite(): Promise<number> {
    const site = new Hono().get('*', (c) => c.html('<!doctype html><title>elsewhere</title><p>hello</p>'));
    const listening = serve({ fetch: site.fetch, port: 0, hostname: '127.0.0.1' });
    await new Promise<void>((resolve) => listening.once('listening', () => resolve()));
    closeSites.push(() => new Promise<void>((resolve) => listening.close(() => resolve())));
    return (listening.address() as AddressInfo).port;
  }

  beforeAll(async () => {
    assertChromium();
    await buildInspector();
    const attacker = await blankSite();
    sameSite = `http://127.0.0.1:${attacker}`;
    crossSite = `http://localhost:${attacker}`;
    allowed = `http://localhost:${await blankSite()}`;
    baton = await startServeProcess(
      [`${ROOT}examples/agents`, '--model', 'offline', '--store', 'memory:', '--port', '0', '--cors', allowed],
      { name: 'cross-origin' },
    );
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  });

  afterAll(async () => {
    await browser?.close();
    if (baton) await stopServeProcess(baton);
    await Promise.all(closeSites.map((close) => close()));
  });

  /** A chat turn from the test itself (no browser): creates `sessionId` and returns its final snapshot. */
  async function chat(sessionId: string, text: string): Promise<void> {
    const response = await fetch(`${baton!.url}/api/chat/${AGENT}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: sessionId, messages: [userMessage(text)] }),
    });
    expect(response.status).toBe(200);
    await response.text();
  }

  /** The session as the server has it, or the status when there is none. */
  async function session(sessionId: string): Promise<{ status: number; turns: number; resets: number }> {
    const response = await fetch(`${baton!.url}/api/sessions/${sessionId}/events?limit=500`);
    if (response.status !== 200) return { status: response.status, turns: 0, resets: 0 };
    const log = (await response.json()) as { events: { turn: number; event: { type: string } }[] };
    return {
      status: 200,
      turns: Math.max(0, ...log.events.map((entry) => entry.turn)),
      resets: log.events.filter((entry) => entry.event.type === 'session-reset').length,
    };
  }

  /** Opens the attacker's page on `origin`. */
  async function pageOn(origin: string): Promise<Page> {
    const context = await browser!.newContext();
    const page = await context.newPage();
    await page.goto(`${origin}/`);
    return page;
  }

  /** Runs, in `page`, every request a page can send without the server's consent; waits for each to be sent. */
  async function attack(page: Page, url: string, victim: string, fresh: string): Promise<void> {
    await page.evaluate(
      async ({ url, victim, agent, chatBody, victimBody }) => {
        const settle = (request: Promise<unknown>) =>
          request.then(
            () => undefined,
            () => undefined,
          );
        await Promise.all([
          // Simple requests: the browser sends them as they are, and only hides the answer.
          settle(fetch(`${url}/api/sessions/${victim}/reset`, { method: 'POST', mode: 'no-cors' })),
          settle(
            fetch(`${url}/api/chat/${agent}`, {
              method: 'POST',
              mode: 'no-cors',
              headers: { 'content-type': 'text/plain' },
              body: chatBody,
            }),
          ),
          settle(
            fetch(`${url}/api/chat/${agent}`, {
              method: 'POST',
              mode: 'no-cors',
              headers: { 'content-type': 'text/plain' },
              body: victimBody,
            }),
          ),
          // Preflighted: the browser asks first, and sends them only if the server agrees.
          settle(fetch(`${url}/api/sessions/${victim}`, { method: 'DELETE' })),
          settle(
            fetch(`${url}/api/chat/${agent}`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: chatBody,
            }),
          ),
        ]);
        // A form posted in a frame: a navigation, so no CORS at all.
        const frame = document.createElement('iframe');
        frame.name = 'sink';
        document.body.append(frame);
        const form = document.createElement('form');
        form.method = 'POST';
        form.action = `${url}/api/sessions/${victim}/reset`;
        form.target = 'sink';
        document.body.append(form);
        await new Promise<void>((resolve) => {
          frame.addEventListener('load', () => resolve(), { once: true });
          form.submit();
        });
      },
      {
        url,
        victim,
        agent: AGENT,
        chatBody: JSON.stringify({
          id: fresh,
          messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'run the tools' }] }],
        }),
        victimBody: JSON.stringify({
          id: victim,
          messages: [{ id: 'm2', role: 'user', parts: [{ type: 'text', text: 'and again' }] }],
        }),
      },
    );
  }

  it.each([
    ['on another port of the same host (same site)', () => sameSite],
    ['of another site', () => crossSite],
  ])('a page %s changes no session: no reset, no chat turn, no delete', async (_, originOf) => {
    const origin = originOf();
    const victim = `victim-${crypto.randomUUID()}`;
    const fresh = `fresh-${crypto.randomUUID()}`;
    await chat(victim, 'How many electric vehicles will be on the road by 2030?');
    const before = await session(victim);
    expect(before).toMatchObject({ status: 200, turns: 1, resets: 0 });

    const page = await pageOn(origin);
    await attack(page, baton!.url, victim, fresh);
    await page.context().close();

    expect(await session(victim)).toEqual(before);
    expect((await session(fresh)).status).toBe(404);
  });

  it('a page of an origin given to --cors may chat, reset and delete', async () => {
    const victim = `allowed-${crypto.randomUUID()}`;
    await chat(victim, 'How many electric vehicles will be on the road by 2030?');
    const page = await pageOn(allowed);
    const statuses = await page.evaluate(
      async ({ url, victim, agent }) => {
        const reset = await fetch(`${url}/api/sessions/${victim}/reset`, { method: 'POST' });
        const chat = await fetch(`${url}/api/chat/${agent}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            id: victim,
            messages: [{ id: 'm3', role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
          }),
        });
        await chat.text();
        const afterChat = await fetch(`${url}/api/sessions/${victim}/events`).then((r) => r.json());
        const remove = await fetch(`${url}/api/sessions/${victim}`, { method: 'DELETE' });
        return { reset: reset.status, chat: chat.status, turns: afterChat.events.at(-1).turn, remove: remove.status };
      },
      { url: baton!.url, victim, agent: AGENT },
    );
    await page.context().close();
    expect(statuses).toEqual({ reset: 200, chat: 200, turns: 2, remove: 204 });
    expect((await session(victim)).status).toBe(404);
  });

  it('a site whose name is rebound to 127.0.0.1 (DNS rebinding) reads and changes nothing', async () => {
    const victim = `rebound-${crypto.randomUUID()}`;
    await chat(victim, 'How many electric vehicles will be on the road by 2030?');
    const port = new URL(baton!.url).port;
    // What a rebinding DNS server does: the attacker's name, first its own address, now 127.0.0.1.
    const rebound = await chromium.launch({
      executablePath: CHROMIUM,
      args: [...CHROMIUM_ARGS, '--host-resolver-rules=MAP rebind.attacker.test 127.0.0.1'],
    });
    try {
      const page = await rebound.newPage();
      // Loaded from the attacker's name, the page is same-origin with every request below.
      await page.goto(`http://rebind.attacker.test:${port}/healthz`);
      const seen = await page.evaluate(
        async ({ victim, agent }) => {
          const read = await fetch(`/api/sessions/${victim}/events`);
          const reset = await fetch(`/api/sessions/${victim}/reset`, { method: 'POST' });
          const chat = await fetch(`/api/chat/${agent}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({
              id: victim,
              messages: [{ id: 'm4', role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
            }),
          });
          await chat.text();
          return {
            read: read.status,
            readable: (await read.text()).includes(victim),
            reset: reset.status,
            chat: chat.status,
          };
        },
        { victim, agent: AGENT },
      );
      expect(seen).toEqual({ read: 403, readable: false, reset: 403, chat: 403 });
    } finally {
      await rebound.close();
    }
    expect(await session(victim)).toMatchObject({ status: 200, turns: 1, resets: 0 });
  });

  it('a page of another origin cannot frame the inspector (clickjacking its reset and delete buttons)', async () => {
    const page = await pageOn(crossSite);
    const inspector = `${baton!.url}/`;
    const loaded = page.waitForEvent('framenavigated', (frame) => frame !== page.mainFrame());
    await page.evaluate((src) => {
      const frame = document.createElement('iframe');
      frame.src = src;
      document.body.append(frame);
    }, inspector);
    const frame = await loaded;
    await page.waitForTimeout(500);
    // Chromium shows its own error page in place of a page that refuses to be framed.
    const rendered = await frame.evaluate(() => document.querySelector('#root') !== null).catch(() => false);
    await page.context().close();
    expect(rendered).toBe(false);

    const answer = await fetch(inspector);
    expect(answer.headers.get('content-security-policy')).toContain("frame-ancestors 'self'");
    expect(answer.headers.get('x-content-type-options')).toBe('nosniff');
    expect(answer.headers.get('x-frame-options')).toBe('SAMEORIGIN');
  });
});
