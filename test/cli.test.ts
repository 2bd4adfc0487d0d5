/**
 * `baton validate`, `baton simulate` and `baton graph` as a user runs them: the built bin
 * (`dist/cli/index.js`, compiled here into a private directory so concurrent builds cannot
 * interfere) in a child process, on the example agents, the AgentDock templates
 * (`test/helpers/agentdock.ts`) and broken templates written to a temp dir.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTemplate, validateTemplate } from '../src/core/validate-template.js';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { agentdockTemplateFiles } from './helpers/agentdock.js';
import { pingRedis, serviceAvailable } from './helpers/services.js';

const ROOT = new URL('..', import.meta.url).pathname;
const EXAMPLES = join(ROOT, 'examples/agents');
const COGNITIVE = join(EXAMPLES, 'cognitive-reasoner.json');
const COGNITIVE_EVENTS = join(EXAMPLES, 'cognitive-reasoner.events.jsonl');

const exampleFiles = readdirSync(EXAMPLES)
  .filter((f) => f.endsWith('.json'))
  .map((f) => join(EXAMPLES, f));
/** Every published AgentDock template (when the environment names them), else the four copied here. */
const allTemplates = [...exampleFiles, ...agentdockTemplateFiles()];
const DR_HOUSE = allTemplates.find((file) => file.endsWith('/dr-house.json'))!;

// Inside the repository (ignored by git), so the built files find node_modules.
const BUILD = join(ROOT, '.tmp', `cli-test-${process.pid}`);
const BIN = join(BUILD, 'dist', 'cli', 'index.js');
const scratch = mkdtempSync(join(tmpdir(), 'baton-cli-'));
const redisSkip = await serviceAvailable('redis', () => pingRedis('redis://127.0.0.1:6379'));

beforeAll(() => {
  rmSync(BUILD, { recursive: true, force: true });
  mkdirSync(BUILD, { recursive: true });
  copyFileSync(join(ROOT, 'package.json'), join(BUILD, 'package.json')); // the bin reads its version there
  const tsc = spawnSync(
    process.execPath,
    [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', join(BUILD, 'dist')],
    { cwd: ROOT, encoding: 'utf8', timeout: 120_000 },
  );
  // Other people's files in progress may not type-check; the build still emits, and
  // `tsc --noEmit` guards the types. Only a missing bin stops these tests.
  if (!existsSync(BIN)) throw new Error(`the build produced no ${BIN}:\n${tsc.stdout}\n${tsc.stderr}`);
}, 120_000);

afterAll(() => {
  rmSync(BUILD, { recursive: true, force: true });
  rmSync(scratch, { recursive: true, force: true });
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the built `baton` with `args`, `input` on stdin, no colour wishes in the environment;
 * killed after `killAfterMs` (a server that starts when it should have refused is not left running).
 */
function baton(args: readonly string[], input = '', killAfterMs?: number): Promise<Run> {
  const env = { ...process.env };
  delete env.NO_COLOR;
  delete env.FORCE_COLOR;
  const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, env });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  child.stdin.end(input);
  const kill = killAfterMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), killAfterMs);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(kill);
      resolve({ code, stdout, stderr });
    });
  });
}

function write(name: string, text: string): string {
  const path = join(scratch, name);
  writeFileSync(path, text);
  return path;
}

describe('baton', { timeout: 60_000 }, () => {
  it('lists the commands in its help', async () => {
    const run = await baton(['--help']);
    expect(run.code).toBe(0);
    for (const command of ['validate', 'simulate', 'graph', 'chat'])
      expect(run.stdout).toMatch(new RegExp(`^  ${command} `, 'm'));
  });
});

