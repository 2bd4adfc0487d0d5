/**
 * Building blocks of the benchmark (`npm run bench`): the cognitive-reasoner workload,
 * synthetic configs for the growth table, statistics and a GC handle. Not part of `npm test`.
 */
import { readFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import {
  type ChatMessage,
  createOrchestrationManager,
  type OrchestrationConfig,
  type OrchestrationManager,
  type OrchestrationManagerOptions,
  type OrchestrationSource,
  type OrchestrationStep,
  templateTools,
} from '../src/index.js';

/**
 * AgentDock's own cognitive-reasoner template, vendored unchanged: the workload the issue
 * quotes AgentDock's figure for (its steps switch on `sequence_match`).
 */
export const AGENTDOCK_TEMPLATE_URL = new URL('./fixtures/agentdock-cognitive-reasoner.json', import.meta.url);

/** The cognitive-reasoner template as Baton ships it in `examples/` (whatever it currently holds). */
export const EXAMPLE_TEMPLATE_URL = new URL('../examples/agents/cognitive-reasoner.json', import.meta.url);

/** A new user message every this many turns (the template's `options.maxSteps` is 10). */
export const TURNS_PER_MESSAGE = 10;

/** Used when a template has no `chatSettings.chatPrompts`. */
const FALLBACK_PROMPTS = [
  'How many electric vehicles will be on the road by 2030?',
  'Compare solar and wind energy for residential power generation',
  'Critique the argument that remote work improves productivity',
];

/** A parsed agent template and what the workload needs from it. */
export interface ReferenceAgent {
  /** Short name for the tables. */
  readonly label: string;
  /** The parsed template: passed as the config, the same object on every call. */
  readonly template: { orchestration: OrchestrationConfig; [key: string]: unknown };
  readonly orchestration: OrchestrationConfig;
  /** The agent's tools (`tools`, or the non-`llm.*` `nodes`). */
  readonly tools: readonly string[];
  /** The user messages the simulated sessions send (`chatSettings.chatPrompts`). */
  readonly prompts: readonly string[];
}

/** Reads an agent template; throws when it has no orchestration or no tools. */
export function loadAgent(url: URL, label: string): ReferenceAgent {
  const raw = JSON.parse(readFileSync(url, 'utf8')) as Record<string, unknown>;
  const orchestration = raw.orchestration as OrchestrationConfig | undefined;
  const tools = templateTools(raw);
  if (orchestration === undefined || tools === undefined || tools.length === 0) {
    throw new Error(`${url.pathname}: expected a template with an orchestration block and tools`);
  }
  const chat = raw.chatSettings as { chatPrompts?: unknown } | undefined;
  const prompts = Array.isArray(chat?.chatPrompts)
    ? chat.chatPrompts.filter((p): p is string => typeof p === 'string')
    : [];
  return {
    label,
    template: { ...raw, orchestration },
    orchestration,
    tools: Object.freeze(tools),
    prompts: prompts.length > 0 ? prompts : FALLBACK_PROMPTS,
  };
}

/** One simulated conversation: its id, the message lists it sends, and a private random stream. */
export interface Session {
  readonly id: string;
  /** `phases[k]` is the message list while the k-th user message is the latest one. */
  readonly phases: readonly (readonly ChatMessage[])[];
  /** xorshift32 state, so the tool choices are deterministic per session. */
  rng: number;
}

/** Options of {@link makeSessions}. */
export interface SessionOptions {
  /** User messages per session (default 2: a question, then a follow-up after {@link TURNS_PER_MESSAGE} turns). */
  messages?: number;
  /** Session ids to use (default `session-000000`, ...). */
  ids?: readonly string[];
}

/** Creates `count` sessions (fresh message objects, so no message is already cached). */
export function makeSessions(count: number, prompts: readonly string[], options: SessionOptions = {}): Session[] {
  const messages = options.messages ?? 2;
  const sessions: Session[] = [];
  for (let i = 0; i < count; i++) {
    const phases: ChatMessage[][] = [];
    let conversation: ChatMessage[] = [];
    for (let m = 0; m < messages; m++) {
      const text = m === 0 ? prompts[i % prompts.length]! : `Follow-up ${m} of ${i}: go deeper on the benchmark.`;
      conversation = [
        ...conversation,
        ...(m === 0 ? [] : [{ role: 'assistant', content: 'Here is what I found.' }]),
        { role: 'user', content: text },
      ];
      phases.push(conversation);
    }
    sessions.push({ id: options.ids?.[i] ?? sessionId(i), phases, rng: (i * 2654435761 + 1) >>> 0 || 1 });
  }
  return sessions;
}

/** The default id of session `i`. */
export function sessionId(i: number, prefix = 'session'): string {
  return `${prefix}-${String(i).padStart(6, '0')}`;
}

/** One of `allowed`, chosen by the session's random stream. */
export function pickTool(session: Session, allowed: readonly string[]): string {
  return allowed[nextRandom(session) % allowed.length]!;
}

function nextRandom(session: Session): number {
  let x = session.rng;
  x ^= x << 13;
  x >>>= 0;
  x ^= x >>> 17;
  x ^= x << 5;
  x >>>= 0;
  session.rng = x;
  return x;
}

/** What one benchmark turn runs against. */
export interface Workload {
  readonly manager: OrchestrationManager;
  /** The same object on every call, so the compiled plan is reused. */
  readonly config: OrchestrationSource;
  readonly agentTools: readonly string[];
  readonly sessions: readonly Session[];
  /** Turns in which no tool was allowed (the turn then records nothing). */
  blocked: number;
}

/** Creates a workload with a new manager (a new memory store). */
export function makeWorkload(
  config: OrchestrationSource,
  agentTools: readonly string[],
  sessions: readonly Session[],
  options: OrchestrationManagerOptions = {},
): Workload {
  return { manager: createOrchestrationManager(options), config, agentTools, sessions, blocked: 0 };
}

/** The messages session `session` sends at turn `t` (a new user message every {@link TURNS_PER_MESSAGE} turns). */
export function messagesAt(session: Session, t: number): readonly ChatMessage[] {
  return session.phases[Math.min(session.phases.length - 1, Math.floor(t / TURNS_PER_MESSAGE))]!;
}

/**
 * One turn, as the issue defines it: `getAllowedTools`, then `processToolUsage` of one of
 * the allowed tools (chosen pseudo-randomly per session).
 */
export async function turn(w: Workload, session: Session, t: number): Promise<void> {
  const messages = messagesAt(session, t);
  const allowed = await w.manager.getAllowedTools(w.config, messages, session.id, w.agentTools);
  if (allowed.length === 0) {
    w.blocked++;
    return;
  }
  await w.manager.processToolUsage(w.config, messages, session.id, pickTool(session, allowed));
}

/** Result of {@link runTurns}. */
export interface TurnRun {
  /** Microseconds per turn, in the order they ran. */
  readonly samples: Float64Array;
  /** Wall time of the whole run, in milliseconds (includes the timer calls). */
  readonly wallMs: number;
}

/**
 * Runs `turns` turns of every session, round-robin (turn 0 of every session, then turn 1,
 * ...: many interleaved conversations, as a server sees them), timing each turn.
 */
export async function runTurns(w: Workload, turns: number): Promise<TurnRun> {
  const { manager, config, agentTools, sessions } = w;
  const samples = new Float64Array(sessions.length * turns);
  let k = 0;
  const start = performance.now();
  for (let t = 0; t < turns; t++) {
    for (let s = 0; s < sessions.length; s++) {
      const session = sessions[s]!;
      const messages = messagesAt(session, t);
      // Timed: exactly the two awaited calls (no wrapper function around them).
      const t0 = performance.now();
      const allowed = await manager.getAllowedTools(config, messages, session.id, agentTools);
      if (allowed.length > 0) await manager.processToolUsage(config, messages, session.id, pickTool(session, allowed));
      else w.blocked++;
      samples[k++] = (performance.now() - t0) * 1000;
    }
  }
  return { samples, wallMs: performance.now() - start };
}

/** Cost of one `performance.now()` pair in microseconds (included in every per-turn sample). */
export function timerOverheadMicros(): number {
  const n = 200_000;
  const samples = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    samples[i] = (performance.now() - t0) * 1000;
  }
  return quantile(samples, 0.5);
}

