import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { generateText, isStepCount, type ToolSet, tool } from 'ai';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createOfflineModel } from '../../ai-sdk/offline-model.js';
import { orchestrate } from '../../ai-sdk/orchestrate.js';
import type { OrchestrationEvent } from '../../core/events.js';
import type { AgentTemplate } from '../../core/schema.js';
import { validateTemplate } from '../../core/validate-template.js';
import { createOrchestrationManager } from '../../orchestration/orchestration-manager.js';
import { loadTemplate } from '../../templates/load-template.js';
import { builtinTools, resolveTools } from './index.js';

const EXAMPLES = fileURLToPath(new URL('../../../examples/agents/', import.meta.url));
const exampleFiles = readdirSync(EXAMPLES).filter((file) => file.endsWith('.json'));

describe('the tool registry', () => {
  it('has the seven built-in tools, each described and executable', () => {
    expect(Object.keys(builtinTools).sort()).toEqual(
      ['brainstorm', 'compare', 'critique', 'debate', 'reflect', 'search', 'think'].sort(),
    );
    for (const [name, implementation] of Object.entries(builtinTools)) {
      expect(implementation.description, name).toBeTruthy();
      expect(typeof implementation.execute, name).toBe('function');
    }
  });

  it('resolves names in the order asked, once each, and reports the missing ones', () => {
    const { tools, missing } = resolveTools(['think', 'web_search', 'search', 'think', 'web_search', 'constructor']);
    expect(Object.keys(tools)).toEqual(['think', 'search']);
    expect(tools.think).toBe(builtinTools.think);
    // Names of Object.prototype are not tools.
    expect(missing).toEqual(['web_search', 'constructor']);
    expect(resolveTools([])).toEqual({ tools: {}, missing: [] });
  });

  it('prefers the caller’s tools over the built-ins, and accepts tools only the caller has', () => {
    const webSearch = tool({
      description: 'Search the web',
      inputSchema: z.object({ query: z.string() }),
      execute: async ({ query }) => `results for ${query}`,
    });
    const extra: ToolSet = { search: webSearch, web_search: webSearch };
    const { tools, missing } = resolveTools(['search', 'web_search', 'reflect'], extra);
    expect(tools).toEqual({ search: webSearch, web_search: webSearch, reflect: builtinTools.reflect });
    expect(missing).toEqual([]);
  });
});

describe('the example agents', () => {
  it('are there', () => {
    expect(exampleFiles).toEqual(
      expect.arrayContaining(['cognitive-reasoner.json', 'research-assistant.json', 'study-buddy.json']),
    );
  });

  it.each(exampleFiles)('%s loads without warnings and every tool it names is built in', async (file) => {
    const template = await loadTemplate(`${EXAMPLES}${file}`);
    const validation = validateTemplate(JSON.parse(readFileSync(`${EXAMPLES}${file}`, 'utf8')));
    expect(validation.success && validation.warnings).toEqual([]);
    expect(template.tools.length).toBeGreaterThan(0);
    expect(resolveTools(template.tools).missing).toEqual([]);
    expect(template.llm?.provider).toBeTruthy();
  });
});

/** Runs one user turn of `template` with the offline model under Baton's orchestration. */
async function runTurn(
  template: AgentTemplate,
  manager: ReturnType<typeof createOrchestrationManager>,
  messages: { role: 'user' | 'assistant'; content: string }[],
  options: { misbehave?: boolean; sessionId?: string } = {},
) {
  const { tools } = resolveTools(template.tools);
  const orchestration = orchestrate({
    manager,
    config: template,
    sessionId: options.sessionId ?? 'session',
    tools,
    messages,
    onError: (error) => {
      throw error;
    },
  });
  const steps: (string | undefined)[] = [];
  const result = await generateText({
    model: createOfflineModel({ misbehave: options.misbehave ?? false }),
    messages,
    stopWhen: isStepCount(template.options?.maxSteps ?? 10),
    ...orchestration,
    onStepEnd: async (step) => {
      steps.push(orchestration.lastStep()?.activeStep);
      await orchestration.onStepEnd(step);
    },
  });
  await orchestration.settled();
  const executed = result.steps.flatMap((step) => step.toolResults.map((r) => r.toolName));
  return { result, executed, modes: [...new Set(steps)] };
}

