/**
 * Store round trips of the MCP gateway, counted on the wire of a real Redis: a call the template
 * allows is two (one update decides and reserves it before the upstream sees it, one commits it),
 * a refused call one (the refusal and its call id are recorded), `tools/list` one read.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { redisStore } from '../src/stores/redis.js';
import { countingRedis } from './helpers/counted-stores.js';
import { inProcessGateway, ROOT, workDir } from './helpers/mcp-gateway.js';
import { deleteRedisKeys, pingRedis, serviceAvailable } from './helpers/services.js';
import { REDIS_URL } from './helpers/store-kinds.js';

const RUN = randomUUID().slice(0, 8);

describe('store round trips of the MCP gateway on Redis', async () => {
  const skip = await serviceAvailable('redis', () => pingRedis(REDIS_URL));
  afterAll(() => (skip ? undefined : deleteRedisKeys(REDIS_URL, `baton-test:mcp-trips:${RUN}:`)));

  it.skipIf(skip)(
    'two per allowed call, one per refusal, one read per tools/list',
    async () => {
      const { client: redis, trips: sent, reset } = await countingRedis(REDIS_URL);
      const manager = createOrchestrationManager({
        store: redisStore({ client: redis, prefix: `baton-test:mcp-trips:${RUN}:` }),
      });
      const template: unknown = JSON.parse(readFileSync(join(ROOT, 'examples/mcp/careful-editor.json'), 'utf8'));
      const dir = workDir();
      const { client, close } = await inProcessGateway(template, manager, dir, `trips-${RUN}`);
      try {
        const trips = async (run: () => Promise<unknown>) => {
          reset();
          await run();
          return sent();
        };
        expect(await trips(() => client.listTools())).toBe(1);
        expect(
          await trips(() => client.callTool({ name: 'write_file', arguments: { path: join(dir, 'x'), content: '' } })),
        ).toBe(1);
        expect(await trips(() => client.callTool({ name: 'list_directory', arguments: { path: dir } }))).toBe(2);
        expect(
          await trips(() => client.callTool({ name: 'search_files', arguments: { path: dir, pattern: 'x' } })),
        ).toBe(2);
      } finally {
        await close();
        await manager.close();
        redis.disconnect();
      }
    },
    60_000,
  );
});
