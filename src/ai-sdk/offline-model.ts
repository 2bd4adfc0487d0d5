/**
 * A deterministic local language model (AI SDK provider spec v4) that behaves like a cooperative
 * tool-using model without a network or an API key. It powers the demo, the CLI's offline mode
 * and end-to-end tests: it calls the tools it is offered, one per step, with arguments built from
 * their JSON schemas, and then answers with a summary of the tool results.
 *
 * It only reads what a real model would see: the prompt (system, user, assistant and tool
 * messages), the tools offered in this call and the tool choice. Nothing is kept between calls,
 * so the same prompt always gives the same output.
 */
import { randomBytes } from 'node:crypto';
import { setImmediate } from 'node:timers/promises';
import type {
  LanguageModelV4,
  LanguageModelV4CallOptions,
  LanguageModelV4FinishReason,
  LanguageModelV4FunctionTool,
  LanguageModelV4GenerateResult,
  LanguageModelV4Prompt,
  LanguageModelV4StreamPart,
  LanguageModelV4StreamResult,
  LanguageModelV4ToolResultOutput,
  LanguageModelV4Usage,
  SharedV4Warning,
} from '@ai-sdk/provider';

/** Options of {@link createOfflineModel}. */
export interface OfflineModelOptions {
  /**
   * On the first call of every turn, call a tool that was NOT offered (a tool of the plan that is
   * not offered, else `delete_everything`), then behave. Shows that enforcement does not rely on
   * the model obeying. Default false.
   */
  misbehave?: boolean;
  /** Most tool calls per turn (a turn starts at the latest user message); then it answers. Default 8. */
  maxToolCalls?: number;
  /** Delay before each streamed chunk, in milliseconds, to make streaming visible. Default 0. */
  delayMs?: number;
}

/** The tool name the misbehaving model calls when every tool of its plan is offered. */
export const OFFLINE_FORBIDDEN_TOOL = 'delete_everything';

const DEFAULT_MAX_TOOL_CALLS = 8;

/**
 * Which tools fit a message, by keywords: the first rule (in order) with a keyword in the message
 * wins. The order of the rules mirrors the modes of `examples/agents/cognitive-reasoner.json`, so
 * that without orchestration the model picks the tools that the template would require with it.
 * A keyword is a whole word, or two words with one space between them, compared without case, as
 * the regex `\b(how many|find)\b` with the `i` flag matches it.
 */
const PLANS: readonly { keywords: readonly string[]; tools: readonly string[] }[] = [
  {
    keywords: ['research', 'how many', 'how much', 'find', 'look up', 'what is', 'what are', 'statistics'],
    tools: ['search', 'think', 'reflect'],
  },
  { keywords: ['solve', 'solving', 'how can', 'problem', 'problems'], tools: ['think', 'brainstorm', 'compare'] },
  { keywords: ['critique', 'evaluate', 'assess', 'review'], tools: ['critique', 'debate', 'reflect'] },
  { keywords: ['compare', 'comparing', 'comparison', 'versus', 'vs'], tools: ['search', 'compare', 'reflect'] },
  { keywords: ['brainstorm', 'idea', 'ideas'], tools: ['think', 'brainstorm', 'critique'] },
  { keywords: ['debate', 'whether'], tools: ['search', 'debate', 'reflect'] },
];
/** The first rule also takes a forecast: "will" and later on the same line "by <4 digits>". */
const FORECAST_PLAN = 0;
const DEFAULT_PLAN: readonly string[] = ['think', 'reflect'];

/** Keyword (one word, or two joined by a space) -> index of the first rule that has it. */
const PLAN_OF_KEYWORD = new Map<string, number>();
for (const [index, plan] of PLANS.entries()) {
  for (const keyword of plan.keywords) if (!PLAN_OF_KEYWORD.has(keyword)) PLAN_OF_KEYWORD.set(keyword, index);
}
/** First words of the two-word keywords: only after these is a word pair looked up. */
const PHRASE_STARTS = new Set([...PLAN_OF_KEYWORD.keys()].flatMap((k) => (k.includes(' ') ? [k.split(' ')[0]!] : [])));
/** A longer word is no keyword, so it is never sliced out of the message. */
const LONGEST_KEYWORD_WORD = Math.max(...[...PLAN_OF_KEYWORD.keys()].flatMap((k) => k.split(' ').map((w) => w.length)));

