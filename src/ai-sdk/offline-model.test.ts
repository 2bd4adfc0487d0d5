import type { LanguageModelV4CallOptions, LanguageModelV4Prompt, LanguageModelV4StreamPart } from '@ai-sdk/provider';
import { generateText, isStepCount, NoSuchToolError, streamText, tool } from 'ai';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { builtinTools } from '../agents/tools/index.js';
import { createOfflineModel, OFFLINE_FORBIDDEN_TOOL, offlinePlan } from './offline-model.js';

const EV = 'How many electric vehicles will be on the road by 2030?';

/** Small real tools that log what ran and with which input. */
function recordingTools() {
  const executed: { tool: string; input: unknown }[] = [];
  const make = (name: string, field: string) =>
    tool({
      description: `The ${name} tool`,
      inputSchema: z.object({ [field]: z.string().min(1) }),
      execute: async (input): Promise<{ summary: string }> => {
        executed.push({ tool: name, input });
        return { summary: `${name} finding ${executed.length}` };
      },
    });
  const tools = {
    search: make('search', 'query'),
    think: make('think', 'thought'),
    reflect: make('reflect', 'reflection'),
    critique: make('critique', 'analysis'),
  };
  return { tools, executed, order: () => executed.map((e) => e.tool) };
}

const namesOf = (call: LanguageModelV4CallOptions) => (call.tools ?? []).map((t) => t.name);

/** Wraps the offline model to record the tools offered in every call. */
function observed(options?: Parameters<typeof createOfflineModel>[0]) {
  const model = createOfflineModel(options);
  const offered: string[][] = [];
  return {
    offered,
    model: {
      ...model,
      doGenerate: (call: LanguageModelV4CallOptions) => {
        offered.push(namesOf(call));
        return model.doGenerate(call);
      },
      doStream: (call: LanguageModelV4CallOptions) => {
        offered.push(namesOf(call));
        return model.doStream(call);
      },
    },
  };
}

/** A gate that offers one tool at a time, in order, advancing on each executed tool. */
function gate<Name extends string>(sequence: readonly Name[], executed: () => readonly string[]) {
  return (): { activeTools: Name[] } => {
    const next = sequence[executed().length];
    return { activeTools: next === undefined ? [] : [next] };
  };
}

