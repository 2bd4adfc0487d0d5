/**
 * The inspector's files, served at the root or under a prefix an enclosing app mounts Baton
 * under (`app.route('/baton', batonApp)`), with the API beside them.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Hono } from 'hono';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { loadTemplate } from '../../templates/load-template.js';
import { type BatonApp, createApp } from '../create-app.js';

const reasoner = await loadTemplate(
  new URL('../../../examples/agents/cognitive-reasoner.json', import.meta.url).pathname,
);
const webRoot = mkdtempSync(join(tmpdir(), 'baton-web-'));
mkdirSync(join(webRoot, 'assets'));
writeFileSync(join(webRoot, 'index.html'), '<!doctype html><script type="module" src="./assets/app.js"></script>');
writeFileSync(join(webRoot, 'assets/app.js'), 'console.log("inspector")');
afterAll(() => rmSync(webRoot, { recursive: true, force: true }));

const apps: BatonApp[] = [];
afterEach(async () => {
  for (const app of apps.splice(0)) await app.close();
});

function baton(): BatonApp {
  const app = createApp({ agents: [reasoner], model: 'offline', webRoot });
  apps.push(app);
  return app;
}

describe.each([
  { mount: 'at the root', prefix: '', serve: (app: BatonApp): Hono => app },
  { mount: 'under /baton', prefix: '/baton', serve: (app: BatonApp) => new Hono().route('/baton', app) },
  { mount: 'under /t/:tenant', prefix: '/t/acme', serve: (app: BatonApp) => new Hono().route('/t/:tenant', app) },
])('the inspector mounted $mount', ({ prefix, serve }) => {
  it('serves its page and its assets, and the API beside them', async () => {
    const app = serve(baton());
    const page = await app.request(`${prefix}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const script = await app.request(`${prefix}/assets/app.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toMatch(/javascript/);
    expect(await script.text()).toBe('console.log("inspector")');
    const agents = await app.request(`${prefix}/api/agents`);
    expect(agents.status).toBe(200);
    expect(((await agents.json()) as { agents: { id: string }[] }).agents.map((a) => a.id)).toEqual([
      'cognitive-reasoner',
    ]);
    expect((await app.request(`${prefix}/healthz`)).status).toBe(200);
  });

  it('answers a missing asset with 404, not with the page a browser would run as a script', async () => {
    const app = serve(baton());
    expect((await app.request(`${prefix}/assets/gone-1234.js`)).status).toBe(404);
  });

  it('never answers an API path with the page', async () => {
    const app = serve(baton());
    const response = await app.request(`${prefix}/api/no-such-route`);
    expect(response.status).toBe(404);
    expect(response.headers.get('content-type') ?? '').not.toMatch(/^text\/html/);
  });
});

describe('the page address under a prefix', () => {
  it('redirects /baton to /baton/, where the page’s relative URLs resolve under the prefix', async () => {
    const app = new Hono().route('/baton', baton());
    const response = await app.request('/baton?agent=x');
    expect(response.status).toBe(308);
    expect(response.headers.get('location')).toBe('/baton/?agent=x');
  });
});
