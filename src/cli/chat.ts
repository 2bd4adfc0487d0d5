/**
 * `baton chat <template>`: a terminal chat with an agent. Each answer streams, and before every
 * model step a line shows the active step, the sequence progress and the tools offered; tool
 * calls, their results and rejected calls get one line each. Reads lines from a terminal or a
 * pipe (`printf 'q1\nq2\n' | baton chat ...`) and exits at the end of input, on `/exit`, or on
 * Ctrl-C.
 */
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { styleText } from 'node:util';
import { type ModelMessage, NoSuchToolError, type ToolSet } from 'ai';
import yoctoSpinner, { type Spinner } from 'yocto-spinner';
import { type Agent, createAgent } from '../agents/create-agent.js';
import { CoreLLM, createLLM, MissingApiKeyError, parseModelSpec, templateLLMOptions } from '../ai-sdk/core-llm.js';
import { createOfflineModel } from '../ai-sdk/offline-model.js';
import { type StepInfo, ToolRejectedError } from '../ai-sdk/orchestrate.js';
import { BatonError, MissingDependencyError } from '../core/errors.js';
import type { AgentTemplate } from '../core/schema.js';
import { resolveStore } from '../stores/resolve-store.js';
import type { SessionStore } from '../stores/types.js';
import { loadTemplate } from '../templates/load-template.js';
import { assertToolsProvided, loadToolModule } from './tool-module.js';

/** Options of {@link runChat}. */
export interface ChatOptions {
  /** Path of the template file. */
  templatePath: string;
  /** A model spec (`offline`, `openai:gpt-4o`, ...); wins over `BATON_MODEL` and the template. */
  model?: string | undefined;
  /** Session id (default: a new one per run). */
  session?: string | undefined;
  /** Where session state lives (`memory:`, `sqlite:path`, `redis://…`, `postgres://…`; default memory). */
  store?: string | undefined;
  /** A module whose named exports are the app's AI SDK tools (`--tools`; see `tool-module.ts`). */
  toolsPath?: string | undefined;
  /** Environment for `BATON_MODEL` and API keys (default `process.env`). */
  env?: Readonly<Record<string, string | undefined>>;
  /** Where user lines come from (default `process.stdin`). */
  input?: Readable & { isTTY?: boolean };
  /** The conversation (default `process.stdout`). */
  output?: Writable & { isTTY?: boolean };
  /** Notices and errors (default `process.stderr`). */
  errorOutput?: Writable;
  /** Aborting it ends the chat like Ctrl-C (the bin wires SIGINT to it). */
  signal?: AbortSignal;
}

/** Exit codes of {@link runChat}. */
export const ChatExitCode = {
  /** End of input or `/exit`. */
  ok: 0,
  /** The template, model or store could not be set up, or a turn failed. */
  failure: 1,
  /** Interrupted (Ctrl-C). */
  interrupted: 130,
} as const;

/** Lines that end the chat. */
const EXIT_COMMANDS = new Set(['/exit', '/quit']);
/**
 * A line that is one `/word` is a command of the chat, never a message to the model (a message
 * such as "/etc/hosts is missing" has more than a word, and goes to the model).
 */
const COMMAND = /^\/[a-z]+$/i;
/** What `/help` prints. */
const HELP = [
  'Commands:',
  '  /help          this list',
  '  /exit, /quit   end the chat (so do Ctrl-C and the end of the input)',
  'Any other line is a message to the agent.',
].join('\n');

/** The model the chat uses, and a notice when it is not the one asked for. */
export interface ChosenModel {
  llm: CoreLLM;
  /** e.g. `anthropic:claude-sonnet-4-20250514` or `offline`. */
  label: string;
  /** Why the template's model was replaced by the offline one, when it was. */
  notice?: string;
}

/**
 * Picks the model: `spec` (from `--model`), else `BATON_MODEL`, else the template's own model.
 * An explicit choice that cannot be used is an error; a template model that cannot be used
 * (no key, no model named, an unsupported provider) falls back to the offline model with a notice.
 */
