/**
 * Orchestration overhead per model step in an AI SDK 7 tool loop: the same scripted model and
 * tools through bare `streamText`, the same filtering written by hand (over the app's tools, and
 * over the tools with their schemas converted once, as `orchestrate()` guards them), and
 * `streamText` + `orchestrate()` (prepareStep before every step, guarded tools, state writes and
 * token accounting) on each store, with the store's round trips per turn counted. The variants
 * run interleaved in one process, so drift (JIT, GC, a busy machine) hits all alike.
 *
 * `npx tsx bench/ai-sdk.ts [--stores=memory,redis] [--turns=2000] [--quick] [--variants=a,b] [--history=N]`
 * (servers: `BATON_BENCH_REDIS`, `BATON_BENCH_POSTGRES`, default the local ones). A
 * benchmark, never part of `npm test`. `--variants` (of bare, hand, hand-converted, orchestrated,
 * and hand-hooks, which runs only when named) runs only those, rotating; one variant runs alone,
 * as an app runs it: bench/variants.ts runs each alone in its own process, alternating, and
 * bench/instructions.ts counts one's instructions.
 */
import { cpus, platform, release } from 'node:os';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import type {
  LanguageModelV4,
  LanguageModelV4CallOptions,
  LanguageModelV4StreamPart,
  LanguageModelV4StreamResult,
  LanguageModelV4Usage,
} from '@ai-sdk/provider';
import { asSchema, isStepCount, type ModelMessage, streamText, type ToolSet, tool } from 'ai';
import { z } from 'zod';
import { orchestrate } from '../src/ai-sdk/orchestrate.js';
import type { OrchestrationConfig } from '../src/core/schema.js';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';
import { median } from './core.js';
import { type Harness, open, type StoreKind, unavailable } from './stores.js';

/** Tool calls per turn, then one text step: 4 model steps per turn. */
const SEQUENCE = ['search', 'think', 'reflect'] as const;
const STEPS_PER_TURN = SEQUENCE.length + 1;

const config: OrchestrationConfig = {
  steps: [
    {
      name: 'ResearchMode',
      conditions: [{ type: 'message_regex', value: 'research|how many' }],
      availableTools: { allowed: [...SEQUENCE] },
      sequence: [...SEQUENCE],
      resetSequenceOn: ['new_message'],
      instructions: 'Search first, then think, then reflect.',
    },
    { name: 'DefaultMode', isDefault: true },
  ],
};

const usage: LanguageModelV4Usage = {
  inputTokens: { total: 120, noCache: 120, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 12, text: 12, reasoning: undefined },
};

/**
 * A model that costs next to nothing, so the figures are the loop's own: step k of a turn (k =
 * tool results since the user message) calls SEQUENCE[k], then it answers. It keeps nothing, so
 * thousands of turns do not grow the heap.
 */
function scriptedModel(): LanguageModelV4 {
  let ids = 0;
  return {
    specificationVersion: 'v4',
    provider: 'bench',
    modelId: 'scripted',
    supportedUrls: {},
    async doGenerate() {
      throw new Error('the benchmark streams');
    },
    async doStream(options: LanguageModelV4CallOptions): Promise<LanguageModelV4StreamResult> {
      let step = 0;
      for (const message of options.prompt) {
        if (message.role === 'user') step = 0;
        else if (message.role === 'tool') step++;
      }
      const next = SEQUENCE[step];
      const parts: LanguageModelV4StreamPart[] = [{ type: 'stream-start', warnings: [] }];
      if (next !== undefined) {
        parts.push({ type: 'tool-call', toolCallId: `c${++ids}`, toolName: next, input: '{"q":"ev"}' });
        parts.push({ type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage });
      } else {
        parts.push(
          { type: 'text-start', id: 't' },
          { type: 'text-delta', id: 't', delta: 'Final answer.' },
          { type: 'text-end', id: 't' },
          { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage },
        );
      }
      return {
        stream: new ReadableStream<LanguageModelV4StreamPart>({
          start(controller) {
            for (const part of parts) controller.enqueue(part);
            controller.close();
          },
        }),
      };
    },
  };
}

