/**
 * DNS rebinding: a site the user visits can make its own name resolve to 127.0.0.1, so that
 * its page's requests reach a server on the user's machine as same-origin ones and the page
 * reads their answers. A server that listens on loopback only therefore answers only requests
 * whose `Host` names loopback (`baton serve`, `baton mcp --http`).
 */
import { errorResponse, HttpError } from './http-errors.js';

/** A fetch handler, as Hono's node server calls it (`env`: its bindings). */
export type LoopbackFetch<ENV> = (request: Request, env: ENV) => Response | Promise<Response>;

/** Whether a host name or address names this machine's loopback: `localhost` (and its subdomains), 127/8, ::1. */
export function isLoopback(host: string): boolean {
  const name = host
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '');
  return (
    name === 'localhost' ||
    name.endsWith('.localhost') ||
    name === '::1' ||
    /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name) ||
    // 127/8 mapped into IPv6, as written (`::ffff:127.0.0.1`) or as a URL normalizes it.
    /^::ffff:127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name) ||
    /^::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}$/.test(name)
  );
}

/**
 * A server listening on loopback only (the default `--host`) answers only requests whose `Host`
 * names loopback, else `403 cross-origin`. A site can otherwise reach it through DNS rebinding:
 * the page loads from the site's own name, which then resolves to 127.0.0.1, so the browser
 * sends the page's requests here as same-origin ones, and the page reads every session and runs
 * turns. A proxy on the machine that forwards with another `Host` (nginx's
 * `proxy_set_header Host $host`) needs `--host` set to the interface it reaches, such as `0.0.0.0`
 * behind a firewall; nginx's default (`$proxy_host`) passes.
 */
export function loopbackHostsOnly<ENV>(fetch: LoopbackFetch<ENV>): LoopbackFetch<ENV> {
  return (request, env) => {
    const { hostname } = new URL(request.url);
    if (isLoopback(hostname)) return fetch(request, env);
    const refused = errorResponse(
      new HttpError(
        'cross-origin',
        `This server listens on loopback only and answers requests for localhost, not for "${hostname}" (DNS rebinding); listen with --host to serve other names.`,
        { path: 'header.host' },
      ),
    );
    return Response.json(refused.body, { status: refused.status });
  };
}
