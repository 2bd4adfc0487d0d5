/**
 * Stores by URL: `memory:`, `sqlite:path.db`, `redis://…`, `postgres://…`. The SQLite,
 * Redis and PostgreSQL modules are imported only when their URL is used, so a user of the
 * memory store never loads ioredis or pg.
 */
import { InvalidArgumentError } from '../core/errors.js';
import { memoryStore } from './memory.js';
import type { SessionStore, StoreOptions } from './types.js';

/** A store object, or a URL naming one. */
export type StoreSpec = SessionStore | string;

/** Opens the store a URL names; passes a store object through unchanged. */
export async function resolveStore(spec: StoreSpec, options: StoreOptions = {}): Promise<SessionStore> {
  if (typeof spec !== 'string') return spec;
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(spec)?.[1]?.toLowerCase();
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
      throw new InvalidArgumentError(
        'store',
        `"${redact(spec)}" is not a store URL; use memory:, sqlite:path/to/state.db, redis://host:6379 or postgres://user@host/db`,
      );
  }
}

/** The URL with any password hidden, for messages. */
export function redact(url: string): string {
  return url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
}
