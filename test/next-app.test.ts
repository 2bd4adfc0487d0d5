/**
 * A Next.js 16 app (Turbopack) built from the packed tarball with no special configuration (no
 * next.config, no `serverExternalPackages`): test/fixtures/next-app, the routes the README shows.
 * `next build`, then `next start`, then:
 *
 * - the catch-all route mounting `createApp` (SQLite sessions) answers a research turn, and its
 *   chat id continues the session;
 * - the route of its own (`orchestrate()` + `streamText` on a SQLite store, with
 *   `orchestrationParts()`) answers with Baton's parts, the chat id as the session;
 * - a store whose package the app lacks says which package, from inside the bundle;
 * - in Chromium, the page's `useChat` gets the parts and continues its session.
 *
 * Before the fixes this test was written for, `next build` failed on the inspector's folder
 * (`Can't resolve '../../dist/web/'`) and the SQLite route answered `{"type":"error"}` because
 * the bundler had rewritten how `node:sqlite` is loaded.
 *
 * Installs come from the npm registry through npm, at the versions the repository has installed,
 * so npm's cache serves them (`--prefer-offline`). Next's telemetry is off: there is no network.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OrchestrationSnapshot } from '../src/ai-sdk/index.js';
import { CHROMIUM, CHROMIUM_ARGS, collectErrors, hasChromium } from './helpers/browser.js';
import { freePort } from './helpers/free-port.js';
import {
  appDirectory,
  childEnv,
  installedVersion,
  NPM_TIMEOUT_MS,
  packTarball,
  runOk,
} from './helpers/package-tarball.js';
import { servicesRequired } from './helpers/services.js';

const ROOT = new URL('..', import.meta.url).pathname;
const FIXTURE = join(ROOT, 'test/fixtures/next-app');
const QUESTION = 'What is CRISPR and what has it been used for?';
/** What `next build` and `next start` run with: no telemetry (no network here), no color codes. */
const NEXT_ENV = { NEXT_TELEMETRY_DISABLED: '1', NO_COLOR: '1' };

type Chunk = { type: string; data?: OrchestrationSnapshot; errorText?: string; messageMetadata?: unknown };

/** The UI message stream chunks of a response. */
async function chunksOf(response: Response): Promise<Chunk[]> {
  expect(response.status, await response.clone().text()).toBe(200);
  return (await response.text())
    .split('\n')
    .filter((line) => line.startsWith('data: {'))
    .map((line) => JSON.parse(line.slice('data: '.length)) as Chunk);
}

const snapshotsOf = (chunks: Chunk[]) =>
  chunks.filter((chunk) => chunk.type === 'data-orchestration').map((chunk) => chunk.data!);

/** A chat request as useChat's default transport posts it. */
function useChatRequest(url: string, id: string, text: string): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      id,
      messages: [{ id: crypto.randomUUID(), role: 'user', parts: [{ type: 'text', text }] }],
      trigger: 'submit-message',
    }),
  });
}

/** The code of a file without its leading comment lines. */
const code = (text: string) => text.replace(/^(\/\/[^\n]*\n)+/, '').trim();

it("has the README's routes as its own, so the README shows what this test builds and runs", () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const blocks = [...readme.matchAll(/```ts\n(\/\/ (app\/api\/\S+?\/route\.ts)[^\n]*\n[\s\S]*?)```/g)];
  expect(blocks.map((block) => block[2])).toEqual(['app/api/[...baton]/route.ts', 'app/api/research/route.ts']);
  for (const [, block, file] of blocks) {
    expect(code(block!), file).toBe(code(readFileSync(join(FIXTURE, file!), 'utf8')));
  }
});

