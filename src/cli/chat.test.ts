import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import type { StepInfo } from '../ai-sdk/orchestrate.js';
import { parseTemplate } from '../core/validate-template.js';
import { ChatExitCode, chooseModel, runChat, stepLine } from './chat.js';

const EXAMPLE = new URL('../../examples/agents/cognitive-reasoner.json', import.meta.url).pathname;
const EV = 'How many electric vehicles will be on the road by 2030?';

const scratch = mkdtempSync(join(tmpdir(), 'baton-chat-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function writeTemplate(name: string, template: unknown): string {
  const file = join(scratch, name);
  writeFileSync(file, JSON.stringify(template));
  return file;
}

function sink() {
  const stream = new PassThrough();
  let text = '';
  stream.setEncoding('utf8').on('data', (chunk: string) => {
    text += chunk;
  });
  return { stream, text: () => text };
}

/** Runs the chat in this process with `lines` as its input. */
async function chat(options: {
  template?: string;
  lines: readonly string[];
  model?: string;
  env?: Record<string, string>;
  store?: string;
  signal?: AbortSignal;
}) {
  const out = sink();
  const err = sink();
  const code = await runChat({
    templatePath: options.template ?? EXAMPLE,
    model: options.model,
    store: options.store,
    env: options.env ?? {},
    input: Readable.from(options.lines.map((line) => `${line}\n`)),
    output: out.stream,
    errorOutput: err.stream,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  return { code, stdout: out.text(), stderr: err.text() };
}

describe('runChat', () => {
  it("falls back to offline with a notice when the template's key is missing", async () => {
    const run = await chat({ lines: [EV] });
    expect(run.code).toBe(ChatExitCode.ok);
    expect(run.stderr).toContain(
      "the template's model anthropic:claude-sonnet-4-20250514 cannot be used (ANTHROPIC_API_KEY is not set); using the offline model instead",
    );
    expect(run.stdout).toContain('· model offline ·');
    expect(run.stdout).toContain('● ResearchMode [3/3: reflect]  tools: reflect');
  });

  it('uses BATON_MODEL over the template, and --model over BATON_MODEL', async () => {
    const offline = await chat({ lines: ['hello'], env: { BATON_MODEL: 'offline' } });
    expect([offline.code, offline.stderr]).toEqual([0, '']);
    expect(offline.stdout).toContain('· model offline ·');

    const openai = await chat({ lines: ['hello'], env: { BATON_MODEL: 'openai:gpt-4o' } });
    expect(openai.code).toBe(ChatExitCode.failure);
    expect(openai.stderr).toContain('set OPENAI_API_KEY');
    expect(openai.stderr).toContain('--model offline');
    expect(openai.stdout).toBe('');

    const flag = await chat({ lines: ['hello'], model: 'offline', env: { BATON_MODEL: 'openai:gpt-4o' } });
    expect([flag.code, flag.stderr]).toEqual([0, '']);
  });

  it('fails on an explicit --model whose key is missing instead of falling back', async () => {
    const run = await chat({ lines: ['hello'], model: 'anthropic:claude-x' });
    expect(run.code).toBe(ChatExitCode.failure);
    expect(run.stderr).toContain('set ANTHROPIC_API_KEY');
  });

  it('stops at /exit and ignores the lines after it', async () => {
    const run = await chat({ lines: ['hello', '/exit', EV], model: 'offline' });
    expect(run.code).toBe(ChatExitCode.ok);
    expect(run.stdout).toContain('> hello');
    expect(run.stdout).not.toContain(EV);
  });

  it('answers /help itself and refuses an unknown /command, sending neither to the model', async () => {
    const run = await chat({ lines: ['/help', '/sate', '/etc/hosts is missing'], model: 'offline' });
    expect(run.code).toBe(ChatExitCode.ok);
    expect(run.stdout).toContain('/exit, /quit   end the chat');
    expect(run.stdout).toContain('Unknown command /sate. /help lists the commands; nothing was sent.');
    // Only the last line is a message: one turn, one model answer.
    expect(run.stdout.match(/^> /gm)).toEqual(['> ']);
    expect(run.stdout).toContain('> /etc/hosts is missing');
    expect(run.stdout.match(/model steps?/g)).toHaveLength(1);
  });

  it('skips empty lines', async () => {
    const run = await chat({ lines: ['', '   ', 'hello'], model: 'offline' });
    expect(run.stdout.match(/^> /gm)).toHaveLength(1);
  });

  it('says so when the template names no model or a provider Baton does not support', async () => {
    const none = await chat({ template: writeTemplate('none.json', { id: 'none', tools: ['think'] }), lines: ['hi'] });
    expect(none.code).toBe(0);
    expect(none.stderr).toContain('the template names no model; using the offline model');

    const gemini = writeTemplate('gemini.json', {
      agentId: 'g',
      nodes: ['llm.gemini', 'think'],
      nodeConfigurations: { 'llm.gemini': { model: 'gemini-2.0-flash' } },
    });
    const run = await chat({ template: gemini, lines: ['hi'] });
    expect(run.code).toBe(0);
    expect(run.stderr).toContain(`the template's model gemini:gemini-2.0-flash cannot be used`);
    expect(run.stderr).toContain('"gemini" is not supported');
  });

  it('exits 1 when the template names tools that have no implementation', async () => {
    const file = writeTemplate('tools.json', { id: 't', tools: ['think', 'telepathy'] });
    const run = await chat({ template: file, lines: ['hi'], model: 'offline' });
    expect(run.code).toBe(ChatExitCode.failure);
    expect(run.stderr).toContain('no implementation: telepathy');
  });

  it('exits 1 before the first question when the store URL is wrong', async () => {
    const run = await chat({ lines: [EV], model: 'offline', store: 'nosuchstore://x' });
    expect(run.code).toBe(ChatExitCode.failure);
    expect(run.stderr).toMatch(/nosuchstore/);
    expect(run.stdout).toBe('');
  });

  it('continues a session kept in --store when run again with the same --session', async () => {
    const store = `sqlite:${join(scratch, 'state.db')}`;
    const run = async (line: string) => {
      const out = sink();
      const code = await runChat({
        templatePath: EXAMPLE,
        model: 'offline',
        store,
        session: 'kept',
        env: {},
        input: Readable.from([`${line}\n`]),
        output: out.stream,
        errorOutput: new PassThrough(),
      });
      return { code, stdout: out.text() };
    };
    const first = await run(EV);
    expect(first.code).toBe(0);
    expect(first.stdout).toContain('session kept');
    expect(first.stdout).toContain('● ResearchMode [3/3 done]');
    const second = await run('Critique the argument that remote work improves productivity');
    expect(second.code).toBe(0);
    expect(second.stdout).toContain('● EvaluationMode [1/3: critique]  tools: critique');
    expect(second.stdout).toContain('● EvaluationMode [2/3: debate]  tools: debate');
  });

  it('treats the same question in a new run of a kept session as a new message: the sequence starts again', async () => {
    const store = `sqlite:${join(scratch, 'state-repeat.db')}`;
    const firstStep = async () => {
      const out = sink();
      await runChat({
        templatePath: EXAMPLE,
        model: 'offline',
        store,
        session: 'repeat',
        env: {},
        input: Readable.from([`${EV}\n`]),
        output: out.stream,
        errorOutput: new PassThrough(),
      });
      return out
        .text()
        .split('\n')
        .find((line) => line.startsWith('●'));
    };
    expect(await firstStep()).toBe('● ResearchMode [1/3: search]  tools: search');
    // Same text at the same position of a new conversation: only the line's own id tells it apart.
    expect(await firstStep()).toBe('● ResearchMode [1/3: search]  tools: search');
  });

  it('returns 130 when its signal is aborted', async () => {
    const controller = new AbortController();
    controller.abort();
    const out = sink();
    const input = new PassThrough(); // never ends: only the signal can stop the chat
    const code = await runChat({
      templatePath: EXAMPLE,
      model: 'offline',
      env: {},
      input,
      output: out.stream,
      errorOutput: new PassThrough(),
      signal: controller.signal,
    });
    expect(code).toBe(ChatExitCode.interrupted);
  });
});

describe('chooseModel', () => {
  const template = parseTemplate({ id: 'x', tools: [], llm: { provider: 'openai', model: 'gpt-4o' } });

  it("uses the template's model when its key is set", () => {
    const chosen = chooseModel(template, undefined, { OPENAI_API_KEY: 'k' });
    expect([chosen.label, chosen.notice]).toEqual(['openai:gpt-4o', undefined]);
  });

  it('parses an openai-compatible spec with its base URL', () => {
    const chosen = chooseModel(template, 'openai-compatible:qwen2.5@http://127.0.0.1:1/v1', {});
    expect(chosen.label).toBe('openai-compatible:qwen2.5');
  });

  it('ignores a blank BATON_MODEL', () => {
    const chosen = chooseModel(template, undefined, { BATON_MODEL: '  ', OPENAI_API_KEY: 'k' });
    expect(chosen.label).toBe('openai:gpt-4o');
  });
});

describe('stepLine', () => {
  const info = (overrides: Partial<StepInfo>): StepInfo => ({
    stepNumber: 0,
    activeStep: 'ResearchMode',
    stepDescription: undefined,
    sequence: undefined,
    shadow: false,
    allowedTools: ['search'],
    toolChoice: 'auto',
    state: {
      sessionId: 's',
      recentlyUsedTools: [],
      sequenceIndex: 0,
      cumulativeTokenUsage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 },
    },
    ...overrides,
  });
  const sequence = { tools: [['search'], ['think', 'reflect']], length: 2, blocked: false };

  it('shows the position, the expected tools and the tools offered', () => {
    expect(
      stepLine(info({ sequence: { ...sequence, index: 1, expected: ['think', 'reflect'], completed: false } })),
    ).toBe('● ResearchMode [2/2: think|reflect]  tools: search');
  });

  it('shows a completed sequence, a blocked one, no step and no tools', () => {
    expect(stepLine(info({ sequence: { ...sequence, index: 2, expected: undefined, completed: true } }))).toBe(
      '● ResearchMode [2/2 done]  tools: search',
    );
    expect(
      stepLine(
        info({
          allowedTools: [],
          sequence: { ...sequence, index: 0, expected: ['search'], completed: false, blocked: true },
        }),
      ),
    ).toBe('● ResearchMode [1/2: search, blocked: the agent lacks it]  tools: (none: answer without tools)');
    expect(stepLine(info({ activeStep: undefined, allowedTools: ['a', 'b'] }))).toBe('● (no step)  tools: a, b');
  });
});
