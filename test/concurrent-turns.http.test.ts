/**
 * Ten chat turns at once on ONE session, over a real `baton serve` process, as a hostile client
 * would send them: a tool the template allows once must run once, whatever the interleaving.
 * Before tool calls were reserved in the same store update that authorized them, this ran the
 * once-only tool 7-10 times (issue 10).
 *
 * The once-only tool: the `Checkout` step allows only it, and once it was used the `Done` step
 * (chosen by `tool_used`) denies it. The offline model calls every tool it is offered for a
 * research question, so every turn tries. Two servers: the real `baton serve` with the built-in
 * `search` as the once-only tool, and `createApp()` on a real port with a `pay` tool that takes
 * 50 ms, the window in which a check-then-record design lets every turn through.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import { tool, type UIMessageChunk } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { SessionResponse } from '../src/server/api-types.js';
import { createApp } from '../src/server/create-app.js';
import { freePort } from './helpers/free-port.js';
import { type ServeProcess, startServeProcess } from './helpers/serve-process.js';

const TURNS = 10;

/** A template whose `once` tool may run once per session. */
const onceTemplate = (id: string, once: string) => ({
  id,
  name: `${once} once`,
  description: `May ${once} once per session, then think and reflect.`,
  tools: [once, 'think', 'reflect'],
  orchestration: {
    steps: [
      { name: 'Done', conditions: [{ type: 'tool_used', value: once }], availableTools: { denied: [once] } },
      { name: 'Checkout', isDefault: true, availableTools: { allowed: [once] } },
    ],
  },
});

/** Sends {@link TURNS} turns of one conversation on one session at once; checks `once` ran once. */
async function raceTurns(url: string, agentId: string, once: string, sessionId: string): Promise<void> {
  const body = JSON.stringify({
    sessionId,
    // Every client sends the same conversation, as retries or a double-click would.
    messages: [{ id: 'question', role: 'user', parts: [{ type: 'text', text: 'research electric cars' }] }],
  });
  const responses = await Promise.all(
    Array.from({ length: TURNS }, () =>
      fetch(`${url}/api/chat/${agentId}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body }),
    ),
  );
  for (const response of responses) expect(response.status).toBe(200);
  const streams = await Promise.all(responses.map(chunks));
  const ran = streams.flatMap(toolsRun);
  expect(
    ran.filter((name) => name === once),
    `${once} ran ${ran.filter((n) => n === once).length} times`,
  ).toHaveLength(1);

  const session = (await (await fetch(`${url}/api/sessions/${sessionId}`)).json()) as SessionResponse;
  // What ran is what was recorded: nothing lost, nothing counted twice.
  expect(session.state.recentlyUsedTools.filter((name) => name === once)).toHaveLength(1);
  expect([...session.state.recentlyUsedTools].sort()).toEqual([...ran].sort());
  // The other turns' calls were refused, and the model was told why.
  const refusals = streams
    .flat()
    .filter((chunk) => chunk.type === 'tool-output-error')
    .map((chunk) => (chunk as { errorText: string }).errorText);
  for (const text of refusals) expect(text).toMatch(/was not run/);
}

/** Tool names whose call ran and returned an output in a UI message stream. */
function toolsRun(chunks: readonly UIMessageChunk[]): string[] {
  const names = new Map<string, string>();
  const ran: string[] = [];
  for (const chunk of chunks) {
    if (chunk.type === 'tool-input-available') names.set(chunk.toolCallId, chunk.toolName);
    if (chunk.type === 'tool-output-available') ran.push(names.get(chunk.toolCallId) ?? '?');
  }
  return ran;
}

async function chunks(response: Response): Promise<UIMessageChunk[]> {
  const text = await response.text();
  return text
    .split('\n')
    .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
    .map((line) => JSON.parse(line.slice('data: '.length)) as UIMessageChunk);
}

describe.each(['memory:', 'sqlite'])('10 concurrent turns on one session over baton serve (%s)', (store) => {
  const dir = mkdtempSync(join(tmpdir(), 'baton-concurrent-turns-'));
  let server: ServeProcess;

  beforeAll(async () => {
    writeFileSync(join(dir, 'search-once.json'), JSON.stringify(onceTemplate('search-once', 'search')));
    const storeUrl = store === 'sqlite' ? `sqlite:${join(dir, 'sessions.db')}` : store;
    const port = await freePort();
    server = await startServeProcess([
      join(dir, 'search-once.json'),
      '--model',
      'offline',
      '--port',
      String(port),
      '--store',
      storeUrl,
    ]);
  }, 60_000);

  afterAll(() => {
    server?.child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs the once-only tool once, records what ran, and refuses the rest with a reason', async () => {
    await raceTurns(server.url, 'search-once', 'search', `shared-${store}`);
  }, 90_000);
});

describe('10 concurrent turns on one session with a slow once-only tool (createApp on a real port)', () => {
  let url: string;
  let close: () => Promise<void>;
  let executions = 0;

  beforeAll(async () => {
    const pay = tool({
      description: 'Charges the card (takes 50 ms).',
      inputSchema: z.object({ query: z.string().optional() }),
      execute: async () => {
        executions++;
        await new Promise((resolve) => setTimeout(resolve, 50));
        return 'paid';
      },
    });
    const app = createApp({ agents: [onceTemplate('pay-once', 'pay')], model: 'offline', tools: { pay } });
    const port = await freePort();
    const server = serve({ fetch: app.fetch, port, hostname: '127.0.0.1' });
    url = `http://127.0.0.1:${port}`;
    close = async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await app.close();
    };
  });

  afterAll(() => close?.());

  it('runs pay once, however the turns interleave', async () => {
    await raceTurns(url, 'pay-once', 'pay', 'shared-pay');
    expect(executions).toBe(1);
  }, 90_000);
});
