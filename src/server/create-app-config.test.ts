/**
 * A misconfiguration fails when the app (or agent, or orchestration) is created, with one error
 * that lists every problem and where it is; a fault at run time is in the log even when the app
 * was given no logger.
 */
import { isStepCount, streamText, tool } from 'ai';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { configErrorOf } from '../../test/helpers/config-errors.js';
import { createAgent } from '../agents/create-agent.js';
import { builtinTools } from '../agents/tools/index.js';
import { createOfflineModel } from '../ai-sdk/offline-model.js';
import { orchestrate } from '../ai-sdk/orchestrate.js';
import { createOrchestratedAgent } from '../ai-sdk/orchestrated-agent.js';
import { UnsupportedRuntimeError } from '../core/errors.js';
import type { AgentTemplate } from '../core/schema.js';
import type { TemplateIssue } from '../core/template-issues.js';
import { parseTemplate } from '../core/validate-template.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import { memoryStore } from '../stores/memory.js';
import type { SessionStore } from '../stores/types.js';
import { type BatonApp, createApp } from './create-app.js';

const good = parseTemplate({
  id: 'research',
  tools: ['search', 'think'],
  orchestration: { steps: [{ name: 'Research', isDefault: true, sequence: ['search', 'think'] }] },
});
/** A template as an app might build it in code, with a typo `parseTemplate` would have caught. */
const withTypo = {
  ...good,
  id: 'typo',
  orchestration: { ...good.orchestration, rulez: [] },
} as unknown as AgentTemplate;

const paths = (issues: readonly TemplateIssue[]) => issues.map((issue) => issue.path);

const apps: BatonApp[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const app of apps.splice(0)) await app.close();
});

describe('createApp checks what it is given when it is created', () => {
  it('accepts every option as an app passes them (process.env, the built-in tools, a pino logger)', () => {
    const app = createApp({
      agents: [good, { template: { ...good, id: 'other' }, warnings: [], model: 'offline' }],
      model: 'offline',
      env: process.env,
      tools: builtinTools,
      logger: pino({ level: 'silent' }),
      store: 'memory:',
      eventLog: 10,
      apiKey: 'secret',
      corsOrigins: ['http://localhost:3000'],
      bodyLimit: 1000,
      maxMessages: 10,
      maxMessageChars: 100,
      maxTurns: 4,
      minTurns: 2,
      maxQueuedTurns: 0,
      webRoot: false,
    });
    apps.push(app);
    expect(app.manager).toBeDefined();
  });

  it('refuses a template with an unknown key at creation, naming where it is', () => {
    const error = configErrorOf(() => createApp({ agents: [good, withTypo], model: 'offline', webRoot: false }));
    expect(paths(error.issues)).toEqual(['agents[1].orchestration.rulez']);
    expect(error.message).toMatch(/^Invalid createApp options \(1 error\):/);
    expect(error.message).toContain('agents[1].orchestration.rulez');
  });

  it('lists every problem at once: options, templates, served agents, ids, store', () => {
    const error = configErrorOf(() =>
      createApp({
        agents: [withTypo, { template: { ...withTypo, id: 'typo-2' }, modle: 'offline' } as never, good, good],
        model: 'offline',
        store: 'mongodb://localhost/baton',
        maxTurns: 0,
        webroot: false,
      } as never),
    );
    expect(paths(error.issues).sort()).toEqual(
      [
        'agents[0].orchestration.rulez',
        'agents[1].modle',
        'agents[1].template.orchestration.rulez',
        'agents[3].id',
        'maxTurns',
        'store',
        'webroot',
      ].sort(),
    );
    const webroot = error.issues.find((issue) => issue.path === 'webroot')!;
    expect(webroot.hint).toBe('did you mean "webRoot"?');
    expect(error.issues.find((issue) => issue.path === 'agents[3].id')!.message).toContain(
      'two agents have the id "research"',
    );
  });

  it('refuses stateless keys too short to sign with, at creation rather than at the end of the first turn', () => {
    const error = configErrorOf(() =>
      createApp({ agents: [good], model: 'offline', webRoot: false, stateless: { keys: ['short'] } }),
    );
    expect(paths(error.issues)).toEqual(['stateless.keys[0]']);
    expect(error.issues[0]!.message).toContain('use at least 32 random bytes');
  });

  it('says at creation that this Node.js cannot run the SQLite store it names', () => {
    const real = process.getBuiltinModule.bind(process);
    // A Node.js without node:sqlite (older than 22.5, or 22.5 to 22.12 without the flag).
    vi.spyOn(process, 'getBuiltinModule').mockImplementation(((id: string) =>
      id === 'node:sqlite' ? undefined : real(id)) as typeof process.getBuiltinModule);
    expect(() =>
      createApp({ agents: [good], model: 'offline', webRoot: false, store: 'sqlite:/tmp/never-opened.db' }),
    ).toThrow(UnsupportedRuntimeError);
    expect(() =>
      createApp({ agents: [good], model: 'offline', webRoot: false, store: 'sqlite:/tmp/never-opened.db' }),
    ).toThrow(/node:sqlite.*Node\.js 22\.13 or newer/);
  });
});

