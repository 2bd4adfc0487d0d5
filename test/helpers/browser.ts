/**
 * What the inspector's browser tests share: Debian's Chromium for playwright-core, the build of
 * the page under test, and readings of a page (console errors, sideways overflow).
 *
 * Several browser test files may run at once (vitest runs files in parallel), and each serves
 * the page from dist/web: building it in every file would empty dist/web under a page another
 * file is loading. So {@link buildInspector} builds under a lock, and only when the inputs of
 * the build changed since the last build it made.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { serve } from '@hono/node-server';
import { type Browser, chromium, type Page } from 'playwright-core';
import type { BatonApp } from '../../src/server/create-app.js';
import { type ServeProcess, startServeProcess } from './serve-process.js';
import { servicesRequired } from './services.js';

const ROOT = new URL('../..', import.meta.url).pathname;

/** Where Debian's Chromium is. */
export const CHROMIUM = '/usr/bin/chromium';
/** Chromium's flags for these tests: headless, in a container, never reaching the network. */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

/** Whether Chromium is installed. */
export const hasChromium = existsSync(CHROMIUM);

/** Whether the browser tests run: with Chromium, or when required (then a missing one fails). */
export function browserTestsRun(file: string): boolean {
  if (!hasChromium && !servicesRequired()) {
    console.warn(
      `SKIPPING ${file}: ${CHROMIUM} is missing (apt-get install chromium); set BATON_REQUIRE_SERVICES=1 to make this a failure`,
    );
    return false;
  }
  return true;
}

/** Throws when the tests must run but Chromium is missing (BATON_REQUIRE_SERVICES=1). */
export function assertChromium(): void {
  if (!hasChromium) throw new Error(`BATON_REQUIRE_SERVICES=1 but ${CHROMIUM} is missing: apt-get install -y chromium`);
}

/** Runs a command with this Node.js to completion; rejects with its output when it fails. */
export function run(args: readonly string[]): Promise<void> {
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

/** Every file under `dir` (recursively), sorted, so that the hash does not depend on the listing order. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name))
    .sort();
}

/** A hash of what the build reads: the web app's files and the locked dependency versions. */
function buildInputsHash(): string {
  const hash = createHash('sha256');
  for (const file of [...filesUnder(join(ROOT, 'web')), join(ROOT, 'package-lock.json')]) {
    hash.update(relative(ROOT, file)).update('\0').update(readFileSync(file)).update('\0');
  }
  return hash.digest('hex');
}

/**
 * What the stamp of a build says: its inputs, and the page it produced. The page names its
 * assets by their content hashes, so a build made since by `npm run build:web` from other
 * sources no longer matches, and neither does a missing one.
 */
function buildStamp(inputs: string): string {
  const page = join(ROOT, 'dist/web/index.html');
  const output = existsSync(page) ? createHash('sha256').update(readFileSync(page)).digest('hex') : 'none';
  return `${inputs}\n${output}`;
}

const BUILD_LOCK = join(ROOT, '.tmp', 'inspector-build.lock');
const BUILD_STAMP = join(ROOT, '.tmp', 'inspector-build.stamp');

/** Whether the process that wrote `lock` (its `pid` file) is gone, leaving the lock behind. */
function lockAbandoned(lock: string): boolean {
  try {
    process.kill(Number(readFileSync(join(lock, 'pid'), 'utf8')), 0);
    return false;
  } catch (error) {
    // EPERM: the process exists (another user's); anything else (ESRCH, no pid file yet) may be stale.
    if ((error as NodeJS.ErrnoException).code === 'EPERM') return false;
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/**
 * Builds the inspector into dist/web (as `npm run build:web` does) unless the last build made
 * here had the same inputs and its output is still there. One file builds at a time.
 */
export async function buildInspector(): Promise<void> {
  mkdirSync(join(ROOT, '.tmp'), { recursive: true });
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      // mkdir is atomic: whoever creates the directory holds the lock.
      mkdirSync(BUILD_LOCK);
      writeFileSync(join(BUILD_LOCK, 'pid'), String(process.pid));
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      if (lockAbandoned(BUILD_LOCK)) rmSync(BUILD_LOCK, { recursive: true, force: true });
      else if (Date.now() > deadline) throw new Error(`${BUILD_LOCK} is still held after 120 s`);
      else await sleep(200);
    }
  }
  try {
    const inputs = buildInputsHash();
    if (existsSync(BUILD_STAMP) && readFileSync(BUILD_STAMP, 'utf8') === buildStamp(inputs)) return;
    rmSync(BUILD_STAMP, { force: true });
    await run([
      join(ROOT, 'node_modules/vite/bin/vite.js'),
      'build',
      '--config',
      'web/vite.config.ts',
      '--logLevel',
      'warn',
    ]);
    writeFileSync(BUILD_STAMP, buildStamp(inputs));
  } finally {
    rmSync(BUILD_LOCK, { recursive: true, force: true });
  }
}

/** Console errors and uncaught exceptions of a page, collected from the start. */
export function collectErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(`console: ${message.text()}`);
  });
  page.on('pageerror', (error) => errors.push(`pageerror: ${error.message}`));
  return errors;
}

/** Whether the page scrolls sideways (it should not, at any width). */
export async function overflowsHorizontally(page: Page): Promise<boolean> {
  return page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
}

/** What a browser test file runs against: `baton serve` and a Chromium. */
export interface InspectorRig {
  server: ServeProcess;
  browser: Browser;
}

/**
 * Builds the page (see {@link buildInspector}), starts `baton serve <agentsPath>` as a user
 * would, with the offline model and memory sessions, and launches Chromium. The offline model
 * waits a little per streamed chunk, so the page renders each model step as a user sees it.
 * The caller closes the browser and stops the server (`stopServeProcess`).
 */
export async function startInspectorRig(agentsPath: string): Promise<InspectorRig> {
  assertChromium();
  await buildInspector();
  const args = [agentsPath, '--model', 'offline', '--store', 'memory:', '--port', '0', '--offline-delay', '15'];
  const server = await startServeProcess(args);
  // launch() gives the browser a fresh temporary profile of its own, removed on close.
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  return { server, browser };
}

/**
 * Serves `app` on a free port of 127.0.0.1 in this process (for setups `baton serve` has no
 * flag for); `close` stops listening and closes the app.
 */
export async function serveInProcess(app: BatonApp): Promise<{ url: string; close: () => Promise<void> }> {
  const listening = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((resolve) => listening.once('listening', () => resolve()));
  const { port } = listening.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      await new Promise((resolve) => listening.close(resolve));
      await app.close();
    },
  };
}
