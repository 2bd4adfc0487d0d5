/**
 * The first hour with Baton: mistakes a newcomer makes in a template, in createApp's options and
 * on `baton serve`'s command line, each caught where it is made and said in one clear message.
 */
import { PassThrough } from 'node:stream';
import { openai } from '@ai-sdk/openai';
import { describe, expect, it } from 'vitest';
import { builtinTools } from '../src/agents/tools/index.js';
import { orchestrate } from '../src/ai-sdk/orchestrate.js';
import { createProgram } from '../src/cli/program.js';
import { assertToolsProvided } from '../src/cli/tool-module.js';
import { parseTemplate, validateTemplate } from '../src/core/validate-template.js';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { createApp } from '../src/server/create-app.js';
import { loadTemplate } from '../src/templates/load-template.js';
import { configErrorOf } from './helpers/config-errors.js';

const template = parseTemplate({
  id: 'research',
  tools: ['search', 'think'],
  orchestration: { steps: [{ name: 'Research', isDefault: true, sequence: ['search', 'think'] }] },
});

describe('createApp refuses a model it could not call, when it is created', () => {
  it('names the place and the fix for a provider passed in place of a model, and for a value that is no model', () => {
    // `model: openai` (the provider, not openai('gpt-4o')) used to start, then answer every chat with a 500.
    const provider = configErrorOf(() =>
      createApp({ agents: [template], model: openai as never, store: 'memory:', webRoot: false }),
    );
    expect(provider.issues.map((issue) => issue.path)).toEqual(['model']);
    expect(provider.issues[0]!.message).toMatch(/this is a provider: call it with a model id/);

    const served = configErrorOf(() =>
      createApp({ agents: [{ template, model: 42 as never }], store: 'memory:', webRoot: false }),
    );
    expect(served.issues.map((issue) => issue.path)).toEqual(['agents[0].model']);
    expect(served.issues[0]!.message).toMatch(/expected a model spec .*, got number/);
  });

  it('still accepts a spec and an AI SDK model', async () => {
    for (const model of ['offline', openai('gpt-4o')]) {
      const app = createApp({
        agents: [template],
        model,
        store: 'memory:',
        webRoot: false,
        env: { OPENAI_API_KEY: 'k' },
      });
      await app.close();
    }
  });
});

describe('a misspelt tool in availableTools', () => {
  it('is a warning with its path and a did-you-mean, since it allows or denies nothing', () => {
    const result = validateTemplate({
      id: 'files',
      tools: ['read_file', 'delete_file'],
      orchestration: {
        steps: [{ name: 'Look', isDefault: true, availableTools: { allowed: ['read_fle'], denied: ['delete_fil'] } }],
      },
    });
    expect(result.success).toBe(true);
    const warnings = result.success ? result.warnings : [];
    expect(warnings.map((issue) => [issue.path, issue.hint])).toEqual([
      ['orchestration.steps[0].availableTools.allowed[0]', 'did you mean "read_file"?'],
      ['orchestration.steps[0].availableTools.denied[0]', 'did you mean "delete_file"?'],
    ]);
  });

  it('says nothing of globs, selectors and names the agent has', () => {
    const result = validateTemplate({
      id: 'files',
      tools: ['read_file', 'delete_file'],
      orchestration: {
        steps: [
          {
            name: 'Look',
            isDefault: true,
            availableTools: { allowed: ['read_*', '@readOnly'], denied: ['delete_file'] },
          },
        ],
      },
    });
    expect(result.success && result.warnings).toEqual([]);
  });
});

async function serve(args: readonly string[], env: Record<string, string> = {}) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let err = '';
  stderr.on('data', (chunk) => {
    err += String(chunk);
  });
  let exitCode: number | undefined;
  const program = createProgram({
    env,
    stdin: new PassThrough(),
    stdout,
    stderr,
    signal: new AbortController().signal,
    setExitCode: (code) => {
      exitCode = code;
    },
  });
  // A usage error throws (as a CommanderError) instead of ending the test process.
  for (const command of program.commands) command.exitOverride();
  let thrown: unknown;
  try {
    await program.parseAsync(['serve', 'examples/agents', '--store', 'memory:', ...args], { from: 'user' });
  } catch (error) {
    thrown = error;
  }
  return { stderr: err, exitCode, thrown };
}

