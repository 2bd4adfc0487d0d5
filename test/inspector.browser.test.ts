/**
 * The inspector in a real browser (Debian's Chromium through playwright-core) against
 * `baton serve` started as a user starts it, with the offline model. Skipped loudly when
 * Chromium is missing, unless BATON_REQUIRE_SERVICES=1 (CI), where that is a failure.
 *
 * Screenshots go to .tmp/inspector/; with BATON_UPDATE_SCREENSHOTS=1 they also replace
 * docs/inspector.png and docs/inspector-mobile.png (not on every run: the session id on
 * them changes each time, which would leave the tree dirty).
 */
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { copyFileSync, mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOfflineModel } from '../src/ai-sdk/offline-model.js';
import type { AgentDetailResponse, SessionEventsResponse, SessionResponse } from '../src/server/api-types.js';
import { createApp } from '../src/server/create-app.js';
import { loadTemplate } from '../src/templates/load-template.js';
import {
  browserTestsRun,
  collectErrors,
  overflowsHorizontally,
  serveInProcess,
  startInspectorRig,
} from './helpers/browser.js';
import { stopServeProcess } from './helpers/serve-process.js';

const ROOT = new URL('..', import.meta.url).pathname;
const QUESTION = 'How many electric vehicles will be on the road by 2030?';
const SECOND_QUESTION = 'Compare solar and wind energy for residential power generation';
const THIRD_QUESTION = 'Critique the argument that remote work improves productivity';
const SHOTS = join(ROOT, '.tmp', 'inspector');
const UPDATE_DOCS = process.env.BATON_UPDATE_SCREENSHOTS === '1';
/** The screenshots docs/ keeps; the others stay in .tmp/inspector for a person to look at. */
const DOCS_SHOTS = new Set(['inspector.png', 'inspector-mobile.png']);

/** A signing key for the stateless server (32 bytes or more). */
const STATE_KEY = 'inspector-browser-test-state-key-0123456789';

const runs = browserTestsRun('inspector browser tests');

/** A box in page coordinates (not moved by scrolling), rounded to the pixel. */
interface PageBox {
  x: number;
  y: number;
  width: number;
  height: number;
}

/** Where the first element matching `selector` is on the page. */
async function pageBox(page: Page, selector: string): Promise<PageBox> {
  return page.evaluate((css) => {
    const element = document.querySelector(css);
    if (!element) throw new Error(`no element matches ${css}`);
    const rect = element.getBoundingClientRect();
    const round = (n: number) => Math.round(n);
    return {
      x: round(rect.left + window.scrollX),
      y: round(rect.top + window.scrollY),
      width: round(rect.width),
      height: round(rect.height),
    };
  }, selector);
}

/** Elements that scroll vertically inside the page (text boxes aside), e.g. `div.chat-log`. */
async function innerScrollers(page: Page): Promise<string[]> {
  return page.evaluate(() =>
    Array.from(document.querySelectorAll('body *'))
      .filter((element) => {
        if (element instanceof HTMLTextAreaElement) return false;
        const { overflowY } = getComputedStyle(element);
        return /auto|scroll/.test(overflowY) && element.scrollHeight > element.clientHeight + 1;
      })
      .map((element) => `${element.tagName.toLowerCase()}.${element.className}`),
  );
}

/** Where the end of the newest message is, against the chat log and the window (viewport coordinates). */
async function newestMessageEnd(page: Page): Promise<{ bottom: number; logTop: number; logBottom: number }> {
  return page.evaluate(() => {
    const log = document.querySelector('[data-testid=chat-log]')!.getBoundingClientRect();
    const messages = document.querySelectorAll('article[data-testid^=message-]');
    const last = messages[messages.length - 1]!.getBoundingClientRect();
    return { bottom: last.bottom, logTop: Math.max(log.top, 0), logBottom: Math.min(log.bottom, window.innerHeight) };
  });
}