export function chooseModel(
  template: AgentTemplate,
  spec: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
  offlineDelayMs = 0,
): ChosenModel {
  const offline = (): CoreLLM =>
    new CoreLLM(createOfflineModel({ delayMs: offlineDelayMs }), { provider: 'offline', modelId: 'offline' });
  const explicit = spec ?? (env.BATON_MODEL?.trim() ? env.BATON_MODEL : undefined);
  if (explicit !== undefined) {
    const options = parseModelSpec(explicit);
    if (options.provider === 'offline') return { llm: offline(), label: 'offline' };
    const llm = createLLM({ ...options, env });
    return { llm, label: `${llm.provider}:${llm.modelId}` };
  }
  const fromTemplate = templateLLMOptions(template);
  if (fromTemplate === undefined) {
    return { llm: offline(), label: 'offline', notice: 'the template names no model; using the offline model.' };
  }
  const wanted = `${fromTemplate.provider}${fromTemplate.model ? `:${fromTemplate.model}` : ''}`;
  if (fromTemplate.provider === 'offline') return { llm: offline(), label: 'offline' };
  try {
    const llm = createLLM({ ...fromTemplate, env });
    return { llm, label: `${llm.provider}:${llm.modelId}` };
  } catch (error) {
    // What is wrong, and the fix for that: a key to set, a package to install, or another model.
    let why: string;
    let fix: string;
    if (MissingApiKeyError.isInstance(error)) {
      why = `${error.variable} is not set`;
      fix = `Set ${error.variable}, or pass --model.`;
    } else if (MissingDependencyError.isInstance(error)) {
      why = `its package ${error.packageName} is not installed`;
      fix = `Run \`npm install ${error.packageName}\`, or pass --model.`;
    } else {
      why = BatonError.isInstance(error) ? error.message : String(error);
      fix = 'Pass --model.';
    }
    return {
      llm: offline(),
      label: 'offline',
      notice: `the template's model ${wanted} cannot be used (${why}); using the offline model instead. ${fix}`,
    };
  }
}

