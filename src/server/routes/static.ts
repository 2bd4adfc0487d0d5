/**
 * The inspector's files at `/`, and its `index.html` for any other page path (client-side
 * routes). Only GET and HEAD outside `/api` and `/healthz` reach it.
 *
 * The page works under a path prefix, however it gets there: its asset and API URLs are
 * relative, so behind a proxy that strips `/baton/` it asks for `/baton/api/...`; and in an app
 * that mounts Baton with `app.route('/baton', batonApp)` (where the request keeps its prefix),
 * the prefix is taken off here before a file is looked up. The page's own address needs its
 * trailing slash for relative URLs to resolve under it, so `/baton` redirects to `/baton/`.
 *
 * Every file goes with {@link PAGE_SECURITY_HEADERS}: the page can be framed only by its own
 * origin (a site that framed it could have the user click its reset and delete buttons unseen),
 * and runs only its own scripts.
 */
import { type Context, Hono, type MiddlewareHandler } from 'hono';

/**
 * The headers of the inspector's files. The built page has no inline script or style and loads
 * nothing from elsewhere (its only `data:` URL is the blank icon), so its policy allows its own
 * origin only; `frame-ancestors 'self'` (and `X-Frame-Options` for older browsers) keeps it
 * embeddable by the app that serves it (`app.route('/baton', batonApp)`), not by other sites.
 */
export const PAGE_SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'content-security-policy':
    "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'self'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'SAMEORIGIN',
  'referrer-policy': 'no-referrer',
});

/** The inspector routes, to mount at `/`, serving the built files of `root`. */
export function staticRoutes(root: string): Hono {
  let handler: MiddlewareHandler | undefined;
  return new Hono().use('*', async (c, next) => {
    if (c.req.method !== 'GET' && c.req.method !== 'HEAD') return next();
    const prefix = mountPrefix(c);
    const path = localPath(c);
    if (path.startsWith('/api/') || path === '/api' || path === '/healthz') return next();
    if (path === '') {
      const query = new URL(c.req.url).search;
      return c.redirect(`${prefix}/${query}`, 308);
    }
    // Imported on first use: only Node serves files from disk; other runtimes skip the page.
    if (handler === undefined) {
      const { serveStatic } = await import('@hono/node-server/serve-static');
      const files = serveStatic({
        root,
        rewriteRequestPath: (filePath, context) => filePath.slice(mountPrefix(context).length),
      });
      const index = serveStatic({ root, rewriteRequestPath: () => '/index.html' });
      handler = async (context, proceed) => {
        // serveStatic answers by returning a Response; returned from inside a `next` callback it
        // would be dropped (the context never finalized: a 500), so the page is passed on here.
        let page: Response | undefined;
        const response = await files(context, async () => {
          // A missing asset (a stale page's) is a 404, not the page, which a browser would try
          // to run as a script.
          if (localPath(context).startsWith('/assets/')) return proceed();
          page = (await index(context, proceed)) ?? undefined;
        });
        return response ?? page;
      };
    }
    for (const [name, value] of Object.entries(PAGE_SECURITY_HEADERS)) c.header(name, value);
    return handler(c, next);
  });
}

/** The request's path within Baton's app: without the prefix an enclosing app mounted it under. */
function localPath(c: Context): string {
  return c.req.path.slice(mountPrefix(c).length);
}

/**
 * The path an enclosing app mounted Baton under (`/baton` for `app.route('/baton', batonApp)`),
 * or '' at the root. The route pattern that reached this middleware is the mount path plus
 * `/*`; counting its segments also covers a mount path with parameters (`/:tenant`).
 */
function mountPrefix(c: Context): string {
  const mount = c.req.routePath.replace(/\/?\*$/, '');
  const depth = mount.split('/').filter(Boolean).length;
  if (depth === 0) return '';
  return c.req.path
    .split('/')
    .slice(0, depth + 1)
    .join('/');
}