/**
 * The tools the offline model would like to use for `message`, in order.
 *
 * One pass over the message, so its time is linear in the message's length, whatever the message:
 * the regexes this replaced backtracked quadratically (`\bwill\b.*\bby \d{4}\b` on a message of
 * many "will"s took 5 s for 100 KB).
 */
export function offlinePlan(message: string): readonly string[] {
  let best = PLANS.length;
  let previous: string | undefined;
  let previousEnd = -1;
  let willOnLine = false;
  let byAt = -1;
  const length = message.length;
  let i = 0;
  while (i < length && best > 0) {
    const code = message.charCodeAt(i);
    if (!isWordCode(code)) {
      // `.` in the forecast pattern stops at line terminators, so a forecast is one line.
      if (code === 0x0a || code === 0x0d || code === 0x2028 || code === 0x2029) willOnLine = false;
      i++;
      continue;
    }
    const start = i;
    while (i < length && isWordCode(message.charCodeAt(i))) i++;
    const afterSpace = previousEnd === start - 1 && message.charCodeAt(previousEnd) === 0x20;
    if (i - start > LONGEST_KEYWORD_WORD) {
      // Too long for a keyword or for four digits; it still separates the words around it.
      previous = undefined;
      previousEnd = i;
      byAt = -1;
      continue;
    }
    const word = message.slice(start, i).toLowerCase();
    let plan = PLAN_OF_KEYWORD.get(word);
    if (afterSpace && previous !== undefined && PHRASE_STARTS.has(previous)) {
      const pair = PLAN_OF_KEYWORD.get(`${previous} ${word}`);
      if (pair !== undefined && (plan === undefined || pair < plan)) plan = pair;
    }
    if (word === 'will') willOnLine = true;
    else if (willOnLine && afterSpace && byAt === start - 3 && isFourDigits(word)) plan = FORECAST_PLAN;
    // "by" counts only after a "will" that came before it on the line.
    byAt = willOnLine && word === 'by' ? start : -1;
    if (plan !== undefined && plan < best) best = plan;
    previous = word;
    previousEnd = i;
  }
  return PLANS[best]?.tools ?? DEFAULT_PLAN;
}

/** The characters of `\w` (and so of `\b`) in a JavaScript regex without the `u` flag. */
function isWordCode(code: number): boolean {
  return (
    (code >= 0x61 && code <= 0x7a) || (code >= 0x41 && code <= 0x5a) || (code >= 0x30 && code <= 0x39) || code === 0x5f
  );
}

function isFourDigits(word: string): boolean {
  if (word.length !== 4) return false;
  for (let i = 0; i < 4; i++) {
    const code = word.charCodeAt(i);
    if (code < 0x30 || code > 0x39) return false;
  }
  return true;
}

/** Creates the offline model. */
export function createOfflineModel(options: OfflineModelOptions = {}): LanguageModelV4 {
  const settings: Settings = {
    misbehave: options.misbehave ?? false,
    maxToolCalls: Math.max(0, options.maxToolCalls ?? DEFAULT_MAX_TOOL_CALLS),
    delayMs: Math.max(0, options.delayMs ?? 0),
  };
  return {
    specificationVersion: 'v4',
    provider: 'baton-offline',
    modelId: 'offline',
    supportedUrls: {},
    async doGenerate(call: LanguageModelV4CallOptions): Promise<LanguageModelV4GenerateResult> {
      call.abortSignal?.throwIfAborted();
      const reply = respond(call, settings);
      return {
        content:
          reply.type === 'text'
            ? [{ type: 'text', text: reply.text }]
            : [{ type: 'tool-call', toolCallId: reply.toolCallId, toolName: reply.toolName, input: reply.input }],
        finishReason: reply.finishReason,
        usage: reply.usage,
        warnings: reply.warnings,
        response: { id: reply.responseId, modelId: 'offline' },
      };
    },
    async doStream(call: LanguageModelV4CallOptions): Promise<LanguageModelV4StreamResult> {
      call.abortSignal?.throwIfAborted();
      const parts = streamParts(respond(call, settings));
      const signal = call.abortSignal;
      let next = 0;
      return {
        stream: new ReadableStream<LanguageModelV4StreamPart>({
          async pull(controller) {
            if (settings.delayMs > 0) await sleep(settings.delayMs, signal);
            // A network model's stream arrives as I/O, so a server gets a turn of its event loop
            // between model steps. Without it, a CPU-bound turn ran from its first step to its
            // last in one run of promise callbacks, and with many turns in flight the loop went
            // a second or more between I/O polls: Node accepts one connection per poll, so new
            // connections waited seconds to be accepted (p99 7 s at 50 connections, p50 0.4 s).
            else if (next === 0) await setImmediate();
            signal?.throwIfAborted();
            const part = parts[next++];
            if (part !== undefined) controller.enqueue(part);
            if (next >= parts.length) controller.close();
          },
        }),
      };
    },
  };
}

