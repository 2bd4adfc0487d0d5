/**
 * The package as an app gets it. `npm pack` builds the tarball (see helpers/package-tarball.ts:
 * a real build, cached by a hash of its inputs). The tarball is installed
 * into temporary apps with the lowest `ai` the peer range allows and the latest `ai` 7, the way
 * the README says (`npm install baton-agents ai`, nothing optional). Each app is typechecked
 * strict under `moduleResolution` `nodenext` and `bundler` (test/package-consumer/), runs a
 * `streamText` turn through `orchestrate()` with a mock model from `ai/test` and a SQLite session,
 * creates the stores and models whose packages it lacks, runs the shipped examples and the
 * installed `baton validate`. On a Node.js older than Baton supports (when the machine has one),
 * the bin and the SQLite store must say so clearly.
 *
 * Installs come from the npm registry (`--prefer-offline`, so the npm cache serves repeats).
 */
import { execFile, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appDirectory, childEnv, NPM_TIMEOUT_MS, packTarball, run, runOk } from './helpers/package-tarball.js';

const ROOT = new URL('..', import.meta.url).pathname;
const FIXTURE = join(ROOT, 'test/package-consumer');
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');
const TSX = join(ROOT, 'node_modules/tsx/dist/cli.mjs');

interface PackageJson {
  name: string;
  version: string;
  engines: { node: string };
  sideEffects?: boolean;
  bin: Record<string, string>;
  exports: Record<string, string | Record<string, string>>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, { optional?: boolean }>;
}

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as PackageJson;
/** The floor of the `ai` peer range (`^7.0.171` -> `7.0.171`). */
const LOWEST_AI = /^\^(\d+\.\d+\.\d+)$/.exec(pkg.peerDependencies.ai ?? '')?.[1];
/** The lowest zod of the peer range (`^3.25.76 || ^4.1.8` -> `3.25.76`): a zod 3 app. */
const LOWEST_ZOD = /^\^(\d+\.\d+\.\d+)/.exec(pkg.peerDependencies.zod ?? '')?.[1];
const OPTIONAL_PEERS = Object.keys(pkg.peerDependenciesMeta).filter((name) => pkg.peerDependenciesMeta[name]?.optional);

/** Typechecks the app with one of its tsconfig files; resolves to tsc's output when it fails, else ''. */
async function typecheck(app: string, config: string, options: { skipLibCheck: boolean }): Promise<string> {
  const args = [TSC, '-p', config, ...(options.skipLibCheck ? ['--skipLibCheck'] : [])];
  try {
    await promisify(execFile)(process.execPath, args, { cwd: app, env: childEnv(), timeout: 240_000 });
    return '';
  } catch (error) {
    const { stdout, stderr, message } = error as { stdout?: string; stderr?: string; message: string };
    return `tsc ${args.slice(1).join(' ')} failed:\n${stdout ?? ''}${stderr ?? ''}` || message;
  }
}

/** Paths of the files in a tarball, without the leading `package/`. */
function tarballFiles(tarball: string): string[] {
  return runOk('tar', ['-tzf', tarball], ROOT)
    .split('\n')
    .filter(Boolean)
    .map((line) => line.replace(/^package\//, ''));
}

/** A Node.js on this machine older than the package supports, if there is one. */
function oldNode(): { path: string; version: string } | undefined {
  const minimum = pkg.engines.node.replace(/^>=/, '').split('.').map(Number);
  const candidates = new Set(['/usr/bin/node', '/usr/local/bin/node']);
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir.includes('node_modules')) candidates.add(join(dir, 'node'));
  }
  for (const path of candidates) {
    if (!existsSync(path)) continue;
    const version = spawnSync(path, ['--version'], { encoding: 'utf8' }).stdout?.trim().replace(/^v/, '');
    if (!version) continue;
    const [major = 0, minor = 0] = version.split('.').map(Number);
    if (major < (minimum[0] ?? 0) || (major === minimum[0] && minor < (minimum[1] ?? 0))) return { path, version };
  }
  return undefined;
}

let tarball = '';
let files: string[] = [];
const apps: string[] = [];

