/**
 * `baton simulate`: replays a conversation against a template without a model. Each event
 * is a user message or a tool the model tries to call; the tool goes through the same
 * checks as in the model loop (SPEC section 7): a tool that is not allowed now is rejected
 * and not recorded, an allowed one is recorded (SPEC section 5). Expectations on events
 * turn a replay into a test of the template, for CI.
 */
import { readFile } from 'node:fs/promises';
import type { Readable, Writable } from 'node:stream';
import { compileOrchestration } from '../core/compile.js';
import type { OrchestrationEvent, ToolDenial } from '../core/events.js';
import type { ChatMessage } from '../core/messages.js';
import type { AgentTemplate } from '../core/schema.js';
import { describeType } from '../core/state-check.js';
import { didYouMean } from '../core/template-issues.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import { memoryStore } from '../stores/memory.js';
import { formatFileIssue, locateJson, type Paint, painter, readTemplateFile, wantsColor } from './template-file.js';

/** What must hold right after an event; every given field is checked. */
export interface Expectation {
  /** The active step's name, or null for no active step. */
  step?: string | null;
  /** The allowed tools, in any order. */
  allowed?: string[];
  /** Positions of the active step's sequence already done. */
  sequenceIndex?: number;
  /** Tool events only: whether the call was rejected. */
  rejected?: boolean;
  /** Tool events only: the code of the call's refusal (`rule`, `limit`, `approval-required`, ...), or null for none. */
  code?: string | null;
  /** Tool events only: the rule on calls that refused the call (`rules[0]`, `steps[1].rules[0]`), or null for none. */
  rule?: string | null;
}

/** One event of an events file. */
export type SimulationEvent =
  | { line: number; kind: 'user'; text: string; expect?: Expectation }
  | {
      line: number;
      kind: 'tool';
      tool: string;
      /** The call's input, for rules on calls (`args` in their conditions). */
      args?: unknown;
      /** What the caller passes for rules on calls (`context` in their conditions). */
      context?: Record<string, unknown>;
      expect?: Expectation;
    };

/** A bad line of an events file. */
export interface EventLineError {
  line: number;
  column?: number;
  message: string;
}

/** Parsed events, or every bad line. */
export type ParsedEvents = { ok: true; events: SimulationEvent[] } | { ok: false; errors: EventLineError[] };

const EVENT_KEYS = ['user', 'tool', 'args', 'context', 'expect'];
const EXPECT_KEYS = ['step', 'allowed', 'sequenceIndex', 'rejected', 'code', 'rule'];

/**
 * Parses JSONL events: `{"user": "text"}` or `{"tool": "name"}` (with its input as `"args"` and
 * the caller's `"context"`, for rules on calls), each with an optional `"expect"`. Blank lines and lines starting with `//` are skipped. Reports every bad line.
 */
