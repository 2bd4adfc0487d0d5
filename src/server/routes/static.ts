/**
 * The inspector's files at `/`, and its `index.html` for any other page path (client-side
 * routes). Only GET and HEAD outside `/api` and `/healthz` reach it.
 */
import { Hono, type MiddlewareHandler } from 'hono';

/** The inspector routes, to mount at `/`, serving the built files of `root`. */
export function staticRoutes(root: string): Hono {
  let handler: MiddlewareHandler | undefined;
  return new Hono().use('*', async (c, next) => {
    if (c.req.method !== 'GET' && c.req.method !== 'HEAD') return next();
    if (c.req.path.startsWith('/api/') || c.req.path === '/healthz') return next();
    // Imported on first use: only Node serves files from disk; other runtimes skip the page.
    if (handler === undefined) {
      const { serveStatic } = await import('@hono/node-server/serve-static');
      const files = serveStatic({ root });
      const index = serveStatic({ root, rewriteRequestPath: () => '/index.html' });
      handler = async (context, proceed) => {
        // serveStatic answers by returning a Response; returned from inside a `next` callback it
        // would be dropped (the context never finalized: a 500), so the page is passed on here.
        let page: Response | undefined;
        const response = await files(context, async () => {
          page = (await index(context, proceed)) ?? undefined;
        });
        return response ?? page;
      };
    }
    return handler(c, next);
  });
}
