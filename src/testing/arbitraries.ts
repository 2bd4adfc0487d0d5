/**
 * fast-check arbitraries for property tests of the engine: random valid orchestration
 * configs (built-in condition types only) and random event streams of one session.
 *
 * Every generated config is valid by construction (unique names, at most one default,
 * sequence tools permitted by `availableTools`, bare reset rules only where the step has a
 * condition of that type); the tests still check this with `validateOrchestration`.
 */
import fc from 'fast-check';
import type {
  AvailableTools,
  OrchestrationConfig,
  OrchestrationStep,
  SequencePosition,
  StepCondition,
} from '../core/schema.js';

/** Tool names an agent may have: plain, snake_case, MCP-style (`/`, `.`, `:`) and kebab-case. */
export const TOOL_POOL: readonly string[] = Object.freeze([
  'search',
  'think',
  'reflect',
  'compare',
  'critique',
  'brainstorm',
  'cognitive_think',
  'cognitive_reflect',
  'web_search',
  'deep_research',
  'mcp/fs.read',
  'mcp/fs.write',
  'github:create_issue',
  'pubmed-search',
]);

/** Tool names that no generated agent has (tool uses of unknown tools). */
export const UNKNOWN_TOOLS: readonly string[] = Object.freeze(['ghost', 'unknown_tool', 'mcp/fs.delete', 'search2']);

/** Glob patterns used in `availableTools`, besides exact tool names. */
export const GLOB_PATTERNS: readonly string[] = Object.freeze([
  '*',
  '*think*',
  'cognitive_*',
  'mcp/*',
  'mcp/fs.*',
  '*.read',
  'web_*',
  '*search*',
  '*_*',
  'github:*',
  's*h',
  '*e*t*',
  'pubmed-*',
]);

/** Words that message conditions look for. */
export const KEYWORDS: readonly string[] = Object.freeze([
  'research',
  'compare',
  'debug',
  'plan',
  'reset',
  'deep dive',
  'urgent',
]);

/** Words mixed into user messages that no condition looks for (some non-ASCII, e.g. a long s). */
export const FILLER_WORDS: readonly string[] = Object.freeze([
  'the',
  'please',
  'now',
  'and',
  'Über',
  'reſearch',
  'İstanbul',
  '42',
  '!',
  '',
]);

/** Step names, in configuration order (index i gets `STEP_NAMES[i]`). */
export const STEP_NAMES: readonly string[] = Object.freeze([
  'Greeting',
  'Research',
  'Debug Mode',
  'plan',
  'Review',
  'Wrap-up',
  'Deep Dive',
  'Idle',
]);

/** A step name that no generated config has. */
export const MISSING_STEP = 'No Such Step';

/** Any tool name a session may report: the pool plus unknown tools. */
export const anyToolArb: fc.Arbitrary<string> = fc.constantFrom(...TOOL_POOL, ...UNKNOWN_TOOLS);

/** An agent's tool list: a shuffled subset of {@link TOOL_POOL} (possibly empty). */
export const agentToolsArb: fc.Arbitrary<string[]> = fc.shuffledSubarray([...TOOL_POOL]);

const keywordArb = fc
  .tuple(fc.constantFrom(...KEYWORDS), fc.constantFrom('lower', 'upper', 'title'))
  .map(([word, style]) =>
    style === 'upper' ? word.toUpperCase() : style === 'title' ? word[0]!.toUpperCase() + word.slice(1) : word,
  );

/** The text of a user message: a few keywords (any case) and filler words. */
export const messageTextArb: fc.Arbitrary<string> = fc
  .array(fc.oneof({ arbitrary: keywordArb, weight: 2 }, { arbitrary: fc.constantFrom(...FILLER_WORDS), weight: 3 }), {
    maxLength: 6,
  })
  .map((words) => words.join(' '));

const descriptionArb = fc.constantFrom('when it fits', 'Transition after using a tool', '');