interface Settings {
  misbehave: boolean;
  maxToolCalls: number;
  delayMs: number;
}

/** What the model produces for one call. */
type Reply = (
  | { type: 'text'; text: string }
  | { type: 'tool-call'; toolCallId: string; toolName: string /** JSON text, as the spec wants. */; input: string }
) & {
  responseId: string;
  finishReason: LanguageModelV4FinishReason;
  usage: LanguageModelV4Usage;
  warnings: SharedV4Warning[];
};

// Reading the prompt ---------------------------------------------------------------------------

/** A tool call of the current turn and, once it ran (or was rejected), its result. */
interface TurnCall {
  toolCallId: string;
  toolName: string;
  output: LanguageModelV4ToolResultOutput | undefined;
}

/** The current turn: the latest user message and everything after it. */
interface Turn {
  /** The latest user message, cut to {@link QUESTION_LENGTH} characters: what the model quotes. */
  question: string;
  /** The tools of the plan for the whole latest user message. */
  plan: readonly string[];
  /** 0 for the first user message of the conversation, 1 for the second, ... */
  index: number;
  /** The system messages, joined. */
  system: string;
  calls: TurnCall[];
}

function readTurn(prompt: LanguageModelV4Prompt): Turn {
  const system: string[] = [];
  let users = 0;
  let latest = '';
  let calls: TurnCall[] = [];
  const byId = new Map<string, TurnCall>();
  const attach = (toolCallId: string, output: LanguageModelV4ToolResultOutput) => {
    const call = byId.get(toolCallId);
    if (call !== undefined) call.output = output;
  };
  for (const message of prompt) {
    switch (message.role) {
      case 'system':
        system.push(message.content);
        break;
      case 'user':
        users++;
        latest = message.content
          .flatMap((part) => (part.type === 'text' ? [part.text] : []))
          .join('\n')
          .trim();
        calls = [];
        byId.clear();
        break;
      case 'assistant':
        for (const part of message.content) {
          if (part.type === 'tool-call') {
            const call: TurnCall = { toolCallId: part.toolCallId, toolName: part.toolName, output: undefined };
            calls.push(call);
            byId.set(part.toolCallId, call);
          } else if (part.type === 'tool-result') {
            attach(part.toolCallId, part.output);
          }
        }
        break;
      case 'tool':
        for (const part of message.content) if (part.type === 'tool-result') attach(part.toolCallId, part.output);
        break;
    }
  }
  return {
    question: excerpt(latest, QUESTION_LENGTH),
    plan: offlinePlan(latest),
    index: Math.max(0, users - 1),
    system: system.join('\n'),
    calls,
  };
}

/**
 * Most characters of the user's message the model quotes (in tool arguments and its answer).
 * Its output stays small whatever it is sent: quoting a 900 KB message in every tool input, and
 * the AI SDK streaming each input and result, once made a 27 MB response.
 */
const QUESTION_LENGTH = 1000;

/** `text` cut to at most `length` characters, at a space when one is near the end, marked with `…`. */
function excerpt(text: string, length: number): string {
  if (text.length <= length) return text;
  let end = length - 1;
  // Never split a surrogate pair.
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  const space = text.lastIndexOf(' ', end);
  if (space > length * 0.8) end = space;
  return `${text.slice(0, end).trimEnd()}…`;
}

// An error result that says the tool was not available (the AI SDK's NoSuchToolError, Baton's
// ToolRejectedError "Tool "x" was not run: ..."). Such a call did not happen as far as the plan
// is concerned, so the model tries the tool again once it is offered. Any other result, errors
// of the tool itself included, counts as done: retrying a tool that failed would only fail again.
const REJECTION = /NoSuchToolError|unavailable tool|not (?:allowed|available|offered|run)\b|rejected/i;