describe('the cognitive reasoner with the offline model', () => {
  const load = () => loadTemplate(`${EXAMPLES}cognitive-reasoner.json`);

  it('runs search → think → reflect for the EV question, enforced from the first step', async () => {
    const template = await load();
    const manager = createOrchestrationManager();
    const question = 'How many electric vehicles will be on the road by 2030?';
    const { result, executed, modes } = await runTurn(template, manager, [{ role: 'user', content: question }]);
    expect(modes).toEqual(['ResearchMode']);
    expect(executed).toEqual(['search', 'think', 'reflect']);
    expect(result.steps.map((s) => s.toolCalls.map((c) => c.toolName))).toEqual([
      ['search'],
      ['think'],
      ['reflect'],
      [],
    ]);
    expect(result.text).toContain('240 to 250 million by 2030');
    expect(await manager.getState('session')).toMatchObject({
      activeStep: 'ResearchMode',
      sequenceIndex: 3,
      recentlyUsedTools: ['search', 'think', 'reflect'],
    });
  });

  it.each([
    [
      'Compare solar and wind energy for residential power generation',
      'ComparisonMode',
      ['search', 'compare', 'reflect'],
    ],
    [
      'Critique the argument that remote work improves productivity',
      'EvaluationMode',
      ['critique', 'debate', 'reflect'],
    ],
    [
      'Brainstorm innovative ways to reduce food waste in restaurants',
      'IdeationMode',
      ['think', 'brainstorm', 'critique'],
    ],
    [
      'Debate whether cryptocurrencies will eventually replace traditional banking',
      'DebateMode',
      ['search', 'debate', 'reflect'],
    ],
    ['How can cities solve traffic congestion problems?', 'ProblemSolvingMode', ['think', 'brainstorm', 'compare']],
    ['Tell me a story about a lighthouse', 'DefaultMode', ['think', 'reflect']],
  ])('"%s" runs %s: %j', async (question, mode, sequence) => {
    const template = await load();
    const { executed, modes } = await runTurn(template, createOrchestrationManager(), [
      { role: 'user', content: question },
    ]);
    expect(modes).toEqual([mode]);
    expect(executed).toEqual(sequence);
  });

  it('covers every chat prompt of the template with a mode of its own', async () => {
    const template = await load();
    const prompts = (template.chatSettings as { chatPrompts: string[] }).chatPrompts;
    const manager = createOrchestrationManager();
    const modes = await Promise.all(
      prompts.map(async (prompt, i) => {
        const step = await manager.getActiveStep(template, [{ role: 'user', content: prompt }], `p${i}`);
        return step?.name;
      }),
    );
    expect(new Set(modes).size).toBe(prompts.length);
    expect(modes).not.toContain('DefaultMode');
  });

  it('keeps the sequence when the model misbehaves: the forbidden call is rejected and never runs', async () => {
    const template = await load();
    const events: OrchestrationEvent[] = [];
    const manager = createOrchestrationManager({ onEvent: (event) => events.push(event) });
    const { executed, result } = await runTurn(
      template,
      manager,
      [{ role: 'user', content: 'How many electric vehicles will be on the road by 2030?' }],
      { misbehave: true },
    );
    expect(result.steps[0]?.toolCalls[0]).toMatchObject({ toolName: 'think', invalid: true });
    expect(executed).toEqual(['search', 'think', 'reflect']);
    expect(events.filter((e) => e.type === 'tool-rejected').map((e) => e.type === 'tool-rejected' && e.tool)).toEqual([
      'think',
    ]);
  });

  it('picks the mode afresh for every message', async () => {
    const template = await load();
    const manager = createOrchestrationManager();
    const messages: { role: 'user' | 'assistant'; content: string }[] = [
      { role: 'user', content: 'Critique the argument that remote work improves productivity' },
    ];
    const first = await runTurn(template, manager, messages);
    messages.push({ role: 'assistant', content: first.result.text }, { role: 'user', content: 'Thanks!' });
    const second = await runTurn(template, manager, messages);
    expect(second.modes).toEqual(['DefaultMode']);
    expect(second.executed).toEqual(['think', 'reflect']);
  });
});

describe('the other example agents with the offline model', () => {
  it('research-assistant: researches, then fact-checks when the user doubts the answer', async () => {
    const template = await loadTemplate(`${EXAMPLES}research-assistant.json`);
    const manager = createOrchestrationManager();
    const messages: { role: 'user' | 'assistant'; content: string }[] = [
      { role: 'user', content: 'Who discovered penicillin?' },
    ];
    const first = await runTurn(template, manager, messages);
    expect(first.modes).toEqual(['Research']);
    expect(first.executed.slice(0, 2)).toEqual(['search', 'think']);
    messages.push({ role: 'assistant', content: first.result.text }, { role: 'user', content: 'Are you sure?' });
    const second = await runTurn(template, manager, messages);
    expect(second.modes).toEqual(['FactCheck']);
    expect(second.executed).toEqual(['critique', 'search', 'reflect']);
    messages.push({ role: 'assistant', content: second.result.text }, { role: 'user', content: 'What is CRISPR?' });
    expect((await runTurn(template, manager, messages)).modes).toEqual(['Research']);
  });

  it('study-buddy: glob patterns decide the tools of each step', async () => {
    const template = await loadTemplate(`${EXAMPLES}study-buddy.json`);
    const manager = createOrchestrationManager();
    const allowed = async (content: string, sessionId: string) =>
      manager.getAllowedTools(template, [{ role: 'user', content }], sessionId, template.tools);
    expect(await allowed('Explain photosynthesis', 'a')).toEqual(['search', 'think', 'reflect']);
    expect(await allowed('Why should cities charge drivers for congestion?', 'b')).toEqual([
      'search',
      'think',
      'reflect',
      'compare',
      'critique',
      'debate',
    ]);
    // Quiz: the sequence narrows the glob-allowed tools (think, reflect, brainstorm) to its first position.
    expect(await allowed('Quiz me on the Industrial Revolution', 'c')).toEqual(['think']);
    const quiz = await runTurn(template, manager, [{ role: 'user', content: 'Quiz me on the Industrial Revolution' }]);
    expect(quiz.executed.slice(0, 2)).toEqual(['think', 'brainstorm']);
  });
});
