/**
 * The baseline of `npm run loadtest -- --compare-bare`: the chat server an AI SDK user writes
 * without Baton. Hono on @hono/node-server, `streamText` over the same offline model with the same
 * tools, instructions and step limit as the served agent, answered with `toUIMessageStreamResponse`;
 * no orchestration, no session, no validation beyond the AI SDK's own. A benchmark fixture, never
 * shipped (bench/ is outside the package).
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

const app = new Hono().post(`/api/chat/${template.id}`, async (c) => {
  const { messages } = await c.req.json<{ messages: UIMessage[] }>();
  const result = streamText({
    model,
    tools,
    messages: await convertToModelMessages(messages, { tools }),
    stopWhen: isStepCount(maxSteps),
    abortSignal: c.req.raw.signal,
    ...(instructions ? { instructions } : {}),
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