describe('the offline model in the AI SDK loop', () => {
  it('calls the offered tools of its plan one per step, then answers from their results', async () => {
    const { tools, executed, order } = recordingTools();
    const result = await generateText({
      model: createOfflineModel(),
      tools,
      prompt: EV,
      stopWhen: isStepCount(10),
    });
    expect(order()).toEqual(['search', 'think', 'reflect']);
    expect(result.steps.map((s) => s.toolCalls.length)).toEqual([1, 1, 1, 0]);
    expect(result.steps.map((s) => s.finishReason)).toEqual(['tool-calls', 'tool-calls', 'tool-calls', 'stop']);
    expect(executed[0]?.input).toEqual({ query: EV });
    // The reasoning fields carry the question and what earlier tools of the turn found.
    expect(executed[1]?.input).toEqual({ thought: `Consider: ${EV}\nFrom search: search finding 1` });
    expect(result.text).toContain(`## ${EV}`);
    expect(result.text).toContain('- **search**: search finding 1');
    expect(result.text).toContain('- **think**: think finding 2');
    expect(result.text).toContain('- **reflect**: reflect finding 3');
  });

  it('follows a prepareStep that offers one tool at a time, even against its own plan', async () => {
    const { tools, order } = recordingTools();
    const { model, offered } = observed();
    const sequence = ['search', 'think', 'reflect'] as const;
    const result = streamText({
      model,
      tools,
      // The plan for a critique would start with critique; the gate decides.
      prompt: 'Critique the argument that remote work improves productivity',
      stopWhen: isStepCount(10),
      prepareStep: gate(sequence, order),
    });
    const text = await result.text;
    expect(order()).toEqual(sequence);
    expect(offered).toEqual([['search'], ['think'], ['reflect'], []]);
    expect(text).toContain('- **reflect**: reflect finding 3');
  });

  it('calls the tool named by a "Next required tool" line first, and repeats it when a sequence does', async () => {
    const { tools, order } = recordingTools();
    const sequence = ['reflect', 'reflect', 'search'];
    await generateText({
      model: createOfflineModel(),
      tools,
      prompt: EV,
      stopWhen: isStepCount(10),
      // Everything is offered; only the instructions say what comes next.
      prepareStep: () => {
        const next = sequence[order().length];
        // Instructions carry over to later steps in v7, so the last step must replace them.
        return { instructions: `Active step: Demo${next ? `\nNext required tool: ${next} or critique` : ''}` };
      },
    });
    // After the required ones, it goes on with the rest of its plan (think) and stops.
    expect(order()).toEqual(['reflect', 'reflect', 'search', 'think']);
  });

  it('is deterministic: two runs, and generate versus stream, give the same steps, text and usage', async () => {
    const run = async (mode: 'generate' | 'stream') => {
      const { tools } = recordingTools();
      const options = { model: createOfflineModel(), tools, prompt: EV, stopWhen: isStepCount(10) };
      const result = mode === 'generate' ? await generateText(options) : streamText(options);
      const steps = await result.steps;
      return {
        text: await result.text,
        // Ids end in random bytes (unique per session, like a real provider's); the rest is fixed.
        calls: steps.map((s) =>
          s.toolCalls.map((c) => [c.toolCallId.replace(/-[0-9a-f]{8}$/, ''), c.toolName, c.input]),
        ),
        ids: steps.flatMap((s) => s.toolCalls.map((c) => c.toolCallId)),
        usage: steps.map((s) => [s.usage.inputTokens, s.usage.outputTokens, s.usage.totalTokens]),
      };
    };
    const { ids, ...first } = await run('generate');
    const { ids: again, ...second } = await run('generate');
    expect(second).toEqual(first);
    const { ids: streamed, ...third } = await run('stream');
    expect(third).toEqual(first);
    expect(ids).toEqual([
      expect.stringMatching(/^offline-0-1-[0-9a-f]{8}$/),
      expect.stringMatching(/^offline-0-2-[0-9a-f]{8}$/),
      expect.stringMatching(/^offline-0-3-[0-9a-f]{8}$/),
    ]);
    expect(new Set([...ids, ...again, ...streamed]).size).toBe(9);
  });

  it('never makes more than maxToolCalls calls in a turn, even when a gate keeps asking', async () => {
    const { tools, order } = recordingTools();
    const result = await generateText({
      model: createOfflineModel({ maxToolCalls: 3 }),
      tools,
      prompt: EV,
      stopWhen: isStepCount(20),
      prepareStep: () => ({ activeTools: ['search'], instructions: 'Next required tool: search' }),
    });
    expect(order()).toEqual(['search', 'search', 'search']);
    expect(result.steps).toHaveLength(4);
    expect(result.finishReason).toBe('stop');

    const defaults = recordingTools();
    await generateText({
      model: createOfflineModel(),
      tools: defaults.tools,
      prompt: EV,
      stopWhen: isStepCount(20),
      prepareStep: () => ({ instructions: 'Next required tool: think' }),
    });
    expect(defaults.order()).toEqual(Array(8).fill('think'));
  });

  it('misbehaves when asked: its first call is to a tool that is not offered, which the SDK rejects', async () => {
    const { tools, order } = recordingTools();
    const sequence = ['search', 'think', 'reflect'] as const;
    const result = await generateText({
      model: createOfflineModel({ misbehave: true }),
      tools,
      prompt: EV,
      stopWhen: isStepCount(10),
      prepareStep: gate(sequence, order),
    });
    const [first] = result.steps;
    expect(first?.toolCalls).toHaveLength(1);
    const rejected = first?.toolCalls[0];
    // think is in the tool set but not offered on step 0: the first plan tool that is not offered.
    expect(rejected).toMatchObject({ toolName: 'think', invalid: true });
    expect(NoSuchToolError.isInstance(rejected?.invalid ? rejected.error : undefined)).toBe(true);
    expect(first?.toolResults).toEqual([]);
    // It then behaves: the gate's sequence runs in full and nothing else ran.
    expect(order()).toEqual(sequence);
    expect(result.steps).toHaveLength(5);
    expect(result.text).toContain('Not run (the tool was not available): think');
  });

  it('misbehaves with a tool that does not exist when every plan tool is offered', async () => {
    const { tools, order } = recordingTools();
    const result = await generateText({
      model: createOfflineModel({ misbehave: true }),
      tools,
      prompt: EV,
      stopWhen: isStepCount(10),
    });
    expect(result.steps[0]?.toolCalls[0]).toMatchObject({ toolName: OFFLINE_FORBIDDEN_TOOL, invalid: true });
    expect(order()).toEqual(['search', 'think', 'reflect']);
  });

  it('tries a tool again after a rejection, but not after the tool itself failed', async () => {
    const run = async (error: string) => {
      const { tools, order } = recordingTools();
      let attempts = 0;
      const search = tool({
        description: 'search',
        inputSchema: z.object({ query: z.string() }),
        execute: async (): Promise<string> => {
          attempts++;
          if (attempts === 1) throw new Error(error);
          return 'found';
        },
      });
      await generateText({
        model: createOfflineModel(),
        tools: { ...tools, search },
        prompt: EV,
        stopWhen: isStepCount(10),
      });
      return { attempts, others: order() };
    };
    // Baton's ToolRejectedError: the call did not happen, so search comes again.
    expect(await run('Tool "search" was not run: step "X" expects think next')).toEqual({
      attempts: 2,
      others: ['think', 'reflect'],
    });
    expect(await run('kaput')).toEqual({ attempts: 1, others: ['think', 'reflect'] });
  });

  it('answers in plain text when no tool is offered or the tool choice is none', async () => {
    const { tools, order } = recordingTools();
    const none = await generateText({ model: createOfflineModel(), tools, toolChoice: 'none', prompt: EV });
    expect(none.toolCalls).toEqual([]);
    expect(none.text).toContain('No tool was used');
    const hello = await generateText({ model: createOfflineModel(), prompt: 'Hello there' });
    expect(hello.text).toBe('Hello! How can I help you today?');
    expect(order()).toEqual([]);
  });

  it('drives the built-in tools end to end', async () => {
    const result = await generateText({
      model: createOfflineModel(),
      tools: builtinTools,
      prompt: 'Compare solar and wind energy for residential power generation',
      stopWhen: isStepCount(10),
    });
    expect(result.steps.flatMap((s) => s.toolCalls.map((c) => c.toolName))).toEqual(['search', 'compare', 'reflect']);
    expect(result.steps[1]?.toolCalls[0]?.input).toMatchObject({
      items: ['solar', 'wind energy for residential power generation'],
    });
    expect(result.text).toContain(
      '**search**: 5 results; top: "Solar versus wind energy for residential power generation"',
    );
    expect(result.text).toContain('**compare**: solar vs wind energy for residential power generation on 3 criteria');
    expect(result.text).toContain(
      '**In short:** Wind can beat solar on open, windy rural land and complements it seasonally.',
    );
  });
});

