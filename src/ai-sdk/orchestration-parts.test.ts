/**
 * `orchestrationParts()` in an app's own route: the parts it adds are the ones `baton serve`
 * streams, in the same places, whatever the pace of the reader, and a wiring mistake or a
 * failed turn is said in the stream.
 */
import {
  convertToModelMessages,
  createUIMessageStreamResponse,
  isStepCount,
  readUIMessageStream,
  streamText,
  type UIMessage,
  type UIMessageChunk,
} from 'ai';
import { describe, expect, it } from 'vitest';
import { configErrorOf } from '../../test/helpers/config-errors.js';
import { builtinTools } from '../agents/tools/index.js';
import { StoreUnavailableError } from '../core/errors.js';
import type { AgentTemplate } from '../core/schema.js';
import { createOrchestrationManager, type OrchestrationManager } from '../orchestration/orchestration-manager.js';
import { createApp } from '../server/create-app.js';
import { memoryStore } from '../stores/memory.js';
import type { SessionStore } from '../stores/types.js';
import { loadTemplate } from '../templates/load-template.js';
import { createOfflineModel } from './offline-model.js';
import { orchestrate } from './orchestrate.js';
import { orchestrationParts } from './orchestration-parts.js';
import type { OrchestrationSnapshot, OrchestrationUIMessage } from './orchestration-snapshot.js';

const reasoner: AgentTemplate = await loadTemplate(
  new URL('../../examples/agents/cognitive-reasoner.json', import.meta.url).pathname,
);
const RESEARCH = 'How many electric vehicles will be on the road by 2030?';
const userMessage = (text: string): UIMessage => ({
  id: crypto.randomUUID(),
  role: 'user',
  parts: [{ type: 'text', text }],
});

/** The built-in tools the template names, as an app's route would pass them. */
const tools = Object.fromEntries(
  reasoner.tools.map((name) => [name, builtinTools[name as keyof typeof builtinTools]]),
) as typeof builtinTools;

/** An app's own route: orchestrate() + streamText + the parts helper, answering one chat request. */
async function ownRoute(
  manager: OrchestrationManager,
  body: { id: string; messages: UIMessage[] },
  options: { wireOnStep?: boolean } = {},
): Promise<Response> {
  const parts = orchestrationParts({ manager, config: reasoner });
  const orchestration = orchestrate({
    manager,
    config: reasoner,
    sessionId: body.id,
    tools,
    onError: () => undefined,
    ...(options.wireOnStep === false ? {} : { onStep: parts.onStep }),
  });
  const result = streamText({
    model: createOfflineModel(),
    messages: await convertToModelMessages(body.messages),
    stopWhen: isStepCount(10),
    ...orchestration,
  });
  return createUIMessageStreamResponse({ stream: parts.stream(result.toUIMessageStream(), orchestration) });
}

/** The chunks of a UI message stream response, read at the given pace. */
async function chunksOf(response: Response, pauseMs = 0): Promise<UIMessageChunk[]> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = '';
  for (;;) {
    if (pauseMs) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    const { value, done } = await reader.read();
    if (done) break;
    text += value;
  }
  return text
    .split('\n')
    .filter((line) => line.startsWith('data: {'))
    .map((line) => JSON.parse(line.slice('data: '.length)) as UIMessageChunk);
}

const snapshotsOf = (chunks: UIMessageChunk[]) =>
  chunks
    .filter((chunk) => chunk.type === 'data-orchestration')
    .map((chunk) => (chunk as unknown as { id: string; data: OrchestrationSnapshot }).data);

/** What two turns' snapshots must agree on (the session ids and token counts differ). */
const comparable = ({ sessionId: _s, tokenUsage: _t, ...rest }: OrchestrationSnapshot) => rest;