function isRejected(output: LanguageModelV4ToolResultOutput | undefined): boolean {
  if (output === undefined) return false;
  if (output.type === 'error-text') return REJECTION.test(output.value);
  if (output.type === 'error-json') return REJECTION.test(JSON.stringify(output.value));
  return false;
}

function isError(output: LanguageModelV4ToolResultOutput | undefined): boolean {
  return output?.type === 'error-text' || output?.type === 'error-json' || output?.type === 'execution-denied';
}

/** Tool names from a `Next required tool: a` line (alternatives: `a or b`, `a, b`, `a | b`). */
function requiredNext(system: string): string[] {
  const line = /next required tools?:\s*([^\n]+)/i.exec(system)?.[1];
  if (line === undefined) return [];
  return line
    .split(/,|\||\bor\b/)
    .map((name) => trimEnd(trimStart(name, isQuoteOrSpace), (char) => char === '.' || isQuoteOrSpace(char)))
    .filter((name) => name !== '');
}

const isSpace = (char: string) => /\s/.test(char);
const isQuoteOrSpace = (char: string) => char === '`' || char === "'" || char === '"' || char === '*' || isSpace(char);

// Trimming by loops: a pattern such as `/[\s?.!]+$/` tries every start in a long run of those
// characters and backtracks quadratically (a message of 100,000 spaces took seconds).

/** `text` without its trailing characters for which `drop` holds. */
function trimEnd(text: string, drop: (char: string) => boolean): string {
  let end = text.length;
  while (end > 0 && drop(text[end - 1]!)) end--;
  return text.slice(0, end);
}

/** `text` without its leading characters for which `drop` holds. */
function trimStart(text: string, drop: (char: string) => boolean): string {
  let start = 0;
  while (start < text.length && drop(text[start]!)) start++;
  return text.slice(start);
}

// Deciding -------------------------------------------------------------------------------------

function respond(call: LanguageModelV4CallOptions, settings: Settings): Reply {
  const turn = readTurn(call.prompt);
  const offered = (call.tools ?? []).filter((t): t is LanguageModelV4FunctionTool => t.type === 'function');
  const choice = call.toolChoice ?? { type: 'auto' };
  const plan = turn.plan;
  const serial = `${turn.index}-${turn.calls.length + 1}`;
  const inputTokens = Math.ceil((JSON.stringify(call.prompt).length + JSON.stringify(offered).length) / 4);
  const warnings: SharedV4Warning[] =
    call.responseFormat?.type === 'json'
      ? [{ type: 'unsupported', feature: 'responseFormat', details: 'the offline model answers in Markdown text' }]
      : [];
  const base = { responseId: `offline-response-${serial}`, warnings };

  const toolCall = (toolName: string, args: Record<string, unknown>): Reply => {
    const input = JSON.stringify(args);
    return {
      ...base,
      type: 'tool-call',
      // Call ids must be unique across the whole session, as a real provider's are: the
      // session de-duplicates recorded calls by id, and the same question can be asked again
      // in a new conversation. So the id ends in random bytes; everything else is deterministic.
      toolCallId: `offline-${serial}-${randomBytes(4).toString('hex')}`,
      toolName,
      input,
      finishReason: { unified: 'tool-calls', raw: 'tool-calls' },
      usage: usage(inputTokens, Math.ceil((toolName.length + input.length) / 4)),
    };
  };
  const answer = (): Reply => {
    const text = composeAnswer(turn);
    return {
      ...base,
      type: 'text',
      text,
      finishReason: { unified: 'stop', raw: 'stop' },
      usage: usage(inputTokens, Math.ceil(text.length / 4)),
    };
  };

  if (choice.type === 'none' || turn.calls.length >= settings.maxToolCalls) return answer();
  const offeredNames = new Set(offered.map((t) => t.name));
  // Only under 'auto': a forced choice that the model ignores makes the AI SDK abort the whole
  // run (ToolChoiceViolationError), which would demonstrate nothing about orchestration.
  if (settings.misbehave && turn.calls.length === 0 && choice.type === 'auto') {
    const forbidden = plan.find((name) => !offeredNames.has(name)) ?? OFFLINE_FORBIDDEN_TOOL;
    return toolCall(forbidden, { reason: `I will use ${forbidden} whatever I am offered` });
  }
  if (offered.length === 0) return answer();

  const done = new Set(turn.calls.filter((c) => !isRejected(c.output)).map((c) => c.toolName));
  const find = (name: string | undefined) => offered.find((t) => t.name === name);
  const picked =
    (choice.type === 'tool' ? find(choice.toolName) : undefined) ??
    requiredNext(turn.system)
      .map(find)
      .find((t) => t !== undefined) ??
    plan.map(find).find((t) => t !== undefined && !done.has(t.name)) ??
    // A gate that offers a single tool is a strong hint, even for a tool outside the plan.
    (offered.length === 1 && !done.has(offered[0]!.name) ? offered[0] : undefined) ??
    (done.size === 0 || choice.type === 'required' ? offered[0] : undefined);
  if (picked === undefined) return answer();
  return toolCall(picked.name, argumentsFor(picked.inputSchema, argumentContext(turn)));
}