describe('baton serve with a model it cannot use', () => {
  it('says so in one line, as baton chat does, not with a stack trace', async () => {
    const typo = await serve(['--port', '0', '--model', 'opnai:gpt-4o']);
    expect(typo.thrown).toBeUndefined();
    expect(typo.exitCode).toBe(1);
    expect(typo.stderr.trim().split('\n')).toEqual([
      'baton serve: Invalid provider: "opnai" is not supported; use one of openai, anthropic, openai-compatible, offline (local servers such as Ollama work through openai-compatible)',
    ]);

    const noKey = await serve(['--port', '0'], { BATON_MODEL: 'openai:gpt-4o' });
    expect(noKey.exitCode).toBe(1);
    expect(noKey.stderr.trim()).toMatch(/^baton serve: No API key for provider "openai": set OPENAI_API_KEY/);
    expect(noKey.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('a number below its minimum', () => {
  it('says what the minimum is, in words that read', () => {
    const result = validateTemplate({
      id: 'research',
      tools: ['search'],
      orchestration: { historyLimit: 0, budget: { totalTokens: 0 }, steps: [{ name: 'a', isDefault: true }] },
    });
    expect(result.success).toBe(false);
    const issues = result.success ? [] : result.issues;
    expect(issues.map((issue) => [issue.path, issue.message])).toEqual([
      ['orchestration.historyLimit', 'must be more than 0'],
      ['orchestration.budget.totalTokens', 'must be more than 0'],
    ]);
  });
});

describe('baton serve on a port that cannot be', () => {
  it('says which of $PORT and --port is wrong, in one line, before loading anything', async () => {
    const fromEnv = await serve([], { PORT: 'abc' });
    expect(fromEnv.thrown).toBeUndefined();
    expect(fromEnv.exitCode).toBe(1);
    expect(fromEnv.stderr.trim()).toBe(
      'baton serve: $PORT must be a port number from 0 to 65535 (0 picks a free one), not "abc".',
    );

    const fromFlag = await serve(['--port', '99999']);
    expect(String(fromFlag.thrown)).toMatch(/--port must be a port number from 0 to 65535/);
    expect(fromFlag.stderr).toMatch(/--port must be a port number from 0 to 65535 \(0 picks a free one\), not "99999"/);
  });
});

describe('a template that would enforce nothing by mistake', () => {
  it('is refused when `orchestration` is misspelt, by validateTemplate and by orchestrate()', () => {
    const misspelt = {
      id: 'files',
      tools: ['search', 'think'],
      orchestraton: { steps: [{ name: 'Look', isDefault: true, availableTools: { allowed: ['search'] } }] },
    };
    const result = validateTemplate(misspelt);
    expect(result.success).toBe(false);
    const issues = result.success ? [] : result.issues;
    expect(issues.map((issue) => [issue.path, issue.hint])).toEqual([
      ['orchestraton', 'did you mean "orchestration"?'],
    ]);
    expect(issues[0]!.message).toMatch(/nothing would be enforced/);

    const manager = createOrchestrationManager();
    const turn = configErrorOf(() =>
      orchestrate({ manager, config: misspelt as never, sessionId: 's1', tools: builtinTools }),
    );
    expect(turn.issues.map((issue) => [issue.path, issue.hint])).toEqual([
      ['config.orchestraton', 'did you mean "orchestration"?'],
    ]);
  });

  it('is refused when loadTemplate() was not awaited, saying so', async () => {
    const pending = loadTemplate('examples/agents/cognitive-reasoner.json');
    const manager = createOrchestrationManager();
    // Without the check, the Promise passed as a template with no orchestration: every tool allowed.
    const turn = configErrorOf(() =>
      orchestrate({ manager, config: pending as never, sessionId: 's1', tools: builtinTools }),
    );
    expect(turn.issues.map((issue) => [issue.path, issue.message])).toEqual([
      ['config', 'expected an agent template or its orchestration block, got a Promise: await loadTemplate(...) first'],
    ]);
    const app = configErrorOf(() =>
      createApp({ agents: [pending as never], model: 'offline', store: 'memory:', webRoot: false }),
    );
    expect(app.issues.map((issue) => issue.path)).toEqual(['agents[0]']);
    expect(app.issues[0]!.message).toMatch(/got a Promise: await loadTemplate\(\.\.\.\) first$/);
    await pending;
  });
});

describe('a tool the template names that the --tools module spells differently', () => {
  it('gets a did-you-mean naming the export', () => {
    const template = parseTemplate({ id: 'w', tools: ['web_search'], orchestration: { steps: [] } });
    const exported = { web_serch: builtinTools.search };
    expect(() => assertToolsProvided([template], exported, './tools.ts')).toThrow(
      /export them from \.\/tools\.ts \(for "web_search", did you mean "web_serch"\?\)$/,
    );
  });
});

describe('baton serve --workers with a word it does not know', () => {
  it('names both forms it takes, "auto" and a number', async () => {
    const run = await serve(['--workers', 'many']);
    expect(String(run.thrown)).toContain('--workers must be "auto" (one per core) or a whole number >= 1.');
  });
});

describe('createOrchestrationManager with a misspelt option', () => {
  it('is refused with the option and a did-you-mean, not ignored (sessions kept in memory by mistake)', () => {
    const error = configErrorOf(() => createOrchestrationManager({ stroe: 'sqlite::memory:' } as never));
    expect(error.issues).toEqual([
      expect.objectContaining({
        path: 'stroe',
        message: 'unknown option "stroe"',
        hint: expect.stringContaining('store'),
      }),
    ]);
    // The options it knows still pass.
    expect(() => createOrchestrationManager({ store: 'memory', leaseMs: 1_000, eventLog: 10 })).not.toThrow();
  });
});