function makeTools(): ToolSet {
  const make = (name: string) =>
    tool({
      description: name,
      inputSchema: z.object({ q: z.string() }),
      execute: async ({ q }) => `${name}: ${q}`,
    });
  return Object.fromEntries(SEQUENCE.map((name) => [name, make(name)]));
}

/**
 * The same tools with each input schema converted to JSON Schema once (`asSchema`), as
 * `orchestrate()`'s guarded tools carry them: the AI SDK converts a zod schema again for every
 * tool offered at every model step, a converted one it reuses. The hand-written filter over these
 * is the fair measure of what Baton's own work costs.
 */
function withConvertedSchemas(tools: ToolSet): ToolSet {
  return Object.fromEntries(
    Object.entries(tools).map(([name, t]) => [name, { ...t, inputSchema: asSchema(t.inputSchema) }]),
  );
}

/**
 * `exchanges` earlier exchanges of a conversation, each a question, a tool call, its result and
 * an answer (4 messages), that every turn's question follows (`--history`): what a turn costs
 * against the length of the conversation it continues.
 */
function conversationHistory(exchanges: number): ModelMessage[] {
  const history: ModelMessage[] = [];
  for (let i = 0; i < exchanges; i++) {
    const toolCallId = `earlier-${i}`;
    history.push(
      { role: 'user', content: `Earlier question ${i}` },
      {
        role: 'assistant',
        content: [{ type: 'tool-call', toolCallId, toolName: 'search', input: { q: `topic ${i}` } }],
      },
      {
        role: 'tool',
        content: [
          { type: 'tool-result', toolCallId, toolName: 'search', output: { type: 'text', value: `found ${i}` } },
        ],
      },
      { role: 'assistant', content: [{ type: 'text', text: `Earlier answer ${i}` }] },
    );
  }
  return history;
}

/** What one measured turn did, to check both variants did the same work. */
interface TurnCheck {
  steps: number;
  toolResults: number;
}

/** One turn of bare streamText. */
async function bareTurn(model: LanguageModelV4, tools: ToolSet, messages: ModelMessage[]): Promise<TurnCheck> {
  const result = streamText({ model, messages, tools, stopWhen: isStepCount(STEPS_PER_TURN + 2) });
  await result.consumeStream();
  const steps = await result.steps;
  return { steps: steps.length, toolResults: steps.reduce((n, s) => n + s.toolResults.length, 0) };
}

const RESEARCH = /research|how many/i;

/**
 * One turn with the same filtering written by hand, as an app would without Baton: the mode from
 * the latest user message (the config's ResearchMode regex), `prepareStep` offering only the
 * sequence's next tool (`activeTools`) and, once the sequence is complete, the step's tools again
 * (SPEC section 4: the final model step is offered all three, as Baton offers them), and an
 * approval hook refusing any other call. No state is kept between turns (nothing survives a
 * restart or a second process: what Baton's store is for).
 */