/** The q-quantile (0..1) of `values`, linearly interpolated. */
export function quantile(values: ArrayLike<number>, q: number): number {
  const sorted = Float64Array.from(values).sort();
  if (sorted.length === 0) return Number.NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
}

/** The median of `values`. */
export function median(values: readonly number[]): number {
  return quantile(values, 0.5);
}

/** `gc()`: the global one under `--expose-gc`, else enabled at run time through V8 flags. */
export function getGc(): () => void {
  const existing = (globalThis as { gc?: unknown }).gc;
  if (typeof existing === 'function') return existing as () => void;
  setFlagsFromString('--expose-gc');
  const gc: unknown = runInNewContext('gc');
  if (typeof gc !== 'function') throw new Error('cannot enable gc(): run node with --expose-gc');
  return gc as () => void;
}

/** Collects until the heap stops shrinking; returns `heapUsed`. */
export function settledHeap(gc: () => void): number {
  let last = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 10; i++) {
    gc();
    const used = process.memoryUsage().heapUsed;
    if (used >= last) return used;
    last = used;
  }
  return last;
}

/** Agent tools for the "agent tools" growth row: the reference tools plus fillers, `count` in all. */
export function paddedTools(base: readonly string[], count: number): readonly string[] {
  const tools = base.slice(0, count);
  for (let i = tools.length; i < count; i++) tools.push(`extra_tool_${i}`);
  return Object.freeze(tools);
}