function usage(input: number, output: number): LanguageModelV4Usage {
  return {
    inputTokens: { total: input, noCache: input, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: output, text: output, reasoning: undefined },
  };
}

// Arguments from a JSON schema -------------------------------------------------------------------

interface ArgumentContext {
  /** The user's question, or a stand-in when there is none. */
  question: string;
  /** The question without its leading command ("Compare", "Debate whether", ...). */
  core: string;
  /** One line per successful tool result of this turn: `tool: digest`. */
  evidence: string[];
}

const COMMAND =
  /^(?:please\s+)?(?:can you\s+)?(?:compare|critique|evaluate|assess|review|brainstorm|debate|research|find|explain|analy[sz]e|describe|tell me about)\b\s*(?:whether\s+|the argument that\s+|about\s+)?/i;

function argumentContext(turn: Turn): ArgumentContext {
  const question = turn.question === '' ? 'the conversation so far' : turn.question;
  const core =
    trimEnd(question.replace(COMMAND, ''), (char) => char === '?' || char === '.' || char === '!' || isSpace(char)) ||
    question;
  const evidence = turn.calls
    .filter((c) => c.output !== undefined && !isError(c.output))
    .map((c) => `From ${c.toolName}: ${shorten(digest(c.output), EVIDENCE_LENGTH)}`);
  return { question, core, evidence };
}

type JsonObject = Record<string, unknown>;
const isObject = (value: unknown): value is JsonObject =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** Builds arguments for an object schema: every required property, nothing optional. */
function argumentsFor(schema: unknown, context: ArgumentContext, depth = 0): JsonObject {
  if (!isObject(schema) || !isObject(schema.properties)) return {};
  const required = Array.isArray(schema.required) ? schema.required.filter((k) => typeof k === 'string') : [];
  const args: JsonObject = {};
  for (const name of required) args[name] = valueFor(name, schema.properties[name], context, depth);
  return args;
}

function valueFor(name: string, schema: unknown, context: ArgumentContext, depth: number): unknown {
  if (!isObject(schema)) return textFor(name, context);
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  if (schema.default !== undefined) return schema.default;
  for (const key of ['anyOf', 'oneOf', 'allOf'] as const) {
    const variants = schema[key];
    if (!Array.isArray(variants)) continue;
    const variant = variants.find((v) => !(isObject(v) && v.type === 'null'));
    if (variant !== undefined) return valueFor(name, variant, context, depth);
  }
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type;
  switch (type) {
    case 'string':
      return fitString(textFor(name, context), schema);
    case 'number':
    case 'integer':
      return fitNumber(schema, type === 'integer');
    case 'boolean':
      return true;
    case 'null':
      return null;
    case 'array':
      return arrayFor(name, schema, context, depth);
    case 'object':
      // Depth-limited: a recursive schema must not make the model loop.
      return depth >= 4 ? {} : argumentsFor(schema, context, depth + 1);
    default:
      return isObject(schema.properties) && depth < 4
        ? argumentsFor(schema, context, depth + 1)
        : textFor(name, context);
  }
}

// Fields that expect reasoning rather than a subject get it, with this turn's evidence.
const REASONING_FIELD =
  /thought|reason|reflect|analys|critique|argument|rationale|explanation|assessment|evaluation|note|comment|synthesis|conclusion|content|body/i;