/** The chunk types, with Baton's parts marked by their step. */
const layout = (chunks: UIMessageChunk[]) =>
  chunks
    .filter((chunk) => ['data-orchestration', 'start-step', 'finish-step', 'finish', 'error'].includes(chunk.type))
    .map((chunk) =>
      chunk.type === 'data-orchestration'
        ? `orchestration:${(chunk as unknown as { data: OrchestrationSnapshot }).data.stepNumber ?? 'final'}`
        : chunk.type,
    );

describe('orchestrationParts', () => {
  it("adds the parts baton serve streams, where it streams them: each step's before its start-step, the final one before finish", async () => {
    const manager = createOrchestrationManager({ store: memoryStore() });
    const own = await chunksOf(await ownRoute(manager, { id: 'own-1', messages: [userMessage(RESEARCH)] }));

    const app = createApp({ agents: [reasoner], model: 'offline', webRoot: false });
    const served = await chunksOf(
      await app.request('/api/chat/cognitive-reasoner', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ id: 'served-1', messages: [userMessage(RESEARCH)] }),
      }),
    );
    await app.close();

    expect(layout(own)).toEqual(layout(served));
    expect(layout(own)).toEqual([
      'orchestration:0',
      'start-step',
      'finish-step',
      'orchestration:1',
      'start-step',
      'finish-step',
      'orchestration:2',
      'start-step',
      'finish-step',
      'orchestration:3',
      'start-step',
      'finish-step',
      'orchestration:final',
      'finish',
    ]);
    expect(snapshotsOf(own).map(comparable)).toEqual(snapshotsOf(served).map(comparable));
    const final = snapshotsOf(own).at(-1)!;
    expect(final).toMatchObject({ sessionId: 'own-1', agentId: 'cognitive-reasoner', final: true });
    expect(final.recentlyUsedTools).toEqual(['search', 'think', 'reflect']);
    // The final part shows what the turn stored.
    expect((await manager.getState('own-1'))?.recentlyUsedTools).toEqual(final.recentlyUsedTools);
    await manager.close();
  });

  it('keeps each step with its own snapshot when the reader is slower than the model loop', async () => {
    const manager = createOrchestrationManager({ store: memoryStore() });
    const chunks = await chunksOf(await ownRoute(manager, { id: 'slow-1', messages: [userMessage(RESEARCH)] }), 5);
    const seen = layout(chunks);
    // Every start-step comes right after the snapshot of its own step.
    const starts = seen.flatMap((entry, i) => (entry === 'start-step' ? [seen[i - 1]] : []));
    expect(starts).toEqual(starts.map((_, i) => `orchestration:${i}`));
    await manager.close();
  });

  it("gives useChat one data-orchestration part per message, typed, holding the turn's final state", async () => {
    const manager = createOrchestrationManager({ store: memoryStore() });
    const response = await ownRoute(manager, { id: 'typed-1', messages: [userMessage(RESEARCH)] });
    const stream = response.body!.pipeThrough(new TextDecoderStream()).pipeThrough(
      new TransformStream<string, UIMessageChunk>({
        transform(text, controller) {
          for (const line of text.split('\n'))
            if (line.startsWith('data: {')) controller.enqueue(JSON.parse(line.slice(6)) as UIMessageChunk);
        },
      }),
    );
    let last: OrchestrationUIMessage | undefined;
    for await (const message of readUIMessageStream<OrchestrationUIMessage>({ stream })) last = message;
    const parts = last!.parts.filter((part) => part.type === 'data-orchestration');
    expect(parts).toHaveLength(1);
    // Typed: data is an OrchestrationSnapshot without a cast.
    const data: OrchestrationSnapshot = parts[0]!.data;
    expect(data.final).toBe(true);
    expect(data.sequence?.completed).toBe(true);
    await manager.close();
  });

  it('says in the stream when its onStep was not passed to orchestrate()', async () => {
    const manager = createOrchestrationManager({ store: memoryStore() });
    const chunks = await chunksOf(
      await ownRoute(manager, { id: 'unwired', messages: [userMessage(RESEARCH)] }, { wireOnStep: false }),
    );
    const error = chunks.find((chunk) => chunk.type === 'error') as { errorText: string } | undefined;
    expect(error?.errorText).toContain('orchestrate({ onStep })');
    expect(chunks.at(-1)?.type).toBe('finish');
    await manager.close();
  });

  it('ends a turn whose writes failed with an error part saying why, and still finishes the message', async () => {
    const { updateSync: _sync, ...inner } = memoryStore(); // every write through update()
    let failing = false;
    const store: SessionStore = {
      ...inner,
      name: 'flaky',
      update: (sessionId, fn) => {
        if (failing) return Promise.reject(new StoreUnavailableError('flaky', 'the test store is down'));
        return inner.update(sessionId, fn);
      },
    };
    const manager = createOrchestrationManager({ store });
    const parts = orchestrationParts({ manager, config: reasoner });
    const orchestration = orchestrate({
      manager,
      config: reasoner,
      sessionId: 'flaky-1',
      tools,
      onStep: (info) => {
        parts.onStep(info);
        // The first step's writes succeed; everything after fails.
        failing = info.stepNumber >= 1;
      },
      onError: () => undefined,
    });
    const result = streamText({
      model: createOfflineModel(),
      messages: await convertToModelMessages([userMessage(RESEARCH)]),
      stopWhen: isStepCount(10),
      ...orchestration,
    });
    const chunks = await chunksOf(
      createUIMessageStreamResponse({ stream: parts.stream(result.toUIMessageStream(), orchestration) }),
    );
    const errors = chunks.filter((chunk) => chunk.type === 'error') as { errorText: string }[];
    expect(errors.map((error) => error.errorText).join('\n')).toContain('the test store is down');
    expect(snapshotsOf(chunks).some((snapshot) => snapshot.final)).toBe(false);
    expect(chunks.at(-1)?.type).toBe('finish');
    await manager.close();
  });

  it('refuses misspelt, missing or ill-typed options when it is created, as orchestrate() does', () => {
    const manager = createOrchestrationManager();
    // `confg` used to pass, then fail as a TypeError reading the template's id.
    const misspelt = configErrorOf(() => orchestrationParts({ manager, confg: reasoner } as never));
    expect(misspelt.message).toContain('Invalid orchestrationParts() options');
    expect(misspelt.issues).toEqual([
      expect.objectContaining({ path: 'config', message: 'expected an agent template or its orchestration block' }),
      expect.objectContaining({ path: 'confg', message: 'unknown option "confg"', hint: 'did you mean "config"?' }),
    ]);
    // The same words as orchestrate() for the same mistake.
    const orchestrated = configErrorOf(() => orchestrate({ manager, confg: reasoner, sessionId: 's', tools } as never));
    expect(orchestrated.issues.find((issue) => issue.path === 'config')?.message).toBe(misspelt.issues[0]?.message);

    const typed = configErrorOf(() =>
      orchestrationParts({ manager: {}, config: reasoner, agentId: 7, toolAnnotations: {} } as never),
    );
    expect(typed.issues.map((issue) => issue.path)).toEqual(['manager', 'agentId', 'toolAnnotations']);
    expect(typed.message).toContain('expected an OrchestrationManager (createOrchestrationManager())');
    expect(typed.message).toContain('expected a Map from tool name to MCP annotations');

    // A bad template is reported under `config`, with the other problems.
    const bad = configErrorOf(() =>
      orchestrationParts({ manager, config: { ...reasoner, orchestration: { stepz: [] } } } as never),
    );
    expect(bad.issues.every((issue) => issue.path.startsWith('config'))).toBe(true);
    expect(bad.issues.length).toBeGreaterThan(0);
  });

  it('needs an agent id for an orchestration block, at creation', () => {
    const manager = createOrchestrationManager();
    expect(() => orchestrationParts({ manager, config: reasoner.orchestration! })).toThrow(/agentId/);
    expect(() => orchestrationParts({ manager, config: reasoner.orchestration!, agentId: 'reasoner' })).not.toThrow();
  });
});
