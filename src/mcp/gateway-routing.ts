/**
 * Pass-through with several upstreams: what the gateway does not decide goes to the upstream it
 * belongs to. Prompts are qualified like tools (`fs__review`) and lists are merged; a resource goes
 * to the upstream that listed its URI (else to each that serves resources, in order, until one
 * has it); completions follow their prompt or resource. With one upstream nothing is renamed and
 * every request goes there as it is. An upstream that is restarting is left out of merged lists
 * and of the search for a resource; a request meant for it alone is refused by `send`.
 */
import { ErrorCode, McpError, type Request } from '@modelcontextprotocol/sdk/types.js';
import type { UpstreamConnection } from './gateway-upstream.js';

/** Sends `request` to `upstream` and resolves to its result. */
export type Send = (upstream: UpstreamConnection, request: Request) => Promise<Record<string, unknown>>;

type Feature = 'resources' | 'prompts' | 'completions' | 'logging';

/** The upstreams that declare `feature`, in order. */
function serving(upstreams: readonly UpstreamConnection[], feature: Feature): UpstreamConnection[] {
  return upstreams.filter((upstream) => upstream.client.getServerCapabilities()?.[feature] !== undefined);
}

/**
 * The upstreams that declare `feature` and can be asked now: a merged list leaves out one that
 * is restarting (its items come back with it) rather than failing for all.
 */
function servingNow(upstreams: readonly UpstreamConnection[], feature: Feature): UpstreamConnection[] {
  return serving(upstreams, feature).filter((upstream) => upstream.available);
}

/** Every page of a list request's `key` items from one upstream. */
async function listAll(upstream: UpstreamConnection, method: string, key: string, send: Send): Promise<unknown[]> {
  const items: unknown[] = [];
  let cursor: string | undefined;
  do {
    const page = await send(upstream, { method, params: cursor === undefined ? {} : { cursor } });
    items.push(...((page[key] as unknown[] | undefined) ?? []));
    cursor = typeof page.nextCursor === 'string' ? page.nextCursor : undefined;
  } while (cursor !== undefined && items.length < 10_000);
  return items;
}

/** The upstream whose prefix `name` carries, and the name without it. */
function byPrefix(
  upstreams: readonly UpstreamConnection[],
  name: unknown,
): { upstream: UpstreamConnection; name: string } | undefined {
  if (typeof name !== 'string') return undefined;
  const upstream = upstreams.find((candidate) => name.startsWith(candidate.prefix));
  return upstream === undefined ? undefined : { upstream, name: name.slice(upstream.prefix.length) };
}

function notFound(what: string): McpError {
  return new McpError(ErrorCode.InvalidParams, `${what}: no upstream has it`);
}

/** Routes one request across several upstreams (see the module comment). */
export async function routeMany(
  upstreams: readonly UpstreamConnection[],
  request: Request,
  owners: Map<string, UpstreamConnection>,
  send: Send,
): Promise<Record<string, unknown>> {
  const params = (request.params ?? {}) as Record<string, unknown>;
  switch (request.method) {
    case 'prompts/list': {
      const lists = await Promise.all(
        servingNow(upstreams, 'prompts').map(async (upstream) =>
          (await listAll(upstream, request.method, 'prompts', send)).map((prompt) => ({
            ...(prompt as Record<string, unknown>),
            name: `${upstream.prefix}${(prompt as { name: string }).name}`,
          })),
        ),
      );
      return { prompts: lists.flat() };
    }
    case 'prompts/get': {
      const target = byPrefix(serving(upstreams, 'prompts'), params.name);
      if (target === undefined) throw notFound(`prompt "${String(params.name)}"`);
      return send(target.upstream, { ...request, params: { ...params, name: target.name } });
    }
    case 'resources/list':
    case 'resources/templates/list': {
      const key = request.method === 'resources/list' ? 'resources' : 'resourceTemplates';
      const lists = await Promise.all(
        servingNow(upstreams, 'resources').map(async (upstream) => {
          const items = await listAll(upstream, request.method, key, send);
          for (const item of items) {
            const uri = (item as { uri?: unknown }).uri;
            if (typeof uri === 'string' && !owners.has(uri)) owners.set(uri, upstream);
          }
          return items;
        }),
      );
      return { [key]: lists.flat() };
    }
    case 'resources/read':
    case 'resources/subscribe':
    case 'resources/unsubscribe': {
      const uri = String(params.uri);
      const owner = owners.get(uri);
      if (owner !== undefined) return send(owner, request);
      let last: unknown = notFound(`resource "${uri}"`);
      for (const upstream of servingNow(upstreams, 'resources')) {
        try {
          const result = await send(upstream, request);
          owners.set(uri, upstream);
          return result;
        } catch (error) {
          last = error;
        }
      }
      throw last;
    }
    case 'completion/complete': {
      const ref = (params.ref ?? {}) as { type?: string; name?: unknown; uri?: unknown };
      const candidates = serving(upstreams, 'completions');
      if (ref.type === 'ref/prompt') {
        const target = byPrefix(candidates, ref.name);
        if (target === undefined) throw notFound(`prompt "${String(ref.name)}"`);
        return send(target.upstream, { ...request, params: { ...params, ref: { ...ref, name: target.name } } });
      }
      const owner = typeof ref.uri === 'string' ? owners.get(ref.uri) : undefined;
      const upstream = owner ?? candidates[0];
      if (upstream === undefined) throw notFound('completion');
      return send(upstream, request);
    }
    default: {
      // Anything else (an extension's method): the first upstream that answers it.
      const upstream = upstreams[0];
      if (upstream === undefined) throw new McpError(ErrorCode.MethodNotFound, `Method not found: ${request.method}`);
      return send(upstream, request);
    }
  }
}
