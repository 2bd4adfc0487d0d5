/**
 * Property-based tests of the engine and the seed `OrchestrationManager`, for random valid
 * configs and random event streams (src/testing/arbitraries.ts).
 *
 * The centrepiece is a reference interpreter of SPEC sections 3 to 5 (`Oracle`, below),
 * written over the raw config without any engine code, checked against the engine after
 * every event.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type ExpectedEvent, Oracle, positionTools } from '../../test/helpers/spec-oracle.js';
import { createOrchestrationManager, type OrchestrationManager } from '../orchestration/orchestration-manager.js';
import { memoryStore } from '../stores/memory.js';
import {
  agentToolsArb,
  anyToolArb,
  globMatches,
  messageTextArb,
  orchestrationConfigArb,
  permittedBy,
  type Scenario,
  type SessionEvent,
  scenarioArb,
  TOOL_POOL,
} from '../testing/arbitraries.js';
import { createFakeClock } from '../testing/fake-clock.js';
import { allowedTools } from './engine.js';
import type { OrchestrationEvent } from './events.js';
import type { ChatMessage } from './messages.js';
import type { OrchestrationConfig, OrchestrationStep } from './schema.js';
import { createState, type OrchestrationState } from './state.js';
import { validateOrchestration } from './validate-template.js';

const SESSION = 'prop-session';

function reduce(events: readonly OrchestrationEvent[]): ExpectedEvent[] {
  return events.flatMap((e): ExpectedEvent[] => {
    if (e.type === 'step-changed') return [{ type: e.type, from: e.from, to: e.to }];
    if (e.type === 'sequence-violation') return [{ type: e.type, step: e.step, tool: e.tool }];
    if (e.type === 'sequence-blocked') return [{ type: e.type, step: e.step }];
    return [];
  });
}

// ---------------------------------------------------------------------------------------
// Driving a manager with an event stream.

/** What one event did, for the checks. */
interface Observation {
  event: SessionEvent;
  /** The stored state after the event (a fresh-looking state when the session does not exist yet). */
  state: Pick<OrchestrationState, 'activeStep' | 'recentlyUsedTools' | 'sequenceIndex'>;
  /** The tool used, for `tool` and `expected` events. */
  tool: string | undefined;
  /** The result of getAllowedTools, when the event called it. */
  allowed: string[] | undefined;
  /** The result of getActiveStep, when the event called it. */
  activeStep: OrchestrationStep | undefined | null;
  /** Events emitted during this event. */
  emitted: OrchestrationEvent[];
  /** Every tool use so far, oldest first. */
  uses: string[];
}

/** A manager plus the conversation, replaying {@link SessionEvent}s. */
class Driver {
  readonly messages: ChatMessage[] = [];
  readonly emitted: OrchestrationEvent[] = [];
  readonly uses: string[] = [];
  readonly manager: OrchestrationManager;
  readonly clock = createFakeClock(1_700_000_000_000);

  constructor(
    readonly scenario: Scenario,
    options: { ttl?: number } = {},
  ) {
    this.manager = createOrchestrationManager({
      onEvent: (e) => this.emitted.push(e),
      clock: this.clock.now,
      store: memoryStore({ now: this.clock.now, sweepIntervalMs: 0 }),
      ...(scenario.managerHistoryLimit === undefined ? {} : { historyLimit: scenario.managerHistoryLimit }),
      ...(options.ttl === undefined ? {} : { ttl: options.ttl }),
    });
  }

  async apply(event: SessionEvent): Promise<Observation> {
    const { config, agentTools } = this.scenario;
    const before = this.emitted.length;
    let allowed: string[] | undefined;
    let activeStep: OrchestrationStep | undefined | null = null;
    let tool: string | undefined;
    switch (event.kind) {
      case 'user':
        this.messages.push({ role: 'user', content: event.text });
        if (event.observe === 'activeStep')
          activeStep = await this.manager.getActiveStep(config, this.messages, SESSION);
        if (event.observe === 'allowedTools')
          allowed = await this.manager.getAllowedTools(config, this.messages, SESSION, agentTools);
        break;
      case 'assistant':
        this.messages.push({ role: 'assistant', content: event.text });
        break;
      case 'tool':
      case 'expected':
        tool = event.kind === 'tool' ? event.tool : await this.expectedTool(event.pick);
        this.uses.push(tool);
        await this.manager.processToolUsage(config, this.messages, SESSION, tool);
        break;
      case 'allowed':
        allowed = await this.manager.getAllowedTools(config, this.messages, SESSION, agentTools);
        break;
      case 'force':
        await this.manager.getStateManager().setActiveStep(SESSION, event.step);
        break;
      case 'tick':
        this.clock.advance(event.ms);
        break;
    }
    const stored = await this.manager.getStateManager().getState(SESSION);
    const state = stored ?? { recentlyUsedTools: [], sequenceIndex: 0 };
    return { event, state, tool, allowed, activeStep, emitted: this.emitted.slice(before), uses: [...this.uses] };
  }

