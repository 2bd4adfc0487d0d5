/**
 * Store round trips of a 3-tool research turn (ResearchMode: search, think, reflect, then the
 * answer), counted on the wire of real Redis and PostgreSQL servers the way
 * test/round-trips.test.ts counts them (every Redis command the client sends, every PostgreSQL
 * statement a pooled client runs): through the library (`orchestrate()` + `streamText`, a
 * new session and one the store knows) and through the server (`createApp`, a new session and a
 * continued one). Printed by `npm run bench`; alone: `npx tsx bench/round-trips.ts`.
 */
import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { createApp } from '../src/server/create-app.js';
import { loadTemplate } from '../src/templates/load-template.js';
import { chunksOf, postJson, userMessage } from '../test/helpers/chat-requests.js';
import {
  countedPostgres,
  countedRedis,
  researchTurn as libraryTurn,
  RESEARCH_QUESTION as QUESTION,
} from '../test/helpers/counted-stores.js';

const REDIS_URL = process.env.BATON_BENCH_REDIS ?? 'redis://127.0.0.1:6379';
const POSTGRES_URL = process.env.BATON_BENCH_POSTGRES ?? 'postgres://postgres@127.0.0.1:5432/test';

type Template = Awaited<ReturnType<typeof loadTemplate>>;

/** Round trips per research turn, per path, on one store. */
export interface RoundTrips {
  store: 'redis' | 'postgres';
  /** A session the store knows (this process read or wrote it): the turn begins without a round trip. */
  library: number;
  /**
   * A session the process has not seen: the library reads it before the first model step, to
   * offer what its state allows (a read: the turn still makes 4 writes).
   */
  libraryNewSession: number;
  /** A new session the app says is new (`orchestrate({ newSession: true })`): no read. */
  libraryNewSessionHinted: number;
  serverNewSession: number;
  serverContinued: number;
  /** The most writes (round trips that commit) any of these paths made in one turn. */
  mostWrites: number;
}

async function countOn(kind: 'redis' | 'postgres', reasoner: Template): Promise<RoundTrips> {
  const run = randomUUID().slice(0, 8);
  const counted =
    kind === 'redis'
      ? await countedRedis(REDIS_URL, `baton-bench:trips:${run}:`)
      : await countedPostgres(POSTGRES_URL, `baton_bench_trips_${run}`);
  let mostWrites = 0;
  let writesBefore = 0;
  const since = (before: number) => {
    mostWrites = Math.max(mostWrites, counted.writes() - writesBefore);
    return counted.trips() - before;
  };
  const start = () => {
    writesBefore = counted.writes();
    return counted.trips();
  };
  try {
    const manager = createOrchestrationManager({ store: counted.store });
    const sessionId = `trips-lib-${randomUUID()}`;
    let before = start();
    await libraryTurn(reasoner, manager, sessionId); // a new session: the store learns it
    const libraryNewSession = since(before);
    before = start();
    await libraryTurn(reasoner, manager, sessionId);
    const library = since(before);
    before = start();
    await libraryTurn(reasoner, manager, `trips-lib-${randomUUID()}`, { newSession: true });
    const libraryNewSessionHinted = since(before);

    const served = createOrchestrationManager({ store: counted.store, eventLog: 100 });
    const app = createApp({ agents: [reasoner], model: 'offline', manager: served, webRoot: false });
    try {
      await chunksOf(await postJson(app, '/api/chat/cognitive-reasoner', { messages: [userMessage('Hello')] }));
      before = start();
      const first = await postJson(app, '/api/chat/cognitive-reasoner', { messages: [userMessage(QUESTION)] });
      await chunksOf(first);
      const serverNewSession = since(before);
      before = start();
      await chunksOf(
        await postJson(app, '/api/chat/cognitive-reasoner', {
          sessionId: first.headers.get('x-session-id'),
          messages: [
            userMessage(QUESTION),
            { id: 'a1', role: 'assistant', parts: [{ type: 'text', text: 'ok' }] },
            userMessage('And by 2040?'),
          ],
        }),
      );
      return {
        store: kind,
        library,
        libraryNewSession,
        libraryNewSessionHinted,
        serverNewSession,
        serverContinued: since(before),
        mostWrites,
      };
    } finally {
      await app.close();
    }
  } finally {
    await counted.close();
  }
}

/** Counts on each store that answers; a store that does not is reported and skipped. */
export async function runRoundTrips(): Promise<{ results: RoundTrips[]; skipped: string[] }> {
  const reasoner = await loadTemplate(new URL('../examples/agents/cognitive-reasoner.json', import.meta.url).pathname);
  const results: RoundTrips[] = [];
  const skipped: string[] = [];
  for (const kind of ['redis', 'postgres'] as const) {
    try {
      results.push(await countOn(kind, reasoner));
    } catch (error) {
      skipped.push(`${kind}: ${(error as Error).message}`);
    }
  }
  return { results, skipped };
}

/** The table `npm run bench` prints. */
export function formatRoundTrips({ results, skipped }: Awaited<ReturnType<typeof runRoundTrips>>): string {
  const lines = [
    'store       library, known session  library, new session  library, newSession: true  server, new session  server, continued  most writes',
  ];
  for (const r of results) {
    lines.push(
      `${r.store.padEnd(10)}  ${String(r.library).padStart(22)}  ${String(r.libraryNewSession).padStart(20)}  ${String(r.libraryNewSessionHinted).padStart(25)}  ${String(r.serverNewSession).padStart(19)}  ${String(r.serverContinued).padStart(17)}  ${String(r.mostWrites).padStart(11)}`,
    );
  }
  lines.push('(round trips per turn; a new session the library has not seen is read first: a read, no commit)');
  for (const s of skipped) lines.push(`not measured: ${s}`);
  return lines.join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  console.log(formatRoundTrips(await runRoundTrips()));
}
