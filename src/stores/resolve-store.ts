/**
 * Stores by URL: `memory:`, `sqlite:path.db`, `redis://…`, `postgres://…`. The SQLite,
 * Redis and PostgreSQL modules are imported only when their URL is used, so a user of the
 * memory store never loads ioredis or pg.
 */
import { InvalidArgumentError } from '../core/errors.js';
import { memoryStore } from './memory.js';
import { loadNodeSqlite, loadOptionalDependency } from './optional-dependency.js';
import type { SessionStore, StoreOptions } from './types.js';

/** A store object, or a URL naming one. */
export type StoreSpec = SessionStore | string;

const STORE_SCHEMES = ['memory', 'sqlite', 'redis', 'rediss', 'postgres', 'postgresql'] as const;

function schemeOf(url: string): string | undefined {
  return /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
}

/** What is wrong with a store URL (an unknown scheme), without opening it; undefined when nothing is. */
export function storeUrlProblem(url: string): string | undefined {
  const scheme = schemeOf(url);
  if (scheme !== undefined && (STORE_SCHEMES as readonly string[]).includes(scheme)) return undefined;
  return `"${redact(url)}" is not a store URL; use memory:, sqlite:path/to/state.db, redis://host:6379 or postgres://user@host/db`;
}

/**
 * Checks, without connecting, that this process can run the store a URL names: `node:sqlite`
 * for SQLite, the ioredis or pg package for Redis or PostgreSQL. Throws the error that says what
 * to install or which Node.js to use, so an app fails when it is created, not at its first request.
 */
export function checkStoreRuntime(url: string): void {
  switch (schemeOf(url)) {
    case 'sqlite':
      loadNodeSqlite();
      return;
    case 'redis':
    case 'rediss':
      loadOptionalDependency('ioredis', 'The Redis store');
      return;
    case 'postgres':
    case 'postgresql':
      loadOptionalDependency('pg', 'The PostgreSQL store');
      return;
  }
}

/** Opens the store a URL names; passes a store object through unchanged. */
export async function resolveStore(spec: StoreSpec, options: StoreOptions = {}): Promise<SessionStore> {
  if (typeof spec !== 'string') return spec;
  const scheme = schemeOf(spec);
  switch (scheme) {
    case 'memory':
      return memoryStore(options);
    case 'sqlite': {
      const { sqliteStore, parseSqliteUrl } = await import('./sqlite.js');
      return sqliteStore({ ...parseSqliteUrl(spec), ...options });
    }
    case 'redis':
    case 'rediss': {
      const { redisStore } = await import('./redis.js');
      return redisStore({ url: spec, ...options });
    }
    case 'postgres':
    case 'postgresql': {
      const { postgresStore } = await import('./postgres.js');
      return postgresStore({ connectionString: spec, ...options });
    }
    default:
      throw new InvalidArgumentError('store', storeUrlProblem(spec) ?? 'not a store URL');
  }
}

/** The URL with any password hidden, for messages. */
export function redact(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
}