describe('baton validate', { timeout: 60_000 }, () => {
  it('accepts the example agents and the AgentDock templates in one run (exit 0), listing their warnings', async () => {
    const run = await baton(['validate', ...allTemplates]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    let warnings = 0;
    for (const file of allTemplates) {
      expect(run.stdout).toContain(`✓ ${file} (`);
      const result = validateTemplate(readFileSync(file, 'utf8'));
      expect(result.success).toBe(true);
      if (result.success) warnings += result.warnings.length;
    }
    expect(warnings).toBeGreaterThan(0);
    expect(run.stdout.trimEnd().split('\n').at(-1)).toBe(
      `${allTemplates.length} files: 0 errors, ${warnings} warnings`,
    );
    // dr-house: two steps shadowed by earlier ones with the same condition, located in the file.
    expect(run.stdout).toMatch(
      new RegExp(
        `${DR_HOUSE.replaceAll('.', '\\.')}:\\d+:\\d+: warning: orchestration\\.steps\\[3\\]: .*\\[shadowed_step\\]`,
      ),
    );
    expect(run.stdout).not.toContain('\u001b['); // a pipe gets no colour
  });

  it('reports a JSON syntax error with its line and column (exit 1)', async () => {
    const file = write('trailing-comma.json', '{\n  "id": "x",\n  "tools": ["search"],\n}\n');
    const run = await baton(['validate', file]);
    expect(run.code).toBe(1);
    expect(run.stdout).toContain(
      `${file}:3:22: error: not valid JSON: a trailing comma before "}" (JSON allows none) [invalid_json]`,
    );
    expect(run.stdout).toContain('1 file (1 invalid): 1 error, 0 warnings');
  });

  it('reports an unknown key with a did-you-mean hint at its line, and duplicate steps (exit 1)', async () => {
    const text = JSON.stringify(
      {
        id: 'typos',
        tools: ['search', 'think'],
        orchestration: {
          defualtStep: 'idle',
          steps: [{ name: 'idle' }, { name: 'idle', conditions: [{ type: 'tool_used', value: 'search' }] }],
        },
      },
      null,
      2,
    );
    const file = write('typos.json', text);
    const line = text.split('\n').findIndex((l) => l.includes('"defualtStep"')) + 1;
    const run = await baton(['validate', file]);
    expect(run.code).toBe(1);
    expect(run.stdout).toContain(
      `${file}:${line}:5: error: orchestration.defualtStep: unknown key "defualtStep" (known keys: description, defaultStep, historyLimit, shadow, budget, rules, facts, labels, unlistedTools, steps) [unknown_key]\n    hint: did you mean "defaultStep"?`,
    );
    expect(run.stdout).toMatch(
      /typos\.json:\d+:\d+: error: orchestration\.steps\[1\]\.name: duplicate step name "idle"/,
    );
  });

  it('reports bad rules on calls at their line: a CEL syntax error, a bad period, an effect with a limit (exit 1)', async () => {
    const text = JSON.stringify(
      {
        id: 'ruled',
        tools: ['pay'],
        orchestration: {
          rules: [
            { tools: ['pay'], when: 'args.amount >', effect: 'deny', reason: 'x' },
            { tools: ['pay'], limit: { max: 2, per: 'fortnight' }, reason: 'y' },
            { tools: ['pay'], effect: 'deny', limit: { max: 1, per: 'turn' }, reason: 'z' },
          ],
          steps: [{ name: 'A', isDefault: true }],
        },
      },
      null,
      2,
    );
    const file = write('ruled.json', text);
    const run = await baton(['validate', file]);
    expect(run.code).toBe(1);
    const lineOf = (needle: string) => text.split('\n').findIndex((l) => l.includes(needle)) + 1;
    expect(run.stdout).toMatch(
      new RegExp(
        `${lineOf('"args.amount >"')}:\\d+: error: orchestration\\.rules\\[0\\]\\.when: invalid CEL expression`,
      ),
    );
    expect(run.stdout).toContain(`:${lineOf('"fortnight"')}:`);
    expect(run.stdout).toContain(
      'orchestration.rules[1].limit.per: "fortnight" is not a period a limit can count over',
    );
    expect(run.stdout).toContain('orchestration.rules[2]: a rule has either an effect or a limit, not both');
    expect(run.stdout).toContain('1 file (1 invalid): 3 errors, 0 warnings');
  });

  it('passes a template with warnings only (exit 0) and fails a missing file (exit 1)', async () => {
    const warned = write(
      'warned.json',
      JSON.stringify({
        id: 'w',
        tools: ['search'],
        orchestration: { steps: [{ name: 'a', isDefault: true }, { name: 'lonely' }] },
      }),
    );
    const ok = await baton(['validate', warned]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain('warning: orchestration.steps[1]: step "lonely" can never become active');
    expect(ok.stdout).toContain('1 file: 0 errors, 1 warning');

    const missing = await baton(['validate', warned, join(scratch, 'nope.json')]);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toContain(`${join(scratch, 'nope.json')}: error: cannot read the file: no such file`);
  });

  it('prints a JSON report with --json', async () => {
    const bad = write(
      'bad-regex.json',
      JSON.stringify({
        id: 'r',
        orchestration: { steps: [{ name: 'a', conditions: [{ type: 'message_regex', value: '(' }] }] },
      }),
    );
    const run = await baton(['validate', '--json', COGNITIVE, bad]);
    expect(run.code).toBe(1);
    const report = JSON.parse(run.stdout) as {
      valid: boolean;
      errors: number;
      files: { file: string; valid: boolean; issues: { code: string; path: string; line?: number }[] }[];
    };
    expect(report.valid).toBe(false);
    expect(report.errors).toBe(1);
    expect(report.files.map((f) => f.valid)).toEqual([true, false]);
    expect(report.files[1]!.issues[0]).toMatchObject({
      code: 'invalid_regex',
      path: 'orchestration.steps[0].conditions[0].value',
      line: 1,
    });
  });
});

describe('baton simulate', { timeout: 60_000 }, () => {
  it('replays the committed cognitive-reasoner events with every expectation met (exit 0)', async () => {
    const run = await baton(['simulate', COGNITIVE, '--events', COGNITIVE_EVENTS]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const rows = run.stdout.split('\n');
    expect(rows[0]).toMatch(/^#\s+event\s+step\s+sequence\s+allowed\s+note$/);
    expect(rows[1]).toMatch(
      /^1\s+user: "How many electric.*ResearchMode\s+0\/3 next: search\s+search\s+step \(none\) → ResearchMode/,
    );
    expect(rows[2]).toMatch(
      /^2\s+tool: think\s+ResearchMode\s+0\/3 next: search\s+search\s+✗ rejected: step "ResearchMode" expects search next/,
    );
    expect(rows[3]).toMatch(/^3\s+tool: search\s+ResearchMode\s+1\/3 next: think\s+think\s/);
    expect(rows[4]).toMatch(/^4\s+tool: think\s+ResearchMode\s+2\/3 next: reflect\s+reflect\s/);
    expect(rows[5]).toMatch(
      /^5\s+tool: reflect\s+ResearchMode\s+3\/3 done\s+search, think, reflect\s+sequence complete/,
    );
    expect(run.stdout).toMatch(/2 rejected tool calls, all \d+ expectations met\n$/);
  });

  it('fails (exit 1) when an expectation does not hold, naming it', async () => {
    const events = write(
      'wrong.jsonl',
      '{"user": "Compare solar and wind"}\n{"tool": "search", "expect": {"step": "ResearchMode", "allowed": ["search"]}}\n',
    );
    const run = await baton(['simulate', COGNITIVE, '--events', events]);
    expect(run.code).toBe(1);
    expect(run.stdout).toContain('✗ FAILED: expected step "ResearchMode", got "ComparisonMode"');
    expect(run.stdout).toContain('✗ FAILED: expected allowed [search], got [compare]');
    expect(run.stdout).toContain('1 of 1 expectations failed: #2 (line 2)');
  });

  it('reads events from stdin with --events - and prints JSON lines with --json', async () => {
    const run = await baton(
      ['simulate', COGNITIVE, '--events', '-', '--json'],
      '{"user": "Debate whether cats are better"}\n{"tool": "search"}\n',
    );
    expect(run.code).toBe(0);
    const objects = run.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as { activeStep: string; allowedTools: string[] });
    expect(objects.map((o) => [o.activeStep, o.allowedTools])).toEqual([
      ['DebateMode', ['search']],
      ['DebateMode', ['debate']],
    ]);
  });

  it('rejects bad event lines with file:line and what is wrong (exit 2)', async () => {
    const events = write(
      'bad.jsonl',
      '// ok\n{"user": "hi"}\n{"tool": 3}\n{"user": "x", "expect": {"stepp": "A"}}\n{oops}\n',
    );
    const run = await baton(['simulate', COGNITIVE, '--events', events]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(`${events}:3: "tool" must be a tool name (a non-empty string), got number`);
    expect(run.stderr).toContain(
      `${events}:4: expect: unknown key "stepp" (known keys: step, allowed, sequenceIndex, rejected, code, rule); did you mean "step"?`,
    );
    expect(run.stderr).toContain(`${events}:5:2: not valid JSON: expected a property name in double quotes, found "o"`);
  });

  it('prints the issues of an invalid template and exits 1', async () => {
    const bad = write(
      'dupe.json',
      JSON.stringify({ id: 'd', orchestration: { steps: [{ name: 'a' }, { name: 'a' }] } }),
    );
    const run = await baton(['simulate', bad, '--events', COGNITIVE_EVENTS]);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('error: orchestration.steps[1].name: duplicate step name "a"');
    expect(run.stdout).toBe('');
  });

  it.concurrent.for(allTemplates)('replays a message and a tool call on %s (exit 0)', async (file, { expect }) => {
    const events =
      '{"user": "hello, can you research this?"}\n{"tool": "search"}\n{"tool": "not-a-tool-of-any-agent", "expect": {"rejected": true}}\n';
    const run = await baton(['simulate', file, '--events', '-', '--json'], events);
    expect(run.code, run.stderr).toBe(0);
    const objects = run.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as { rejected: { code: string } | null });
    expect(objects).toHaveLength(3);
    expect(objects[2]!.rejected?.code).toBe('no-such-tool');
  });
});

describe('baton graph', { timeout: 60_000 }, () => {
  it.concurrent.for(allTemplates)('prints Mermaid and DOT for %s', async (file, { expect }) => {
    const mermaid = await baton(['graph', file]);
    expect(mermaid.code, mermaid.stderr).toBe(0);
    expect(mermaid.stdout.startsWith('flowchart LR\n  entry(("any message / tool use"))\n')).toBe(true);
    const dot = await baton(['graph', file, '--format', 'dot']);
    expect(dot.code).toBe(0);
    expect(dot.stdout).toMatch(/^digraph ".*" \{\n[\s\S]*\n\}\n$/);
  });

  it('highlights the active step of a session kept in a SQLite store, and fails on an unknown session', async () => {
    const store = `sqlite:${join(scratch, 'state.db')}`;
    const manager = createOrchestrationManager({ store });
    const parsed = parseTemplate(readFileSync(COGNITIVE, 'utf8'));
    await manager.getAllowedTools(parsed, [{ role: 'user', content: 'Critique this plan' }], 's1', parsed.tools);
    await manager.close();

    const run = await baton(['graph', COGNITIVE, '--session', 's1', '--store', store]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('  s2["EvaluationMode<br/>critique → debate → reflect"]');
    expect(run.stdout).toContain('  class s2 active\n');

    const dot = await baton(['graph', COGNITIVE, '--format', 'dot', '--session', 's1', '--store', store]);
    expect(dot.stdout).toMatch(/"EvaluationMode" \[label="[^"]*", style="rounded,filled,bold", fillcolor="#ffd54f"/);

    const unknown = await baton(['graph', COGNITIVE, '--session', 'nobody', '--store', store]);
    expect(unknown.code).toBe(1);
    expect(unknown.stdout).toBe('');
    expect(unknown.stderr).toBe(`baton graph: no session "nobody" in ${store} (it never existed or has expired)\n`);
  });

  it('needs --store with --session, and rejects an unknown format', async () => {
    const run = await baton(['graph', COGNITIVE, '--session', 's1']);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('--session needs --store');
    const format = await baton(['graph', COGNITIVE, '--format', 'svg']);
    expect(format.code).toBe(1);
    expect(format.stderr).toContain("argument 'svg' is invalid. Allowed choices are mermaid, dot.");
  });
});

describe('baton serve and baton chat with the app’s own tools (--tools)', { timeout: 60_000 }, () => {
  /** A template naming a tool Baton does not ship, in order: web_search, then think. */
  const RESEARCHER = JSON.stringify({
    id: 'researcher',
    tools: ['web_search', 'think'],
    orchestration: { steps: [{ name: 'research', isDefault: true, sequence: ['web_search', 'think'] }] },
  });
  /** The tool module an app writes; inside the repository so it finds `ai` and `zod`. */
  const toolModule = (name: string, source: string) => {
    const path = join(BUILD, name);
    writeFileSync(path, source);
    return path;
  };
  const JS_TOOLS = `import { tool } from 'ai';
import { z } from 'zod';
export const web_search = tool({
  description: 'Searches the web',
  inputSchema: z.object({ query: z.string() }),
  execute: async ({ query }) => ({ results: ['MARKER-FROM-THE-APP-TOOL for ' + query] }),
});
export const notATool = 42;
`;

  /** Starts the built `baton serve` on a free port; resolves once it listens, or with its exit. */
  function serve(args: readonly string[]) {
    const child = spawn(
      process.execPath,
      [BIN, 'serve', ...args, '--port', '0', '--store', 'memory:', '--model', 'offline'],
      {
        cwd: ROOT,
        env: { ...process.env, NO_COLOR: '1' },
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    return new Promise<{ url?: string; code?: number | null; stderr: string; stop: () => void }>((resolve) => {
      const stop = () => child.kill('SIGTERM');
      child.stdout.on('data', () => {
        const url = /Baton listening on (\S+)/.exec(stdout)?.[1];
        if (url) resolve({ url, stderr, stop });
      });
      child.on('close', (code) => resolve({ code, stderr, stop }));
    });
  }

  it('refuses to start, in one line without a stack, naming the missing tools and --tools', async () => {
    const dir = join(scratch, 'needs-tools');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'researcher.json'), RESEARCHER);
    const run = await serve([dir]);
    expect(run.url).toBeUndefined();
    expect(run.code).toBe(1);
    const lines = run.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^baton serve: agent "researcher" names tools that have no implementation: web_search \(/);
    expect(lines[0]).toContain('give them with --tools <module>');
    expect(run.stderr).not.toMatch(/\n\s+at /);
  });

  it.each([
    ['a .js module', 'tools.mjs', JS_TOOLS],
    // Node.js strips the types of a .ts module itself (Node 22.18 and newer).
    [
      'a .ts module',
      'tools.ts',
      JS_TOOLS.replace('async ({ query })', 'async ({ query }: { query: string }): Promise<{ results: string[] }>'),
    ],
  ])('serves an agent whose tool comes from %s, and runs it in a turn', async (_label, file, source) => {
    const dir = join(scratch, `with-tools-${file}`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'researcher.json'), RESEARCHER);
    const server = await serve([dir, '--tools', toolModule(file, source)]);
    try {
      expect(server.url, server.stderr).toBeDefined();
      const response = await fetch(`${server.url}/api/chat/researcher`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'Find the EV forecasts' }] }],
        }),
      });
      const stream = await response.text();
      expect(response.status).toBe(200);
      expect(stream).toContain('MARKER-FROM-THE-APP-TOOL');
      expect(stream.indexOf('"toolName":"web_search"')).toBeLessThan(stream.indexOf('"toolName":"think"'));
    } finally {
      server.stop();
    }
  });

  it('says what is wrong with the module: missing, no tools, or failing to load', async () => {
    const dir = join(scratch, 'bad-tools');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'researcher.json'), RESEARCHER);
    const missing = await serve([dir, '--tools', './no-such-tools.js']);
    expect(missing.code).toBe(1);
    expect(missing.stderr.trim()).toBe(
      `baton serve: --tools ./no-such-tools.js: no such file (looked for ${join(ROOT, 'no-such-tools.js')})`,
    );
    const empty = await serve([dir, '--tools', toolModule('empty-tools.mjs', 'export const answer = 42;\n')]);
    expect(empty.code).toBe(1);
    expect(empty.stderr).toContain('exports no AI SDK tools: export each under the name your templates use');
    const broken = await serve([dir, '--tools', toolModule('broken-tools.mjs', "import 'no-such-package-at-all';\n")]);
    expect(broken.code).toBe(1);
    expect(broken.stderr).toMatch(
      /^baton serve: --tools \S+broken-tools\.mjs: cannot load it: .*no-such-package-at-all/,
    );
    const partial = await serve([
      dir,
      '--tools',
      toolModule('other-tools.mjs', JS_TOOLS.replaceAll('web_search', 'web_fetch')),
    ]);
    expect(partial.code).toBe(1);
    expect(partial.stderr).toMatch(
      /names tools that have no implementation: web_search \(neither \S+other-tools\.mjs nor/,
    );
  });

  it('gives baton chat the same tools', async () => {
    const template = write('researcher.json', RESEARCHER);
    const refused = await baton(['chat', template, '--model', 'offline'], 'Find the EV forecasts\n');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('give them with --tools <module>');
    const run = await baton(
      ['chat', template, '--model', 'offline', '--tools', toolModule('chat-tools.mjs', JS_TOOLS)],
      'Find the EV forecasts\n',
    );
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    // The app's tool ran (its one result), then the built-in think.
    expect(run.stdout).toContain('✓ web_search: 1 result');
    expect(run.stdout).toContain('✓ think:');
  });
});

