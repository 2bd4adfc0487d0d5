/**
 * The AI SDK's human-in-the-loop flow in a real browser: the inspector (`useChat`) shows the
 * approval request of a `pay` call, a person clicks Approve (`addToolApprovalResponse`), and the
 * conversation goes back to the server on its own (`sendAutomaticallyWhen`), which runs the call
 * because it asked for that very approval. Deny runs nothing, and the timeline keeps the person's
 * no; a call a rule refuses shows as rejected, not as denied. With stored and stateless sessions,
 * against `createApp()` served in this process (`baton serve` has no `pay` tool).
 */
import type { Browser } from 'playwright-core';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOfflineModel } from '../src/ai-sdk/offline-model.js';
import { parseTemplate } from '../src/core/validate-template.js';
import type { SessionResponse } from '../src/server/api-types.js';
import { type CreateAppOptions, createApp } from '../src/server/create-app.js';
import { loadTemplate } from '../src/templates/load-template.js';
import { APPROVAL_AGENTS, approvalTools, type ToolRun } from './helpers/approvals.js';
import {
  assertChromium,
  browserTestsRun,
  buildInspector,
  CHROMIUM,
  CHROMIUM_ARGS,
  collectErrors,
  serveInProcess,
} from './helpers/browser.js';

const STATE_KEY = 'inspector-approvals-test-state-key-0123456789';
const PAY = 'Please settle my invoice';

const runs = browserTestsRun('inspector approval tests');