beforeAll(async () => {
  if (!LOWEST_AI) throw new Error(`the ai peer range should be ^x.y.z, not ${pkg.peerDependencies.ai}`);
  if (!LOWEST_ZOD) throw new Error(`the zod peer range should start with ^x.y.z, not ${pkg.peerDependencies.zod}`);
  tarball = await packTarball();
  files = tarballFiles(tarball);
}, NPM_TIMEOUT_MS);

afterAll(() => {
  for (const app of apps) rmSync(app, { recursive: true, force: true });
});

describe('the packed tarball', () => {
  it('ships the build, the examples, the docs, the schema and the license, and nothing else', () => {
    for (const file of [
      'package.json',
      'README.md',
      'LICENSE',
      'dist/index.js',
      'dist/index.d.ts',
      'dist/cli/index.js',
      'dist/web/index.html',
      'schema/template.schema.json',
      'examples/demo.ts',
      'examples/library.ts',
      'examples/model-loop.ts',
      'examples/agents/cognitive-reasoner.json',
      'docs/http-api.md',
      'docs/behaviour.md',
      'docs/inspector.png',
    ]) {
      expect(files, file).toContain(file);
    }
    const unwanted = files.filter(
      (file) =>
        /\.map$|\.test\.|\.tsbuildinfo$/.test(file) ||
        /^(src|test|web|bench|scripts|node_modules)\//.test(file) ||
        file === 'dist/testing/arbitraries.js',
    );
    expect(unwanted).toEqual([]);
    expect(readFileSync(join(ROOT, 'LICENSE'), 'utf8')).toMatch(
      /^MIT License\n\nCopyright \(c\) \d{4} The Baton authors/,
    );
  });

  it('has a file for every export, in ESM with types, and no source map comments', () => {
    for (const [subpath, target] of Object.entries(pkg.exports)) {
      if (typeof target === 'string') {
        expect(files, subpath).toContain(target.replace(/^\.\//, ''));
        continue;
      }
      expect(Object.keys(target).filter((condition) => condition !== 'baton-source')).toEqual(['types', 'import']);
      expect(files, subpath).toContain(target.types?.replace(/^\.\//, ''));
      expect(files, subpath).toContain(target.import?.replace(/^\.\//, ''));
    }
    expect(pkg.sideEffects).toBe(false);
    expect(files).toContain(pkg.bin.baton?.replace(/^\.\//, ''));
  });

  it('links the README only to files that ship, at this version, so the links work on the registry page', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const links = [...readme.matchAll(/\]\(([^)\s]+)\)/g)].map((match) => match[1]!);
    expect(links.length).toBeGreaterThan(5);
    const shipped = `https://unpkg.com/${pkg.name}@${pkg.version}/`;
    const broken = links.filter((link) => {
      if (link.startsWith(shipped)) return !files.includes(link.slice(shipped.length).replace(/#.*$/, ''));
      return !/^https?:\/\//.test(link) || link.includes('unpkg.com');
    });
    expect(broken).toEqual([]);
  });
});

// The floor of the peer range, and whatever the newest ai 7 is today.
// The floor of the peer range, and whatever the newest ai 7 is today. Checking every declaration
// file (skipLibCheck off) costs most of this test's time; it is done once, with the lowest ai,
// where the package's declarations, generated against the newest ai, are most likely to break.
// The lowest app is also a zod 3 app (the lowest zod that ai accepts): Baton's zod is a peer, so
// the app's copy serves both (Baton's code uses the zod 4 API that zod 3.25 ships as `zod/v4`).
describe.each([
  {
    label: `ai@${LOWEST_AI} (the lowest supported) and zod 3`,
    ai: LOWEST_AI ?? '',
    zod: LOWEST_ZOD ?? '',
    checkDeclarations: true,
  },
  { label: 'the latest ai 7 and zod 4', ai: '^7', zod: '^4', checkDeclarations: false },
])('an app with $label', ({ ai, zod, checkDeclarations }) => {
  let app = '';
  const modules = () => join(app, 'node_modules');
  const installed = (name: string) => existsSync(join(modules(), name, 'package.json'));
  const versionOf = (path: string) =>
    (JSON.parse(readFileSync(join(path, 'package.json'), 'utf8')) as { version: string }).version;

  beforeAll(() => {
    app = appDirectory('baton-consumer-');
    apps.push(app);
    cpSync(FIXTURE, app, { recursive: true });
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    // What the README tells an app to install, plus the type packages its strict typecheck needs.
    runOk(
      'npm',
      [
        'install',
        tarball,
        `ai@${ai}`,
        `zod@${zod}`,
        '@types/node@^24',
        '@types/json-schema@^7',
        '--prefer-offline',
        '--no-audit',
        '--no-fund',
        '--loglevel=error',
      ],
      app,
    );
  }, NPM_TIMEOUT_MS);

  it('has one copy of ai, zod and @ai-sdk/provider, and none of the optional packages', () => {
    if (ai !== '^7') expect(versionOf(join(modules(), 'ai'))).toBe(ai);
    expect(versionOf(join(modules(), 'zod')).split('.')[0]).toBe(zod.replace(/^\^/, '').split('.')[0]);
    const copies = (name: string) =>
      runOk('find', [modules(), '-path', `*/node_modules/${name}/package.json`, '-not', '-path', '*/.bin/*'], app)
        .split('\n')
        .filter(Boolean);
    expect(copies('ai')).toHaveLength(1);
    expect(copies('@ai-sdk/provider')).toHaveLength(1);
    expect(copies('zod')).toHaveLength(1);
    // @ai-sdk/provider is there as ai's own dependency (an optional peer so npm adds no second copy).
    expect(OPTIONAL_PEERS.filter((name) => name !== '@ai-sdk/provider' && installed(name))).toEqual([]);
  });

  it('typechecks strict with moduleResolution nodenext and bundler', async () => {
    const failures = await Promise.all([
      typecheck(app, 'tsconfig.nodenext.json', { skipLibCheck: !checkDeclarations }),
      typecheck(app, 'tsconfig.bundler.json', { skipLibCheck: true }),
    ]);
    expect(failures.filter(Boolean).join('\n')).toBe('');
  }, 250_000);

  it('runs a streamText turn through orchestrate() with a mock model and a SQLite session', () => {
    const output = runOk(process.execPath, ['app.ts', join(app, 'state.db')], app, 60_000);
    const result = JSON.parse(output.trim().split('\n').at(-1)!) as Record<string, unknown>;
    expect(result).toMatchObject({
      text: 'done',
      // search, then the forbidden tool (refused, not run), then think: the sequence in order.
      offered: [['search'], ['think'], ['think'], ['search', 'think']],
      executed: ['search', 'think'],
      recentlyUsedTools: ['search', 'think'],
      activeStep: 'research',
      clock: 1500,
      scriptedText: 'scripted answer',
      invalidCode: 'template-config',
      agentsStatus: 200,
      inspectorStatus: 200,
    });
    expect(result.events).toEqual(expect.arrayContaining(['step-changed', 'sequence-advanced', 'tool-rejected']));
    expect(result.inspectorType).toMatch(/^text\/html/);
  });

  it('names the package and the install command when a store or model needs one that is missing', () => {
    const outcomes = JSON.parse(runOk(process.execPath, ['missing-dependencies.mjs'], app, 60_000)) as Record<
      string,
      { name?: string; code?: string; packageName?: string; message?: string }
    >;
    expect(Object.keys(outcomes)).toEqual([
      'ioredis',
      'pg',
      '@ai-sdk/openai',
      '@ai-sdk/anthropic',
      '@ai-sdk/openai-compatible',
    ]);
    for (const [name, outcome] of Object.entries(outcomes)) {
      expect(outcome, name).toMatchObject({
        name: 'MissingDependencyError',
        code: 'missing-dependency',
        packageName: name,
      });
      expect(outcome.message, name).toContain(`npm install ${name}`);
    }
  });

  it('runs the examples that ship in the package', () => {
    const examples = join(modules(), pkg.name, 'examples');
    expect(runOk(process.execPath, [TSX, join(examples, 'library.ts')], app, 60_000)).toContain('allowed: critique');
    const loop = runOk(process.execPath, [TSX, join(examples, 'model-loop.ts')], app, 60_000);
    expect(loop).toContain('step ResearchMode: offered search');
    expect(loop.indexOf('called search')).toBeLessThan(loop.indexOf('called think'));
    expect(runOk(process.execPath, [TSX, join(examples, 'demo.ts')], app, 60_000)).toContain('recentlyUsedTools');
  }, 200_000);

  it('runs the installed baton validate', () => {
    const bin = join(modules(), '.bin', 'baton');
    const agents = join(modules(), pkg.name, 'examples/agents');
    const templates = readdirSync(agents)
      .filter((file) => file.endsWith('.json'))
      .map((file) => join(agents, file));
    const valid = run(bin, ['validate', ...templates], app, 60_000);
    expect(valid.stderr).toBe('');
    expect(valid.status, valid.stdout).toBe(0);
    expect(valid.stdout).toContain(`${templates.length} files`);

    writeFileSync(
      join(app, 'broken.json'),
      JSON.stringify({ id: 'broken', orchestration: { defualtStep: 'x', steps: [] } }),
    );
    const invalid = run(bin, ['validate', 'broken.json'], app, 60_000);
    expect(invalid.status).toBe(1);
    expect(invalid.stdout).toContain('did you mean "defaultStep"?');
  });

  it("serves and chats with the app's own tools from --tools, and says which tools are missing without it", () => {
    const bin = join(modules(), '.bin', 'baton');
    mkdirSync(join(app, 'agents'), { recursive: true });
    writeFileSync(
      join(app, 'agents/researcher.json'),
      JSON.stringify({
        id: 'researcher',
        llm: { provider: 'openai', model: 'gpt-4o-mini' },
        tools: ['web_search', 'think'],
        orchestration: { steps: [{ name: 'research', isDefault: true, sequence: ['web_search', 'think'] }] },
      }),
    );
    writeFileSync(
      join(app, 'tools.js'),
      [
        "import { tool } from 'ai';",
        "import { z } from 'zod';",
        'export const web_search = tool({',
        '  inputSchema: z.object({ query: z.string() }),',
        "  execute: async ({ query }) => ({ results: ['found ' + query] }),",
        '});',
      ].join('\n'),
    );
    const template = join(app, 'agents/researcher.json');
    // Without --tools: one line naming the tool and the option, no stack.
    const missing = run(bin, ['chat', template, '--model', 'offline'], app, 60_000);
    expect(missing.status).toBe(1);
    expect(missing.stderr.trim().split('\n')).toHaveLength(1);
    expect(missing.stderr).toContain('names tools that have no implementation: web_search');
    expect(missing.stderr).toContain('--tools <module>');
    // With them, and the template's model, whose provider package this app lacks: the offline
    // model stands in, and the notice names the package to install, not a key to set.
    const chat = spawnSync(bin, ['chat', template, '--tools', './tools.js'], {
      cwd: app,
      env: { ...childEnv(), OPENAI_API_KEY: 'sk-not-used' },
      input: 'Find the EV forecasts\n',
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(chat.status, chat.stderr).toBe(0);
    expect(chat.stderr).toContain('its package @ai-sdk/openai is not installed');
    expect(chat.stderr).toContain('Run `npm install @ai-sdk/openai`, or pass --model.');
    expect(chat.stdout).toContain('✓ web_search: 1 result');
  });

  it('tells the user of an older Node.js what it needs, from the bin, the SQLite store and an app that names one', (context) => {
    const old = oldNode();
    if (!old) {
      console.warn('package-consumer: no Node.js older than the engines range on this machine; not checked');
      context.skip();
      return;
    }
    const bin = join(modules(), pkg.name, pkg.bin.baton!);
    const cli = spawnSync(old.path, [bin, '--version'], { cwd: app, encoding: 'utf8' });
    expect(cli.status).toBe(1);
    expect(cli.stderr.trim()).toBe(
      `baton: Baton needs Node.js ${pkg.engines.node.replace(/^>=/, '')}.0 or newer, and this is Node.js ${old.version}. ` +
        'Install a current LTS release (https://nodejs.org, or `nvm install --lts`) and run the command again.',
    );
    const created = spawnSync(old.path, ['old-node.mjs'], { cwd: app, encoding: 'utf8' });
    const outcomes = JSON.parse(created.stdout) as Record<'store' | 'app', { name: string; message: string }>;
    for (const what of ['store', 'app'] as const) {
      expect(outcomes[what], what).toMatchObject({ name: 'UnsupportedRuntimeError', code: 'unsupported-runtime' });
      expect(outcomes[what].message, what).toContain(`Node.js ${old.version} does not provide`);
    }
  });
});