async function handTurn(
  model: LanguageModelV4,
  tools: ToolSet,
  messages: ModelMessage[],
  hooks = false,
): Promise<TurnCheck> {
  const latest = messages.findLast((m) => m.role === 'user');
  const research = typeof latest?.content === 'string' && RESEARCH.test(latest.content);
  const expected = (steps: readonly { toolCalls: readonly unknown[] }[]) => {
    let used = 0;
    for (const step of steps) used += step.toolCalls.length;
    return research ? SEQUENCE[used] : undefined;
  };
  let done: readonly { toolCalls: readonly unknown[] }[] = [];
  const prepareStep = ({ steps }: { steps: readonly { toolCalls: readonly unknown[] }[] }) => {
    done = steps;
    const next = expected(steps);
    return research ? { activeTools: next === undefined ? [...SEQUENCE] : [next] } : {};
  };
  const toolApproval = ({ toolCall }: { toolCall: { toolName: string } }) => {
    const next = expected(done);
    const allowed =
      next === undefined ? (SEQUENCE as readonly string[]).includes(toolCall.toolName) : toolCall.toolName === next;
    if (!research || allowed) return 'not-applicable' as const;
    return { type: 'denied' as const, reason: `expected ${next ?? 'no tool'} next` };
  };
  const common = { model, messages, tools, stopWhen: isStepCount(STEPS_PER_TURN + 2) };
  const result = hooks
    ? streamText({
        ...common,
        // Every hook orchestrate() hands the AI SDK, in its shape: async, instructions and a
        // tool choice at every step, and the start, step-end and end callbacks.
        prepareStep: async (step) => {
          const next = expected(step.steps);
          return {
            ...prepareStep(step),
            toolChoice: next === undefined ? 'auto' : { type: 'tool', toolName: next },
            instructions: `${config.steps[0]?.instructions}\nNext: ${next ?? 'answer'}.`,
          };
        },
        toolApproval: async (args) => toolApproval(args),
        onStart: async () => undefined,
        onStepEnd: async () => undefined,
        onEnd: async () => undefined,
      })
    : streamText({ ...common, prepareStep, toolApproval });
  await result.consumeStream();
  const steps = await result.steps;
  return { steps: steps.length, toolResults: steps.reduce((n, s) => n + s.toolResults.length, 0) };
}

/** One turn of streamText with orchestrate(), until every state write has finished. */
async function orchestratedTurn(
  model: LanguageModelV4,
  tools: ToolSet,
  messages: ModelMessage[],
  manager: ReturnType<typeof createOrchestrationManager>,
  sessionId: string,
): Promise<TurnCheck> {
  const orchestration = orchestrate({ manager, config, sessionId, tools, messages });
  const result = streamText({ model, messages, stopWhen: isStepCount(STEPS_PER_TURN + 2), ...orchestration });
  await result.consumeStream();
  await orchestration.settled();
  const steps = await result.steps;
  return { steps: steps.length, toolResults: steps.reduce((n, s) => n + s.toolResults.length, 0) };
}

/** Figures of one store, in µs per model step (medians over turns). */
export interface AiSdkBenchCell {
  store: StoreKind;
  turns: number;
  stepsPerTurn: number;
  bareMicrosPerStep: number;
  /** The same filtering written by hand (`prepareStep` + `activeTools` + an approval hook). */
  handMicrosPerStep: number;
  /** The same, over tools whose schemas were converted once, as Baton's guarded tools are. */
  handConvertedMicrosPerStep: number;
  /** The same as "hand, conv.", with every hook orchestrate() passes, in its shape (NaN unless asked for). */
  handHooksMicrosPerStep: number;
  orchestratedMicrosPerStep: number;
  overheadMicrosPerStep: number;
  /** Median of the per-turn differences (each orchestrated turn minus the bare turn next to it). */
  pairedOverheadMicrosPerStep: number;
  ratio: number;
  /** Store round trips per orchestrated turn (Redis commands, PostgreSQL statements; 0 in-process). */
  roundTripsPerTurn: number;
  /** The budget for this store, µs per step (undefined: reported only). */
  budgetMicrosPerStep: number | undefined;
  met: boolean | undefined;
  /**
   * The second goal on the memory store: an orchestrated step no slower than the same filtering
   * by hand (orchestrated minus hand-written <= 0). Undefined on the other stores (the filter by
   * hand keeps no state, so it is no measure of a store) or when either variant did not run.
   */
  noSlowerThanHand: boolean | undefined;
}

/** Figures of one run. */
export interface AiSdkBenchResult {
  /** Earlier exchanges of the conversation each turn continues (4 messages each). */
  history: number;
  cells: AiSdkBenchCell[];
  skipped: { store: StoreKind; reason: string }[];
}

/** Per-step overhead budgets against bare streamText (issue 10); SQLite is reported only. */
const BUDGETS: Partial<Record<StoreKind, number>> = { memory: 25, redis: 300, postgres: 600 };
const DEFAULT_TURNS: Record<StoreKind, number> = { memory: 2_000, sqlite: 600, redis: 600, postgres: 400 };