describe('a Next.js 16 app built from the packed tarball', () => {
  let app = '';
  let next: ChildProcess | undefined;
  let output = '';
  let base = '';

  beforeAll(async () => {
    const tarball = await packTarball();
    app = appDirectory('baton-next-app-');
    cpSync(FIXTURE, app, { recursive: true });
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'next-consumer', private: true }));
    const same = (name: string) => `${name}@${installedVersion(name)}`;
    runOk(
      'npm',
      [
        'install',
        tarball,
        same('next'),
        same('react'),
        same('react-dom'),
        same('ai'),
        same('@ai-sdk/react'),
        same('typescript'),
        same('@types/react'),
        same('@types/react-dom'),
        same('@types/node'),
        '--prefer-offline',
        '--no-audit',
        '--no-fund',
        '--loglevel=error',
      ],
      app,
    );
    const nextBin = join(app, 'node_modules/next/dist/bin/next');
    const env = { ...childEnv(), ...NEXT_ENV };
    // The build typechecks the app too (its own tsconfig, against the tarball's declarations).
    const built = runOk(process.execPath, [nextBin, 'build'], app, NPM_TIMEOUT_MS);
    expect(built).toContain('/api/[...baton]');

    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    next = spawn(process.execPath, [nextBin, 'start', '-p', String(port), '-H', '127.0.0.1'], { cwd: app, env });
    await new Promise<void>((resolve, reject) => {
      const giveUp = setTimeout(() => reject(new Error(`next start did not start:\n${output}`)), 30_000);
      const onData = (chunk: Buffer) => {
        output += chunk.toString('utf8');
        if (/Ready in/.test(output)) {
          clearTimeout(giveUp);
          resolve();
        }
      };
      next!.stdout!.on('data', onData);
      next!.stderr!.on('data', onData);
      next!.once('exit', (code) => {
        clearTimeout(giveUp);
        reject(new Error(`next start exited with ${code}:\n${output}`));
      });
    });
  }, 3 * NPM_TIMEOUT_MS);

  afterAll(async () => {
    if (next && next.exitCode === null) {
      const exited = new Promise((resolve) => next!.once('exit', resolve));
      next.kill('SIGTERM');
      await exited;
    }
    if (app) rmSync(app, { recursive: true, force: true });
  });

  it('answers a research turn through the catch-all route mounting createApp, and continues the chat id', async () => {
    const agents = (await (await fetch(`${base}/api/agents`)).json()) as { agents: { id: string }[] };
    expect(agents.agents.map((agent) => agent.id)).toEqual(['research']);

    const first = await chunksOf(await useChatRequest(`${base}/api/chat/research`, 'next-app-chat', QUESTION));
    expect(first.filter((chunk) => chunk.type === 'error')).toEqual([]);
    const one = snapshotsOf(first).at(-1)!;
    expect(one).toMatchObject({ sessionId: 'next-app-chat', final: true, activeStep: 'Research' });
    expect(one.recentlyUsedTools.slice(0, 2)).toEqual(['search', 'think']);

    const second = await chunksOf(await useChatRequest(`${base}/api/chat/research`, 'next-app-chat', QUESTION));
    const two = snapshotsOf(second).at(-1)!;
    expect(two.sessionId).toBe('next-app-chat');
    expect(two.tokenUsage.totalTokens).toBeGreaterThan(one.tokenUsage.totalTokens);
    const stored = (await (await fetch(`${base}/api/sessions/next-app-chat`)).json()) as {
      state: OrchestrationSnapshot;
    };
    expect(stored.state.tokenUsage).toEqual(two.tokenUsage);
  });

  it("answers a research turn through its own route (orchestrate() on SQLite, orchestrationParts(), useChat's chat id)", async () => {
    const first = await chunksOf(await useChatRequest(`${base}/api/research`, 'own-route-chat', QUESTION));
    expect(first.filter((chunk) => chunk.type === 'error')).toEqual([]);
    const snapshots = snapshotsOf(first);
    expect(snapshots.map((snapshot) => snapshot.stepNumber)).toEqual([
      ...snapshots.slice(0, -1).map((_, i) => i),
      null,
    ]);
    const one = snapshots.at(-1)!;
    expect(one).toMatchObject({ sessionId: 'own-route-chat', agentId: 'research', final: true });
    expect(one.recentlyUsedTools.slice(0, 2)).toEqual(['search', 'think']);
    expect(one.sequence).toMatchObject({ completed: true });
    // Before the final part, the message's finish; after it, nothing but the stream's end.
    expect(first.at(-1)?.type).toBe('finish');

    const second = snapshotsOf(
      await chunksOf(await useChatRequest(`${base}/api/research`, 'own-route-chat', QUESTION)),
    );
    expect(second.at(-1)!.tokenUsage.totalTokens).toBeGreaterThan(one.tokenUsage.totalTokens);
  });

  it('names the missing package from inside the bundle, not a bundler error', async () => {
    const outcome = (await (await fetch(`${base}/api/missing`)).json()) as { name: string; message: string };
    expect(outcome.name).toBe('MissingDependencyError');
    expect(outcome.message).toContain('npm install ioredis');
  });

  it.skipIf(!hasChromium && !servicesRequired())(
    "gets the parts in useChat's messages in Chromium, and continues the page's session",
    async () => {
      const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
      try {
        const page = await browser.newPage();
        const errors = collectErrors(page);
        await page.goto(base);
        const ask = async (answers: number) => {
          await page.getByTestId('input').fill(QUESTION);
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
        };
        const one = await ask(1);
        expect(one.sessionId).toMatch(/^[A-Za-z0-9]{16}$/); // useChat's own id
        const two = await ask(2);
        expect(two.sessionId).toBe(one.sessionId);
        expect(two.tokenUsage.totalTokens).toBeGreaterThan(one.tokenUsage.totalTokens);
        expect(errors).toEqual([]);
      } finally {
        await browser.close();
      }
    },
  );
});
