/**
 * Shadow mode and token budgets in the inspector, in Chromium, against `baton serve` with the
 * offline model and two templates written for this test (no example agent uses either): what a
 * user sees while a turn runs and once it has ended.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { browserTestsRun, collectErrors, overflowsHorizontally, startInspectorRig } from './helpers/browser.js';
import { type ServeProcess, stopServeProcess } from './helpers/serve-process.js';

/** A research question: the offline model plans search, then think, then reflect. */
const QUESTION = 'How many electric vehicles will be on the road by 2030?';
const BUDGET = 300;

/**
 * Shadow mode: the step allows search and think, in that order; the offline model also calls
 * reflect, which enforcement would refuse, and which runs because nothing is enforced.
 */
const SHADOW_TEMPLATE = {
  id: 'rollout-shadow',
  name: 'Shadow rollout',
  description: 'Research in shadow mode: decisions are reported, not enforced.',
  tools: ['search', 'think', 'reflect', 'compare'],
  orchestration: {
    shadow: true,
    steps: [
      {
        name: 'Research',
        isDefault: true,
        availableTools: { allowed: ['search', 'think'] },
        sequence: ['search', 'think'],
      },
    ],
  },
};

/** A session budget the first model step of the first turn already spends (its prompt alone is larger). */
const BUDGET_TEMPLATE = {
  id: 'rollout-budget',
  name: 'Budgeted research',
  description: 'Research on a small token budget.',
  tools: ['search', 'think', 'reflect'],
  orchestration: {
    budget: { totalTokens: BUDGET },
    steps: [{ name: 'Research', isDefault: true }],
  },
};

/** What the orchestration panel showed at one moment. */
interface Shown {
  /** Tools marked allowed in the tools panel, in its order. */
  allowed: string[];
  /** Tools marked "would have blocked (shadow mode)", and the text of each mark. */
  wouldBlock: Record<string, string>;
  /** The shadow mode note is shown. */
  shadow: boolean;
  /** The text of the spent-budget banner, when shown. */
  budget: string | null;
  /** The session's token total as the panel shows it. */
  tokens: string;
}

