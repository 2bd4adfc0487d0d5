import type { LanguageModelV4CallOptions } from '@ai-sdk/provider';
import { asSchema, generateText, isStepCount, type Tool } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { describe, expect, it } from 'vitest';
import {
  cognitiveTools,
  splitPoints,
  splitSentences,
  structureBrainstorm,
  structureComparison,
  structureCritique,
  structureDebate,
  structureReflection,
  structureThought,
} from './cognitive.js';

describe('splitting text into points', () => {
  it('uses lines when there are several, dropping list markers and blank lines', () => {
    expect(splitPoints('1. First step.\n2) Second step\n\n- third\n* fourth\n(5) fifth')).toEqual([
      'First step.',
      'Second step',
      'third',
      'fourth',
      'fifth',
    ]);
  });

  it('uses sentences for a single paragraph, without breaking decimals', () => {
    expect(splitPoints('  The fleet was 40 million.  It may reach 2.5 times that!  Why?  ')).toEqual([
      'The fleet was 40 million.',
      'It may reach 2.5 times that!',
      'Why?',
    ]);
    expect(splitSentences('')).toEqual([]);
  });
});

describe('think', () => {
  it('numbers the steps and keeps the conclusion and the confidence', () => {
    const output = structureThought({
      topic: ' EV adoption ',
      thought: 'Sales grew fast. Batteries got cheaper. So adoption will keep rising.',
      confidence: 0.7,
    });
    expect(output).toEqual({
      topic: 'EV adoption',
      reasoning: 'Sales grew fast. Batteries got cheaper. So adoption will keep rising.',
      steps: [
        { step: 1, text: 'Sales grew fast.' },
        { step: 2, text: 'Batteries got cheaper.' },
        { step: 3, text: 'So adoption will keep rising.' },
      ],
      conclusion: 'So adoption will keep rising.',
      confidence: 0.7,
      summary: '3 steps; conclusion: So adoption will keep rising.',
    });
    expect(structureThought({ topic: 't', thought: 'One.' })).not.toHaveProperty('confidence');
  });
});

describe('reflect', () => {
  it('separates insights from open questions and drops repeats', () => {
    expect(
      structureReflection({
        topic: 'the search',
        reflection: 'The sources agree.\nThe sources agree.\nAre they current?\nProjections vary by scenario.',
      }),
    ).toEqual({
      topic: 'the search',
      insights: ['The sources agree.', 'Projections vary by scenario.'],
      openQuestions: ['Are they current?'],
      summary: '2 insights, 1 open question; first insight: The sources agree.',
    });
  });
});

describe('critique', () => {
  it('classifies labelled points by label and the rest by wording', () => {
    const output = structureCritique({
      subject: 'remote work improves productivity',
      analysis: [
        'Strength: a randomized trial supports it',
        'Weakness: the trial was a call center',
        'Suggestion: look at hybrid studies',
        'It ignores collaboration effects',
        'Consider measuring output, not hours',
        'Attrition fell by half',
      ].join('\n'),
    });
    expect(output).toEqual({
      subject: 'remote work improves productivity',
      strengths: ['a randomized trial supports it', 'Attrition fell by half'],
      weaknesses: ['the trial was a call center', 'It ignores collaboration effects'],
      suggestions: ['look at hybrid studies', 'Consider measuring output, not hours'],
      summary: '"remote work improves productivity": 2 strengths, 2 weaknesses, 2 suggestions',
    });
  });

  it('keeps a colon that is part of the text rather than a label', () => {
    const output = structureCritique({ subject: 's', analysis: 'The claim rests on one source: a single survey.' });
    expect(output.strengths).toEqual(['The claim rests on one source: a single survey.']);
  });
});

describe('debate', () => {
  it('parses "Side: argument" perspectives and keeps the synthesis', () => {
    expect(
      structureDebate({
        topic: 'Will crypto replace banks?',
        perspectives: ['Supporters: payments get cheaper', 'Sceptics: no deposit insurance', 'an unlabelled view'],
        synthesis: ' Banks adopt the technology instead. ',
      }),
    ).toEqual({
      topic: 'Will crypto replace banks?',
      positions: [
        { side: 'Supporters', argument: 'payments get cheaper' },
        { side: 'Sceptics', argument: 'no deposit insurance' },
        { side: 'Position 3', argument: 'an unlabelled view' },
      ],
      synthesis: 'Banks adopt the technology instead.',
      summary: '3 positions on "Will crypto replace banks?": Supporters vs Sceptics vs Position 3',
    });
  });

  it('returns the frame of a debate, for and against, when no perspective is given', () => {
    const output = structureDebate({ topic: 'crypto replaces banks' });
    expect(output.positions).toEqual([
      { side: 'For', argument: 'Arguments that support: crypto replaces banks' },
      { side: 'Against', argument: 'Arguments that oppose: crypto replaces banks' },
    ]);
    expect(output).not.toHaveProperty('synthesis');
  });
});