  /** The tool the stored state's sequence position expects (alternative `pick`), else agent tool `pick`. */
  async expectedTool(pick: number): Promise<string> {
    const { config, agentTools } = this.scenario;
    const state = await this.manager.getStateManager().getState(SESSION);
    const step = config.steps.find((s) => s.name === state?.activeStep);
    const sequence = step?.sequence ?? [];
    const index = state?.sequenceIndex ?? 0;
    const choices =
      index < sequence.length ? positionTools(sequence[index]!) : agentTools.length ? agentTools : TOOL_POOL;
    return choices[pick % choices.length]!;
  }
}

/** Replays `scenario`, calling `check` after every event. */
async function drive(scenario: Scenario, check: (o: Observation, driver: Driver) => void): Promise<Driver> {
  const driver = new Driver(scenario);
  for (const event of scenario.events) check(await driver.apply(event), driver);
  return driver;
}

/** Property (a), for one list of allowed tools against the state it was computed from. */
function checkAllowed(
  tools: readonly string[],
  config: OrchestrationConfig,
  state: Observation['state'],
  agentTools: readonly string[],
) {
  const step = config.steps.find((s) => s.name === state.activeStep);
  for (const tool of tools) {
    expect(agentTools).toContain(tool);
    if (step !== undefined) {
      expect(
        permittedBy(step.availableTools, tool),
        `${tool} permitted by ${JSON.stringify(step.availableTools)}`,
      ).toBe(true);
      const sequence = step.sequence ?? [];
      if (state.sequenceIndex < sequence.length) expect(positionTools(sequence[state.sequenceIndex]!)).toContain(tool);
    }
  }
  if (step === undefined) expect(tools).toEqual(agentTools);
  // In the order of agentTools, without repeats.
  const order = tools.map((t) => agentTools.indexOf(t));
  expect(order).toEqual([...order].sort((a, b) => a - b));
  expect(new Set(tools).size).toBe(tools.length);
}

const RUNS = 300;