// Fields that name what a tool is about get the question without its command ("Debate whether").
const SUBJECT_FIELD = /^(topic|subject|challenge|title|theme|problem|goal|issue)$/i;

function textFor(name: string, context: ArgumentContext): string {
  if (REASONING_FIELD.test(name)) return [`Consider: ${context.question}`, ...context.evidence].join('\n');
  return SUBJECT_FIELD.test(name) ? context.core : context.question;
}

function fitString(text: string, schema: JsonObject): string {
  const min = typeof schema.minLength === 'number' ? schema.minLength : 0;
  const max = typeof schema.maxLength === 'number' ? schema.maxLength : Number.POSITIVE_INFINITY;
  return text.padEnd(min, '.').slice(0, max);
}

function fitNumber(schema: JsonObject, integer: boolean): number {
  let value = 1;
  if (typeof schema.minimum === 'number') value = Math.max(value, schema.minimum);
  if (typeof schema.exclusiveMinimum === 'number' && value <= schema.exclusiveMinimum)
    value = schema.exclusiveMinimum + 1;
  if (typeof schema.maximum === 'number') value = Math.min(value, schema.maximum);
  if (typeof schema.exclusiveMaximum === 'number' && value >= schema.exclusiveMaximum) {
    const low = typeof schema.exclusiveMinimum === 'number' ? schema.exclusiveMinimum : schema.exclusiveMaximum - 2;
    value = (low + schema.exclusiveMaximum) / 2;
  }
  return integer ? Math.ceil(value) : value;
}

function arrayFor(name: string, schema: JsonObject, context: ArgumentContext, depth: number): unknown[] {
  const min = typeof schema.minItems === 'number' ? schema.minItems : 0;
  const max = typeof schema.maxItems === 'number' ? schema.maxItems : Number.POSITIVE_INFINITY;
  const items = schema.items;
  const itemType = isObject(items) ? items.type : undefined;
  const plainStrings = isObject(items) && itemType === 'string' && items.enum === undefined;
  if (!plainStrings) {
    const count = Math.min(Math.max(min, 1), max);
    return Array.from({ length: count }, () => valueFor(name, items, context, depth + 1));
  }
  const list = listFrom(context.core).map((item) => fitString(item, items));
  for (let i = list.length; i < min; i++) list.push(fitString(`${context.core} (${i + 1})`, items));
  return list.slice(0, max);
}

/** Two or three items split from a sentence: on "and", "or", "vs", commas; else on prepositions. */
function listFrom(sentence: string): string[] {
  const split = (pattern: RegExp) =>
    sentence
      .split(pattern)
      .map((part) => part.trim())
      .filter((part) => part !== '');
  // The parts are trimmed, so the separators need no `\s*` or `\s+` around them: those backtrack
  // quadratically over a long run of spaces.
  const byConjunction = split(/,|;|\band\b|\bor\b|\bversus\b|\bvs\.?(?=\s)/i);
  if (byConjunction.length >= 2) return byConjunction.slice(0, 3);
  const byPreposition = split(/(?<=\s)(?:to|in|for|of|on|by|with|at|from|into)(?=\s)/i);
  if (byPreposition.length >= 2) return byPreposition.slice(0, 3);
  return [sentence, `alternatives to ${sentence}`];
}

// Answering ------------------------------------------------------------------------------------

const DIGEST_LENGTH = 200;
const EVIDENCE_LENGTH = 160;

function shorten(text: string, length = DIGEST_LENGTH): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= length ? flat : `${flat.slice(0, length - 1).trimEnd()}…`;
}

/** A one-line digest of a tool result: its `summary`, its top result, or its first text. */
function digest(output: LanguageModelV4ToolResultOutput | undefined): string {
  switch (output?.type) {
    case undefined:
      return 'no result';
    case 'text':
      return shorten(output.value);
    case 'json':
      return digestValue(output.value);
    case 'content':
      return shorten(output.value.flatMap((part) => (part.type === 'text' ? [part.text] : [])).join(' '));
    case 'error-text':
      return shorten(`error: ${output.value}`);
    case 'error-json':
      return shorten(`error: ${JSON.stringify(output.value)}`);
    case 'execution-denied':
      return `not run (denied${output.reason ? `: ${output.reason}` : ''})`;
  }
}