describe('brainstorm', () => {
  it('numbers ideas, removes repeats and groups them by category in order of appearance', () => {
    expect(
      structureBrainstorm({
        challenge: 'less food waste',
        ideas: ['Process: weigh waste daily', 'Menu: smaller portions', 'process: weigh waste daily', 'donate surplus'],
      }),
    ).toEqual({
      challenge: 'less food waste',
      ideas: [
        { id: 1, idea: 'weigh waste daily', category: 'Process' },
        { id: 2, idea: 'smaller portions', category: 'Menu' },
        { id: 3, idea: 'donate surplus', category: 'General' },
      ],
      categories: ['Process', 'Menu', 'General'],
      summary: '3 ideas in 3 categories',
    });
  });
});

describe('compare', () => {
  it('builds a table with one row per criterion and marks what a description does not cover', () => {
    const output = structureComparison({
      items: ['Solar: low cost per kWh, reliable output; quiet', 'Wind: costly tower. Works at night'],
      criteria: ['cost', 'reliability', 'noise'],
    });
    expect(output.items).toEqual([
      { name: 'Solar', description: 'low cost per kWh, reliable output; quiet' },
      { name: 'Wind', description: 'costly tower. Works at night' },
    ]);
    expect(output.table).toEqual({
      columns: ['Criterion', 'Solar', 'Wind'],
      rows: [
        ['cost', 'low cost per kWh', 'costly tower'],
        ['reliability', 'reliable output', '—'],
        ['noise', '—', '—'],
      ],
    });
    expect(output.topic).toBe('Solar vs Wind');
    expect(output.summary).toBe('Solar vs Wind on 3 criteria');
  });

  it('defaults the criteria and names unlabelled items by their text', () => {
    const output = structureComparison({ items: ['trains', 'planes', 'Trains'], topic: 'travel in Europe' });
    expect(output.criteria).toEqual(['cost', 'benefits', 'drawbacks']);
    expect(output.items.map((item) => item.name)).toEqual(['trains', 'planes']);
    expect(output.table.rows).toEqual([
      ['cost', '—', '—'],
      ['benefits', '—', '—'],
      ['drawbacks', '—', '—'],
    ]);
    expect(output.topic).toBe('travel in Europe');
  });
});

describe('the cognitive tools in the AI SDK', () => {
  /** A model that calls one tool with the given input, then stops. */
  const callOnce = (toolName: string, input: unknown) =>
    new MockLanguageModelV4({
      doGenerate: async (options: LanguageModelV4CallOptions) => ({
        content: options.prompt.some((m) => m.role === 'tool')
          ? [{ type: 'text', text: 'done' }]
          : [{ type: 'tool-call', toolCallId: 'c1', toolName, input: JSON.stringify(input) }],
        finishReason: { unified: 'tool-calls', raw: undefined },
        usage: {
          inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
          outputTokens: { total: 1, text: 1, reasoning: undefined },
        },
        warnings: [],
      }),
    });

  it('describes the tool and every input field, so real models fill them well', async () => {
    for (const [name, implementation] of Object.entries(cognitiveTools) as [string, Tool][]) {
      expect(implementation.description?.length, name).toBeGreaterThan(40);
      const schema = await asSchema(implementation.inputSchema).jsonSchema;
      const properties = Object.entries(schema.properties ?? {});
      expect(properties.length, name).toBeGreaterThan(0);
      for (const [field, property] of properties) {
        const description = (property as { description?: unknown } | null)?.description;
        expect(typeof description === 'string' && description.length > 10, `${name}.${field}`).toBe(true);
      }
    }
  });

  it('executes with valid input and returns plain JSON', async () => {
    const result = await generateText({
      model: callOnce('compare', { items: ['Solar: cheap', 'Wind: windy sites'], criteria: ['cost'] }),
      tools: cognitiveTools,
      prompt: 'compare',
      stopWhen: isStepCount(3),
    });
    const output = result.steps[0]?.toolResults[0]?.output;
    expect(output).toMatchObject({ table: { rows: [['cost', '—', '—']] } });
    expect(JSON.parse(JSON.stringify(output))).toEqual(output);
  });

  it('rejects invalid input before executing: the model gets the validation error', async () => {
    const result = await generateText({
      model: callOnce('compare', { items: ['only one'] }),
      tools: cognitiveTools,
      prompt: 'compare',
      stopWhen: isStepCount(3),
    });
    const [first] = result.steps;
    expect(first?.toolCalls[0]).toMatchObject({ toolName: 'compare', invalid: true });
    expect(first?.toolResults).toEqual([]);
    const error = first?.content.find((part) => part.type === 'tool-error');
    expect(String(error?.type === 'tool-error' ? error.error : '')).toMatch(/InvalidToolInput|too_small|>=2/i);
  });
});