describe('the offline model as a v4 provider', () => {
  const prompt = (text: string): LanguageModelV4Prompt => [{ role: 'user', content: [{ type: 'text', text }] }];
  const functionTool = (name: string, inputSchema: Record<string, unknown>) => ({
    type: 'function' as const,
    name,
    inputSchema,
  });
  const read = async (stream: ReadableStream<LanguageModelV4StreamPart>) => {
    const parts: LanguageModelV4StreamPart[] = [];
    const reader = stream.getReader();
    for (let next = await reader.read(); !next.done; next = await reader.read()) parts.push(next.value);
    return parts;
  };

  it('identifies itself', () => {
    const model = createOfflineModel();
    expect(model).toMatchObject({
      specificationVersion: 'v4',
      provider: 'baton-offline',
      modelId: 'offline',
      supportedUrls: {},
    });
  });

  it('builds arguments from the JSON schema: required properties only, within their bounds', async () => {
    const schema = {
      type: 'object',
      properties: {
        query: { type: 'string' },
        topic: { type: 'string' },
        mode: { type: 'string', enum: ['fast', 'slow'] },
        level: { type: 'integer', minimum: 3, maximum: 5 },
        ratio: { type: 'number', maximum: 0.5 },
        strict: { type: 'boolean' },
        items: { type: 'array', items: { type: 'string' }, minItems: 2 },
        many: { type: 'array', items: { type: 'string' }, minItems: 4, maxItems: 4 },
        nested: { type: 'object', properties: { note: { type: 'string' } }, required: ['note'] },
        maybe: { anyOf: [{ type: 'null' }, { type: 'string', maxLength: 5 }] },
        optional: { type: 'string' },
      },
      required: ['query', 'topic', 'mode', 'level', 'ratio', 'strict', 'items', 'many', 'nested', 'maybe'],
    };
    const result = await createOfflineModel().doGenerate({
      prompt: prompt('Compare trains versus planes'),
      tools: [functionTool('plan', schema)],
    });
    const call = result.content[0];
    expect(call?.type).toBe('tool-call');
    const input = JSON.parse(call?.type === 'tool-call' ? call.input : 'null');
    expect(input).toEqual({
      query: 'Compare trains versus planes',
      // Subject-like fields get the question without its command.
      topic: 'trains versus planes',
      mode: 'fast',
      level: 3,
      ratio: 0.5,
      strict: true,
      items: ['trains', 'planes'],
      many: ['trains', 'planes', 'trains versus planes (3)', 'trains versus planes (4)'],
      nested: { note: 'Consider: Compare trains versus planes' },
      maybe: 'Compa',
    });
  });

  it('streams a tool call as input start, deltas and end, then the call with a JSON string input', async () => {
    const model = createOfflineModel();
    const options = { prompt: prompt(EV), tools: [functionTool('search', builtinSchema('query'))] };
    const generated = await model.doGenerate(options);
    const { stream } = await model.doStream(options);
    const parts = await read(stream);
    expect(parts.map((p) => p.type)).toEqual([
      'stream-start',
      'response-metadata',
      'tool-input-start',
      ...parts.filter((p) => p.type === 'tool-input-delta').map(() => 'tool-input-delta'),
      'tool-input-end',
      'tool-call',
      'finish',
    ]);
    const deltas = parts.flatMap((p) => (p.type === 'tool-input-delta' ? [p.delta] : []));
    const call = parts.find((p) => p.type === 'tool-call');
    if (call?.type !== 'tool-call') throw new Error('no tool-call part');
    expect(call).toMatchObject({ toolCallId: expect.stringMatching(/^offline-0-1-[0-9a-f]{8}$/), toolName: 'search' });
    expect(JSON.parse(call.input)).toEqual({ query: EV });
    expect(deltas.join('')).toBe(call.input);
    expect(generated.content).toEqual([{ ...call, toolCallId: expect.stringMatching(/^offline-0-1-[0-9a-f]{8}$/) }]);
    expect(parts.at(-1)).toMatchObject({ finishReason: { unified: 'tool-calls' }, usage: generated.usage });
  });

  it('streams text word by word, and counts tokens as characters / 4', async () => {
    const model = createOfflineModel();
    const options = { prompt: prompt('Thanks a lot') };
    const generated = await model.doGenerate(options);
    const text = generated.content[0]?.type === 'text' ? generated.content[0].text : '';
    expect(text).toBe("You're welcome! Anything else I can look into?");
    const parts = await read((await model.doStream(options)).stream);
    const deltas = parts.flatMap((p) => (p.type === 'text-delta' ? [p.delta] : []));
    expect(deltas).toHaveLength(text.split(' ').length);
    expect(deltas.join('')).toBe(text);
    expect(generated.usage.outputTokens.total).toBe(Math.ceil(text.length / 4));
    expect(generated.usage.inputTokens.total).toBe(Math.ceil((JSON.stringify(options.prompt).length + 2) / 4));
    expect(generated.finishReason).toEqual({ unified: 'stop', raw: 'stop' });
  });

  it('lets the event loop turn between model steps, as a network model does, so a busy server still polls I/O', async () => {
    // Counts event loop turns: one tick per check phase, as long as the turn runs.
    let turns = 0;
    let running = true;
    const tick = () => {
      turns++;
      if (running) setImmediate(tick);
    };
    const { tools } = recordingTools();
    setImmediate(tick);
    turns = 0;
    const result = streamText({ model: createOfflineModel(), tools, prompt: EV, stopWhen: isStepCount(10) });
    await result.consumeStream();
    running = false;
    // Four model steps (three tool calls and the answer); before, the whole turn ran in one
    // run of promise callbacks, without a single turn of the loop.
    expect((await result.steps).length).toBe(4);
    expect(turns).toBeGreaterThanOrEqual(4);
  });

  it('delays each chunk by delayMs and stops when aborted', async () => {
    const model = createOfflineModel({ delayMs: 20 });
    const started = performance.now();
    const parts = await read((await model.doStream({ prompt: prompt('Hello') })).stream);
    expect(performance.now() - started).toBeGreaterThanOrEqual(parts.length * 20 - 5);

    const controller = new AbortController();
    const { stream } = await model.doStream({ prompt: prompt('Hello'), abortSignal: controller.signal });
    const reader = stream.getReader();
    await reader.read();
    controller.abort(new Error('stop it'));
    await expect(reader.read()).rejects.toThrow('stop it');
  });

  it('counts only the calls of the current turn and numbers them by turn', async () => {
    const conversation: LanguageModelV4Prompt = [
      ...prompt('What is CRISPR?'),
      {
        role: 'assistant',
        content: [{ type: 'tool-call', toolCallId: 'offline-0-1', toolName: 'search', input: { query: 'x' } }],
      },
      {
        role: 'tool',
        content: [
          {
            type: 'tool-result',
            toolCallId: 'offline-0-1',
            toolName: 'search',
            output: { type: 'json', value: { query: 'x', results: [] } },
          },
        ],
      },
      { role: 'assistant', content: [{ type: 'text', text: 'Done.' }] },
      ...prompt(EV),
    ];
    const result = await createOfflineModel({ maxToolCalls: 1 }).doGenerate({
      prompt: conversation,
      tools: [functionTool('search', builtinSchema('query'))],
    });
    expect(result.content[0]).toMatchObject({
      type: 'tool-call',
      toolCallId: expect.stringMatching(/^offline-1-1-[0-9a-f]{8}$/),
      toolName: 'search',
    });
  });

  it('plans by keywords, in the order of the cognitive-reasoner modes', () => {
    expect(offlinePlan(EV)).toEqual(['search', 'think', 'reflect']);
    expect(offlinePlan('How can cities solve traffic congestion problems?')).toEqual([
      'think',
      'brainstorm',
      'compare',
    ]);
    expect(offlinePlan('Critique the argument that remote work improves productivity')).toEqual([
      'critique',
      'debate',
      'reflect',
    ]);
    expect(offlinePlan('Compare solar and wind energy')).toEqual(['search', 'compare', 'reflect']);
    expect(offlinePlan('Brainstorm innovative ways to reduce food waste')).toEqual(['think', 'brainstorm', 'critique']);
    expect(offlinePlan('Debate whether cryptocurrencies will eventually replace traditional banking')).toEqual([
      'search',
      'debate',
      'reflect',
    ]);
    expect(offlinePlan('Tell me a story')).toEqual(['think', 'reflect']);
  });
});