/** The variants of a turn, in the order they rotate. */
export const VARIANTS = ['bare', 'hand', 'hand-converted', 'orchestrated', 'hand-hooks'] as const;
/**
 * The variants that rotate when `--variants` does not say: `hand-hooks` (the filter over converted
 * schemas, with every hook orchestrate() passes, in its shape, doing nothing more) runs only when
 * named, to tell the AI SDK's cost of those hooks from Baton's own work.
 */
export const DEFAULT_VARIANTS: readonly Variant[] = ['bare', 'hand', 'hand-converted', 'orchestrated'];
/** One of {@link VARIANTS}. */
export type Variant = (typeof VARIANTS)[number];

/** A `--variants` value (comma-separated names) as variants; throws naming one it does not know. */
export function parseVariants(text: string): Variant[] {
  const variants = text.split(',');
  for (const v of variants) {
    if (!(VARIANTS as readonly string[]).includes(v)) {
      throw new Error(`--variants: "${v}" is not one of ${VARIANTS.join(', ')}`);
    }
  }
  return variants as Variant[];
}

/** The warm-up turns run before `turns` measured ones (not timed). */
export function warmupTurns(turns: number): number {
  return Math.min(300, Math.ceil(turns / 5));
}

/**
 * Runs the variants interleaved on one store, `turns` measured turns each after a warm-up;
 * `only` runs just those (the others' figures are then NaN).
 */
async function runCell(
  kind: StoreKind,
  harness: Harness,
  turns: number,
  only?: readonly Variant[],
  history: readonly ModelMessage[] = [],
): Promise<AiSdkBenchCell> {
  const warmup = warmupTurns(turns);
  const model = scriptedModel();
  const tools = makeTools();
  const converted = withConvertedSchemas(tools);
  const manager = createOrchestrationManager({ store: harness.store, onError: () => undefined });
  const bare: number[] = [];
  const hand: number[] = [];
  const handConverted: number[] = [];
  const handHooks: number[] = [];
  const orchestrated: number[] = [];
  // Each turn's pair ran back to back, so their difference cancels slow drift in machine load.
  const paired: number[] = [];
  let trips = 0;
  const expected: TurnCheck = { steps: STEPS_PER_TURN, toolResults: SEQUENCE.length };
  const check = (variant: string, got: TurnCheck) => {
    if (got.steps !== expected.steps || got.toolResults !== expected.toolResults) {
      throw new Error(`${variant} turn did ${JSON.stringify(got)}, expected ${JSON.stringify(expected)}`);
    }
  };

  for (let i = 0; i < warmup + turns; i++) {
    // A fresh message (and session) per turn, as a new user question would be.
    const messages: ModelMessage[] = [
      ...history,
      { role: 'user', content: `Please research EV adoption, question ${i}` },
    ];
    const sessionId = `bench-${i}`;
    /** Times one variant's turn, checks it did the research turn, and keeps its time after the warm-up. */
    const timed = (variant: string, into: number[], turn: () => Promise<TurnCheck>) => async () => {
      const t0 = performance.now();
      const got = await turn();
      const micros = (performance.now() - t0) * 1000;
      check(variant, got);
      if (i >= warmup) into.push(micros);
    };
    const runBare = timed('bare', bare, () => bareTurn(model, tools, messages));
    const runHand = timed('hand-written', hand, () => handTurn(model, tools, messages));
    const runHandConverted = timed('hand-written (converted schemas)', handConverted, () =>
      handTurn(model, converted, messages),
    );
    const runOrchestrated = timed('orchestrated', orchestrated, async () => {
      const trips0 = harness.roundTrips();
      const got = await orchestratedTurn(model, tools, messages, manager, sessionId);
      if (i >= warmup) trips += harness.roundTrips() - trips0;
      return got;
    });
    // Rotate which variant goes first, so none always runs on a warmer cache.
    const runHandHooks = timed('hand-written (converted schemas, every hook)', handHooks, () =>
      handTurn(model, converted, messages, true),
    );
    const runs: Record<Variant, () => Promise<void>> = {
      bare: runBare,
      hand: runHand,
      'hand-converted': runHandConverted,
      orchestrated: runOrchestrated,
      'hand-hooks': runHandHooks,
    };
    const chosen = only ?? DEFAULT_VARIANTS;
    const order = VARIANTS.filter((v) => chosen.includes(v)).map((v) => runs[v]);
    for (let k = 0; k < order.length; k++) await order[(i + k) % order.length]!();
    if (i >= warmup && order.includes(runOrchestrated) && order.includes(runBare)) {
      paired.push(orchestrated.at(-1)! - bare.at(-1)!);
    }
    // Old sessions are never read again; dropping them keeps the store (and GC) the same size.
    if (i >= 1) await manager.removeSession(`bench-${i - 1}`);
  }

  const bareMicrosPerStep = median(bare) / STEPS_PER_TURN;
  const orchestratedMicrosPerStep = median(orchestrated) / STEPS_PER_TURN;
  const overheadMicrosPerStep = orchestratedMicrosPerStep - bareMicrosPerStep;
  const handMicrosPerStep = median(hand) / STEPS_PER_TURN;
  const budget = BUDGETS[kind];
  return {
    store: kind,
    turns,
    stepsPerTurn: STEPS_PER_TURN,
    bareMicrosPerStep,
    handMicrosPerStep,
    handConvertedMicrosPerStep: median(handConverted) / STEPS_PER_TURN,
    handHooksMicrosPerStep: median(handHooks) / STEPS_PER_TURN,
    orchestratedMicrosPerStep,
    overheadMicrosPerStep,
    pairedOverheadMicrosPerStep: median(paired) / STEPS_PER_TURN,
    ratio: orchestratedMicrosPerStep / bareMicrosPerStep,
    roundTripsPerTurn: trips / turns,
    budgetMicrosPerStep: budget,
    met: budget === undefined ? undefined : overheadMicrosPerStep <= budget,
    noSlowerThanHand:
      kind === 'memory' && hand.length > 0 && orchestrated.length > 0
        ? orchestratedMicrosPerStep <= handMicrosPerStep
        : undefined,
  };
}