const toolUsedArb: fc.Arbitrary<StepCondition> = fc.record(
  { type: fc.constant('tool_used'), value: anyToolArb, description: descriptionArb },
  { requiredKeys: ['type', 'value'] },
);

const messageContainsArb: fc.Arbitrary<StepCondition> = fc.record(
  {
    type: fc.constant('message_contains'),
    value: fc.oneof(keywordArb, fc.constantFrom('pla', 'EEP D', 'e')),
    description: descriptionArb,
  },
  { requiredKeys: ['type', 'value'] },
);

const regexValueArb = fc
  .tuple(fc.uniqueArray(keywordArb, { minLength: 1, maxLength: 3 }), fc.constantFrom('plain', 'group', 'start', 'end'))
  .map(([words, shape]) => {
    const alternation = words.join('|');
    if (shape === 'group') return `(${alternation})`;
    if (shape === 'start') return `^(?:${alternation})`;
    if (shape === 'end') return `(?:${alternation})$`;
    return alternation;
  });

const messageRegexArb: fc.Arbitrary<StepCondition> = fc.record(
  { type: fc.constant('message_regex'), value: regexValueArb, flags: fc.constantFrom('i', '') },
  { requiredKeys: ['type', 'value'] },
);

const notRecentlyUsedArb: fc.Arbitrary<StepCondition> = fc.record(
  { type: fc.constant('not_recently_used'), value: anyToolArb, window: fc.integer({ min: 1, max: 7 }) },
  { requiredKeys: ['type', 'value'] },
);

/** A condition of a built-in type other than `sequence_match` (added separately, it needs a sequence). */
export const conditionArb: fc.Arbitrary<StepCondition> = fc.oneof(
  toolUsedArb,
  messageContainsArb,
  messageRegexArb,
  notRecentlyUsedArb,
);

const positionArb: fc.Arbitrary<SequencePosition> = fc.oneof(
  { arbitrary: anyToolArb, weight: 3 },
  { arbitrary: fc.uniqueArray(anyToolArb, { minLength: 1, maxLength: 3 }), weight: 1 },
);

const patternArb = fc.oneof(fc.constantFrom(...GLOB_PATTERNS), anyToolArb);

const availableToolsArb: fc.Arbitrary<AvailableTools> = fc.record(
  {
    allowed: fc.array(patternArb, { maxLength: 4 }),
    denied: fc.array(patternArb, { maxLength: 2 }),
  },
  { requiredKeys: [] },
);

type ResetRule = NonNullable<OrchestrationStep['resetSequenceOn']>[number];

const resetRuleArb: fc.Arbitrary<ResetRule> = fc.oneof(
  fc.constantFrom('new_message', 'out_of_sequence', 'message_contains', 'message_regex'),
  messageContainsArb,
  messageRegexArb,
  toolUsedArb,
);

/**
 * SPEC section 4 glob matching, written independently of the engine: a pattern without
 * `*` matches exactly; in a pattern with `*`, each `*` matches any run of characters and
 * everything else is literal.
 */
export function globMatches(pattern: string, name: string): boolean {
  if (!pattern.includes('*')) return pattern === name;
  const parts = pattern.split('*');
  const first = parts[0]!;
  const last = parts[parts.length - 1]!;
  if (!name.startsWith(first)) return false;
  let position = first.length;
  for (let i = 1; i < parts.length - 1; i++) {
    const found = name.indexOf(parts[i]!, position);
    if (found < 0) return false;
    position = found + parts[i]!.length;
  }
  return name.length - position >= last.length && name.endsWith(last);
}

/** SPEC section 4, rule 2: whether `availableTools` lets `tool` through (independent of the engine). */
export function permittedBy(available: AvailableTools | undefined, tool: string): boolean {
  const allowed = available?.allowed ?? [];
  const denied = available?.denied ?? [];
  return (
    (allowed.length === 0 || allowed.some((p) => globMatches(p, tool))) && !denied.some((p) => globMatches(p, tool))
  );
}

