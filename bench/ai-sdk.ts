/**
 * Orchestration overhead per model step in an AI SDK 7 tool loop: the same scripted model and
 * tools through bare `streamText`, and through `streamText` + `orchestrate()` (prepareStep before
 * every step, guarded tools, state writes and token accounting on the memory store). Both
 * variants run interleaved in one process, so drift (JIT, GC, a busy machine) hits both alike.
 *
 * `npx tsx bench/ai-sdk.ts [--turns=2000] [--quick]`. A benchmark, never part of `npm test`.
 */
import { cpus, platform, release } from 'node:os';
import { pathToFileURL } from 'node:url';
import type {
  LanguageModelV4,
  LanguageModelV4CallOptions,
  LanguageModelV4StreamPart,
  LanguageModelV4StreamResult,
  LanguageModelV4Usage,
} from '@ai-sdk/provider';
import { isStepCount, type ModelMessage, streamText, type ToolSet, tool } from 'ai';
import { z } from 'zod';
import { orchestrate } from '../src/ai-sdk/orchestrate.js';
import type { OrchestrationConfig } from '../src/core/schema.js';
import { createOrchestrationManager } from '../src/orchestration/orchestration-manager.js';

/** Tool calls per turn, then one text step: 4 model steps per turn. */
const SEQUENCE = ['search', 'think', 'reflect'] as const;
const STEPS_PER_TURN = SEQUENCE.length + 1;

/** Target: overhead <= 5% of a bare step or <= 50 µs per step, whichever is larger. */
const TARGET_RATIO = 0.05;
const TARGET_MICROS = 50;

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

function median(values: readonly number[]): number {
  const sorted = Float64Array.from(values).sort();
  const mid = (sorted.length - 1) / 2;
  return (sorted[Math.floor(mid)]! + sorted[Math.ceil(mid)]!) / 2;
}

/** Figures of one run, in µs per model step (medians over turns). */
export interface AiSdkBenchResult {
  turns: number;
  stepsPerTurn: number;
  bareMicrosPerStep: number;
  orchestratedMicrosPerStep: number;
  overheadMicrosPerStep: number;
  /** Median of the per-turn differences (each orchestrated turn minus the bare turn next to it). */
  pairedOverheadMicrosPerStep: number;
  ratio: number;
  /** The allowed overhead: max(5% of bare, 50 µs). */
  budgetMicrosPerStep: number;
  met: boolean;
}

/** Runs both variants interleaved, `turns` measured turns each after a warm-up. */
export async function runAiSdkBench(options: { turns?: number; warmup?: number } = {}): Promise<AiSdkBenchResult> {
  const turns = options.turns ?? 2_000;
  const warmup = options.warmup ?? Math.min(300, Math.ceil(turns / 5));
  const model = scriptedModel();
  const tools = makeTools();
  const manager = createOrchestrationManager({ onError: () => undefined });
  const bare: number[] = [];
  const orchestrated: number[] = [];
  // Each turn's pair ran back to back, so their difference cancels slow drift in machine load.
  const paired: number[] = [];
  const expected: TurnCheck = { steps: STEPS_PER_TURN, toolResults: SEQUENCE.length };
  const check = (variant: string, got: TurnCheck) => {
    if (got.steps !== expected.steps || got.toolResults !== expected.toolResults) {
      throw new Error(`${variant} turn did ${JSON.stringify(got)}, expected ${JSON.stringify(expected)}`);
    }
  };

  for (let i = 0; i < warmup + turns; i++) {
    // A fresh message (and session) per turn, as a new user question would be.
    const messages: ModelMessage[] = [{ role: 'user', content: `Please research EV adoption, question ${i}` }];
    const sessionId = `bench-${i}`;
    const runBare = async () => {
      const t0 = performance.now();
      const got = await bareTurn(model, tools, messages);
      const micros = (performance.now() - t0) * 1000;
      check('bare', got);
      if (i >= warmup) bare.push(micros);
    };
    const runOrchestrated = async () => {
      const t0 = performance.now();
      const got = await orchestratedTurn(model, tools, messages, manager, sessionId);
      const micros = (performance.now() - t0) * 1000;
      check('orchestrated', got);
      if (i >= warmup) orchestrated.push(micros);
    };
    // Alternate which variant goes first, so neither always runs on a warmer cache.
    if (i % 2 === 0) {
      await runBare();
      await runOrchestrated();
    } else {
      await runOrchestrated();
      await runBare();
    }
    if (i >= warmup) paired.push(orchestrated.at(-1)! - bare.at(-1)!);
    // Old sessions are never read again; dropping them keeps the store (and GC) the same size.
    if (i >= 1) await manager.removeSession(`bench-${i - 1}`);
  }
  await manager.close();

  const bareMicrosPerStep = median(bare) / STEPS_PER_TURN;
  const orchestratedMicrosPerStep = median(orchestrated) / STEPS_PER_TURN;
  const overheadMicrosPerStep = orchestratedMicrosPerStep - bareMicrosPerStep;
  const budgetMicrosPerStep = Math.max(bareMicrosPerStep * TARGET_RATIO, TARGET_MICROS);
  return {
    turns,
    stepsPerTurn: STEPS_PER_TURN,
    bareMicrosPerStep,
    orchestratedMicrosPerStep,
    overheadMicrosPerStep,
    pairedOverheadMicrosPerStep: median(paired) / STEPS_PER_TURN,
    ratio: orchestratedMicrosPerStep / bareMicrosPerStep,
    budgetMicrosPerStep,
    met: overheadMicrosPerStep <= budgetMicrosPerStep,
  };
}

/** The result as the lines `npm run bench` prints. */
export function formatAiSdkBench(result: AiSdkBenchResult): string {
  const fmt = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: 1, minimumFractionDigits: 1 });
  return [
    `AI SDK loop: ${result.turns.toLocaleString('en-US')} turns x ${result.stepsPerTurn} model steps per variant, interleaved; medians`,
    `  bare streamText            ${fmt(result.bareMicrosPerStep).padStart(8)} µs/step`,
    `  streamText + orchestrate() ${fmt(result.orchestratedMicrosPerStep).padStart(8)} µs/step`,
    `  overhead                   ${fmt(result.overheadMicrosPerStep).padStart(8)} µs/step  (x${result.ratio.toFixed(3)})`,
    `  overhead, paired turns     ${fmt(result.pairedOverheadMicrosPerStep).padStart(8)} µs/step  (median of per-turn differences)`,
    `  target <= ${fmt(result.budgetMicrosPerStep)} µs/step (max of 5% and ${TARGET_MICROS} µs): ${result.met ? 'MET' : 'MISSED'}`,
  ].join('\n');
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = process.argv.slice(2);
  const turnsArg = args.find((a) => a.startsWith('--turns='))?.slice('--turns='.length);
  const turns = turnsArg !== undefined ? Number(turnsArg) : args.includes('--quick') ? 300 : 2_000;
  if (!Number.isInteger(turns) || turns < 1) throw new Error(`--turns must be a positive integer, got ${turnsArg}`);
  console.log(`Node ${process.version} on ${platform()} ${release()}, ${cpus()[0]?.model ?? 'unknown CPU'}`);
  console.log(formatAiSdkBench(await runAiSdkBench({ turns })));
}