describe('createAgent, orchestrate() and OrchestratedAgent check what they are given when created', () => {
  const search = tool({ description: 'search', inputSchema: z.object({}), execute: async () => 'found' });

  it('createAgent refuses a template with an unknown key', () => {
    const error = configErrorOf(() => createAgent(withTypo, { model: 'offline' }));
    expect(paths(error.issues)).toEqual(['orchestration.rulez']);
  });

  it('createAgent refuses options it does not know, with a hint', () => {
    const error = configErrorOf(() => createAgent(good, { model: 'offline', tool: {} } as never));
    expect(paths(error.issues)).toEqual(['options.tool']);
    expect(error.issues[0]!.hint).toBe('did you mean "tools"?');
  });

  it('orchestrate() lists every problem of its options and config in one error', () => {
    const manager = createOrchestrationManager();
    const error = configErrorOf(() =>
      orchestrate({ manager, config: withTypo, sessionId: '', tools: undefined, stopWhen: 3 } as never),
    );
    expect(paths(error.issues).sort()).toEqual(['config.orchestration.rulez', 'sessionId', 'stopWhen', 'tools'].sort());
  });

  it('orchestrate() accepts what the README shows, and a turn runs', async () => {
    const manager = createOrchestrationManager();
    const orchestration = orchestrate({ manager, config: good, sessionId: 's1', tools: { search, think: search } });
    const result = streamText({
      model: createOfflineModel(),
      prompt: 'research solar',
      stopWhen: isStepCount(4),
      ...orchestration,
    });
    await result.consumeStream();
    await orchestration.settled();
    expect((await manager.getState('s1'))?.recentlyUsedTools.length).toBeGreaterThan(0);
  });

  it('orchestrate() checks every turn: what passed on one turn does not let a bad option through on the next', () => {
    const manager = createOrchestrationManager();
    const tools = { search };
    const onError = () => undefined;
    const ok = { manager, config: good, tools, onError };
    // The same manager, config, tools and callback pass turn after turn (checked once per object) ...
    for (let turn = 0; turn < 3; turn++) orchestrate({ ...ok, sessionId: `s${turn}`, messages: [] });
    // ... while whatever is new or wrong on a later turn is still refused, with its path.
    const refused = (options: Record<string, unknown>) =>
      paths(configErrorOf(() => orchestrate(options as never)).issues);
    expect(refused({ ...ok, sessionId: '' })).toEqual(['sessionId']);
    expect(refused({ ...ok, sessionId: 's', messages: ['hello'] })).toEqual(['messages[0]']);
    expect(refused({ ...ok, sessionId: 's', stopWhen: 3 })).toEqual(['stopWhen']);
    expect(refused({ ...ok, sessionId: 's', activeTools: [1] })).toEqual(['activeTools[0]']);
    // An object that passed as one option is not trusted as another: a function is not a tool set.
    expect(refused({ ...ok, sessionId: 's', tools: onError })).toEqual(['tools']);
    expect(refused({ ...ok, sessionId: 's', onStep: tools })).toEqual(['onStep']);
    expect(refused({ manager, config: good, sessionId: 's' })).toEqual(['tools']);
    // The config is checked against these tools on every turn, not only the first time it passed.
    expect(refused({ ...ok, sessionId: 's', config: withTypo })).toEqual(['config.orchestration.rulez']);
  });

  it('OrchestratedAgent refuses a config with an unknown key when it is built', () => {
    const manager = createOrchestrationManager();
    const error = configErrorOf(() =>
      createOrchestratedAgent({ model: createOfflineModel(), tools: { search }, manager, config: withTypo }),
    );
    expect(paths(error.issues)).toEqual(['config.orchestration.rulez']);
  });
});

describe('errors you can see', () => {
  it('logs a server fault to stderr by default, with its cause, while the client gets the generic 500', async () => {
    const broken: SessionStore = {
      ...memoryStore(),
      name: 'broken',
      get: () => Promise.reject(new TypeError('the disk caught fire')),
    };
    const written: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    vi.spyOn(process.stderr, 'write').mockImplementation(((chunk: string | Uint8Array, ...rest: never[]) => {
      written.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
      return write(chunk, ...rest);
    }) as typeof process.stderr.write);
    const app = createApp({ agents: [good], model: 'offline', webRoot: false, store: broken });
    apps.push(app);
    const response = await app.request('/api/sessions/anything');
    expect(response.status).toBe(500);
    expect(await response.json()).toMatchObject({ error: { code: 'internal-error' } });
    const logged = written.join('');
    expect(logged).toContain('the disk caught fire');
    expect(logged).toContain('"level":50');
  });
});
