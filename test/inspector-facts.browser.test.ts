/**
 * Facts and labels (SPEC section 11) in the inspector, in a real browser: an agent whose template
 * keeps the ids a listing returned, the text and owner of a file it read (the owner cannot be
 * computed, so that fact is unknown), and raises `confidential` on reading a confidential file,
 * after which nothing may be sent. The orchestration panel shows the facts and the label, the
 * tool list says which rule reads them, and the session timeline words each fact set and label
 * raised, and shows the facts as they were at each decision. Against `createApp()` served in this
 * process, with a scripted model.
 *
 * The screenshots go to .tmp/inspector/ (facts.png, facts-timeline.png, facts-mobile.png).
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { tool } from 'ai';
import type { Browser } from 'playwright-core';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseTemplate } from '../src/core/validate-template.js';
import { createApp } from '../src/server/create-app.js';
import { ScriptedModel } from '../src/testing/scripted-model.js';
import {
  assertChromium,
  browserTestsRun,
  buildInspector,
  CHROMIUM,
  CHROMIUM_ARGS,
  collectErrors,
  overflowsHorizontally,
  serveInProcess,
} from './helpers/browser.js';

const ROOT = new URL('..', import.meta.url).pathname;
const SHOTS = join(ROOT, '.tmp', 'inspector');
/** What read_file returns as the file's text: longer than the panel shows, and than the event log keeps. */
const TEXT = 'Quarterly plan: hire two engineers, ship the billing rewrite, retire the old dashboard. '.repeat(4);

const runs = browserTestsRun('inspector facts tests');

const template = parseTemplate({
  id: 'files',
  name: 'files',
  description: 'Lists and reads files; sends nothing once a confidential one was read',
  tools: ['list_items', 'read_file', 'send_email'],
  orchestration: {
    facts: [
      { name: 'listed_ids', tools: ['list_items'], value: 'result.items.map(i, i.id)', keep: 'union' },
      { name: 'report', tools: ['read_file'], value: 'result.text' },
      // read_file returns no owner: this fact is unknown, and would refuse any rule reading it.
      { name: 'owner', tools: ['read_file'], value: 'result.owner' },
    ],
    labels: [{ name: 'confidential', tools: ['read_file'], when: "result.classification == 'confidential'" }],
    rules: [
      {
        tools: ['send_email'],
        when: "'confidential' in state.labels",
        effect: 'deny',
        reason: 'Nothing leaves after a confidential read',
      },
    ],
    steps: [{ name: 'Work', isDefault: true }],
  },
});

const tools = {
  list_items: tool({
    inputSchema: z.object({}),
    execute: async () => ({ items: [{ id: 'a-1' }, { id: 'b-2' }] }),
  }),
  read_file: tool({
    inputSchema: z.object({ path: z.string() }),
    execute: async () => ({ classification: 'confidential', text: TEXT }),
  }),
  send_email: tool({ inputSchema: z.object({ to: z.string() }), execute: async () => 'sent' }),
};