interface RawStep {
  conditions?: StepCondition[];
  sequenceMatch?: boolean;
  sequence?: SequencePosition[];
  availableTools?: AvailableTools;
  resetSequenceOn?: ResetRule[];
  instructions?: string;
}

const rawStepArb: fc.Arbitrary<RawStep> = fc.record(
  {
    conditions: fc.array(conditionArb, { maxLength: 3 }),
    sequenceMatch: fc.boolean(),
    sequence: fc.array(positionArb, { minLength: 1, maxLength: 4 }),
    availableTools: availableToolsArb,
    resetSequenceOn: fc.array(resetRuleArb, { maxLength: 3 }),
    instructions: fc.constantFrom('Be brief.', 'Use the tools in order.'),
  },
  { requiredKeys: [] },
);

/** Makes a generated step valid: sequence tools permitted, sequence_match only with a sequence, bare reset rules backed. */
function repairStep(raw: RawStep, index: number): OrchestrationStep {
  const step: OrchestrationStep = { name: STEP_NAMES[index]! };
  const sequence = raw.sequence ?? [];
  const conditions = [...(raw.conditions ?? [])];
  if (raw.sequenceMatch && sequence.length > 0) conditions.push({ type: 'sequence_match' });
  if (conditions.length > 0) step.conditions = conditions;
  let available = raw.availableTools;
  if (sequence.length > 0) {
    const allowed = [...(available?.allowed ?? [])];
    let denied = [...(available?.denied ?? [])];
    for (const position of sequence) {
      for (const tool of typeof position === 'string' ? [position] : position) {
        denied = denied.filter((p) => !globMatches(p, tool));
        if (allowed.length > 0 && !allowed.some((p) => globMatches(p, tool))) allowed.push(tool);
      }
    }
    available = {};
    if (raw.availableTools?.allowed !== undefined || allowed.length > 0) available.allowed = allowed;
    if (raw.availableTools?.denied !== undefined || denied.length > 0) available.denied = denied;
    step.sequence = sequence;
  }
  if (available !== undefined) step.availableTools = available;
  if (raw.resetSequenceOn !== undefined) {
    step.resetSequenceOn = raw.resetSequenceOn.filter(
      (rule) =>
        typeof rule !== 'string' ||
        rule === 'new_message' ||
        rule === 'out_of_sequence' ||
        conditions.some((c) => c.type === rule),
    );
  }
  if (raw.instructions !== undefined) step.instructions = raw.instructions;
  return step;
}

/** Options of {@link orchestrationConfigArb}. */
export interface ConfigArbOptions {
  /** Most steps (default 6, at most {@link STEP_NAMES}.length). */
  maxSteps?: number;
  /** Whether to set `historyLimit` sometimes (default true); the value is drawn from `historyLimit`. */
  withHistoryLimit?: boolean;
  /** Range of `historyLimit` when set (default 1..10). */
  historyLimit?: { min: number; max: number };
}

/** A random valid `orchestration` block using the built-in condition types and `resetSequenceOn` rules. */
export function orchestrationConfigArb(options: ConfigArbOptions = {}): fc.Arbitrary<OrchestrationConfig> {
  const maxSteps = Math.min(options.maxSteps ?? 6, STEP_NAMES.length);
  const limit = options.historyLimit ?? { min: 1, max: 10 };
  return fc
    .record({
      steps: fc.array(rawStepArb, { maxLength: maxSteps, size: 'max' }),
      historyLimit:
        options.withHistoryLimit === false ? fc.constant(undefined) : fc.option(fc.integer(limit), { nil: undefined }),
      defaultMode: fc.constantFrom('none', 'isDefault', 'defaultStep', 'both'),
      defaultIndex: fc.nat(),
    })
    .map(({ steps: rawSteps, historyLimit, defaultMode, defaultIndex }) => {
      const steps = rawSteps.map(repairStep);
      const config: OrchestrationConfig = { steps };
      if (historyLimit !== undefined) config.historyLimit = historyLimit;
      if (steps.length > 0 && defaultMode !== 'none') {
        const target = steps[defaultIndex % steps.length]!;
        if (defaultMode === 'isDefault' || defaultMode === 'both') target.isDefault = true;
        if (defaultMode === 'defaultStep' || defaultMode === 'both') config.defaultStep = target.name;
      }
      return config;
    });
}

