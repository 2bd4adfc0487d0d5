/**
 * `baton chat` as a user runs it: the bin in a child process, questions on stdin.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { callFirstOfferedTool, type StubPolicy, startOpenAIStub, toolResultsThisTurn } from './helpers/openai-stub.js';

const ROOT = new URL('..', import.meta.url).pathname;
const EXAMPLE = 'examples/agents/cognitive-reasoner.json';
const EV = 'How many electric vehicles will be on the road by 2030?';
const CRITIQUE = 'Critique the argument that remote work improves productivity';

const scratch = mkdtempSync(join(tmpdir(), 'baton-cli-chat-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** The environment of a user with no API keys and no BATON_MODEL. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const key of ['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'OPENAI_COMPATIBLE_BASE_URL', 'BATON_MODEL'])
    delete env[key];
  return env;
}

function start(args: readonly string[], env: NodeJS.ProcessEnv): ChildProcessWithoutNullStreams {
  return spawn(process.execPath, ['--import', 'tsx', 'src/cli/index.ts', ...args], { cwd: ROOT, env });
}

function finish(child: ChildProcessWithoutNullStreams): Promise<Run> {
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

/** Runs `baton <args>` with `input` piped to it and the stdin closed after it. */
function baton(args: readonly string[], input: string, env: NodeJS.ProcessEnv = cleanEnv()): Promise<Run> {
  const child = start(args, env);
  const done = finish(child);
  child.stdin.end(input);
  return done;
}

/** Asserts that every fragment occurs in `text`, in this order. */
function expectInOrder(text: string, fragments: readonly string[]): void {
  let from = 0;
  for (const fragment of fragments) {
    const at = text.indexOf(fragment, from);
    expect(at, `"${fragment}" after position ${from} in:\n${text}`).toBeGreaterThanOrEqual(0);
    from = at + fragment.length;
  }
}