/** Saves a screenshot under .tmp/inspector, and to docs/ when asked to. */
async function screenshot(page: Page, name: string, fullPage = false): Promise<void> {
  const path = join(SHOTS, name);
  await page.screenshot({ path, fullPage });
  if (UPDATE_DOCS && DOCS_SHOTS.has(name)) copyFileSync(path, join(ROOT, 'docs', name));
}

describe.skipIf(!runs)('inspector in Chromium', { timeout: 60_000 }, () => {
  let server: ChildProcessWithoutNullStreams | undefined;
  let url = '';
  let browser: Browser | undefined;

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    // The page under test is the one `npm run build:web` produces, served from dist/web.
    const rig = await startInspectorRig('examples/agents');
    ({ child: server, url } = rig.server);
    browser = rig.browser;
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

    // The step graph reads in the order the steps are checked, first at the top, each step's
    // conditions written beside it.
    const agent = (await (await fetch(`${url}/api/agents/cognitive-reasoner`)).json()) as AgentDetailResponse;
    const nodes = await page
      .locator('[data-testid=graph-node]')
      .evaluateAll((elements) =>
        elements.map((e) => ({ step: e.getAttribute('data-step') ?? '', ...e.getBoundingClientRect().toJSON() })),
      );
    const topToBottom = [...nodes].sort((a, b) => a.top - b.top);
    expect(topToBottom.map((node) => node.step)).toEqual(agent.steps);
    for (const [index, node] of topToBottom.entries()) {
      if (index > 0) expect(node.top).toBeGreaterThanOrEqual(topToBottom[index - 1]!.bottom);
    }
    for (const { to, label } of agent.graph.edges.filter((edge) => edge.kind === 'condition')) {
      const conditions = page.locator(`[data-testid=step-conditions][data-step=${to}]`);
      expect(await conditions.isVisible(), `conditions of ${to} visible`).toBe(true);
      expect(await conditions.textContent()).toContain(label);
      const node = nodes.find((n) => n.step === to)!;
      const box = (await conditions.boundingBox())!;
      expect(box.x, `conditions of ${to} right of the step`).toBeGreaterThanOrEqual(node.right);
      expect(box.y, `conditions of ${to} level with the step`).toBeLessThan(node.bottom);
      expect(box.y + box.height).toBeGreaterThan(node.top);
    }
    expect(agent.graph.edges.filter((edge) => edge.kind === 'condition').length).toBe(agent.steps.length);

    // The header keeps its place and size from the first load on (checked again after the turn).
    const header = await pageBox(page, 'header.app-header');

    // Record every configuration the sequence strip and the tools panel go through together
    // (after each DOM change): `strip | allowed tools | undecided tools`.
    await page.evaluate(() => {
      const seen: string[] = [];
      (window as unknown as { stripStates: string[] }).stripStates = seen;
      const record = () => {
        const positions = Array.from(document.querySelectorAll('[data-testid=sequence-position]'));
        if (positions.length === 0) return;
        const strip = positions.map((p) => `${p.getAttribute('data-tool')}:${p.getAttribute('data-state')}`).join(',');
        const rows = Array.from(document.querySelectorAll('[data-testid=tool-status]'));
        const allowed = rows
          .filter((r) => r.getAttribute('data-allowed') === 'true')
          .map((r) => r.getAttribute('data-tool'));
        const undecided = rows.filter((r) => r.getAttribute('data-allowed') === 'unknown').length;
        const state = `${strip}|${allowed.join(',')}|${undecided}`;
        if (seen.at(-1) !== state) seen.push(state);
      };
      new MutationObserver(record).observe(document.body, {
        subtree: true,
        childList: true,
        attributes: true,
        attributeFilter: ['data-state', 'data-allowed'],
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

    // The strip advanced while the answer streamed, and the tools panel with it, from the same
    // snapshot: every configuration shown is one of these, in this order (the tools offered are
    // exactly the strip's current position, then the step's tools once it is complete), starting
    // at model step 0, where the panel already shows the step's tools, and ending with all
    // three done. (A loaded machine may render two later snapshots at once, so not every
    // configuration after the first is necessarily seen.)
    const strip = await page.evaluate(() => (window as unknown as { stripStates: string[] }).stripStates);
    const progression = [
      'search:current,think:todo,reflect:todo|search|0',
      'search:done,think:current,reflect:todo|think|0',
      'search:done,think:done,reflect:current|reflect|0',
      'search:done,think:done,reflect:done|search,think,reflect|0',
    ];
    const positions = strip.map((state) => progression.indexOf(state));
    expect(positions, JSON.stringify(strip)).not.toContain(-1);
    expect(positions, JSON.stringify(strip)).toEqual([...positions].sort((a, b) => a - b));
    expect(strip[0], JSON.stringify(strip)).toBe(progression[0]);
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

    // The tool list matches the API: blocked tools with their reasons, the message alone
    // (no trailing code tag such as `not-allowed`).
    const blocked = session.tools.filter((t) => !t.allowed);
    expect(blocked.map((t) => t.tool).sort()).toEqual(['brainstorm', 'compare', 'critique', 'debate']);
    for (const { tool, reason } of session.tools) {
      const row = page.locator(`[data-testid=tool-status][data-tool=${tool}]`);
      await expect.poll(() => row.getAttribute('data-allowed')).toBe(String(!reason));
      if (reason) await expect.poll(() => row.getByTestId('tool-reason').textContent()).toBe(reason.message);
    }
    expect(await page.locator('[data-testid=tool-status][data-tool=compare]').textContent()).toBe(
      'compareblockedstep "ResearchMode" allows only search, think, reflect',
    );
    expect(await page.getByTestId('token-total').textContent()).toBe(
      session.state.tokenUsage.totalTokens.toLocaleString('en-US'),
    );

    // The header did not move or change size when the session id and the answer came.
    expect(await pageBox(page, 'header.app-header')).toEqual(header);

    expect(await overflowsHorizontally(page)).toBe(false);
    await screenshot(page, 'inspector.png');

    // A second question: the chat follows its answer down to the end.
    await page.getByTestId('message-input').fill(SECOND_QUESTION);
    await page.getByTestId('message-input').press('Enter');
    await page
      .getByTestId('message-assistant')
      .nth(1)
      .getByTestId('message-text')
      .filter({ hasText: 'I worked through this with search, then compare, then reflect.' })
      .waitFor();
    await page.getByTestId('send').waitFor();
    const followed = await newestMessageEnd(page);
    expect(followed.bottom, JSON.stringify(followed)).toBeLessThanOrEqual(followed.logBottom + 1);
    expect(followed.bottom, JSON.stringify(followed)).toBeGreaterThan(followed.logTop);
    expect(await page.getByTestId('chat-log').evaluate((log) => log.scrollTop)).toBeGreaterThan(0);
    expect(await pageBox(page, 'header.app-header')).toEqual(header);

    // A third, and the reader scrolls up while it streams: the chat stays where they read.
    await page.getByTestId('message-input').fill(THIRD_QUESTION);
    await page.getByTestId('message-input').press('Enter');
    await page.getByTestId('message-user').nth(2).waitFor();
    const log = (await page.getByTestId('chat-log').boundingBox())!;
    await page.mouse.move(log.x + log.width / 2, log.y + log.height / 2);
    await page.mouse.wheel(0, -600);
    await page.getByTestId('send').waitFor();
    const reading = await newestMessageEnd(page);
    expect(reading.bottom, JSON.stringify(reading)).toBeGreaterThan(reading.logBottom + 200);

    expect(errors).toEqual([]);
    await context.close();
  });

  it('fits a phone: the composer in view on first load, one scrolling page, the chat following, the orchestration a tab at the top', async () => {
    const context = await browser!.newContext({
      viewport: { width: 390, height: 844 },
      hasTouch: true,
      isMobile: true,
    });
    const { page, errors } = await open(context, url);
    await page.getByTestId('agent-picker').selectOption('cognitive-reasoner');
    // On a phone the steps are on the orchestration tab, hidden while the chat shows.
    await page.locator('[data-testid=graph-node][data-step=ResearchMode]').waitFor({ state: 'attached' });

    // First load: the message box and Send are on the screen, without scrolling.
    expect(await page.evaluate(() => window.scrollY)).toBe(0);
    for (const testId of ['message-input', 'send']) {
      const box = (await page.getByTestId(testId).boundingBox())!;
      expect(box.y, testId).toBeGreaterThanOrEqual(0);
      expect(box.y + box.height, testId).toBeLessThanOrEqual(844);
      expect(box.x, testId).toBeGreaterThanOrEqual(0);
      expect(box.x + box.width, testId).toBeLessThanOrEqual(390);
    }
    const header = await pageBox(page, 'header.app-header');

    await page.getByRole('button', { name: QUESTION }).tap();
    await page
      .getByTestId('message-assistant')
      .getByTestId('message-text')
      .filter({ hasText: 'I worked through this with search, then think, then reflect.' })
      .waitFor();
    await page.getByTestId('send').waitFor();

    // One scroll area, the page: nothing inside it scrolls on its own.
    expect(await innerScrollers(page)).toEqual([]);
    expect(await page.evaluate(() => document.documentElement.scrollHeight > window.innerHeight)).toBe(true);
    expect(await overflowsHorizontally(page)).toBe(false);

    // The page followed the answer: its end is in view, above the composer, which is in view too.
    const composer = (await page.getByTestId('message-input').boundingBox())!;
    expect(composer.y + composer.height).toBeLessThanOrEqual(844);
    const end = await newestMessageEnd(page);
    expect(end.bottom, JSON.stringify(end)).toBeLessThanOrEqual(composer.y + 1);
    expect(end.bottom, JSON.stringify(end)).toBeGreaterThan(0);
    expect(await pageBox(page, 'header.app-header')).toEqual(header);
    await screenshot(page, 'inspector-mobile-chat.png');

    // The orchestration is one tap away at the top of the screen, wherever the chat is
    // scrolled: its tab (which stays under the header, or at the top once the header scrolled
    // away) says where the session stands, and opens the panel right under the tabs.
    const tab = page.getByTestId('tab-orchestration');
    expect(await page.getByTestId('tab-step-summary').textContent()).toBe('ResearchMode ✓');
    const tabBox = (await tab.boundingBox())!;
    expect(tabBox.y).toBeGreaterThanOrEqual(0);
    expect(tabBox.y + tabBox.height).toBeLessThanOrEqual(header.height + 80);
    await tab.tap();
    await expect.poll(() => tab.getAttribute('aria-selected')).toBe('true');
    const tabs = (await page.locator('.view-tabs').boundingBox())!;
    const panel = (await page.locator('#orchestration-panel').boundingBox())!;
    expect(panel.y).toBeGreaterThanOrEqual(tabs.y + tabs.height);
    expect(panel.y).toBeLessThan(tabs.y + tabs.height + 20);
    expect(panel.y).toBeLessThan(300);
    const activeStep = (await page.getByTestId('active-step').boundingBox())!;
    expect(activeStep.y + activeStep.height).toBeLessThanOrEqual(844);
    expect(await page.getByTestId('message-input').isVisible()).toBe(false);

    // The steps' conditions stay readable on the narrow screen: shown, and within its width.
    for (const conditions of await page.getByTestId('step-conditions').all()) {
      const box = (await conditions.boundingBox())!;
      expect(box.width).toBeGreaterThan(100);
      expect(box.x + box.width).toBeLessThanOrEqual(390);
    }

    // The session timeline fits too: a decision opened on the phone stays within its width, and
    // nothing in it scrolls on its own.
    const timeline = page.getByTestId('session-timeline');
    await expect.poll(() => timeline.getByTestId('timeline-entry').last().getAttribute('data-type')).toBe('turn-ended');
    await timeline.locator('[data-testid=timeline-entry][data-type=tools-offered]').nth(1).tap();
    const then = timeline.getByTestId('timeline-state');
    await then.waitFor();
    expect(await then.getByTestId('timeline-active-step').getAttribute('data-step')).toBe('ResearchMode');
    const box = (await then.boundingBox())!;
    expect(box.x).toBeGreaterThanOrEqual(0);
    expect(box.x + box.width).toBeLessThanOrEqual(390);
    expect(await innerScrollers(page)).toEqual([]);
    expect(await overflowsHorizontally(page)).toBe(false);

    await screenshot(page, 'inspector-mobile.png', true);

    // Back to the chat, at its newest message, with the composer in view.
    await page.getByTestId('tab-chat').tap();
    await page.getByTestId('message-input').waitFor();
    await expect.poll(async () => (await newestMessageEnd(page)).bottom).toBeLessThanOrEqual(844);
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

    await page.getByRole('button', { name: 'Reset', exact: true }).click();
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

    // Resuming the deleted session is an error, shown until the next action (here: a question).
    await page.getByLabel('Resume session').fill(sessionId);
    await page.getByRole('button', { name: 'Resume', exact: true }).click();
    const notice = page.getByTestId('error-notice');
    await notice.waitFor();
    expect(await notice.textContent()).toContain('session-not-found');
    await page.getByRole('button', { name: QUESTION }).click();
    await expect.poll(() => notice.count()).toBe(0);
    await page.getByTestId('turn-timeline').getByText('End of turn').waitFor();

    await page.getByRole('button', { name: 'Template' }).click();
    await page.getByTestId('template-json').waitFor();
    expect(await page.getByTestId('template-json').textContent()).toContain('"ResearchMode"');
    expect(await page.getByTestId('template-no-issues').count()).toBe(1);
    await page.keyboard.press('Escape');
    await expect.poll(() => page.evaluate(() => document.querySelector('dialog')?.open)).toBe(false);

    // The browser logs the 404 of the failed resume; nothing else may go wrong.
    expect(errors.filter((e) => !/status of 404/.test(e))).toEqual([]);
    await context.close();
  });

  it('lists every decision of the session by turn, and shows the session at an earlier one', async () => {
    const context = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
    const { page, errors } = await open(context, url);
    await page.getByTestId('agent-picker').selectOption('cognitive-reasoner');
    await page.locator('[data-testid=graph-node][data-step=ResearchMode]').waitFor();
    const timeline = page.getByTestId('session-timeline');
    expect(await timeline.getByTestId('session-timeline-empty').count()).toBe(1);

    for (const [index, question] of [QUESTION, SECOND_QUESTION].entries()) {
      await page.getByTestId('message-input').fill(question);
      await page.getByTestId('message-input').press('Enter');
      await page.getByTestId('message-assistant').nth(index).getByTestId('message-text').first().waitFor();
      await page.getByTestId('send').waitFor();
      // The timeline is refreshed once the turn's final part has come: its last decision is the turn's end.
      await expect
        .poll(() => timeline.getByTestId('timeline-turn').last().getAttribute('data-turn'))
        .toBe(String(index + 1));
      await expect
        .poll(() => timeline.getByTestId('timeline-entry').last().getAttribute('data-type'))
        .toBe('turn-ended');
    }

    // Every decision the server logged, in its order, grouped by turn.
    const sessionId = (await page.getByTestId('session-id').textContent())?.trim() ?? '';
    const log = (await (await fetch(`${url}/api/sessions/${sessionId}/events`)).json()) as SessionEventsResponse;
    expect(log.dropped).toBe(0);
    const rows = timeline.getByTestId('timeline-entry');
    const shown = await rows.evaluateAll((buttons) =>
      buttons.map((b) => ({
        seq: Number(b.getAttribute('data-seq')),
        type: b.getAttribute('data-type'),
        turn: Number(b.closest('[data-turn]')?.getAttribute('data-turn')),
      })),
    );
    expect(shown).toEqual(log.events.map(({ seq, event, turn }) => ({ seq, type: event.type, turn })));
    expect(new Set(shown.map((row) => row.turn))).toEqual(new Set([1, 2]));

    // Each row says what was decided: the research turn's step, then each tool offered alone in
    // the sequence's order, reserved, used, the sequence advancing; then the comparison turn's.
    const turns = timeline.getByTestId('timeline-turn');
    const text = async (turn: number) =>
      (
        await turns
          .nth(turn - 1)
          .getByTestId('timeline-entry')
          .allTextContents()
      ).join('\n');
    expect(await text(1)).toMatch(
      /^#1step → ResearchMode\n#2offered: search\n#3reserved search\n#4used search\n#5sequence 1\/3 \(search\)\n#6offered: think\n[\s\S]*sequence 3\/3 \(reflect\)\n[\s\S]*#16turn ended in ResearchMode$/,
    );
    expect(await text(2)).toMatch(
      /step ResearchMode → ComparisonMode\n[\s\S]*offered: search\n[\s\S]*offered: compare\n[\s\S]*offered: reflect\n[\s\S]*turn ended in ComparisonMode$/,
    );

    // The newest turn is open with its newest decision on screen; the older one is folded.
    expect(await turns.nth(1).evaluate((details) => (details as HTMLDetailsElement).open)).toBe(true);
    expect(await turns.nth(0).evaluate((details) => (details as HTMLDetailsElement).open)).toBe(false);
    expect(await rows.last().isVisible()).toBe(true);

    // Now (end of the comparison turn): search is allowed, think is not.
    const live = (tool: string) => page.locator(`[data-testid=tool-status][data-tool=${tool}]`);
    await expect.poll(() => live('search').getAttribute('data-allowed')).toBe('true');
    expect(await live('think').getByTestId('tool-reason').textContent()).toBe(
      'step "ComparisonMode" allows only search, compare, reflect',
    );

    // Open the first turn and, with the keyboard, the decision that offered think: the session
    // then was in ResearchMode, one of three done, think its only allowed tool, search blocked
    // because the sequence expected think; the server's explanation of that point, word for word.
    await turns.nth(0).locator('summary').click();
    const offeredThink = log.events.find(
      (e) => e.event.type === 'tools-offered' && e.turn === 1 && e.state.sequence?.index === 1,
    )!;
    const row = timeline.locator(`[data-testid=timeline-entry][data-seq="${offeredThink.seq}"]`);
    expect(await row.textContent()).toBe(`#${offeredThink.seq}offered: think`);
    await row.focus();
    await page.keyboard.press('Enter');
    expect(await row.getAttribute('aria-expanded')).toBe('true');
    const then = timeline.getByTestId('timeline-state');
    await then.waitFor();
    expect(await then.getAttribute('data-seq')).toBe(String(offeredThink.seq));
    expect(await then.getByTestId('timeline-active-step').getAttribute('data-step')).toBe('ResearchMode');
    expect(await page.getByTestId('active-step').getAttribute('data-step')).toBe('ComparisonMode');
    expect(await then.getByTestId('timeline-sequence-summary').textContent()).toBe('Sequence 1 of 3 done');
    const past = (tool: string) => then.locator(`[data-testid=timeline-tool-status][data-tool=${tool}]`);
    expect(
      await then
        .locator('[data-testid=timeline-tool-status][data-allowed=true]')
        .evaluateAll((items) => items.map((i) => i.getAttribute('data-tool'))),
    ).toEqual(['think']);
    const searchThen = offeredThink.tools.find((t) => t.tool === 'search')!;
    expect(searchThen.reason?.message).toBe('step "ResearchMode" expects think next (position 2 of 3)');
    expect(await past('search').getAttribute('data-allowed')).toBe('false');
    expect(await past('search').getByTestId('timeline-tool-reason').textContent()).toBe(searchThen.reason!.message);
    for (const { tool, allowed, reason } of offeredThink.tools) {
      expect(await past(tool).getAttribute('data-allowed'), tool).toBe(String(allowed));
      if (reason) expect(await past(tool).getByTestId('timeline-tool-reason').textContent(), tool).toBe(reason.message);
    }
    expect(await then.getByTestId('timeline-recent-tools').textContent()).toBe('search');
    expect(await then.getByTestId('timeline-token-total').textContent()).toBe(
      offeredThink.state.tokenUsage.totalTokens.toLocaleString('en-US'),
    );
    // The live panel still shows the session now.
    expect(await live('search').getAttribute('data-allowed')).toBe('true');
    await screenshot(page, 'inspector-timeline.png');

    // Enter again folds it away.
    await page.keyboard.press('Enter');
    await expect.poll(() => timeline.getByTestId('timeline-state').count()).toBe(0);

    // A reset is a decision too, logged after the turns' ones.
    await page.getByRole('button', { name: 'Reset', exact: true }).click();
    await expect
      .poll(() => timeline.getByTestId('timeline-entry').last().getAttribute('data-type'))
      .toBe('session-reset');
    expect(await overflowsHorizontally(page)).toBe(false);
    expect(errors).toEqual([]);
    await context.close();
  });

  it('says how many old decisions the bounded log dropped, and why a stateless server shows none', async () => {
    const template = await loadTemplate(join(ROOT, 'examples/agents/cognitive-reasoner.json'));
    const small = await serveInProcess(createApp({ agents: [{ template }], model: 'offline', eventLog: 10 }));
    const stateless = await serveInProcess(
      createApp({ agents: [{ template }], model: 'offline', stateless: { keys: [STATE_KEY] } }),
    );
    try {
      const context = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
      const { page, errors } = await open(context, small.url);
      await page.getByTestId('message-input').fill(QUESTION);
      await page.getByTestId('message-input').press('Enter');
      const timeline = page.getByTestId('session-timeline');
      await expect
        .poll(() => timeline.getByTestId('timeline-entry').last().getAttribute('data-type'))
        .toBe('turn-ended');
      // The research turn logs 16 decisions; the server keeps the last 10.
      expect(await timeline.getByTestId('session-timeline-dropped').textContent()).toBe(
        '6 older decisions dropped (the server keeps the last 10).',
      );
      expect(
        await timeline.getByTestId('timeline-entry').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-seq'))),
      ).toEqual(['7', '8', '9', '10', '11', '12', '13', '14', '15', '16']);
      expect(errors).toEqual([]);

      // A stateless server keeps no log (the session travels in its token): the page says so, in its words.
      const other = await open(context, stateless.url);
      await other.page.getByTestId('message-input').fill(QUESTION);
      await other.page.getByTestId('message-input').press('Enter');
      const unavailable = other.page.getByTestId('session-timeline-unavailable');
      await unavailable.waitFor();
      expect(await unavailable.textContent()).toBe(
        'This server is stateless: it keeps no event log, because a session travels in its token.',
      );
      expect(await other.page.getByTestId('timeline-entry').count()).toBe(0);
      // Asked once per page, not at every turn: the browser logs that one 409. The page knows the
      // server is stateless (/healthz), so it asks for no session view mid-turn, which a stateless
      // server can only refuse (401: no state token yet, or a stale one).
      await other.page.getByTestId('message-input').fill(SECOND_QUESTION);
      await other.page.getByTestId('message-input').press('Enter');
      await other.page.getByTestId('message-assistant').nth(1).getByTestId('message-text').first().waitFor();
      await other.page.getByTestId('send').waitFor();
      expect(await unavailable.textContent()).toContain('This server is stateless');
      expect(await other.page.getByTestId('error-notice').allTextContents()).toEqual([]);
      expect(other.errors.filter((e) => /status of 409/.test(e))).toHaveLength(1);
      expect(other.errors.filter((e) => !/status of 409/.test(e))).toEqual([]);
      await context.close();
    } finally {
      await small.close();
      await stateless.close();
    }
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