/** Runs the chat until the input ends; resolves to the exit code (see {@link ChatExitCode}). */
export async function runChat(options: ChatOptions): Promise<number> {
  const input = options.input ?? process.stdin;
  const output = options.output ?? process.stdout;
  const errorOutput = options.errorOutput ?? process.stderr;
  const env = options.env ?? process.env;
  const tty = output.isTTY === true;
  const interactive = tty && input.isTTY === true;
  const paint = (format: Parameters<typeof styleText>[0], text: string) =>
    tty ? styleText(format, text, { validateStream: false }) : text;
  const fail = (message: string) => {
    errorOutput.write(`${message}\n`);
    return ChatExitCode.failure;
  };

  let template: AgentTemplate;
  try {
    template = await loadTemplate(options.templatePath);
  } catch (error) {
    // A TemplateConfigError lists every problem with its file, JSON path and hint.
    return fail(error instanceof Error ? error.message : String(error));
  }

  let chosen: ChosenModel;
  try {
    chosen = chooseModel(template, options.model, env, interactive ? 12 : 0);
  } catch (error) {
    return fail(`baton chat: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (chosen.notice) errorOutput.write(`${paint('yellow', 'baton chat:')} ${chosen.notice}\n`);

  let tools: ToolSet = {};
  try {
    if (options.toolsPath) tools = await loadToolModule(options.toolsPath);
    assertToolsProvided([template], tools, options.toolsPath);
  } catch (error) {
    return fail(`baton chat: ${error instanceof Error ? error.message : String(error)}`);
  }

  let agent: Agent;
  let store: SessionStore | undefined;
  try {
    // Open the store now, so a wrong URL fails before the first question rather than during it.
    store = options.store ? await resolveStore(options.store) : undefined;
    agent = createAgent(template, { model: chosen.llm, tools, ...(store ? { store } : {}) });
  } catch (error) {
    // An open connection (Redis, PostgreSQL) would keep the process alive after the error.
    await store?.close().catch(() => undefined);
    return fail(`baton chat: ${error instanceof Error ? error.message : String(error)}`);
  }

  const sessionId = options.session?.trim() || `chat-${randomUUID().slice(0, 8)}`;
  output.write(
    `${paint('bold', template.name ?? template.id)} (${template.id}) · model ${chosen.label} · session ${sessionId}\n`,
  );
  output.write(paint('dim', 'Type a message; /help for commands, /exit or Ctrl-C to quit.\n'));

  const screen = new Screen(output, tty, paint);
  const lines = createInterface({
    input,
    ...(interactive ? { output, prompt: paint('cyan', 'you> ') } : {}),
    terminal: interactive,
  });
  // Taken before anything can close the interface: an iterator created after close never ends.
  const lineIterator = lines[Symbol.asyncIterator]();
  // The input can end (Ctrl-D, end of a pipe) while a turn runs; lines read before still count.
  let inputClosed = false;
  lines.once('close', () => {
    inputClosed = true;
  });
  const prompt = () => {
    if (interactive && !inputClosed) lines.prompt();
  };
  let interrupted = false;
  let turnAbort: AbortController | undefined;
  const interrupt = () => {
    interrupted = true;
    turnAbort?.abort(new Error('interrupted'));
    lines.close();
  };
  lines.on('SIGINT', interrupt); // a terminal's Ctrl-C, which readline captures
  if (options.signal?.aborted) interrupt();
  options.signal?.addEventListener('abort', interrupt, { once: true });

  const conversation: ModelMessage[] = [];
  let failedTurns = 0;
  try {
    prompt();
    for await (const raw of { [Symbol.asyncIterator]: () => lineIterator }) {
      const line = raw.trim();
      if (line === '') {
        prompt();
        continue;
      }
      if (EXIT_COMMANDS.has(line)) break;
      if (COMMAND.test(line)) {
        output.write(
          line === '/help'
            ? `${HELP}\n`
            : `${paint('yellow', `Unknown command ${line}.`)} /help lists the commands; nothing was sent.\n`,
        );
        prompt();
        continue;
      }
      if (!interactive) output.write(`\n${paint('cyan', '>')} ${line}\n`);
      // An id makes every line a new message for the orchestration (resetSequenceOn
      // "new_message"), even when it repeats an earlier question of a kept session.
      const message: ModelMessage & { id: string } = { id: randomUUID(), role: 'user', content: line };
      conversation.push(message);
      turnAbort = new AbortController();
      const ok = await playTurn(agent, conversation, sessionId, screen, turnAbort.signal, errorOutput);
      turnAbort = undefined;
      if (!ok && !interrupted) failedTurns++;
      if (interrupted) break;
      if (interactive) output.write('\n');
      prompt();
    }
  } finally {
    options.signal?.removeEventListener('abort', interrupt);
    screen.stopSpinner();
    lines.close();
    await agent.manager.close().catch((error: unknown) => {
      errorOutput.write(`baton chat: closing the session store failed: ${String(error)}\n`);
    });
  }
  if (interrupted) {
    output.write('\n');
    return ChatExitCode.interrupted;
  }
  return failedTurns > 0 ? ChatExitCode.failure : ChatExitCode.ok;
}

/** Streams one answer to the screen; resolves to false when the turn failed. */
async function playTurn(
  agent: Agent,
  conversation: ModelMessage[],
  sessionId: string,
  screen: Screen,
  signal: AbortSignal,
  errorOutput: Writable,
): Promise<boolean> {
  let failure: unknown;
  screen.startSpinner('thinking');
  try {
    const result = await agent.handleMessage({
      messages: conversation,
      sessionId,
      abortSignal: signal,
      onStep: (info) => {
        screen.line(stepLine(info, screen.paint));
        screen.startSpinner(info.allowedTools.length ? 'choosing a tool' : 'writing the answer');
      },
      stream: {
        onCallbackError: (error, callback) => {
          failure ??= error;
          screen.stopSpinner();
          errorOutput.write(`baton chat: ${callback} failed: ${describeError(error)}\n`);
        },
      },
    });
    for await (const part of result.stream) {
      switch (part.type) {
        case 'text-delta':
          screen.text(part.text);
          break;
        case 'tool-call':
          screen.line(`  ${screen.paint('blue', '→')} ${part.toolName} ${shorten(JSON.stringify(part.input), 100)}`);
          screen.startSpinner(`running ${part.toolName}`);
          break;
        case 'tool-result':
          screen.line(`  ${screen.paint('green', '✓')} ${part.toolName}: ${summarize(part.output)}`);
          break;
        case 'tool-error':
          screen.line(
            isRejection(part.error)
              ? `  ${screen.paint('red', '✗')} ${part.toolName} rejected: ${shorten(describeError(part.error), 160)}`
              : `  ${screen.paint('red', '✗')} ${part.toolName} failed: ${shorten(describeError(part.error), 160)}`,
          );
          break;
        case 'tool-approval-response':
          // Orchestration refuses an offered tool's call through the approval hook: a result.
          if (!part.approved) {
            screen.line(
              `  ${screen.paint('red', '✗')} ${part.toolCall.toolName} rejected: ${shorten(part.reason ?? 'denied', 160)}`,
            );
          }
          break;
        case 'error':
          failure ??= part.error;
          break;
        case 'abort':
          failure ??= new Error('interrupted');
          break;
      }
    }
    screen.endText();
    if (failure !== undefined) {
      if (!signal.aborted) errorOutput.write(`baton chat: the turn failed: ${describeError(failure)}\n`);
      return false;
    }
    conversation.push(...(await result.responseMessages));
    const usage = await result.usage; // all steps of the turn (AI SDK 7)
    const steps = (await result.steps).length;
    screen.line(
      screen.paint('dim', `  · ${steps} model step${steps === 1 ? '' : 's'} · ${usage.totalTokens ?? 0} tokens`),
    );
    return true;
  } catch (error) {
    screen.endText();
    if (!signal.aborted) errorOutput.write(`baton chat: the turn failed: ${describeError(error)}\n`);
    return false;
  } finally {
    screen.stopSpinner();
  }
}

/** `● ResearchMode [2/3: think]  tools: think`: where the orchestration stands before a model step. */
export function stepLine(
  info: StepInfo,
  paint: (format: 'bold' | 'dim', text: string) => string = (_, t) => t,
): string {
  const name = info.activeStep ?? '(no step)';
  const sequence = info.sequence;
  let progress = '';
  if (sequence !== undefined) {
    if (sequence.completed) progress = ` [${sequence.length}/${sequence.length} done]`;
    else {
      const expected = (sequence.expected ?? []).join('|');
      progress = ` [${sequence.index + 1}/${sequence.length}: ${expected}${sequence.blocked ? ', blocked: the agent lacks it' : ''}]`;
    }
  }
  const tools = info.allowedTools.length ? info.allowedTools.join(', ') : '(none: answer without tools)';
  return `${paint('bold', `● ${name}`)}${progress}  ${paint('dim', 'tools:')} ${tools}`;
}

// The AI SDK reports a call to a tool that was not offered as the string
// "AI_NoSuchToolError: …" in the stream's tool-error part, not as an error object.
const NO_SUCH_TOOL = /^AI_NoSuchToolError:\s*/;

function isRejection(error: unknown): boolean {
  return (
    ToolRejectedError.isInstance(error) ||
    NoSuchToolError.isInstance(error) ||
    (typeof error === 'string' && NO_SUCH_TOOL.test(error))
  );
}

function describeError(error: unknown): string {
  if (error instanceof Error) return error.message;
  return typeof error === 'string' ? error.replace(NO_SUCH_TOOL, '') : JSON.stringify(error);
}

function shorten(text: string, length: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= length ? flat : `${flat.slice(0, length - 1)}…`;
}

/** One line for a tool result: its `summary`, its hit count and top hit, or its JSON. */
function summarize(output: unknown): string {
  if (typeof output === 'string') return shorten(output, 120);
  if (typeof output === 'object' && output !== null) {
    const record = output as { summary?: unknown; results?: unknown };
    if (typeof record.summary === 'string' && record.summary !== '') return shorten(record.summary, 120);
    if (Array.isArray(record.results)) {
      const top = record.results[0] as { title?: unknown } | undefined;
      const title = typeof top?.title === 'string' ? `; top: "${top.title}"` : '';
      return shorten(`${record.results.length} result${record.results.length === 1 ? '' : 's'}${title}`, 120);
    }
  }
  return shorten(JSON.stringify(output) ?? String(output), 120);
}

/** The terminal: keeps streamed text, one-line events and the spinner from overwriting each other. */
class Screen {
  readonly paint: (format: Parameters<typeof styleText>[0], text: string) => string;
  readonly #output: Writable;
  readonly #tty: boolean;
  #spinner: Spinner | undefined;
  /** True while streamed text has not ended with a newline. */
  #midLine = false;

  constructor(
    output: Writable,
    tty: boolean,
    paint: (format: Parameters<typeof styleText>[0], text: string) => string,
  ) {
    this.#output = output;
    this.#tty = tty;
    this.paint = paint;
  }

  startSpinner(text: string): void {
    if (!this.#tty) return; // a spinner in a pipe or a log is only noise
    this.stopSpinner();
    if (this.#midLine) return;
    this.#spinner = yoctoSpinner({ text, stream: this.#output, handleSignals: false }).start();
  }

  stopSpinner(): void {
    this.#spinner?.clear();
    this.#spinner?.stop();
    this.#spinner = undefined;
  }

  line(text: string): void {
    this.stopSpinner();
    this.endText();
    this.#output.write(`${text}\n`);
  }

  text(delta: string): void {
    this.stopSpinner();
    if (delta === '') return;
    this.#output.write(delta);
    this.#midLine = !delta.endsWith('\n');
  }

  endText(): void {
    if (this.#midLine) this.#output.write('\n');
    this.#midLine = false;
  }
}
