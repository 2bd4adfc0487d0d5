/**
 * Ten concurrent `tools/call`s where the template allows one: exactly one reaches the upstream
 * (the reference filesystem server; the disk counts the writes), on every store, and across two
 * gateway processes sharing one Redis session.
 */
import { randomUUID } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, describe, expect, it } from 'vitest';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import {
  connectStdio,
  FILESYSTEM_SERVER,
  inProcessGateway,
  type StdioGateway,
  templateFile,
  textOf,
  workDir,
} from './helpers/mcp-gateway.js';
import { pingRedis, serviceAvailable } from './helpers/services.js';
import { describeEachStore, REDIS_URL } from './helpers/store-kinds.js';

const ONE_WRITE = {
  id: 'one-write',
  tools: ['write_file', 'list_directory'],
  orchestration: {
    steps: [],
    rules: [{ tools: ['write_file'], limit: { max: 1, per: 'session' }, reason: 'One write per session' }],
  },
};

/** Ten writes of ten different files at once through `client`. */
function tenWrites(client: Client, dir: string, tag: string) {
  return Promise.all(
    Array.from({ length: 10 }, (_, i) =>
      client.callTool({ name: 'write_file', arguments: { path: join(dir, `${tag}-${i}.txt`), content: `${i}` } }),
    ),
  );
}

describeEachStore('ten concurrent calls where one is allowed, in one gateway', (open) => {
  it('runs exactly one at the upstream', async () => {
    const manager = createOrchestrationManager({ store: open() });
    const dir = workDir();
    const { client, close } = await inProcessGateway(ONE_WRITE, manager, dir, `concurrent-${randomUUID()}`);
    try {
      const results = await tenWrites(client, dir, 'w');
      expect(results.filter((result) => !result.isError)).toHaveLength(1);
      for (const refused of results.filter((result) => result.isError))
        expect(textOf(refused)).toMatch(/^Tool "write_file" was not run: /);
      expect(readdirSync(dir)).toHaveLength(1);
    } finally {
      await close();
    }
  }, 60_000);
});

describe('ten concurrent calls on one session shared by two gateway processes through Redis', async () => {
  const skip = await serviceAvailable('redis', () => pingRedis(REDIS_URL));
  const gateways: StdioGateway[] = [];
  afterAll(() => Promise.all(gateways.map((gateway) => gateway.close())));

  it.skipIf(skip)(
    'runs exactly one at the upstream',
    async () => {
      const dir = workDir();
      const template = templateFile(ONE_WRITE);
      const session = `mcp-shared-${randomUUID()}`;
      const args = [template, '--store', REDIS_URL, '--session', session, '--', FILESYSTEM_SERVER, dir];
      gateways.push(...(await Promise.all([connectStdio(args), connectStdio(args)])));
      const [a, b] = gateways as [StdioGateway, StdioGateway];
      const results = (await Promise.all([tenWrites(a.client, dir, 'a'), tenWrites(b.client, dir, 'b')])).flat();
      expect(results.filter((result) => !result.isError)).toHaveLength(1);
      expect(readdirSync(dir)).toHaveLength(1);
      // Both processes see the one write: the next call is refused by the limit in either.
      for (const gateway of [a, b]) {
        const again = await gateway.client.callTool({
          name: 'write_file',
          arguments: { path: join(dir, 'late.txt'), content: '' },
        });
        expect(textOf(again)).toContain('One write per session');
      }
      expect(readdirSync(dir)).toHaveLength(1);
    },
    90_000,
  );
});

describe('a change made by another gateway process on the shared session', async () => {
  const skip = await serviceAvailable('redis', () => pingRedis(REDIS_URL));
  const gateways: StdioGateway[] = [];
  afterAll(() => Promise.all(gateways.map((gateway) => gateway.close())));

  it.skipIf(skip)(
    'is announced to a client of the other process with --watch',
    async () => {
      const dir = workDir();
      const template = templateFile({
        id: 'watched',
        tools: ['list_directory', 'write_file'],
        orchestration: {
          steps: [
            {
              name: 'First',
              isDefault: true,
              sequence: ['list_directory'],
              availableTools: { allowed: ['list_directory', 'write_file'] },
            },
          ],
        },
      });
      const args = [template, '--store', REDIS_URL, '--session', `mcp-watched-${randomUUID()}`];
      const a = await connectStdio([...args, '--', FILESYSTEM_SERVER, dir]);
      gateways.push(a);
      let changed = 0;
      const b = await connectStdio([...args, '--watch', '200', '--', FILESYSTEM_SERVER, dir], {
        onClient: (client) =>
          client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
            changed++;
          }),
      });
      gateways.push(b);
      expect((await b.client.listTools()).tools.map((tool) => tool.name)).toEqual(['list_directory']);
      await a.client.callTool({ name: 'list_directory', arguments: { path: dir } });
      await expect.poll(() => changed, { timeout: 5_000 }).toBe(1);
      expect((await b.client.listTools()).tools.map((tool) => tool.name)).toEqual(['write_file', 'list_directory']);
    },
    60_000,
  );
});
