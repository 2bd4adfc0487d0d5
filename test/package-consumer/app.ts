/**
 * An app that uses the installed package the way the README says, run by
 * test/package-consumer.test.ts after `npm pack` and `npm install` in a temporary directory
 * (and typechecked there under `moduleResolution` `nodenext` and `bundler`). It prints one JSON
 * line that the test checks. Inside the repository it typechecks against the sources too.
 *
 * Usage: node app.ts <sqlite file>
 */
import { generateText, isStepCount, streamText, tool } from 'ai';
import { convertArrayToReadableStream, MockLanguageModelV4 } from 'ai/test';
import {
  BatonError,
  createOrchestrationManager,
  type OrchestrationEvent,
  parseTemplate,
  TemplateConfigError,
  validateTemplate,
} from 'baton-agents';
import { orchestrate } from 'baton-agents/ai-sdk';
import { createApp } from 'baton-agents/server';
import { sqliteStore } from 'baton-agents/stores/sqlite';
import { createFakeClock, ScriptedModel } from 'baton-agents/testing';
import { z } from 'zod';

const databasePath = process.argv[2];
if (!databasePath) throw new Error('usage: node app.ts <sqlite file>');

const template = parseTemplate({
  id: 'consumer',
  tools: ['search', 'think', 'delete_everything'],
  orchestration: {
    steps: [
      {
        name: 'research',
        conditions: [{ type: 'message_contains', value: 'research' }],
        availableTools: { allowed: ['search', 'think'] },
        sequence: ['search', 'think'],
      },
    ],
  },
});

const executed: string[] = [];
const tools = {
  search: tool({
    description: 'Searches the web.',
    inputSchema: z.object({ query: z.string() }),
    execute: async ({ query }) => {
      executed.push('search');
      return `results for ${query}`;
    },
  }),
  think: tool({
    description: 'Thinks about the results.',
    inputSchema: z.object({ thought: z.string() }),
    execute: async ({ thought }) => {
      executed.push('think');
      return thought;
    },
  }),
  delete_everything: tool({
    description: 'Never allowed by the template.',
    inputSchema: z.object({}),
    execute: async () => {
      executed.push('delete_everything');
      return 'gone';
    },
  }),
};

/** A stream part of the AI SDK's model spec, as the mock model takes it (no import of @ai-sdk/provider needed). */
type StreamPart =
  Awaited<ReturnType<MockLanguageModelV4['doStream']>>['stream'] extends ReadableStream<infer Part> ? Part : never;

// A mock model from ai/test: it calls the first tool it is offered, twice (trying a forbidden
// tool in between), then answers. What it was offered at each step is recorded.
const offered: string[][] = [];
const usage = {
  inputTokens: { total: 3, noCache: 3, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 2, text: 2, reasoning: undefined },
};
const model = new MockLanguageModelV4({
  doStream: async (options) => {
    const names = (options.tools ?? []).map((t) => t.name);
    const step = offered.push(names) - 1;
    const parts: StreamPart[] = [{ type: 'stream-start', warnings: [] }];
    if (step === 1) {
      parts.push({ type: 'tool-call', toolCallId: 'forbidden', toolName: 'delete_everything', input: '{}' });
    } else if (step < 3 && names[0]) {
      parts.push({
        type: 'tool-call',
        toolCallId: `call-${step}`,
        toolName: names[0],
        input: '{"query":"EVs","thought":"many"}',
      });
    } else {
      parts.push(
        { type: 'text-start', id: 't' },
        { type: 'text-delta', id: 't', delta: 'done' },
        { type: 'text-end', id: 't' },
      );
    }
    const toolCall = parts.some((part) => part.type === 'tool-call');
    parts.push({ type: 'finish', finishReason: { unified: toolCall ? 'tool-calls' : 'stop', raw: undefined }, usage });
    return { stream: convertArrayToReadableStream(parts) };
  },
});

const events: OrchestrationEvent['type'][] = [];
const store = sqliteStore({ path: databasePath });
const manager = createOrchestrationManager({ store, onEvent: (event) => events.push(event.type) });
const messages = [{ role: 'user' as const, content: 'Please research EV adoption' }];
const orchestration = orchestrate({ manager, config: template, sessionId: 'session-1', tools, messages });
const result = streamText({ model, messages, stopWhen: isStepCount(6), ...orchestration });
const text = await result.text;
await orchestration.settled();
await store.close();

// The session is durable: a second store on the same file sees it.
const reopened = sqliteStore({ path: databasePath });
const state = await reopened.get('session-1');
await reopened.close();

// The testing helpers work without vitest (which this app does not install).
const clock = createFakeClock(1_000);
clock.advance(500);
const scripted = new ScriptedModel([{ text: 'scripted answer' }]);
const scriptedText = (await generateText({ model: scripted, prompt: 'hi' })).text;

// Errors are BatonErrors with codes, recognisable across copies of the package.
let invalidCode: string | undefined;
try {
  parseTemplate({ id: 'x', orchestration: { steps: [{ name: 'a', conditions: [{ type: 'tool_used' }] }] } });
} catch (error) {
  if (BatonError.isInstance(error) && error instanceof TemplateConfigError) invalidCode = error.code;
}

// The HTTP app, with the inspector page that ships in the package.
const server = createApp({ agents: [template], model: 'offline', tools });
const agentsStatus = (await server.request('/api/agents')).status;
const inspector = await server.request('/');
const inspectorType = inspector.headers.get('content-type');
await server.close();

console.log(
  JSON.stringify({
    text,
    offered,
    executed,
    events: [...new Set(events)].sort(),
    recentlyUsedTools: state?.recentlyUsedTools,
    activeStep: state?.activeStep,
    clock: clock.now(),
    scriptedText,
    invalidCode,
    validateWarnings: validateTemplate({ id: 'y' }).success,
    agentsStatus,
    inspectorStatus: inspector.status,
    inspectorType,
  }),
);