export function parseEvents(text: string): ParsedEvents {
  const events: SimulationEvent[] = [];
  const errors: EventLineError[] = [];
  const lines = text.split(/\r?\n/);
  lines.forEach((raw, index) => {
    const line = index + 1;
    const trimmed = raw.trim();
    if (trimmed === '' || trimmed.startsWith('//')) return;
    let data: unknown;
    try {
      data = JSON.parse(raw);
    } catch (error) {
      const located = locateJson(raw);
      errors.push(
        located.ok
          ? { line, message: `not valid JSON: ${(error as Error).message}` }
          : { line, column: located.position.column, message: `not valid JSON: ${located.message}` },
      );
      return;
    }
    const problems: string[] = [];
    const event = readEvent(data, line, problems);
    if (event) events.push(event);
    for (const message of problems) errors.push({ line, message });
  });
  return errors.length ? { ok: false, errors } : { ok: true, events };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function unknownKeys(record: Record<string, unknown>, known: readonly string[], where: string, problems: string[]) {
  for (const key of Object.keys(record)) {
    if (known.includes(key)) continue;
    const hint = didYouMean(key, known);
    problems.push(
      `${where}unknown key ${JSON.stringify(key)} (known keys: ${known.join(', ')})${hint ? `; ${hint}` : ''}`,
    );
  }
}

function readEvent(data: unknown, line: number, problems: string[]): SimulationEvent | undefined {
  if (!isRecord(data)) {
    problems.push(`an event must be a JSON object like {"user": "..."} or {"tool": "..."}, got ${describeType(data)}`);
    return undefined;
  }
  unknownKeys(data, EVENT_KEYS, '', problems);
  const hasUser = 'user' in data;
  const hasTool = 'tool' in data;
  if (hasUser === hasTool) {
    problems.push(
      hasUser
        ? 'an event has either "user" or "tool", not both; put them on two lines'
        : 'an event needs "user" (a user message) or "tool" (a tool the model calls)',
    );
  }
  if (hasUser && typeof data.user !== 'string')
    problems.push(`"user" must be a string, got ${describeType(data.user)}`);
  if (hasTool && (typeof data.tool !== 'string' || data.tool.trim() === '')) {
    problems.push(
      `"tool" must be a tool name (a non-empty string), got ${typeof data.tool === 'string' ? 'an empty string' : describeType(data.tool)}`,
    );
  }
  for (const key of ['args', 'context'] as const) {
    if (!(key in data)) continue;
    if (!hasTool || hasUser) problems.push(`"${key}" applies to "tool" events only`);
    else if (!isRecord(data[key])) {
      problems.push(`"${key}" must be a JSON object like {"amount": 120}, got ${describeType(data[key])}`);
    }
  }
  const expect = 'expect' in data ? readExpectation(data.expect, hasTool && !hasUser, problems) : undefined;
  if (problems.length > 0) return undefined;
  const base = expect === undefined ? {} : { expect };
  if (hasUser) return { line, kind: 'user', text: data.user as string, ...base };
  return {
    line,
    kind: 'tool',
    tool: data.tool as string,
    ...('args' in data ? { args: data.args } : {}),
    ...('context' in data ? { context: data.context as Record<string, unknown> } : {}),
    ...base,
  };
}

function readExpectation(value: unknown, isTool: boolean, problems: string[]): Expectation | undefined {
  if (!isRecord(value)) {
    problems.push(`"expect" must be an object like {"step": "ResearchMode"}, got ${describeType(value)}`);
    return undefined;
  }
  unknownKeys(value, EXPECT_KEYS, 'expect: ', problems);
  const out: Expectation = {};
  if ('step' in value) {
    if (value.step === null || typeof value.step === 'string') out.step = value.step;
    else problems.push(`expect.step must be a step name or null (no active step), got ${describeType(value.step)}`);
  }
  if ('allowed' in value) {
    if (Array.isArray(value.allowed) && value.allowed.every((t) => typeof t === 'string')) out.allowed = value.allowed;
    else problems.push('expect.allowed must be an array of tool names');
  }
  if ('sequenceIndex' in value) {
    const n = value.sequenceIndex;
    if (typeof n === 'number' && Number.isInteger(n) && n >= 0) out.sequenceIndex = n;
    else problems.push(`expect.sequenceIndex must be an integer >= 0, got ${JSON.stringify(n)}`);
  }
  if ('rejected' in value) {
    if (!isTool) problems.push('expect.rejected applies to "tool" events only');
    else if (typeof value.rejected === 'boolean') out.rejected = value.rejected;
    else problems.push(`expect.rejected must be true or false, got ${describeType(value.rejected)}`);
  }
  for (const key of ['code', 'rule'] as const) {
    if (!(key in value)) continue;
    const given = value[key];
    if (!isTool) problems.push(`expect.${key} applies to "tool" events only`);
    else if (given === null || typeof given === 'string') out[key] = given;
    else problems.push(`expect.${key} must be a string or null (the call was not refused), got ${describeType(given)}`);
  }
  return out;
}

// ---------------------------------------------------------------------------------------
// Replaying

/** Sequence progress after an event. */
export interface SequenceProgress {
  /** Positions done. */
  index: number;
  length: number;
  /** Tools of the next position (undefined when complete). */
  expected: string[] | undefined;
  completed: boolean;
  /** The agent has none of the next position's tools. */
  blocked: boolean;
}

/** An engine event as the replay reports it: the session id is always the same, so it is left out. */
export type EngineEvent = OrchestrationEvent extends infer E
  ? E extends OrchestrationEvent
    ? Omit<E, 'sessionId'>
    : never
  : never;

/** Where the session stands after one event, and what happened. */
export interface SimulationStep {
  /** 1-based number of the event. */
  index: number;
  /** Line of the events file. */
  line: number;
  event: { user: string } | { tool: string };
  activeStep: string | null;
  sequence: SequenceProgress | null;
  allowedTools: string[];
  /** Why the tool call was rejected, for a rejected tool event. */
  rejected: ToolDenial | null;
  /** Engine events the event caused (without the session id). */
  events: EngineEvent[];
  /** Expectation results, when the event had any. */
  expectations: { passed: boolean; failures: string[] } | null;
}

/** The whole replay. */
export interface SimulationResult {
  steps: SimulationStep[];
  /** The tool list used: the template's, or (when it declares none) every tool the orchestration and the events name. */
  agentTools: string[];
  rejected: number;
  expectationsChecked: number;
  expectationsFailed: number;
}

/** Replays `events` against `template` with an in-memory session. */
export async function simulate(template: AgentTemplate, events: readonly SimulationEvent[]): Promise<SimulationResult> {
  const agentTools = agentToolsOf(template, events);
  const sessionId = 'simulation';
  const manager = createOrchestrationManager({ store: memoryStore(), ttl: 0 });
  let current: OrchestrationEvent[] = [];
  manager.subscribe((event) => {
    current.push(event);
  });
  const messages: ChatMessage[] = [];
  const steps: SimulationStep[] = [];
  let rejected = 0;
  let expectationsChecked = 0;
  let expectationsFailed = 0;
  try {
    for (const [i, event] of events.entries()) {
      current = [];
      let denial: ToolDenial | null = null;
      if (event.kind === 'user') {
        // An id per event: the same text sent twice is two messages (resetSequenceOn "new_message").
        messages.push({ id: `event-${event.line}`, role: 'user', content: event.text });
      } else {
        // As the model loop does: a call that is not allowed now is refused and never recorded.
        const toolCallId = `event-${event.line}`;
        const decision = await manager.requestTool(template, messages, sessionId, {
          tool: event.tool,
          toolCallId,
          agentTools,
          ...(event.args === undefined ? {} : { args: event.args }),
          ...(event.context === undefined ? {} : { context: event.context }),
        });
        if (decision.allowed) await manager.completeTool(template, messages, sessionId, toolCallId);
        else {
          denial = decision.reason;
          rejected++;
        }
      }
      const view = await manager.getStepView(template, messages, sessionId, agentTools);
      const sequence = view.sequence
        ? {
            index: view.sequence.index,
            length: view.sequence.length,
            expected: view.sequence.expected ? [...view.sequence.expected] : undefined,
            completed: view.sequence.completed,
            blocked: view.sequence.blocked,
          }
        : null;
      const step: SimulationStep = {
        index: i + 1,
        line: event.line,
        event: event.kind === 'user' ? { user: event.text } : { tool: event.tool },
        activeStep: view.activeStep?.name ?? null,
        sequence,
        allowedTools: [...view.allowedTools],
        rejected: denial,
        events: current.map(({ sessionId: _, ...rest }) => rest as EngineEvent),
        expectations: null,
      };
      if (event.expect !== undefined) {
        const failures = checkExpectation(event.expect, step, view.state.sequenceIndex);
        step.expectations = { passed: failures.length === 0, failures };
        expectationsChecked++;
        if (failures.length > 0) expectationsFailed++;
      }
      steps.push(step);
    }
  } finally {
    await manager.close();
  }
  return { steps, agentTools, rejected, expectationsChecked, expectationsFailed };
}

/**
 * The template's tools. A template that declares none (no `tools`, no AgentDock `nodes`)
 * gets every tool its orchestration and the events name, so it can be replayed at all.
 */
function agentToolsOf(template: AgentTemplate, events: readonly SimulationEvent[]): string[] {
  // AgentDock's "nodes" declares the tools even when it lists only the model (no tools at all).
  if (template.tools.length > 0 || Array.isArray(template.nodes)) return [...template.tools];
  const tools = new Set(compileOrchestration(template).referencedTools);
  for (const event of events) if (event.kind === 'tool') tools.add(event.tool);
  return [...tools];
}

function checkExpectation(expect: Expectation, step: SimulationStep, sequenceIndex: number): string[] {
  const failures: string[] = [];
  const show = (value: string | null) => (value === null ? 'no step' : JSON.stringify(value));
  if (expect.step !== undefined && expect.step !== step.activeStep) {
    failures.push(`expected step ${show(expect.step)}, got ${show(step.activeStep)}`);
  }
  if (expect.allowed !== undefined) {
    const want = [...new Set(expect.allowed)].sort();
    const got = [...step.allowedTools].sort();
    if (want.join('\u0000') !== got.join('\u0000')) {
      failures.push(`expected allowed [${expect.allowed.join(', ')}], got [${step.allowedTools.join(', ')}]`);
    }
  }
  if (expect.sequenceIndex !== undefined && expect.sequenceIndex !== sequenceIndex) {
    failures.push(`expected sequenceIndex ${expect.sequenceIndex}, got ${sequenceIndex}`);
  }
  if (expect.rejected !== undefined && expect.rejected !== (step.rejected !== null)) {
    failures.push(
      expect.rejected
        ? 'expected the call to be rejected, but it was allowed'
        : `expected the call to be allowed, but it was rejected: ${step.rejected?.message}`,
    );
  }
  const code = step.rejected?.code ?? null;
  if (expect.code !== undefined && expect.code !== code) {
    failures.push(
      `expected ${expect.code === null ? 'no refusal' : `refusal code ${expect.code}`}, got ${code === null ? 'none (the call was allowed)' : `${code}: ${step.rejected?.message}`}`,
    );
  }
  const rejected = step.rejected;
  const rule = rejected !== null && 'rule' in rejected ? rejected.rule : null;
  if (expect.rule !== undefined && expect.rule !== rule) {
    failures.push(
      `expected ${expect.rule === null ? 'no rule to refuse the call' : `rule ${expect.rule} to refuse the call`}, got ${rule === null ? (rejected === null ? 'none (the call was allowed)' : `a refusal by no rule (${rejected.code}: ${rejected.message})`) : `${rule}: ${rejected?.message}`}`,
    );
  }
  return failures;
}

// ---------------------------------------------------------------------------------------
// Printing

const MAX_EVENT_WIDTH = 44;

/** `1/3 next: think`, `3/3 done`, `0/3 blocked: search`, or `-`. */
export function formatSequence(sequence: SequenceProgress | null): string {
  if (sequence === null) return '-';
  if (sequence.completed) return `${sequence.length}/${sequence.length} done`;
  const next = (sequence.expected ?? []).join('|');
  return `${sequence.index}/${sequence.length} ${sequence.blocked ? 'blocked' : 'next'}: ${next}`;
}

function describeEvent(event: EngineEvent): string | undefined {
  switch (event.type) {
    case 'step-changed':
      return `step ${event.from ?? '(none)'} → ${event.to ?? '(none)'}`;
    case 'sequence-completed':
      return 'sequence complete';
    case 'sequence-reset':
      return `sequence reset (${event.reason})`;
    case 'sequence-violation':
      return `out of sequence: expected ${event.expected.join(' or ')}`;
    case 'sequence-blocked':
      return `blocked: the agent has no ${event.expected.join(' or ')}`;
    default:
      // sequence-advanced shows in the sequence column; tool-rejected in the rejection note.
      return undefined;
  }
}

function shorten(text: string, width: number): string {
  const flat = text.replace(/\s+/g, ' ');
  const chars = [...flat];
  return chars.length <= width ? flat : `${chars.slice(0, width - 1).join('')}…`;
}

/** The replay as an aligned table, one row per event; notes show rejections, step changes and expectations. */
export function formatSimulationTable(result: SimulationResult, paint: Paint = painter(false)): string {
  const header = ['#', 'event', 'step', 'sequence', 'allowed', 'note'];
  const rows = result.steps.map((step) => {
    const event = 'user' in step.event ? `user: ${JSON.stringify(step.event.user)}` : `tool: ${step.event.tool}`;
    const notes: { text: string; style: Parameters<Paint>[0] }[] = [];
    if (step.rejected) {
      const by = 'rule' in step.rejected ? ` by ${step.rejected.rule}` : '';
      notes.push({ text: `✗ rejected${by}: ${step.rejected.message}`, style: 'yellow' });
    }
    for (const e of step.events) {
      const text = describeEvent(e);
      if (text !== undefined) notes.push({ text, style: 'dim' });
    }
    if (step.expectations) {
      if (step.expectations.passed) notes.push({ text: '✓ expectations met', style: 'green' });
      for (const failure of step.expectations.failures)
        notes.push({ text: `✗ FAILED: ${failure}`, style: ['bold', 'red'] });
    }
    return {
      cells: [
        String(step.index),
        shorten(event, MAX_EVENT_WIDTH),
        step.activeStep ?? '(none)',
        formatSequence(step.sequence),
        step.allowedTools.length ? step.allowedTools.join(', ') : '(none)',
      ],
      notes,
    };
  });
  const widths = header.slice(0, 5).map((h, c) => Math.max(h.length, ...rows.map((r) => [...r.cells[c]!].length)));
  const pad = (text: string, c: number) => text + ' '.repeat(widths[c]! - [...text].length);
  const lines = [
    paint(
      'bold',
      header
        .map((h, c) => (c < 5 ? pad(h, c) : h))
        .join('  ')
        .trimEnd(),
    ),
  ];
  for (const row of rows) {
    const cells = row.cells.map(pad).join('  ');
    const notes = row.notes.map((n) => paint(n.style, n.text)).join('; ');
    lines.push(`${cells}  ${notes}`.trimEnd());
  }
  return `${lines.join('\n')}\n`;
}

/** One line: how many events, rejections and expectations. */
export function formatSummary(result: SimulationResult, paint: Paint = painter(false)): string {
  const n = result.steps.length;
  const parts = [
    `${n} event${n === 1 ? '' : 's'}`,
    `${result.rejected} rejected tool call${result.rejected === 1 ? '' : 's'}`,
  ];
  if (result.expectationsChecked === 0) return `${parts.join(', ')}, no expectations\n`;
  if (result.expectationsFailed === 0) {
    return `${parts.join(', ')}, ${paint('green', `all ${result.expectationsChecked} expectations met`)}\n`;
  }
  const failed = result.steps
    .filter((s) => s.expectations && !s.expectations.passed)
    .map((s) => `#${s.index} (line ${s.line})`);
  return `${parts.join(', ')}, ${paint(['bold', 'red'], `${result.expectationsFailed} of ${result.expectationsChecked} expectations failed: ${failed.join(', ')}`)}\n`;
}

// ---------------------------------------------------------------------------------------
// The command

/** Exit codes of {@link runSimulate}. */
export const SimulateExitCode = {
  /** Replayed; every expectation held. */
  ok: 0,
  /** An expectation failed, or the template is invalid or cannot be read. */
  failed: 1,
  /** The events file cannot be read or has bad lines (nothing was replayed). */
  badEvents: 2,
} as const;

/** Options of {@link runSimulate}. */
export interface SimulateOptions {
  templatePath: string;
  /** Path of the JSONL events, or `-` for `stdin`. */
  eventsPath: string;
  /** One JSON object per event instead of the table. */
  json?: boolean;
  stdin: Readable;
  stdout: Writable & { isTTY?: boolean };
  stderr: Writable;
  env: Readonly<Record<string, string | undefined>>;
}

/** Runs `baton simulate`; resolves to the exit code (see {@link SimulateExitCode}). */
export async function runSimulate(options: SimulateOptions): Promise<number> {
  const paint = painter(wantsColor(options.stdout, options.env));
  const errorPaint = painter(wantsColor(options.stderr as Writable & { isTTY?: boolean }, options.env));
  const loaded = await readTemplateFile(options.templatePath);
  if (!loaded.ok) {
    options.stderr.write(`${loaded.issues.map((issue) => formatFileIssue(issue, errorPaint)).join('\n')}\n`);
    options.stderr.write(`baton simulate: ${options.templatePath} is not a valid template; nothing was replayed\n`);
    return SimulateExitCode.failed;
  }
  for (const warning of loaded.warnings) options.stderr.write(`${formatFileIssue(warning, errorPaint)}\n`);

  const source = options.eventsPath === '-' ? 'stdin' : options.eventsPath;
  let text: string;
  try {
    text = options.eventsPath === '-' ? await readAll(options.stdin) : await readFile(options.eventsPath, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === 'ENOENT' ? 'no such file' : (error as Error).message;
    options.stderr.write(`baton simulate: cannot read the events ${source}: ${reason}\n`);
    return SimulateExitCode.badEvents;
  }
  const parsed = parseEvents(text);
  if (!parsed.ok) {
    for (const e of parsed.errors) {
      options.stderr.write(`${source}:${e.line}${e.column === undefined ? '' : `:${e.column}`}: ${e.message}\n`);
    }
    const n = new Set(parsed.errors.map((e) => e.line)).size;
    options.stderr.write(
      `baton simulate: ${n} bad event line${n === 1 ? '' : 's'} in ${source}; nothing was replayed\n`,
    );
    return SimulateExitCode.badEvents;
  }

  const result = await simulate(loaded.template, parsed.events);
  if (options.json) {
    for (const step of result.steps) options.stdout.write(`${JSON.stringify(step)}\n`);
  } else {
    options.stdout.write(formatSimulationTable(result, paint));
    options.stdout.write(formatSummary(result, paint));
  }
  return result.expectationsFailed > 0 ? SimulateExitCode.failed : SimulateExitCode.ok;
}

async function readAll(stream: Readable): Promise<string> {
  // Decoded once at the end: a character split between two chunks must stay whole.
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk));
  return Buffer.concat(chunks).toString('utf8');
}
