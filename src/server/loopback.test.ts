import { describe, expect, it } from 'vitest';
import { isLoopback, loopbackHostsOnly } from './loopback.js';

/** The host name a request for `host` carries, as the URL of the request gives it. */
const hostnameOf = (host: string) => new URL(`http://${host}/`).hostname;

describe('isLoopback', () => {
  it('takes every way a browser can write a loopback host, as the request URL gives it', () => {
    for (const host of [
      'localhost',
      'LOCALHOST:80',
      'localhost.',
      'app.localhost',
      '127.0.0.1',
      '127.1',
      '0x7f.0.0.1',
      '2130706433',
      '[::1]',
      '[0:0:0:0:0:0:0:1]',
      '[::ffff:127.0.0.1]',
    ]) {
      expect(isLoopback(hostnameOf(host)), host).toBe(true);
    }
  });

  it('refuses every other name, however close to a loopback one it looks', () => {
    for (const host of [
      'localhost.evil.example',
      '127.0.0.1.evil.example',
      '0.0.0.0',
      '[::]',
      '10.0.0.1',
      'evil.example',
    ]) {
      expect(isLoopback(hostnameOf(host)), host).toBe(false);
    }
  });
});

describe('loopbackHostsOnly', () => {
  const fetch = loopbackHostsOnly<undefined>(() => new Response('ok'));

  it('answers a loopback name and refuses a rebound one with 403 cross-origin', async () => {
    expect(await (await fetch(new Request('http://localhost:4000/api/agents'), undefined)).text()).toBe('ok');
    const refused = await fetch(new Request('http://rebind.attacker.example:4000/api/agents'), undefined);
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ error: { code: 'cross-origin', path: 'header.host' } });
  });
});