describe('the offline model on hostile messages', () => {
  /** The plan rules as the regexes they once were: the reference for short messages. */
  const REFERENCE: readonly [RegExp, readonly string[]][] = [
    [
      /\b(research|how many|how much|find|look up|what is|what are|statistics)\b|\bwill\b.*\bby \d{4}\b/i,
      ['search', 'think', 'reflect'],
    ],
    [/\b(solve|solving|how can|problems?)\b/i, ['think', 'brainstorm', 'compare']],
    [/\b(critique|evaluate|assess|review)\b/i, ['critique', 'debate', 'reflect']],
    [/\b(compare|comparing|comparison|versus|vs)\b/i, ['search', 'compare', 'reflect']],
    [/\b(brainstorm|ideas?)\b/i, ['think', 'brainstorm', 'critique']],
    [/\b(debate|whether)\b/i, ['search', 'debate', 'reflect']],
  ];
  const reference = (message: string) =>
    REFERENCE.find(([pattern]) => pattern.test(message))?.[1] ?? ['think', 'reflect'];

  it('plans as the keyword regexes did, on messages made of keywords, near misses and separators', () => {
    const piece = fc.constantFrom(
      ...['how', 'many', 'much', 'look', 'up', 'what', 'is', 'are', 'will', 'by', '2030', '20301', '203', 'WILL'],
      ...['Research', 'find', 'finds', 'statistics', 'solve', 'problem', 'problems', 'how can', 'review', 'vs'],
      ...['versus', 'idea', 'ideas', 'debate', 'whether', 'x', '_', 'é', 'ſ', 'compare', 'brainstorm'],
      ...[' ', ' ', ' ', '  ', '\n', '\r', '\u2028', '\t', ',', '.', '-', '?'],
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 14 }), (pieces) => {
        const message = pieces.join('');
        expect(offlinePlan(message), JSON.stringify(message)).toEqual(reference(message));
      }),
      { numRuns: 5000 },
    );
  });

  // Each was slow before: many "will"s made the forecast regex backtrack (5 s for 100 KB), a run
  // of spaces made the trimming and splitting regexes backtrack (23 s for 100 KB).
  const MB = 1_000_000;
  const hostile: [string, string][] = [
    ['"will " repeated', 'will '.repeat(MB / 5)],
    ['"will by " repeated', 'will by '.repeat(MB / 8)],
    ['one run of spaces', `Compare a${' '.repeat(MB)}b`],
    ['keywords and conjunctions', 'Compare research and '.repeat(MB / 21)],
    ['spaces around prepositions', `x${'  to  '.repeat(MB / 6)}`],
    ['a single word', 'x'.repeat(MB)],
  ];

  it.each(hostile)('answers a 1 MB message (%s) in well under a second, with a small output', async (_, message) => {
    const started = performance.now();
    const result = await generateText({
      model: createOfflineModel(),
      tools: builtinTools,
      prompt: message,
      stopWhen: isStepCount(10),
    });
    const elapsed = performance.now() - started;
    // It did its work: tools called, then an answer.
    expect(result.steps.length).toBeGreaterThan(1);
    expect(result.finishReason).toBe('stop');
    // What the model wrote (tool inputs and its answer) quotes at most 1,000 characters of the
    // message per field; before, every tool input carried the whole megabyte.
    const written = result.steps.flatMap((step) => [
      step.text,
      ...step.toolCalls.map((call) => JSON.stringify(call.input)),
    ]);
    expect(written.join('').length).toBeLessThan(12_000);
    expect(elapsed).toBeLessThan(800);
  });

  it('quotes a long message cut at a space, marked with an ellipsis', async () => {
    const message = `What is ${'very '.repeat(400)}long?`;
    const result = await createOfflineModel().doGenerate({
      prompt: [{ role: 'user', content: [{ type: 'text', text: message }] }],
      tools: [{ type: 'function', name: 'search', inputSchema: builtinSchema('query') }],
    });
    const call = result.content[0];
    const query = (JSON.parse(call?.type === 'tool-call' ? call.input : '{}') as { query: string }).query;
    expect(query.length).toBeLessThanOrEqual(1000);
    expect(query).toMatch(/^What is (very )+very…$/);
  });
});

/** The JSON schema the AI SDK sends for a one-string-field tool. */
function builtinSchema(field: string) {
  return { type: 'object', properties: { [field]: { type: 'string' } }, required: [field] };
}
