/**
 * Every code sample of README.md and docs/*.md, as a newcomer copies it:
 *
 * - `ts` and `tsx` samples are typechecked together, strict, against the package's own types
 *   (imported as `baton-agents`, the way an app imports them), and every `ts` sample runs to its
 *   end in an app folder where `node_modules/baton-agents` is this repository, with the offline
 *   model and no API keys;
 * - `json` samples parse, and those that are templates pass `baton validate`;
 * - `jsonl` samples are `baton simulate` event files, replayed against the template their marker
 *   names, with every expectation met;
 * - `sh` samples name only npm scripts, `baton` commands and options, and packages that exist; the
 *   `baton validate | simulate | graph` lines on files of this repository run, and `curl` lines run
 *   against `baton serve examples/agents --model offline`.
 *
 * A sample that cannot be run as it stands says so in an HTML comment on the line before it,
 * which this test reads: `<!-- sample: typecheck (why) -->` (compiled, not run), `<!-- sample:
 * server -->` (a server: it must answer `GET /healthz` on `$PORT`), `<!-- sample: vitest -->` (a
 * test file, run with vitest), `<!-- sample: simulate <template> -->` (the template of a `jsonl`
 * sample). Blocks without a language are output, not code.
 */
import { type SpawnSyncReturns, spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { PassThrough } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProgram } from '../src/cli/program.js';
import { freePort } from './helpers/free-port.js';
import { type ServeProcess, startServeProcess, stopServeProcess } from './helpers/serve-process.js';

const ROOT = new URL('..', import.meta.url).pathname;
const DOCS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];
/** An app folder whose `node_modules/baton-agents` is this repository (its `src`, through the baton-source condition). */
const APP = join(ROOT, '.tmp', `docs-samples-${process.pid}`);
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');
const LANGUAGES = new Set(['ts', 'tsx', 'json', 'jsonl', 'sh']);
const MODES = new Set(['typecheck', 'server', 'vitest', 'simulate', 'checked-by']);

/** One fenced block of a Markdown file. */
interface Sample {
  /** `README.md:42`: where the fence opens. */
  where: string;
  lang: string;
  code: string;
  /** The mode of a `<!-- sample: <mode> <args> -->` line right before the fence. */
  mode: string | undefined;
  args: string;
}