describe.skipIf(!runs)('facts and labels in the inspector, in Chromium', { timeout: 60_000 }, () => {
  let browser: Browser | undefined;
  beforeAll(async () => {
    assertChromium();
    mkdirSync(SHOTS, { recursive: true });
    await buildInspector();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  });
  afterAll(async () => {
    await browser?.close();
  });

  it('shows the facts and labels a turn left, and the timeline says when each was set', async () => {
    const model = new ScriptedModel([
      { toolCalls: [{ toolName: 'list_items', input: {} }] },
      { toolCalls: [{ toolName: 'read_file', input: { path: 'plan.txt' } }] },
      { toolCalls: [{ toolName: 'send_email', input: { to: 'someone@example.com' } }] },
      { text: 'The plan is confidential, so I did not send it.' },
    ]);
    const sent: string[] = [];
    const send = tool({
      inputSchema: z.object({ to: z.string() }),
      execute: async ({ to }) => {
        sent.push(to);
        return 'sent';
      },
    });
    const server = await serveInProcess(
      createApp({ agents: [template], model, tools: { ...tools, send_email: send }, eventLog: 100 }),
    );
    try {
      const context = await browser!.newContext({ viewport: { width: 1280, height: 900 } });
      const page = await context.newPage();
      const errors = collectErrors(page);
      await page.goto(`${server.url}/`);
      await page.locator('[data-testid=graph-node][data-step=Work]').waitFor();
      // The template declares facts and labels: the panel says where they will show.
      const panel = page.locator('#orchestration-panel');
      await expect
        .poll(() => panel.getByTestId('facts-empty').textContent())
        .toBe('No fact set and no label raised yet.');

      await page.getByTestId('message-input').fill('List my files, read the plan and mail it to someone');
      await page.getByTestId('message-input').press('Enter');
      // A rule's refusal is orchestration's, not a person's: the card says rejected.
      await expect
        .poll(() => page.locator('[data-testid=tool-card][data-tool=send_email]').getAttribute('data-state'))
        .toBe('rejected');
      await page.getByTestId('stop').waitFor({ state: 'detached' });
      expect(sent).toEqual([]);

      // The panel: the label, then each fact, its value shortened or why it is unknown.
      const fact = (name: string) => panel.locator(`[data-testid=fact][data-fact=${name}]`);
      await expect.poll(() => panel.getByTestId('label').allTextContents()).toEqual(['confidential']);
      expect(await fact('listed_ids').locator('dd').textContent()).toBe('["a-1","b-2"]');
      const report = fact('report').locator('dd');
      const shown = (await report.textContent()) ?? '';
      expect(shown.endsWith('…')).toBe(true);
      expect(shown.length).toBe(80);
      expect(JSON.stringify(TEXT).startsWith(shown.slice(0, -1))).toBe(true);
      expect(await report.getAttribute('title')).toBe(JSON.stringify(TEXT));
      expect(await fact('owner').getAttribute('data-kind')).toBe('unknown');
      expect(await fact('owner').locator('dd').textContent()).toMatch(/^unknown: its value could not be computed/);
      // The tool list: send_email is still offered, and the rule that may refuse it reads the labels.
      expect(
        await panel.locator('[data-testid=tool-status][data-tool=send_email]').getByTestId('tool-rules').textContent(),
      ).toBe('may refuse: Nothing leaves after a confidential read (rules[0], reads labels)');

      // The timeline words every fact set and the label raised.
      const timeline = page.getByTestId('session-timeline');
      const entries = (type: string) => timeline.locator(`[data-testid=timeline-entry][data-type=${type}]`);
      await expect
        .poll(() => entries('fact-set').locator('.session-event-text').allTextContents())
        .toEqual([
          'fact listed_ids set by list_items',
          'fact report set by read_file',
          expect.stringMatching(/^fact owner unknown after read_file: its value could not be computed/),
        ]);
      expect(await entries('label-raised').locator('.session-event-text').allTextContents()).toEqual([
        'label confidential raised by read_file',
      ]);
      expect(await entries('tool-rejected').textContent()).toContain(
        'refused send_email by rules[0]: Nothing leaves after a confidential read',
      );

      // Opened on the listing, the session then: its ids, no label yet.
      await entries('fact-set').first().click();
      const state = page.getByTestId('timeline-state');
      await expect.poll(() => state.getByTestId('timeline-fact').count()).toBe(1);
      expect(await state.locator('[data-testid=timeline-fact][data-fact=listed_ids] dd').textContent()).toBe(
        '["a-1","b-2"]',
      );
      expect(await state.getByTestId('timeline-labels').count()).toBe(0);
      // Opened on the label: the read's text is longer than the log keeps, and says so.
      await entries('label-raised').click();
      await expect.poll(() => state.getByTestId('timeline-label').allTextContents()).toEqual(['confidential']);
      expect(await state.locator('[data-testid=timeline-fact][data-fact=report]').getAttribute('data-kind')).toBe(
        'omitted',
      );
      expect(await state.locator('[data-testid=timeline-fact][data-fact=report] dd').textContent()).toBe(
        `${JSON.stringify(TEXT).length} characters of JSON, not kept in the event log`,
      );

      // For a person to look at: the panel's facts and labels, and the timeline opened on the label.
      await page.locator('#facts-title').scrollIntoViewIfNeeded();
      await page.screenshot({ path: join(SHOTS, 'facts.png') });
      await state.scrollIntoViewIfNeeded();
      await page.screenshot({ path: join(SHOTS, 'facts-timeline.png') });
      // On a phone, a long value and a long reason wrap: nothing pushes the page sideways.
      await page.setViewportSize({ width: 390, height: 844 });
      await page.getByTestId('tab-orchestration').click();
      await panel.locator('#facts-title').scrollIntoViewIfNeeded();
      expect(await overflowsHorizontally(page)).toBe(false);
      await page.screenshot({ path: join(SHOTS, 'facts-mobile.png') });
      expect(errors).toEqual([]);
      await context.close();
    } finally {
      await server.close();
    }
  });
});