function digestValue(value: unknown): string {
  if (typeof value === 'string') return shorten(value);
  if (!isObject(value)) return shorten(JSON.stringify(value) ?? 'nothing');
  if (typeof value.summary === 'string') return shorten(value.summary);
  if (Array.isArray(value.results)) {
    const top = value.results[0];
    const count = `${value.results.length} result${value.results.length === 1 ? '' : 's'}`;
    if (!isObject(top)) return count;
    const title = typeof top.title === 'string' ? ` "${top.title}"` : '';
    const snippet = typeof top.snippet === 'string' ? `: ${top.snippet}` : '';
    return shorten(`${count}; top:${title}${snippet}`);
  }
  const text = Object.values(value).find((v): v is string => typeof v === 'string');
  return shorten(text ?? JSON.stringify(value));
}

function composeAnswer(turn: Turn): string {
  const results = turn.calls.filter((c) => c.output !== undefined && !isRejected(c.output));
  const rejected = turn.calls.filter((c) => isRejected(c.output)).map((c) => c.toolName);
  if (results.length === 0) return plainReply(turn.question, rejected);
  const lines = [
    `## ${turn.question === '' ? 'Summary' : shorten(turn.question, 120)}`,
    '',
    `I worked through this with ${results.map((c) => `\`${c.toolName}\``).join(', then ')}. What each step gave:`,
    '',
    ...results.map((c) => `- **${c.toolName}**: ${digest(c.output)}`),
  ];
  const best = topSnippet(results);
  if (best !== undefined) lines.push('', `**In short:** ${best}`);
  if (rejected.length > 0) lines.push('', `_Not run (the tool was not available): ${rejected.join(', ')}._`);
  lines.push('', '_Composed offline from the tool results of this turn, without a language model._');
  return lines.join('\n');
}

/** The snippet of the best search hit of the turn, if a tool returned `results` with snippets. */
function topSnippet(calls: readonly TurnCall[]): string | undefined {
  for (const call of calls) {
    const value = call.output?.type === 'json' ? call.output.value : undefined;
    const top = isObject(value) && Array.isArray(value.results) ? value.results[0] : undefined;
    if (isObject(top) && typeof top.snippet === 'string') return top.snippet;
  }
  return undefined;
}

function plainReply(question: string, rejected: readonly string[]): string {
  const note = rejected.length > 0 ? ` (I tried ${rejected.join(', ')}, but it was not available.)` : '';
  if (question === '') return `Hello! Ask me a question and I will work through it with the tools I am offered.${note}`;
  if (/^\s*(thanks|thank you)\b/i.test(question)) return `You're welcome! Anything else I can look into?${note}`;
  if (/^\s*(hi|hello|hey|good (morning|afternoon|evening))\b/i.test(question)) {
    return `Hello! How can I help you today?${note}`;
  }
  return (
    `You asked: "${shorten(question, 160)}". No tool was used for this message, so I have no results to ` +
    `report; ask me to research, compare, critique, brainstorm or debate something to see the tools at work.${note}`
  );
}

// Streaming ------------------------------------------------------------------------------------

function streamParts(reply: Reply): LanguageModelV4StreamPart[] {
  const parts: LanguageModelV4StreamPart[] = [
    { type: 'stream-start', warnings: reply.warnings },
    { type: 'response-metadata', id: reply.responseId, modelId: 'offline' },
  ];
  if (reply.type === 'text') {
    const id = `text-${reply.responseId}`;
    parts.push({ type: 'text-start', id });
    // Word by word, keeping the whitespace, so the deltas join back to the exact text.
    for (const word of reply.text.match(/\s*\S+\s*/g) ?? [reply.text])
      parts.push({ type: 'text-delta', id, delta: word });
    parts.push({ type: 'text-end', id });
  } else {
    const id = reply.toolCallId;
    parts.push({ type: 'tool-input-start', id, toolName: reply.toolName });
    for (let i = 0; i < reply.input.length; i += 32) {
      parts.push({ type: 'tool-input-delta', id, delta: reply.input.slice(i, i + 32) });
    }
    parts.push(
      { type: 'tool-input-end', id },
      { type: 'tool-call', toolCallId: id, toolName: reply.toolName, input: reply.input },
    );
  }
  parts.push({ type: 'finish', finishReason: reply.finishReason, usage: reply.usage });
  return parts;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