function samplesOf(file: string): Sample[] {
  const lines = readFileSync(join(ROOT, file), 'utf8').split('\n');
  const samples: Sample[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !/^```\s*$/.test(lines[i]!); i++) body.push(lines[i]!);
    let before = start - 1;
    while (before >= 0 && lines[before]!.trim() === '') before--;
    const marker = /^<!-- sample: (\S+)\s*(.*?)\s*-->$/.exec(lines[before]?.trim() ?? '');
    samples.push({
      where: `${file}:${start + 1}`,
      lang: open[1] ?? '',
      code: `${body.join('\n')}\n`,
      mode: marker?.[1],
      args: marker?.[2] ?? '',
    });
  }
  return samples;
}

const samples = DOCS.flatMap(samplesOf);
const code = samples.filter((sample) => sample.lang !== '');
// A sample of a file in an app of its own (a Next.js route) is built and run by the test it names.
const typescript = code.filter(
  (sample) => (sample.lang === 'ts' || sample.lang === 'tsx') && sample.mode !== 'checked-by',
);
const runnable = typescript.filter((sample) => sample.lang === 'ts' && sample.mode !== 'typecheck');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  scripts: Record<string, string>;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
};

/** The file a sample is written to in the app folder. */
const fileOf = (sample: Sample) =>
  `${sample.where.replace(/[/.:]/g, '-').replace(/-md-/, '-')}.${sample.lang === 'tsx' ? 'tsx' : sample.lang === 'ts' ? 'ts' : sample.lang}`;

/** The environment samples run in: no API keys, no colours, nothing of this vitest run. */
function sampleEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/(_API_KEY|_BASE_URL)$|^(VITEST|NODE_ENV$|NODE_OPTIONS$|TSX_|npm_)/.test(key)) continue;
    env[key] = value;
  }
  return { ...env, NO_COLOR: '1', ...extra };
}

function output(run: SpawnSyncReturns<string>): string {
  return `exit ${run.status ?? run.signal}\n${run.stdout}\n${run.stderr}`.trim();
}

beforeAll(() => {
  rmSync(APP, { recursive: true, force: true });
  mkdirSync(join(APP, 'node_modules'), { recursive: true });
  symlinkSync(ROOT, join(APP, 'node_modules', 'baton-agents'), 'dir');
  for (const sample of code) writeFileSync(join(APP, fileOf(sample)), sample.code);
});

afterAll(() => rmSync(APP, { recursive: true, force: true }));

describe('the code samples of README.md and docs/', () => {
  it('are found, each with a language this test checks and known markers', () => {
    expect(typescript.length).toBeGreaterThan(5);
    expect(code.filter((sample) => !LANGUAGES.has(sample.lang)).map((s) => `${s.where} (${s.lang})`)).toEqual([]);
    expect(code.filter((s) => s.mode !== undefined && !MODES.has(s.mode)).map((s) => s.where)).toEqual([]);
    // Samples that only compile are the exception: each says why.
    const compileOnly = typescript.filter((sample) => sample.mode === 'typecheck');
    expect(compileOnly.filter((sample) => sample.args === '').map((s) => s.where)).toEqual([]);
    expect(compileOnly.length).toBeLessThanOrEqual(4);
    // A sample checked elsewhere names a test that exists and reads this very document.
    for (const sample of code.filter((s) => s.mode === 'checked-by')) {
      const test = join(ROOT, sample.args);
      expect(existsSync(test), `${sample.where}: ${sample.args}`).toBe(true);
      expect(readFileSync(test, 'utf8'), `${sample.where}: ${sample.args}`).toContain(sample.where.split(':')[0]!);
    }
  });

  it('typecheck strict, as an app imports the package', () => {
    writeFileSync(
      join(APP, 'tsconfig.json'),
      JSON.stringify({
        extends: join(ROOT, 'tsconfig.json'),
        compilerOptions: {
          rootDir: ROOT,
          jsx: 'react-jsx',
          types: ['node'],
          noEmit: true,
          // Only the samples' own mistakes: the package's sources are checked by `npm run typecheck`.
          skipLibCheck: true,
        },
        include: typescript.map(fileOf),
      }),
    );
    const run = spawnSync(process.execPath, [TSC, '-p', join(APP, 'tsconfig.json')], {
      cwd: APP,
      encoding: 'utf8',
      timeout: 240_000,
    });
    // Errors in the package's own files are not the samples' (tsc --noEmit guards those).
    const errors = run.stdout
      .split('\n')
      .filter((line) => /error TS/.test(line) && !line.startsWith('../') && !line.startsWith('node_modules/'));
    const where = new Map(typescript.map((sample) => [fileOf(sample), sample.where]));
    const readable = errors.map((line) => {
      const [file, rest] = [line.slice(0, line.indexOf('(')), line.slice(line.indexOf('('))];
      return `${where.get(file) ?? file} ${rest}`;
    });
    expect(readable).toEqual([]);
  }, 250_000);

  it.each(runnable.map((sample) => [sample.where, sample] as const))(
    'runs %s',
    async (_where, sample) => {
      const file = join(APP, fileOf(sample));
      const args = ['--import', 'tsx', '--conditions=baton-source'];
      if (sample.mode === 'vitest') {
        const run = spawnSync(
          process.execPath,
          [
            join(ROOT, 'node_modules/vitest/vitest.mjs'),
            'run',
            '--root',
            APP,
            '--config',
            writeVitestConfig(),
            relative(APP, file),
          ],
          { cwd: APP, encoding: 'utf8', timeout: 120_000, env: sampleEnv() },
        );
        expect(run.status, output(run)).toBe(0);
        return;
      }
      if (sample.mode === 'server') {
        const port = await freePort();
        const child = spawn(process.execPath, [...args, file], { cwd: APP, env: sampleEnv({ PORT: String(port) }) });
        let printed = '';
        child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
          printed += chunk;
        });
        child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
          printed += chunk;
        });
        try {
          const deadline = Date.now() + 30_000;
          let status = 0;
          while (status !== 200 && Date.now() < deadline && child.exitCode === null) {
            status = await fetch(`http://127.0.0.1:${port}/healthz`).then(
              (response) => response.status,
              () => 0,
            );
            if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 200));
          }
          expect(status, `the server never answered GET /healthz on $PORT:\n${printed}`).toBe(200);
        } finally {
          child.kill('SIGTERM');
        }
        return;
      }
      const run = spawnSync(process.execPath, [...args, file], {
        cwd: APP,
        encoding: 'utf8',
        timeout: 60_000,
        env: sampleEnv(),
      });
      // It ends by itself (nothing it opened keeps it alive), without an error, and prints none
      // (the AI SDK prints the error of a stream that failed, even when the script exits 0).
      expect(run.signal, `still running after 60 s:\n${output(run)}`).toBeNull();
      expect(run.status, output(run)).toBe(0);
      const printed = run.stderr
        .split('\n')
        .filter((line) => line.trim() !== '' && !/ExperimentalWarning|--trace-warnings/.test(line));
      expect(printed, output(run)).toEqual([]);
    },
    130_000,
  );

  it('in JSON parse, and the templates among them pass baton validate', () => {
    const json = code.filter((sample) => sample.lang === 'json');
    for (const sample of json) expect(() => JSON.parse(sample.code), sample.where).not.toThrow();
    const templates = json.filter((sample) => isTemplate(JSON.parse(sample.code)));
    expect(templates.length).toBeGreaterThan(0);
    const run = baton(['validate', ...templates.map((sample) => join(APP, fileOf(sample)))]);
    expect(run.status, `${templates.map((s) => s.where).join(', ')}\n${output(run)}`).toBe(0);
    expect(run.stdout).not.toMatch(/warning:/);
  });

  it('in JSONL replay with baton simulate, every expectation met', () => {
    const events = code.filter((sample) => sample.lang === 'jsonl');
    expect(events.length).toBeGreaterThan(0);
    for (const sample of events) {
      expect(sample.mode, `${sample.where} needs <!-- sample: simulate <template> -->`).toBe('simulate');
      const run = baton(['simulate', sample.args, '--events', join(APP, fileOf(sample))]);
      expect(run.status, `${sample.where}\n${output(run)}`).toBe(0);
    }
  });

  describe('in shell', () => {
    const shell = code.filter((sample) => sample.lang === 'sh');
    const commands = shell.flatMap((sample) =>
      commandsOf(sample.code).map((command) => ({ where: sample.where, command })),
    );
    let server: ServeProcess | undefined;
    afterAll(async () => {
      if (server) await stopServeProcess(server);
    });

    it('name npm scripts that exist', () => {
      const missing = commands.flatMap(({ where, command }) =>
        [...command.matchAll(/\bnpm (?:run (\S+)|(start|test)\b)/g)]
          .map((match) => match[1] ?? match[2]!)
          .filter((script) => !(script in pkg.scripts))
          .map((script) => `${where}: npm run ${script}`),
      );
      expect(missing).toEqual([]);
    });

    it('install only packages that are this package, its dependencies or its peers', () => {
      const known = new Set([
        'baton-agents',
        ...Object.keys(pkg.dependencies),
        ...Object.keys(pkg.devDependencies),
        ...Object.keys(pkg.peerDependencies),
      ]);
      const unknown = commands.flatMap(({ where, command }) => {
        const install = /\bnpm (?:install|i) ([^&|#]*)/.exec(command);
        if (!install) return [];
        return install[1]!
          .trim()
          .split(/\s+/)
          .filter((word) => word !== '' && !word.startsWith('-'))
          .map((word) => word.replace(/(.)@.*$/, '$1'))
          .filter((name) => !known.has(name))
          .map((name) => `${where}: ${name}`);
      });
      expect(unknown).toEqual([]);
    });

    it('use only baton commands and options that exist', () => {
      const program = createProgram({
        env: {},
        stdin: new PassThrough(),
        stdout: new PassThrough(),
        stderr: new PassThrough(),
        signal: new AbortController().signal,
        setExitCode: () => undefined,
      });
      const options = new Map(
        program.commands.map((command) => [
          command.name(),
          new Set([
            '--help',
            '-h',
            ...command.options.flatMap((option) => [option.long, option.short].filter((flag) => flag !== undefined)),
          ]),
        ]),
      );
      const wrong = commands.flatMap(({ where, command }) => {
        const call = /(?:\bnpm run baton --|\bnpx baton|^baton)\s+(\S+)(.*)$/.exec(command);
        if (!call) return [];
        const [, name, line] = call;
        const known = options.get(name!);
        if (!known) return [`${where}: baton ${name} (no such command)`];
        // After a lone `--` come another program's words (`baton mcp t.json -- npx -y server`).
        const rest = line!.split(/\s--(?:\s|$)/)[0]!;
        return [...rest.matchAll(/(?:^|[\s[])(--?[a-zA-Z][\w-]*)/g)]
          .map((match) => match[1]!)
          .filter((flag) => !known.has(flag))
          .map((flag) => `${where}: baton ${name} ${flag}`);
      });
      expect(wrong).toEqual([]);
    });

    it('run: baton validate, simulate and graph on this repository’s files', () => {
      const runs = commands.filter(
        ({ command }) => /^npm run baton -- (validate|simulate|graph) /.test(command) && !/[[\]<>…]/.test(command),
      );
      expect(runs.length).toBeGreaterThan(0);
      for (const { where, command } of runs) {
        const run = spawnSync('sh', ['-c', command], {
          cwd: ROOT,
          encoding: 'utf8',
          timeout: 60_000,
          env: sampleEnv(),
        });
        expect(run.status, `${where}: ${command}\n${output(run)}`).toBe(0);
      }
    });

    it('run: baton mcp on this repository’s templates, in front of the server the line names', async () => {
      const runs = commands.filter(({ command }) => /^npm run baton -- mcp \S+ -- /.test(command));
      expect(runs.length).toBeGreaterThan(0);
      for (const { where, command } of runs) {
        const [template, upstream] = command.replace('npm run baton -- mcp ', '').split(' -- ') as [string, string];
        // The line's own upstream command, run as written (npx finds the devDependency), on a
        // scratch folder in place of the line's.
        const words = upstream
          .split(/\s+/)
          .map((word) => (word.startsWith('/tmp/') ? mkdtempSync(join(tmpdir(), 'baton-docs-')) : word));
        const client = new Client({ name: 'docs-samples', version: '1' });
        await client.connect(
          new StdioClientTransport({
            command: process.execPath,
            args: ['--import', 'tsx', join(ROOT, 'src/cli/index.ts'), 'mcp', template, '--', ...words],
            cwd: ROOT,
            stderr: 'ignore',
          }),
        );
        try {
          const { tools } = await client.listTools();
          expect(tools.length, `${where}: ${command}`).toBeGreaterThan(0);
        } finally {
          await client.close();
        }
      }
    }, 120_000);

    it('run: curl against baton serve examples/agents with the offline model', async () => {
      const curls = commands.filter(({ command }) => /^curl /.test(command));
      expect(curls.length).toBeGreaterThan(0);
      server = await startServeProcess(['examples/agents', '--model', 'offline', '--store', 'memory:', '--port', '0']);
      for (const { where, command } of curls) {
        const pointed = command.replaceAll('http://127.0.0.1:4000', server.url);
        const run = spawnSync('sh', ['-c', pointed], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
        expect(run.status, `${where}: ${command}\n${output(run)}`).toBe(0);
        expect(run.stdout.trim(), `${where}: printed nothing`).not.toBe('');
      }
    });
  });
});

/** The command lines of a shell sample: continuations joined, comments and blank lines dropped. */
function commandsOf(text: string): string[] {
  return text
    .replace(/\\\n\s*/g, ' ')
    .split('\n')
    .map((line) => line.replace(/\s+#\s.*$/, '').trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

function isTemplate(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  return 'orchestration' in value || 'agentId' in value || ('id' in value && ('tools' in value || 'nodes' in value));
}

/** The `baton` command of this repository, run as `npm run baton` runs it. */
function baton(args: readonly string[]): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'src/cli/index.ts'), ...args], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 60_000,
    env: sampleEnv(),
  });
}

/** A vitest config for samples that are test files: only them, from the app folder. */
function writeVitestConfig(): string {
  const path = join(APP, 'vitest.samples.config.ts');
  if (!existsSync(path)) {
    writeFileSync(
      path,
      "import { defineConfig } from 'vitest/config';\n" +
        // `baton-agents` is this repository: its sources, as `npm run example` runs them.
        "export default defineConfig({ resolve: { conditions: ['baton-source'] }, ssr: { resolve: { conditions: ['baton-source'], externalConditions: ['baton-source'] } }, test: { include: ['*.ts'] } });\n",
    );
  }
  return path;
}
