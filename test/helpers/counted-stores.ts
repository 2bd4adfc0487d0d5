/**
 * Stores on real Redis and PostgreSQL servers that count their round trips on the wire (every
 * command the Redis client sends, every statement a PostgreSQL connection runs), and the
 * research turn whose round trips the tests and `npm run bench` count. One copy, shared by
 * test/round-trips.test.ts, test/mcp-round-trips.test.ts and bench/round-trips.ts, so the
 * figures the benchmark prints are counted the way the tests assert them.
 */
import { isStepCount, streamText } from 'ai';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createAgent } from '../../src/agents/create-agent.js';
import { createOfflineModel } from '../../src/ai-sdk/offline-model.js';
import { orchestrate } from '../../src/ai-sdk/orchestrate.js';
import type { OrchestrationManager } from '../../src/orchestration/orchestration-manager.js';
import { postgresStore } from '../../src/stores/postgres.js';
import { redisStore } from '../../src/stores/redis.js';
import type { SessionStore } from '../../src/stores/types.js';
import type { loadTemplate } from '../../src/templates/load-template.js';

/** The question of a research turn: ResearchMode runs search, think, reflect, then answers. */
export const RESEARCH_QUESTION = 'How many electric vehicles will be on the road by 2030?';

/** A store on the wire, and the round trips it made since the last `reset()`. */
export interface CountedStore {
  store: SessionStore;
  trips: () => number;
  /** The writes among those round trips (what commits: the reads left out). */
  writes: () => number;
  reset: () => void;
  /** Closes the store and removes what it wrote (its keys, its tables). */
  close: () => Promise<void>;
}

/** A Redis client that counts the commands it sends. */
export async function countingRedis(
  url: string,
): Promise<{ client: Redis; trips: () => number; writes: () => number; reset: () => void }> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  await client.connect();
  let sent = 0;
  let reads = 0;
  const original = client.sendCommand.bind(client);
  client.sendCommand = ((...args: Parameters<typeof original>) => {
    sent++;
    if (READ_COMMANDS.has(args[0].name.toLowerCase())) reads++;
    return original(...args);
  }) as typeof client.sendCommand;
  return {
    client,
    trips: () => sent,
    writes: () => sent - reads,
    reset: () => {
      sent = 0;
      reads = 0;
    },
  };
}

/** Redis commands that only read. */
const READ_COMMANDS = new Set(['get', 'mget', 'exists', 'ttl', 'pttl', 'zrange', 'zcard', 'lrange', 'llen']);

/** A Redis store under `prefix`, counted. */
export async function countedRedis(url: string, prefix: string): Promise<CountedStore> {
  const { client, trips, writes, reset } = await countingRedis(url);
  const store = redisStore({ client, prefix });
  return {
    store,
    trips,
    writes,
    reset,
    close: async () => {
      await store.close();
      const keys = await client.keys(`${prefix}*`);
      if (keys.length > 0) await client.del(...keys);
      client.disconnect();
    },
  };
}

/** Statements sent on the connections of one {@link countPostgresStatements} label. */
export interface StatementCount {
  sent: number;
  /** Those that only read (a plain SELECT: a write's CTEs begin with WITH). */
  reads: number;
}

/**
 * Statements sent per label, by the `application_name` of the connections. Every statement,
 * through a client checked out of a pool or kept by the store, ends in a `Client.query`; counting
 * there (patched once, for the whole process) counts each once, whoever made the pool.
 */
const statementCounts = new Map<string, StatementCount>();
let clientQueryPatched = false;

function patchClientQuery(): void {
  if (clientQueryPatched) return;
  clientQueryPatched = true;
  const proto = pg.Client.prototype as unknown as {
    query: (...args: unknown[]) => unknown;
    connectionParameters?: { application_name?: string };
  };
  const query = proto.query;
  proto.query = function (this: typeof proto, ...args: unknown[]) {
    const name = this.connectionParameters?.application_name;
    const count = name === undefined ? undefined : statementCounts.get(name);
    if (count !== undefined) {
      count.sent++;
      const statement = args[0] as string | { text?: string } | undefined;
      const text = typeof statement === 'string' ? statement : (statement?.text ?? '');
      if (/^\s*SELECT\b/i.test(text) && !/\bFOR UPDATE\b/i.test(text)) count.reads++;
    }
    return query.apply(this, args);
  };
}

/**
 * Counts the statements sent on connections made from the returned `connectionString` (the given
 * one, with an `application_name` of `label`), until `stop()`. A store given that string makes its
 * own pool, as an app's `postgresStore({ connectionString })` does.
 */
export function countPostgresStatements(
  connectionString: string,
  label: string,
): { connectionString: string; count: StatementCount; stop: () => void } {
  patchClientQuery();
  const url = new URL(connectionString);
  url.searchParams.set('application_name', label);
  const count: StatementCount = { sent: 0, reads: 0 };
  statementCounts.set(label, count);
  return { connectionString: url.href, count, stop: () => statementCounts.delete(label) };
}

/** Drops the tables of a PostgreSQL store in `table`. */
export async function dropPostgresTables(connectionString: string, table: string): Promise<void> {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    await client.query(`DROP TABLE IF EXISTS "${table}_log", "${table}", "${table}_migrations"`);
  } finally {
    await client.end();
  }
}

/**
 * A PostgreSQL store in `table`, on the pool it makes itself (what apps get), counted from
 * after its migrations.
 */
export async function countedPostgres(url: string, table: string): Promise<CountedStore> {
  const counting = countPostgresStatements(url, `baton-trips-${table.slice(-24)}`);
  const { count } = counting;
  const store = postgresStore({ connectionString: counting.connectionString, table });
  await store.get('warm-up'); // migrations and prepared statements, before counting
  const reset = () => {
    count.sent = 0;
    count.reads = 0;
  };
  reset();
  return {
    store,
    trips: () => count.sent,
    writes: () => count.sent - count.reads,
    reset,
    close: async () => {
      await store.close();
      counting.stop();
      await dropPostgresTables(url, table);
    },
  };
}

type Template = Awaited<ReturnType<typeof loadTemplate>>;

/** One research turn through `orchestrate()` + `streamText` with the offline model on `manager`. */
export async function researchTurn(
  template: Template,
  manager: OrchestrationManager,
  sessionId: string,
  options: { newSession?: boolean } = {},
): Promise<void> {
  const agent = createAgent(template, { model: 'offline', manager });
  const messages = [{ role: 'user' as const, content: RESEARCH_QUESTION }];
  const orchestration = orchestrate({ manager, config: template, sessionId, tools: agent.tools, messages, ...options });
  const result = streamText({ model: createOfflineModel(), messages, stopWhen: isStepCount(8), ...orchestration });
  await result.consumeStream();
  await orchestration.settled();
}