// Sequential and with a generous timeout: each test starts Node with tsx, slow on a loaded machine.
describe('baton chat', { timeout: 90_000 }, () => {
  it('answers piped questions with the offline model, showing steps, sequence progress and tool calls', async () => {
    const run = await baton(['chat', EXAMPLE, '--model', 'offline', '--session', 'cli-1'], `${EV}\n${CRITIQUE}\n`);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expectInOrder(run.stdout, [
      'Cognitive Reasoner (cognitive-reasoner) · model offline · session cli-1',
      `> ${EV}`,
      '● ResearchMode [1/3: search]  tools: search',
      '  → search {"query":',
      '  ✓ search: 5 results; top: ',
      '● ResearchMode [2/3: think]  tools: think',
      '  → think ',
      '  ✓ think: ',
      '● ResearchMode [3/3: reflect]  tools: reflect',
      '  → reflect ',
      '  ✓ reflect: ',
      '● ResearchMode [3/3 done]  tools: search, think, reflect',
      `## ${EV}`,
      'I worked through this with `search`, then `think`, then `reflect`.',
      '  · 4 model steps · ',
      `> ${CRITIQUE}`,
      '● EvaluationMode [1/3: critique]  tools: critique',
      '  ✓ critique: ',
      '● EvaluationMode [2/3: debate]  tools: debate',
      '  ✓ debate: ',
      '● EvaluationMode [3/3: reflect]  tools: reflect',
      '  ✓ reflect: ',
      `## ${CRITIQUE}`,
      'I worked through this with `critique`, then `debate`, then `reflect`.',
    ]);
    expect(run.stdout).not.toContain('rejected');
    // No spinner and no colours in a pipe.
    expect(run.stdout).not.toContain('\u001b[');
  });

  it('talks to an OpenAI-compatible server given as --model provider:model@url, marking rejected calls', async () => {
    // A model that first calls a tool it was not offered, then calls what it is offered.
    const obedient = callFirstOfferedTool(4);
    const policy: StubPolicy = (request, index) =>
      toolResultsThisTurn(request).length === 0
        ? { type: 'tool-calls', calls: [{ name: 'reflect', arguments: { topic: 't', reflection: 'r' } }] }
        : obedient(request, index);
    const stub = await startOpenAIStub({ policy });
    try {
      const run = await baton(
        ['chat', EXAMPLE, '--model', `openai-compatible:stub-model@${stub.baseURL}`],
        'How many electric vehicles will be on the road by 2030?\n',
      );
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      expectInOrder(run.stdout, [
        '· model openai-compatible:stub-model ·',
        '● ResearchMode [1/3: search]  tools: search',
        '  → reflect {"topic":"t","reflection":"r"}',
        "  ✗ reflect rejected: Model tried to call unavailable tool 'reflect'. Available tools: search.",
        '● ResearchMode [1/3: search]  tools: search',
        '  ✓ search: ',
        '● ResearchMode [2/3: think]  tools: think',
        '  ✓ think: ',
        '● ResearchMode [3/3: reflect]  tools: reflect',
        '  ✓ reflect: ',
        'Final answer, from reflect then search then think then reflect.',
        '  · 5 model steps · ',
      ]);
      expect(stub.requests.map((r) => r.offeredTools)).toEqual([
        ['search'],
        ['search'],
        ['think'],
        ['reflect'],
        ['search', 'think', 'reflect'],
      ]);
      const tokens = stub.usages.reduce((sum, u) => sum + u.total_tokens, 0);
      expect(run.stdout).toContain(`· 5 model steps · ${tokens} tokens`);
    } finally {
      await stub.close();
    }
  });

  it('exits with 130 on SIGINT while waiting for input', async () => {
    const child = start(['chat', EXAMPLE, '--model', 'offline'], cleanEnv());
    const done = finish(child);
    // stdin stays open: the chat waits for a line until the signal comes.
    await new Promise<void>((resolve) => {
      child.stdout.on('data', (chunk: Buffer | string) => {
        if (String(chunk).includes('Type a message')) resolve();
      });
    });
    child.kill('SIGINT');
    const run = await done;
    expect([run.code, run.signal]).toEqual([130, null]);
  });

  it('stops quietly with 0 when its reader goes away (baton chat ... | head)', async () => {
    const child = start(['chat', EXAMPLE, '--model', 'offline'], cleanEnv());
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    child.stdout.once('data', () => {
      child.stdout.destroy(); // like `head -1` exiting after the first line
      child.stdin.end(`${EV}\n${EV}\n`);
    });
    expect(await exited).toBe(0);
    expect(stderr).not.toContain('EPIPE');
  });

  it('reports an invalid template with its file, JSON paths and hints, and exits 1', async () => {
    const file = join(scratch, 'invalid.json');
    writeFileSync(
      file,
      JSON.stringify({
        id: 'broken',
        tools: ['think'],
        orchestration: { defualtStep: 'a', steps: [{ name: 'a', conditions: [{ type: 'tool_used' }] }] },
      }),
    );
    const run = await baton(['chat', file, '--model', 'offline'], 'hello\n');
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(`Invalid agent template ${file} (2 errors):`);
    expect(run.stderr).toContain('orchestration.steps[0].conditions[0].value: a tool_used condition needs a "value"');
    expect(run.stderr).toContain('orchestration.defualtStep: unknown key "defualtStep"');
    expect(run.stderr).toContain('hint: did you mean "defaultStep"?');
  });

  it('reports a missing template file and exits 1', async () => {
    const file = join(scratch, 'no-such-template.json');
    const run = await baton(['chat', file, '--model', 'offline'], 'hello\n');
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(file);
    expect(run.stderr).toContain('cannot read the file: no such file');
  });

  it('prints usage and exits 1 without a template argument', async () => {
    const run = await baton(['chat'], '');
    expect(run.code).toBe(1);
    expect(run.stderr).toContain("missing required argument 'template'");
    expect(run.stderr).toContain('Usage: baton chat [options] <template>');
  });
});