/** Starts recording every distinct {@link Shown} of the page, after each DOM change. */
async function recordPanel(page: Page): Promise<void> {
  await page.evaluate(() => {
    const seen: string[] = [];
    (window as unknown as { shown: string[] }).shown = seen;
    const record = () => {
      const rows = Array.from(document.querySelectorAll('[data-testid=tool-status]'));
      const shown = {
        allowed: rows
          .filter((row) => row.getAttribute('data-allowed') === 'true')
          .map((row) => row.getAttribute('data-tool') ?? ''),
        wouldBlock: Object.fromEntries(
          rows.flatMap((row) => {
            const mark = row.querySelector('[data-testid=tool-would-block]');
            return mark ? [[row.getAttribute('data-tool') ?? '', mark.textContent ?? '']] : [];
          }),
        ),
        shadow: document.querySelector('[data-testid=shadow-mode]') !== null,
        budget: document.querySelector('[data-testid=budget-spent]')?.textContent ?? null,
        tokens: document.querySelector('[data-testid=token-total]')?.textContent ?? '',
      };
      const json = JSON.stringify(shown);
      if (seen.at(-1) !== json) seen.push(json);
    };
    new MutationObserver(record).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
}

async function recorded(page: Page): Promise<Shown[]> {
  const seen = await page.evaluate(() => (window as unknown as { shown: string[] }).shown);
  return seen.map((json) => JSON.parse(json) as Shown);
}

/** Asks `question` of the agent `agentId` in a fresh page and waits for the end of the turn. */
async function askInFreshPage(page: Page, agentId: string, question: string): Promise<void> {
  await page.getByTestId('agent-picker').selectOption(agentId);
  await page.locator('[data-testid=graph-node][data-step=Research]').waitFor();
  await recordPanel(page);
  await page.getByTestId('message-input').fill(question);
  await page.getByTestId('message-input').press('Enter');
  await page.getByTestId('turn-timeline').getByText('End of turn').waitFor();
  await page.getByTestId('send').waitFor();
}

describe.skipIf(!browserTestsRun('inspector rollout browser tests'))(
  'shadow mode and token budgets in the inspector',
  { timeout: 60_000 },
  () => {
    let dir = '';
    let server: ServeProcess | undefined;
    let browser: Browser | undefined;

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), 'baton-rollout-'));
      writeFileSync(join(dir, 'rollout-shadow.json'), JSON.stringify(SHADOW_TEMPLATE, null, 2));
      writeFileSync(join(dir, 'rollout-budget.json'), JSON.stringify(BUDGET_TEMPLATE, null, 2));
      ({ server, browser } = await startInspectorRig(dir));
    });

    afterAll(async () => {
      await browser?.close();
      if (server) await stopServeProcess(server);
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('marks what shadow mode would have blocked, and runs it', async () => {
      const context = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
      const page = await context.newPage();
      const errors = collectErrors(page);
      await page.goto(`${server!.url}/`);
      await askInFreshPage(page, 'rollout-shadow', QUESTION);

      // While the turn ran, every tool was offered (nothing is enforced), with the shadow note
      // on, and the tools outside what enforcement would have offered were marked: before the
      // first model step only search would have been offered, then only think (the sequence),
      // then the step's tools. In that order; a loaded machine may render two snapshots at once.
      const shadowed = (await recorded(page)).filter((shown) => shown.shadow);
      const progression = ['think,reflect,compare', 'search,reflect,compare', 'reflect,compare'];
      const marked = shadowed.map((shown) => Object.keys(shown.wouldBlock).join(','));
      const positions = marked.map((tools) => progression.indexOf(tools));
      expect(positions, JSON.stringify(marked)).not.toContain(-1);
      expect(positions, JSON.stringify(marked)).toEqual([...positions].sort((a, b) => a - b));
      expect(marked.at(-1), JSON.stringify(marked)).toBe('reflect,compare');
      for (const shown of shadowed) expect(shown.allowed).toEqual(['search', 'think', 'reflect', 'compare']);
      // Each mark gives enforcement's reason once the server has explained that state.
      for (const text of shadowed.flatMap((shown) => Object.values(shown.wouldBlock))) {
        expect(text).toMatch(
          /^would have blocked \(shadow mode\)(: step "Research" (allows only search, think|expects \w+ next \(position \d of 2\)))?$/,
        );
      }

      // What enforcement would have refused ran: reflect's call is a card like the others, done.
      for (const tool of ['search', 'think', 'reflect']) {
        expect(await page.locator(`[data-testid=tool-card][data-tool=${tool}]`).getAttribute('data-state')).toBe(
          'done',
        );
      }
      expect(await page.locator('[data-testid=tool-card][data-state=rejected]').count()).toBe(0);

      // Once the turn is over, the page still says shadow mode: every tool offered, and the two
      // that enforcement would refuse marked with its reason (the sequence is done: the step's
      // allowed tools are the rule now).
      await expect.poll(() => page.getByTestId('tool-would-block').count()).toBe(2);
      expect(await page.getByTestId('shadow-mode').isVisible()).toBe(true);
      const rows = page.getByTestId('tool-status');
      expect(
        await rows.evaluateAll((items) =>
          items.map((i) => `${i.getAttribute('data-tool')}:${i.getAttribute('data-allowed')}`),
        ),
      ).toEqual(['search:true', 'think:true', 'reflect:true', 'compare:true']);
      for (const tool of ['reflect', 'compare']) {
        await expect
          .poll(() =>
            page.locator(`[data-testid=tool-status][data-tool=${tool}]`).getByTestId('tool-would-block').textContent(),
          )
          .toBe('would have blocked (shadow mode): step "Research" allows only search, think');
      }

      // The session timeline has the decision that would have refused reflect, and opening the
      // first offer shows the session then: everything offered, think marked, because the
      // sequence expected search first.
      const timeline = page.getByTestId('session-timeline');
      await expect
        .poll(() => timeline.locator('[data-testid=timeline-entry][data-type=tool-would-block]').textContent())
        .toMatch(/would have refused reflect \(shadow mode\): step "Research" allows only search, think$/);
      const firstOffer = timeline.locator('[data-testid=timeline-entry][data-type=tools-offered]').first();
      expect(await firstOffer.textContent()).toMatch(
        /offered: search, think, reflect, compare \(would offer: search\)$/,
      );
      await firstOffer.click();
      const then = timeline.getByTestId('timeline-state');
      expect(await then.getByTestId('timeline-shadow-mode').isVisible()).toBe(true);
      expect(
        await then
          .locator('[data-testid=timeline-tool-status][data-tool=think]')
          .getByTestId('timeline-tool-would-block')
          .textContent(),
      ).toBe('would have blocked (shadow mode): step "Research" expects search next (position 1 of 2)');
      expect(
        await then
          .locator('[data-testid=timeline-tool-status][data-tool=search]')
          .getByTestId('timeline-tool-would-block')
          .count(),
      ).toBe(0);

      expect(await overflowsHorizontally(page)).toBe(false);
      expect(errors).toEqual([]);
      await context.close();
    });

    it('says when the token budget is spent, with the numbers, and offers no tool', async () => {
      const context = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
      const page = await context.newPage();
      const errors = collectErrors(page);
      await page.goto(`${server!.url}/`);
      await askInFreshPage(page, 'rollout-budget', QUESTION);

      // The first model step was offered every tool (nothing spent yet) and called search; its
      // tokens spent the budget, so the next step was offered none, and the banner said so with
      // the session's total at that point, which the token panel showed too.
      const shown = await recorded(page);
      const first = shown.findIndex((s) => s.allowed.length > 0);
      const spent = shown.findIndex((s) => s.budget !== null);
      expect(first, JSON.stringify(shown)).toBeGreaterThanOrEqual(0);
      expect(shown[first]).toMatchObject({ allowed: ['search', 'think', 'reflect'], budget: null });
      expect(spent, JSON.stringify(shown)).toBeGreaterThan(first);
      const banner = shown[spent]!;
      const numbers = /^Token budget of the session spent \(([\d,]+) of 300\): no tool is offered\.$/.exec(
        banner.budget ?? '',
      );
      expect(numbers, banner.budget ?? '').not.toBeNull();
      const used = Number(numbers![1]!.replaceAll(',', ''));
      expect(used).toBeGreaterThan(BUDGET);
      expect(banner.tokens).toBe(used.toLocaleString('en-US'));
      expect(banner.allowed).toEqual([]);

      // Only the call made before the budget was spent ran; then no model call was made: the
      // answer is Baton's, saying that the budget is spent.
      const cards = page.getByTestId('tool-card');
      expect(await cards.count()).toBe(1);
      expect(await cards.first().getAttribute('data-tool')).toBe('search');
      await expect
        .poll(() => page.getByTestId('message-assistant').getByTestId('message-text').last().textContent())
        .toContain('token budget of this conversation is spent');

      // Once the turn is over the banner stays, with the session's total (no tokens were spent
      // after it), and every tool is blocked for the budget, as the next turn will find it.
      const total = (await page.getByTestId('token-total').textContent()) ?? '';
      expect(Number(total.replaceAll(',', ''))).toBe(used);
      await expect
        .poll(() => page.getByTestId('budget-spent').textContent())
        .toBe(`Token budget of the session spent (${total} of 300): no tool is offered.`);
      for (const tool of BUDGET_TEMPLATE.tools) {
        const row = page.locator(`[data-testid=tool-status][data-tool=${tool}]`);
        expect(await row.getAttribute('data-allowed')).toBe('false');
        await expect
          .poll(() => row.getByTestId('tool-reason').textContent())
          .toBe(
            `the token budget of this session is spent (${total.replaceAll(',', '')} of 300 tokens); answer without tools`,
          );
      }

      // The timeline says when it was spent; the session before the first model step had every tool.
      const timeline = page.getByTestId('session-timeline');
      await expect
        .poll(() => timeline.locator('[data-testid=timeline-entry][data-type=budget-exceeded]').textContent())
        .toMatch(new RegExp(`token budget of the session spent \\(${numbers![1]} of 300\\)$`));
      await timeline.locator('[data-testid=timeline-entry][data-type=tools-offered]').first().click();
      const then = timeline.getByTestId('timeline-state');
      expect(await then.getByTestId('timeline-budget-spent').count()).toBe(0);
      expect(
        await then
          .getByTestId('timeline-tool-status')
          .evaluateAll((items) => items.map((i) => i.getAttribute('data-allowed'))),
      ).toEqual(['true', 'true', 'true']);

      expect(errors).toEqual([]);
      await context.close();
    });
  },
);