/** Runs the model-loop bench on each store in `stores` (default all four). */
export async function runAiSdkBench(
  options: {
    stores?: readonly StoreKind[];
    turns?: number;
    quick?: boolean;
    variants?: readonly Variant[];
    /** Earlier exchanges of the conversation before each turn's question (default none). */
    history?: number;
  } = {},
): Promise<AiSdkBenchResult> {
  const history = conversationHistory(options.history ?? 0);
  // The same variables as bench/rtt.ts and bench/round-trips.ts, to run against another server.
  const redisUrl = process.env.BATON_BENCH_REDIS ?? 'redis://127.0.0.1:6379';
  const postgresUrl = process.env.BATON_BENCH_POSTGRES ?? 'postgres://postgres@127.0.0.1:5432/test';
  const result: AiSdkBenchResult = { history: options.history ?? 0, cells: [], skipped: [] };
  for (const kind of options.stores ?? (['memory', 'sqlite', 'redis', 'postgres'] as const)) {
    const reason = await unavailable(kind, redisUrl, postgresUrl);
    if (reason !== undefined) {
      result.skipped.push({ store: kind, reason });
      continue;
    }
    const harness = await open(kind, redisUrl, postgresUrl);
    try {
      const turns = options.turns ?? Math.ceil(DEFAULT_TURNS[kind] / (options.quick ? 5 : 1));
      result.cells.push(await runCell(kind, harness, turns, options.variants, history));
    } finally {
      await harness.close();
    }
  }
  return result;
}

