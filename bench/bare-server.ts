/**
 * The baseline of `npm run loadtest -- --compare-bare`: the chat server an AI SDK user writes
 * without Baton. Hono on @hono/node-server, `streamText` over the same offline model with the same
 * tools, instructions and step limit as the served agent, answered with `toUIMessageStreamResponse`.
 * It filters tools per model step as the template says, written by hand as a user would instead of
 * Baton: the first mode whose `message_regex` matches the latest user message, `prepareStep`
 * offering only the next tool of its sequence (`activeTools`), then its allowed tools, and an
 * approval hook refusing any other call. Without that filtering the bare server would offer all 7
 * tools at every step, which costs the AI SDK more per step than Baton's one tool (an earlier
 * comparison did that, and flattered Baton). No session store, no validation beyond the AI SDK's
 * own. A benchmark fixture, never shipped (bench/ is outside the package).
 *
 * `tsx bench/bare-server.ts [--agent examples/agents/cognitive-reasoner.json] [--port 0]`
 * prints `Bare AI SDK server listening on <url>` and serves `POST /api/chat/<agent id>`.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { serve } from '@hono/node-server';
import { convertToModelMessages, isStepCount, streamText, type UIMessage } from 'ai';
import { Hono } from 'hono';
import { resolveTools } from '../src/agents/tools/index.js';
import { createOfflineModel } from '../src/ai-sdk/offline-model.js';
import { loadTemplate } from '../src/index.js';

const { values: flags } = parseArgs({
  options: {
    agent: { type: 'string', default: 'examples/agents/cognitive-reasoner.json' },
    port: { type: 'string', default: '0' },
    host: { type: 'string', default: '127.0.0.1' },
  },
});

const template = await loadTemplate(flags.agent);
const { tools } = resolveTools(template.tools);
// The instructions Baton's agent gives the model (createAgent): personality, then the guide.
const personality = Array.isArray(template.personality) ? template.personality.join('\n') : template.personality;
const description = template.orchestration?.description;
const guide = Array.isArray(description) ? description.join('\n') : description;
const instructions = [personality, guide].filter(Boolean).join('\n\n') || undefined;
const maxSteps = template.options?.maxSteps ?? 10;
const model = createOfflineModel();

/** The template's modes as a user would hand-code them: a regex, a sequence, the allowed tools. */
const modes = (template.orchestration?.steps ?? []).flatMap((step) => {
  const condition = step.conditions?.find((c) => c.type === 'message_regex');
  if (condition?.value === undefined) return [];
  const sequence = (step.sequence ?? []).map((slot) => (typeof slot === 'string' ? slot : slot[0]!));
  return [
    { regex: new RegExp(condition.value, condition.flags ?? 'i'), sequence, allowed: step.availableTools?.allowed },
  ];
});

function latestUserText(messages: readonly UIMessage[]): string {
  const latest = messages.findLast((m) => m.role === 'user');
  return latest?.parts.map((p) => (p.type === 'text' ? p.text : '')).join('\n') ?? '';
}

const app = new Hono().post(`/api/chat/${template.id}`, async (c) => {
  const { messages } = await c.req.json<{ messages: UIMessage[] }>();
  const text = latestUserText(messages);
  const mode = modes.find((m) => m.regex.test(text));
  // The tool the sequence expects after `used` calls this turn; undefined once it is done.
  const offered = (used: number): string[] | undefined => {
    if (mode === undefined) return undefined;
    const next = mode.sequence[used];
    return next !== undefined ? [next] : mode.allowed;
  };
  let used = 0;
  const result = streamText({
    model,
    tools,
    messages: await convertToModelMessages(messages, { tools }),
    stopWhen: isStepCount(maxSteps),
    abortSignal: c.req.raw.signal,
    ...(instructions ? { instructions } : {}),
    prepareStep: ({ steps }) => {
      used = 0;
      for (const step of steps) used += step.toolCalls.length;
      const active = offered(used);
      return active === undefined ? {} : { activeTools: active as (keyof typeof tools)[] };
    },
    toolApproval: ({ toolCall }) => {
      const active = offered(used);
      if (active === undefined || active.includes(toolCall.toolName)) return 'not-applicable';
      return { type: 'denied', reason: `${toolCall.toolName} is not allowed now; use ${active.join(' or ')}` };
    },
  });
  return result.toUIMessageStreamResponse();
});

const server = await new Promise<Server>((resolve) => {
  const listening = serve({ fetch: app.fetch, port: Number(flags.port), hostname: flags.host }, () =>
    resolve(listening as Server),
  );
});
const { port } = server.address() as AddressInfo;
console.log(`Bare AI SDK server listening on http://${flags.host}:${port}`);

const stop = () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