describe('engine properties (random configs, random event streams)', () => {
  it('the generated configs are valid', () => {
    fc.assert(
      fc.property(orchestrationConfigArb(), (config) => {
        const result = validateOrchestration(config);
        expect(result.success ? [] : result.issues).toEqual([]);
      }),
      { seed: 101, numRuns: 1000 },
    );
  });

  it('(a) every allowed tool is an agent tool, permitted by the active step, and within the current sequence position', async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb(), async (scenario) => {
        const { config, agentTools } = scenario;
        const plan = createOrchestrationManager().plan(config);
        await drive(scenario, (o) => {
          if (o.allowed !== undefined) checkAllowed(o.allowed, config, o.state, agentTools);
          // The pure function, on the stored state, agrees with the same rules and with the manager.
          const stored = { ...(o.state as OrchestrationState), sessionId: SESSION };
          const pure = allowedTools(plan, stored, agentTools).tools;
          checkAllowed(pure, config, o.state, agentTools);
          if (o.allowed !== undefined) expect(o.allowed).toEqual(pure);
        });
      }),
      { seed: 202, numRuns: RUNS },
    );
  });

  it('(b) recentlyUsedTools is bounded by the history limit and holds the last N tool uses, oldest first', async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb({ events: { maxLength: 60 } }), async (scenario) => {
        const limit = scenario.config.historyLimit ?? scenario.managerHistoryLimit ?? 50;
        await drive(scenario, (o) => {
          expect(o.state.recentlyUsedTools.length).toBeLessThanOrEqual(limit);
          expect(o.state.recentlyUsedTools).toEqual(o.uses.slice(Math.max(0, o.uses.length - limit)));
        });
      }),
      { seed: 303, numRuns: RUNS },
    );
  });

  it('(c) replaying the same events on a fresh manager gives the same states and the same events', async () => {
    const withTicks = scenarioArb({ events: { ticks: true } });
    await fc.assert(
      fc.asyncProperty(withTicks, fc.constantFrom(undefined, 2_000, 10_000), async (scenario, ttl) => {
        const run = async () => {
          const driver = new Driver(scenario, ttl === undefined ? {} : { ttl });
          const trace: unknown[] = [];
          for (const event of scenario.events) {
            const o = await driver.apply(event);
            trace.push({ allowed: o.allowed, active: o.activeStep?.name ?? o.activeStep });
            trace.push(await driver.manager.getStateManager().getState(SESSION));
          }
          return { trace, state: await driver.manager.getState(SESSION), events: driver.emitted };
        };
        const first = await run();
        const second = await run();
        expect(second.state).toEqual(first.state);
        expect(second.events).toEqual(first.events);
        expect(second.trace).toEqual(first.trace);
      }),
      { seed: 404, numRuns: 200 },
    );
  });

  it('(e) the active step, sequenceIndex, history, allowed tools and events agree with a reference interpreter of SPEC 3-5', async () => {
    await fc.assert(
      fc.asyncProperty(scenarioArb({ events: { maxLength: 50 } }), async (scenario) => {
        const { config, agentTools } = scenario;
        const oracle = new Oracle(config, scenario.managerHistoryLimit);
        await drive(scenario, (o, driver) => {
          const expected: ExpectedEvent[] = [];
          const e = o.event;
          if (o.tool !== undefined) oracle.record(o.tool, driver.messages, expected);
          else if (e.kind === 'allowed' || (e.kind === 'user' && e.observe !== 'none')) {
            oracle.observe(driver.messages, expected);
            const tools = oracle.allowed(agentTools, e.kind === 'user' && e.observe === 'activeStep' ? [] : expected);
            if (o.allowed !== undefined) expect(o.allowed, 'allowed tools').toEqual(tools);
          } else if (e.kind === 'force') oracle.force(e.step);
          if (o.activeStep !== null) expect(o.activeStep?.name, 'getActiveStep').toBe(oracle.active);
          const context = JSON.stringify({ event: e, expected: oracle.active, index: oracle.index });
          expect(o.state.activeStep, `activeStep ${context}`).toBe(oracle.active);
          expect(o.state.sequenceIndex, `sequenceIndex ${context}`).toBe(oracle.index);
          expect(o.state.recentlyUsedTools, 'recentlyUsedTools').toEqual(oracle.history);
          expect(reduce(o.emitted), `events ${context}`).toEqual(expected);
          // SPEC 4 on the stored state, without running selection.
          const stored = { ...(o.state as OrchestrationState), sessionId: SESSION };
          expect(allowedTools(driver.manager.plan(config), stored, agentTools).tools).toEqual(
            oracle.allowed(agentTools),
          );
        });
      }),
      { seed: 505, numRuns: 500 },
    );
  });

  it('(d) 200 concurrent processToolUsage calls on one session record exactly 200 uses (memory store)', async () => {
    await fc.assert(
      fc.asyncProperty(
        orchestrationConfigArb({ historyLimit: { min: 200, max: 1_000 } }),
        agentToolsArb,
        fc.array(anyToolArb, { minLength: 200, maxLength: 200 }),
        fc.array(fc.nat({ max: 3 }), { minLength: 200, maxLength: 200 }),
        messageTextArb,
        fc.boolean(),
        async (config, agentTools, tools, interleave, text, withReads) => {
          const manager = createOrchestrationManager({ historyLimit: 200 });
          const messages: ChatMessage[] = [{ role: 'user', content: text }];
          const calls: Promise<unknown>[] = [];
          for (const [i, tool] of tools.entries()) {
            calls.push(manager.processToolUsage(config, messages, SESSION, tool));
            // A random interleaving of reads (0 to 3 getAllowedTools calls after each use).
            if (withReads)
              for (let r = 0; r < interleave[i]!; r++)
                calls.push(manager.getAllowedTools(config, messages, SESSION, agentTools));
          }
          await Promise.all(calls);
          const state = await manager.getState(SESSION);
          expect(state?.recentlyUsedTools).toHaveLength(200);
          expect([...state!.recentlyUsedTools].sort()).toEqual([...tools].sort());
          // The uses were applied one at a time: the reference interpreter, fed the uses in the
          // order the history records them, ends in the same step and sequence position.
          const oracle = new Oracle(config, 200);
          for (const tool of state!.recentlyUsedTools) oracle.record(tool, messages, []);
          expect(state?.activeStep).toBe(oracle.active);
          expect(state?.sequenceIndex).toBe(oracle.index);
        },
      ),
      { seed: 606, numRuns: 60 },
    );
  });
});