/** The result as the lines `npm run bench` prints. */
export function formatAiSdkBench(result: AiSdkBenchResult): string {
  const fmt = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: 1, minimumFractionDigits: 1 });
  const lines = [
    `AI SDK loop: a research turn of ${STEPS_PER_TURN} model steps and ${SEQUENCE.length} tools: bare streamText, the same`,
    'filtering by hand (prepareStep + activeTools + approval hook), the same over tools whose schemas were converted',
    'once ("hand, conv.", as orchestrate() guards them) and streamText + orchestrate(), rotating turn by turn on each',
    'store; medians, µs per model step; "vs hand" = orchestrated minus hand-written; "vs conv." = minus hand, conv.',
    ...(result.history > 0
      ? [`each turn continues a conversation of ${result.history} earlier exchanges (${4 * result.history} messages)`]
      : []),
    '',
    'store      turns  bare µs/step  hand-written  hand, conv.  orchestrated  overhead  (ratio)  paired  vs hand  vs conv.  round trips/turn  target',
  ];
  for (const c of result.cells) {
    let target =
      c.budgetMicrosPerStep === undefined ? 'reported' : `<= ${c.budgetMicrosPerStep} µs ${c.met ? 'MET' : 'MISSED'}`;
    if (c.noSlowerThanHand !== undefined) target += `; vs hand <= 0 ${c.noSlowerThanHand ? 'MET' : 'MISSED'}`;
    // New sessions: the turn reads the session before the first model step, one round trip (a
    // read) more than the 4 writes of a known session (counted and checked by bench/round-trips.ts).
    const trips =
      c.store === 'redis' || c.store === 'postgres' ? `${c.roundTripsPerTurn.toFixed(2)} (new)` : 'in-process';
    lines.push(
      [
        c.store.padEnd(9),
        String(c.turns).padStart(6),
        fmt(c.bareMicrosPerStep).padStart(13),
        fmt(c.handMicrosPerStep).padStart(13),
        fmt(c.handConvertedMicrosPerStep).padStart(12),
        fmt(c.orchestratedMicrosPerStep).padStart(13),
        fmt(c.overheadMicrosPerStep).padStart(9),
        `x${c.ratio.toFixed(3)}`.padStart(8),
        fmt(c.pairedOverheadMicrosPerStep).padStart(7),
        fmt(c.orchestratedMicrosPerStep - c.handMicrosPerStep).padStart(8),
        fmt(c.orchestratedMicrosPerStep - c.handConvertedMicrosPerStep).padStart(9),
        trips.padStart(17),
        ` ${target}`,
      ].join(' '),
    );
  }
  for (const c of result.cells) {
    if (Number.isNaN(c.handHooksMicrosPerStep)) continue;
    lines.push(
      `${c.store}: hand, conv. with every hook orchestrate() passes ${fmt(c.handHooksMicrosPerStep)} µs/step; orchestrated minus it ${fmt(c.orchestratedMicrosPerStep - c.handHooksMicrosPerStep)}`,
    );
  }
  for (const s of result.skipped) lines.push(`${s.store}: skipped (${s.reason})`);
  return lines.join('\n');
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values } = parseArgs({
    options: {
      stores: { type: 'string' },
      turns: { type: 'string' },
      quick: { type: 'boolean', default: false },
      variants: { type: 'string' },
      history: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  const turns = values.turns !== undefined ? Number(values.turns) : undefined;
  if (turns !== undefined && (!Number.isInteger(turns) || turns < 1)) {
    throw new Error(`--turns must be a positive integer, got ${values.turns}`);
  }
  const stores = values.stores?.split(',') as StoreKind[] | undefined;
  const variants = values.variants !== undefined ? parseVariants(values.variants) : undefined;
  const history = values.history !== undefined ? Number(values.history) : undefined;
  if (history !== undefined && (!Number.isInteger(history) || history < 0)) {
    throw new Error(`--history must be a whole number of earlier exchanges, got ${values.history}`);
  }
  const result = await runAiSdkBench({
    ...(history !== undefined ? { history } : {}),
    ...(stores ? { stores } : {}),
    ...(turns !== undefined ? { turns } : {}),
    quick: values.quick,
    ...(variants ? { variants } : {}),
  });
  // --json: the result alone, for bench/variants.ts (NaN, a variant not run, becomes null).
  if (values.json) console.log(JSON.stringify(result));
  else {
    console.log(`Node ${process.version} on ${platform()} ${release()}, ${cpus()[0]?.model ?? 'unknown CPU'}`);
    console.log(formatAiSdkBench(result));
  }
}
