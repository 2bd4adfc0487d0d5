/**
 * The gateway's upstreams over a session's life: what they are started with, and what happens
 * when one goes away. Driven as a desktop client drives `baton mcp`: spawned over stdio, with the
 * SDK's client.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { connectStdio, ROOT, type StdioGateway, templateFile, textOf, workDir } from './helpers/mcp-gateway.js';

const READER = templateFile({
  id: 'reader',
  tools: ['read_text_file', 'list_directory'],
  orchestration: { steps: [] },
});

/**
 * What `npx -y -p baton-agents -p @modelcontextprotocol/sdk baton mcp …` (the README's desktop
 * configuration) leaves in the environment of the gateway it launches, as npm 11 sets it: every
 * setting given on its command line as `npm_config_*` (arrays joined by blank lines), and the
 * lifecycle and package variables of the script it runs.
 */
const NPX_LAUNCHER_ENV = {
  npm_command: 'exec',
  npm_config_package: 'baton-agents\n\n@modelcontextprotocol/sdk',
  npm_config_yes: 'true',
  npm_lifecycle_event: 'npx',
  npm_lifecycle_script: 'baton',
  npm_package_name: 'baton-agents',
  npm_package_json: '/nowhere/package.json',
};

describe('the environment an upstream starts with', () => {
  const gateways: StdioGateway[] = [];
  afterEach(async () => {
    await Promise.all(gateways.map((gateway) => gateway.close()));
    gateways.length = 0;
  });

  it('lets the README’s desktop line start: `npx -y <server>` behind a gateway that npx launched', async () => {
    const dir = workDir();
    writeFileSync(join(dir, 'note.txt'), 'hello from the disk');
    // The inner command is the README's, with --offline: the server is resolved from this
    // repository's node_modules (the gateway's working directory), never from the network. With
    // npm_config_package passed on, npx would run "@modelcontextprotocol/server-filesystem" as a
    // program of that name ("not found"), and the gateway could not connect to it.
    const gateway = await connectStdio(
      [READER, '--', 'npx', '--offline', '-y', '@modelcontextprotocol/server-filesystem', dir],
      { env: NPX_LAUNCHER_ENV },
    );
    gateways.push(gateway);
    const read = await gateway.client.callTool({ name: 'read_text_file', arguments: { path: join(dir, 'note.txt') } });
    expect(read.isError).toBeFalsy();
    expect(textOf(read)).toBe('hello from the disk');
  }, 90_000);

  it('keeps what the user set: PATH, HOME and their own variables reach the upstream', async () => {
    const dir = workDir();
    const seen = join(dir, 'env.txt');
    // The upstream writes the variables it got, then serves as the filesystem server does.
    const script = `env > ${JSON.stringify(seen)} && exec ${JSON.stringify(process.execPath)} ${JSON.stringify(join(ROOT, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js'))} ${JSON.stringify(dir)}`;
    const gateway = await connectStdio([READER, '--', 'sh', '-c', script], {
      env: { ...NPX_LAUNCHER_ENV, BATON_TEST_MINE: 'kept', NPM_CONFIG_REGISTRY: 'https://registry.example.com/' },
    });
    gateways.push(gateway);
    const read = await gateway.client.callTool({ name: 'read_text_file', arguments: { path: seen } });
    const names = textOf(read)
      .split('\n')
      .map((line) => line.slice(0, line.indexOf('=')));
    expect(names).toEqual(expect.arrayContaining(['PATH', 'HOME', 'BATON_TEST_MINE', 'NPM_CONFIG_REGISTRY']));
    expect(names.filter((name) => name.startsWith('npm_'))).toEqual([]);
  }, 60_000);
});