describe('availableTools patterns (SPEC section 4, rule 2)', () => {
  // Tool names from two alphabets: realistic names (words joined by . / : __) and names
  // made of characters that regex, glob and path syntaxes give meanings to, plus any
  // Unicode; SPEC 4 makes every character except `*` literal.
  const word = fc
    .array(fc.constantFrom('a', 'b', 'x', '0', '_', '-'), { minLength: 1, maxLength: 3 })
    .map((a) => a.join(''));
  const separator = fc.constantFrom('.', '/', ':', '__');
  const realisticName = fc
    .tuple(word, fc.array(fc.tuple(separator, word), { maxLength: 3 }))
    .map(([w, rest]) => w + rest.map(([s, x]) => s + x).join(''));
  const strangeChar = fc.oneof(
    fc.constantFrom(
      'a',
      'b',
      '.',
      '/',
      '|',
      '(',
      ')',
      '?',
      '[',
      ']',
      '{',
      '}',
      ',',
      '\\',
      '!',
      '+',
      '@',
      '^',
      '$',
      '\n',
      ' ',
    ),
    fc.string({ unit: 'grapheme', minLength: 1, maxLength: 1 }),
  );
  const strangeName = fc
    .array(strangeChar, { minLength: 1, maxLength: 6 })
    .map((a) => a.join('').replaceAll('*', ''))
    .filter((n) => n.length > 0);
  const toolName = fc.oneof(realisticName, strangeName);
  // A pattern: a tool name with random substrings replaced by `*`, sometimes doubled.
  const pattern = fc
    .tuple(toolName, fc.array(fc.nat(), { minLength: 0, maxLength: 3 }), fc.boolean())
    .map(([name, cuts, doubled]) => {
      // Cut between code points: a lone surrogate is not text (RE2 reads code points).
      let p = Array.from(name);
      for (const c of cuts) {
        const at = c % (p.length + 1);
        p = [...p.slice(0, at), doubled ? '**' : '*', ...p.slice(Math.min(p.length, at + (c % 3)))];
      }
      return p.join('');
    })
    // A leading `@` or `!` spells an annotation selector (tested in tool-annotations.test.ts).
    .filter((p) => !p.startsWith('@') && !p.startsWith('!'));

  it('allowed/denied globs select exactly the tools the SPEC glob rule selects', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(toolName, { maxLength: 8 }),
        fc.array(pattern, { maxLength: 3 }),
        fc.array(pattern, { maxLength: 2 }),
        (agentTools, allowed, denied) => {
          const config: OrchestrationConfig = {
            steps: [{ name: 'Only', isDefault: true, availableTools: { allowed, denied } }],
          };
          const state = { ...createState(SESSION, 0), activeStep: 'Only' };
          const got = allowedTools(createOrchestrationManager().plan(config), state, agentTools).tools;
          expect(got).toEqual(agentTools.filter((t) => permittedBy({ allowed, denied }, t)));
        },
      ),
      { seed: 707, numRuns: 3_000 },
    );
  });

  // Regression: the first matcher (picomatch) gave `|`, a leading `./`, `**/` and
  // parentheses path or regex meanings, which SPEC 4 does not allow.
  it('treats every character except * literally', () => {
    const cases: { pattern: string; tool: string; expected: boolean }[] = [
      { pattern: '*|*', tool: 'search', expected: false },
      { pattern: './search*', tool: 'search_x', expected: false },
      { pattern: './search*', tool: './search_x', expected: true },
      { pattern: '**/read', tool: 'read', expected: false },
      { pattern: '(beta)*', tool: '(beta)_x', expected: true },
      { pattern: 'think?*', tool: 'thinks', expected: false },
      { pattern: '*', tool: '..', expected: true },
    ];
    const manager = createOrchestrationManager();
    for (const { pattern, tool, expected } of cases) {
      expect(globMatches(pattern, tool), `oracle: ${pattern} vs ${tool}`).toBe(expected);
      const config: OrchestrationConfig = { steps: [{ name: 'S', availableTools: { allowed: [pattern] } }] };
      const got = allowedTools(manager.plan(config), { ...createState(SESSION, 0), activeStep: 'S' }, [tool]).tools;
      expect(got.includes(tool), `${pattern} vs ${tool}`).toBe(expected);
    }
  });
});