/** One thing that happens in a session; the property tests replay these against a manager. */
export type SessionEvent =
  /** A user message; `observe` says which manager call (if any) sees it right away. */
  | { kind: 'user'; text: string; observe: 'none' | 'activeStep' | 'allowedTools' }
  /** An assistant message (never read by message conditions). */
  | { kind: 'assistant'; text: string }
  /** A completed tool use (`processToolUsage`). */
  | { kind: 'tool'; tool: string }
  /**
   * A completed use of the tool the active step's sequence expects next (alternative
   * `pick`, modulo their number), or else of agent tool `pick`; resolved by the test driver
   * from the stored state, so that sequences make progress.
   */
  | { kind: 'expected'; pick: number }
  /** A `getAllowedTools` call (before a model step). */
  | { kind: 'allowed' }
  /** Code forces the active step (`setActiveStep`), possibly to a step the config lacks. */
  | { kind: 'force'; step: string }
  /** The clock moves forward. */
  | { kind: 'tick'; ms: number };

/** Options of {@link sessionEventsArb}. */
export interface EventsArbOptions {
  /** Longest stream (default 40). */
  maxLength?: number;
  /** Include `force` events (default true). */
  force?: boolean;
  /** Include `tick` events (default false). */
  ticks?: boolean;
}

/** A random event stream of one session: messages with keywords, tool uses (known and unknown), allowed-tools calls. */
export function sessionEventsArb(options: EventsArbOptions = {}): fc.Arbitrary<SessionEvent[]> {
  const kinds: fc.WeightedArbitrary<SessionEvent>[] = [
    {
      weight: 3,
      arbitrary: fc.record({
        kind: fc.constant('user' as const),
        text: messageTextArb,
        observe: fc.constantFrom('none' as const, 'activeStep' as const, 'allowedTools' as const),
      }),
    },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('assistant' as const), text: messageTextArb }) },
    { weight: 4, arbitrary: fc.record({ kind: fc.constant('tool' as const), tool: anyToolArb }) },
    { weight: 4, arbitrary: fc.record({ kind: fc.constant('expected' as const), pick: fc.nat({ max: 5 }) }) },
    { weight: 2, arbitrary: fc.constant({ kind: 'allowed' as const }) },
  ];
  if (options.force !== false) {
    kinds.push({
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('force' as const),
        step: fc.constantFrom(...STEP_NAMES.slice(0, 4), MISSING_STEP),
      }),
    });
  }
  if (options.ticks === true) {
    kinds.push({
      weight: 1,
      arbitrary: fc.record({ kind: fc.constant('tick' as const), ms: fc.integer({ min: 0, max: 5_000 }) }),
    });
  }
  const event = fc.oneof(...kinds);
  return fc.array(event, { maxLength: options.maxLength ?? 40, size: 'max' });
}

/** A complete scenario: a config, the agent's tools, the manager's `historyLimit` option and an event stream. */
export interface Scenario {
  config: OrchestrationConfig;
  agentTools: string[];
  managerHistoryLimit: number | undefined;
  events: SessionEvent[];
}

/** A random {@link Scenario}. */
export function scenarioArb(
  options: { config?: ConfigArbOptions; events?: EventsArbOptions } = {},
): fc.Arbitrary<Scenario> {
  return fc.record({
    config: orchestrationConfigArb(options.config),
    agentTools: agentToolsArb,
    managerHistoryLimit: fc.option(fc.integer({ min: 1, max: 12 }), { nil: undefined }),
    events: sessionEventsArb(options.events),
  });
}