describe('baton serve and baton mcp with a Redis database the server does not have', { timeout: 60_000 }, () => {
  // A Redis server has 16 databases unless configured otherwise; ioredis sends everything to
  // database 0 when the SELECT of another fails, so both commands used to start and mix sessions there.
  const STORE = 'redis://127.0.0.1:6379/99';
  const EXPECTED =
    /^cannot open the store redis:\/\/127\.0\.0\.1:6379\/99: Session store "redis" cannot use database 99: the Redis server refused to select it \(ERR [^)]*\)\. This server has \d+ \(0 to \d+\); name one of them in the URL/;

  it.skipIf(redisSkip)('refuse to start, in one line that says what to do', async () => {
    const serve = await baton(['serve', EXAMPLES, '--store', STORE, '--port', '0', '--model', 'offline'], '', 20_000);
    expect(serve.code).toBe(1);
    expect(serve.stdout).not.toContain('listening');
    const serveLines = serve.stderr.trim().split('\n');
    expect(serveLines).toHaveLength(1);
    expect(serveLines[0]!.replace(/^baton serve: /, '')).toMatch(EXPECTED);

    const mcp = await baton(
      [
        'mcp',
        join(ROOT, 'examples/mcp/careful-editor.json'),
        '--store',
        STORE,
        '--',
        join(ROOT, 'node_modules/.bin/mcp-server-filesystem'),
        scratch,
      ],
      '',
      20_000,
    );
    expect(mcp.code).toBe(1);
    expect(mcp.stdout).toBe(''); // the protocol's
    const mcpLines = mcp.stderr.trim().split('\n');
    expect(mcpLines).toHaveLength(1);
    expect(mcpLines[0]!.replace(/^baton mcp: /, '')).toMatch(EXPECTED);
  });
});