/**
 * A config of `count` steps in which only the last one can match the workload's messages:
 * the earlier ones cycle through `message_contains` (a text never sent), `tool_used` (a tool
 * never used) and `sequence_match` (a sequence never run), so step selection walks them all.
 */
export function manyStepsConfig(count: number, agentTools: readonly string[]): OrchestrationConfig {
  const steps: OrchestrationStep[] = [];
  for (let i = 0; i < count - 1; i++) {
    const name = `Step${i}`;
    switch (i % 3) {
      case 0:
        steps.push({ name, conditions: [{ type: 'message_contains', value: `never-said-${i}` }] });
        break;
      case 1:
        steps.push({ name, conditions: [{ type: 'tool_used', value: `never_used_${i}` }] });
        break;
      default:
        steps.push({
          name,
          sequence: [`never_a_${i}`, `never_b_${i}`],
          conditions: [{ type: 'sequence_match' }],
        });
    }
  }
  // Every workload message is one of the template's prompts or a "Follow-up ..." line: all contain a space.
  steps.push({
    name: 'Matching',
    conditions: [{ type: 'message_contains', value: ' ' }],
    availableTools: { allowed: [...agentTools] },
  });
  return { steps };
}

/** The reference orchestration with `historyLimit` set. */
export function withHistoryLimit(config: OrchestrationConfig, historyLimit: number): OrchestrationConfig {
  return { ...config, historyLimit };
}

/** Fills every session's history to `length` entries (the reference tools, round-robin). */
export async function prefillHistory(w: Workload, tools: readonly string[], length: number): Promise<void> {
  const history: string[] = new Array(length);
  for (let i = 0; i < length; i++) history[i] = tools[i % tools.length]!;
  for (const s of w.sessions) await w.manager.updateState(s.id, { recentlyUsedTools: history });
}
