/**
 * The operator's policy at the MCP gateway (`baton mcp --policy`): its deny holds whatever the
 * template allows, and a limit that counts across sessions (`scope: "global"`) holds across two
 * gateway processes, each with its own session, sharing one store (Redis, PostgreSQL), with the
 * reference filesystem server's disk as witness. A bad policy stops the start, naming the problem.
 */
import { randomUUID } from 'node:crypto';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  connectStdio,
  FILESYSTEM_SERVER,
  type StdioGateway,
  templateFile,
  textOf,
  workDir,
} from './helpers/mcp-gateway.js';
import { pingPostgres, pingRedis, serviceAvailable } from './helpers/services.js';
import { POSTGRES_URL, REDIS_URL } from './helpers/store-kinds.js';

/** A template that allows every write. */
const TEMPLATE = {
  id: 'writer',
  tools: ['write_file', 'list_directory'],
  orchestration: { steps: [], rules: [{ tools: ['write_file'], when: 'true', effect: 'allow', reason: 'any' }] },
};

function policyFile(policy: object): string {
  const path = join(workDir(), 'policy.json');
  writeFileSync(path, JSON.stringify(policy));
  return path;
}

const POLICY = {
  rules: [
    { tools: ['write_file'], when: "args.path.endsWith('.exe')", effect: 'deny', reason: 'No programs' },
    { tools: ['write_file'], limit: { max: 3, per: 'session', scope: 'global' }, reason: 'Three writes in all' },
  ],
};

describe('the operator policy at the MCP gateway', async () => {
  const redisSkip = await serviceAvailable('redis', () => pingRedis(REDIS_URL));
  const postgresSkip = await serviceAvailable('postgres', () => pingPostgres(POSTGRES_URL));
  const gateways: StdioGateway[] = [];
  afterAll(() => Promise.all(gateways.map((gateway) => gateway.close())));

  const twoGateways = async (store: string) => {
    const dir = workDir();
    const template = templateFile(TEMPLATE);
    // The global scope's record is shared by every test on this store: each run its own agent.
    const policy = policyFile({
      rules: POLICY.rules.map((rule) => (rule.limit ? { ...rule, limit: { ...rule.limit, scope: 'agent' } } : rule)),
    });
    const agent = templateFile({ ...TEMPLATE, id: `writer-${randomUUID()}` });
    const started = await Promise.all(
      ['a', 'b'].map((name) =>
        connectStdio([
          agent,
          '--store',
          store,
          '--session',
          `${name}-${randomUUID()}`,
          '--policy',
          policy,
          '--',
          FILESYSTEM_SERVER,
          dir,
        ]),
      ),
    );
    gateways.push(...started);
    void template;
    const [a, b] = started as [StdioGateway, StdioGateway];
    // The operator's deny holds though the template allows every write.
    const exe = await a.client.callTool({ name: 'write_file', arguments: { path: join(dir, 'x.exe'), content: 'x' } });
    expect(exe.isError).toBe(true);
    expect(textOf(exe)).toMatch(/No programs/);
    const write = (client: StdioGateway, i: number) =>
      client.client.callTool({ name: 'write_file', arguments: { path: join(dir, `f${i}.txt`), content: `${i}` } });
    const results = await Promise.all([write(a, 1), write(b, 2), write(a, 3), write(b, 4), write(a, 5), write(b, 6)]);
    expect(results.filter((result) => result.isError !== true)).toHaveLength(3);
    for (const refused of results.filter((result) => result.isError === true)) {
      expect(textOf(refused)).toMatch(/Three writes in all/);
    }
    expect(readdirSync(dir).filter((file) => file.endsWith('.txt'))).toHaveLength(3);
  };

  it.skipIf(redisSkip)('holds across two gateway processes on Redis', () => twoGateways(REDIS_URL), 60_000);
  it.skipIf(postgresSkip)('holds across two gateway processes on PostgreSQL', () => twoGateways(POSTGRES_URL), 60_000);

  it('refuses to start with a bad policy, naming the problem', async () => {
    const bad = policyFile({ rules: [{ tools: ['write_file'], when: 'args.(', effect: 'deny', reason: 'x' }] });
    let message = '';
    try {
      const gateway = await connectStdio([templateFile(TEMPLATE), '--policy', bad, '--', FILESYSTEM_SERVER, workDir()]);
      gateways.push(gateway);
    } catch (error) {
      message = String(error);
    }
    expect(message).not.toBe('');
  });
});