describe.skipIf(!runs)('approvals in the inspector, in Chromium', { timeout: 60_000 }, () => {
  let browser: Browser | undefined;
  beforeAll(async () => {
    assertChromium();
    await buildInspector();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  });
  afterAll(async () => {
    await browser?.close();
  });

  const modes: [string, Partial<CreateAppOptions>][] = [
    ['stored', {}],
    ['stateless', { stateless: { keys: [STATE_KEY] } }],
  ];
  it.each(modes)('asks, and runs the call once a person approves it (%s sessions)', async (_mode, options) => {
    const ran: ToolRun[] = [];
    const shop = await loadTemplate(`${APPROVAL_AGENTS}shop.json`);
    const server = await serveInProcess(
      createApp({
        agents: [shop],
        // A little delay per chunk: the page renders the answer as a user sees it stream.
        model: createOfflineModel({ delayMs: 5 }),
        tools: approvalTools((run) => ran.push(run)),
        ...options,
      }),
    );
    try {
      const context = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
      const page = await context.newPage();
      const errors = collectErrors(page);
      const chats: number[] = [];
      page.on('response', (response) => {
        if (response.url().includes('/api/chat/')) chats.push(response.status());
      });
      await page.goto(`${server.url}/`);
      await page.locator('[data-testid=graph-node][data-step=Checkout]').waitFor();

      await page.getByTestId('message-input').fill(PAY);
      await page.getByTestId('message-input').press('Enter');
      const card = page.locator('[data-testid=tool-card][data-tool=pay]');
      await expect.poll(() => card.getAttribute('data-state')).toBe('awaiting-approval');
      const approve = card.getByRole('button', { name: 'Approve' });
      await expect.poll(() => approve.isEnabled()).toBe(true);
      // Nothing runs while the person decides.
      expect(ran).toEqual([]);

      await approve.click();
      await expect.poll(() => card.getAttribute('data-state')).toBe('done');
      // The turn goes on to its answer; the page is ready for another message once it ended.
      await page.getByTestId('stop').waitFor({ state: 'detached' });
      expect(ran).toHaveLength(1);
      expect(ran[0]?.tool).toBe('pay');
      // The call that ran is the one the card asked about, with the input it showed.
      expect(JSON.parse((await card.locator('pre.json').first().textContent()) ?? 'null')).toEqual(ran[0]?.input);
      // Two requests (the question, then the approval), both accepted.
      expect(chats).toEqual([200, 200]);
      const sessionId = (await page.getByTestId('session-id').getAttribute('title')) ?? '';
      if (!options.stateless) {
        // Once the turn's writes are stored, the session records the call.
        await expect
          .poll(async () => {
            const view = (await (await fetch(`${server.url}/api/sessions/${sessionId}`)).json()) as SessionResponse;
            return view.state.recentlyUsedTools;
          })
          .toEqual(['pay']);
      }

      // Another question in the same session, denied this time: nothing more runs.
      await page.getByTestId('message-input').fill(`${PAY} again`);
      await page.getByTestId('message-input').press('Enter');
      const second = card.nth(1);
      await expect.poll(() => second.getAttribute('data-state')).toBe('awaiting-approval');
      await second.getByRole('button', { name: 'Deny' }).click();
      await expect.poll(() => second.getAttribute('data-state')).toBe('denied');
      expect(await second.locator('.badge').textContent()).toBe('declined by a person');
      await page.getByTestId('stop').waitFor({ state: 'detached' });
      expect(ran).toHaveLength(1);
      expect(chats).toEqual([200, 200, 200, 200]);
      if (!options.stateless) {
        // The session timeline keeps the person's no, apart from orchestration's refusals.
        const declined = page.locator('[data-testid=timeline-entry][data-type=approval-declined]');
        await expect.poll(() => declined.textContent()).toMatch(/a person declined pay$/);
        expect(await declined.getAttribute('class')).toContain('event-decline');
      }
      // A stateless server keeps no event log: the page asks once, and the browser logs that 409.
      expect(errors).toEqual(
        options.stateless
          ? ['console: Failed to load resource: the server responded with a status of 409 (Conflict)']
          : [],
      );
      await context.close();
    } finally {
      await server.close();
    }
  });

  it("shows a call a rule refuses as rejected by orchestration, with the rule's reason, not as a person's denial", async () => {
    const ran: ToolRun[] = [];
    const refusing = parseTemplate({
      id: 'closed-shop',
      name: 'closed-shop',
      tools: ['pay', 'search'],
      orchestration: {
        rules: [
          { tools: ['pay'], when: 'args.amount >= 0', effect: 'deny', reason: 'The shop takes no payments today' },
        ],
        steps: [{ name: 'Checkout', isDefault: true, sequence: ['pay'], resetSequenceOn: ['new_message'] }],
      },
    });
    const { needsApproval: _byTool, ...pay } = approvalTools((run) => ran.push(run)).pay;
    const server = await serveInProcess(
      createApp({
        agents: [refusing],
        model: createOfflineModel({ delayMs: 5 }),
        tools: { ...approvalTools((run) => ran.push(run)), pay },
      }),
    );
    try {
      const context = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
      const page = await context.newPage();
      const errors = collectErrors(page);
      await page.goto(`${server.url}/`);
      await page.locator('[data-testid=graph-node][data-step=Checkout]').waitFor();
      await page.getByTestId('message-input').fill(PAY);
      await page.getByTestId('message-input').press('Enter');
      await page.getByTestId('stop').waitFor({ state: 'detached' });
      const cards = page.locator('[data-testid=tool-card][data-tool=pay]');
      expect(await cards.count()).toBeGreaterThan(0);
      // The AI SDK reports the rule's refusal as a denied approval: it is orchestration's, no person's.
      for (const state of await cards.evaluateAll((all) => all.map((card) => card.getAttribute('data-state')))) {
        expect(state).toBe('rejected');
      }
      expect(await cards.first().textContent()).toMatch(
        /rejected by orchestration[\s\S]*Why it was not run[\s\S]*Tool "pay" was not run: The shop takes no payments today/,
      );
      expect(ran).toEqual([]);
      expect(errors).toEqual([]);
      await context.close();
    } finally {
      await server.close();
    }
  });

  it("asks about a call an approve rule guards, with the rule's reason, and the timeline names the rule", async () => {
    const ran: ToolRun[] = [];
    // The same shop, with approval asked by a rule of the template instead of the tool's needsApproval.
    const ruled = parseTemplate({
      id: 'ruled-shop',
      name: 'ruled-shop',
      tools: ['pay', 'search'],
      orchestration: {
        rules: [
          { tools: ['pay'], when: 'args.amount >= 0', effect: 'approve', reason: 'Every payment needs a person' },
        ],
        steps: [{ name: 'Checkout', isDefault: true, sequence: ['pay'], resetSequenceOn: ['new_message'] }],
      },
    });
    const { needsApproval: _byTool, ...pay } = approvalTools((run) => ran.push(run)).pay;
    const tools = { ...approvalTools((run) => ran.push(run)), pay };
    const server = await serveInProcess(
      createApp({ agents: [ruled], model: createOfflineModel({ delayMs: 5 }), tools }),
    );
    try {
      const context = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
      const page = await context.newPage();
      const errors = collectErrors(page);
      await page.goto(`${server.url}/`);
      await page.locator('[data-testid=graph-node][data-step=Checkout]').waitFor();
      await page.getByTestId('message-input').fill(PAY);
      await page.getByTestId('message-input').press('Enter');
      const card = page.locator('[data-testid=tool-card][data-tool=pay]');
      await expect.poll(() => card.getAttribute('data-state')).toBe('awaiting-approval');
      expect(await card.getByTestId('approval-reason').textContent()).toBe(
        'Every payment needs a person: a person must approve this call',
      );
      expect(ran).toEqual([]);
      // The session timeline has the pending approval, naming the rule that asked for it.
      const timeline = page.getByTestId('session-timeline');
      await expect
        .poll(() => timeline.locator('[data-testid=timeline-entry][data-type=approval-requested]').textContent())
        .toMatch(/asked a person to approve pay \(rules\[0\]\): Every payment needs a person$/);
      // The tool list says that pay is offered, and that a rule may ask a person about a call of it.
      await expect
        .poll(() => page.locator('[data-testid=tool-status][data-tool=pay]').getByTestId('tool-rules').textContent())
        .toBe('may ask a person: Every payment needs a person (rules[0])');
      await card.getByRole('button', { name: 'Approve' }).click();
      await expect.poll(() => card.getAttribute('data-state')).toBe('done');
      await page.getByTestId('stop').waitFor({ state: 'detached' });
      expect(ran.map((run) => run.tool)).toEqual(['pay']);
      expect(errors).toEqual([]);
      await context.close();
    } finally {
      await server.close();
    }
  });
});
