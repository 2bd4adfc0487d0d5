/**
 * `createApp()`: the Baton HTTP API as a Hono app. It never listens (the CLI does), so it runs
 * wherever Hono runs and its routes are tested with `app.request()`.
 *
 * A session belongs to the agent that created it (its state carries `agentId`). State lives in
 * the manager's store, shared by every process that uses the same store, or, in stateless mode,
 * travels with the client as a signed token.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  createUIMessageStream,
  createUIMessageStreamResponse,
  safeValidateUIMessages,
  type ToolSet,
  toUIMessageStream,
  type UIMessage,
  type UIMessageChunk,
} from 'ai';
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { bearerAuth } from 'hono/bearer-auth';
import { bodyLimit } from 'hono/body-limit';
import { cors } from 'hono/cors';
import { HTTPException } from 'hono/http-exception';
import { type Logger, pino } from 'pino';
import { type Agent, type CreateAgentOptions, createAgent } from '../agents/create-agent.js';
import { type Explanation, explainTools, handleMessage } from '../core/engine.js';
import type { AgentTemplate } from '../core/schema.js';
import { createState, type OrchestrationState } from '../core/state.js';
import { templateGraph, toMermaid } from '../core/template-graph.js';
import type { TemplateIssue } from '../core/template-issues.js';
import { createOrchestrationManager, type OrchestrationManager } from '../orchestration/orchestration-manager.js';
import { memoryStore } from '../stores/memory.js';
import type { StoreSpec } from '../stores/resolve-store.js';
import { decodeStateToken, encodeStateToken, StateTokenError } from '../stores/state-token.js';
import type {
  AgentDetailResponse,
  AgentSummary,
  BatonUIMessage,
  HealthResponse,
  OrchestrationSnapshot,
  StepSummary,
} from './api-types.js';
import { errorResponse, HttpError } from './http-errors.js';
import { parseChatBody, parseJsonBody, parseSessionId } from './request-schemas.js';
import { restingSnapshot, sessionResponse, stepSnapshot } from './snapshots.js';

/** An agent to serve: its template, and optionally the warnings it loaded with and its own model. */
export interface ServedAgent {
  template: AgentTemplate;
  /** Validation warnings, shown by `GET /api/agents/:agentId`. */
  warnings?: readonly TemplateIssue[];
  /** This agent's model; default {@link CreateAppOptions.model}, else the template's. */
  model?: CreateAgentOptions['model'];
}

/** Options of {@link createApp}. */
export interface CreateAppOptions {
  /** The agents to serve; their ids must be unique. */
  agents: readonly (AgentTemplate | ServedAgent)[];
  /** The manager whose store keeps sessions (the caller closes it). */
  manager?: OrchestrationManager;
  /** Where sessions live when no manager is given; the app owns it (`app.close()`). Default `memory:`. */
  store?: StoreSpec;
  /**
   * Keep no state on the server: it travels in the `x-orchestration-state` header as a token
   * signed with the first key (the others still verify, for rotation).
   */
  stateless?: { keys: readonly string[]; ttl?: number };
  /** The model of agents that do not name their own (a spec such as `offline`, or a model). */
  model?: CreateAgentOptions['model'];
  /** Tool implementations by name, over the built-in ones. */
  tools?: ToolSet;
  /** Environment for model API keys (default `process.env`). */
  env?: Readonly<Record<string, string | undefined>>;
  /** When set, every `/api` request needs `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Origins allowed to call `/api` from a browser (default: same origin only). */
  corsOrigins?: readonly string[];
  /** Largest request body in bytes (default 1 MiB). */
  bodyLimit?: number;
  /** Most messages in one chat request (default 1,000). */
  maxMessages?: number;
  /** Request and error log (default: silent). */
  logger?: Logger;
  /**
   * Folder of the built inspector to serve at `/`; `false` for none. Default: the package's
   * `dist/web`, when it was built.
   */
  webRoot?: string | false;
}

/** The Hono app, plus what it owns. */
export type BatonApp = Hono & {
  /** The manager that keeps this app's sessions (absent in stateless mode). */
  readonly manager: OrchestrationManager | undefined;
  /** Closes the store if the app created it. */
  close(): Promise<void>;
};

/** Default largest request body: 1 MiB. */
export const DEFAULT_BODY_LIMIT = 1024 * 1024;
/** Default most messages per chat request. */
export const DEFAULT_MAX_MESSAGES = 1000;

const SESSION_HEADER = 'x-session-id';
const STATE_HEADER = 'x-orchestration-state';
const ORCHESTRATION_PART_ID = 'orchestration';
const DEFAULT_WEB_ROOT = fileURLToPath(new URL('../../dist/web/', import.meta.url));

interface Served {
  agent: Agent;
  summary: AgentSummary;
  detail: AgentDetailResponse;
}

/** Builds the app; see the module comment and `docs/http-api.md`. */
export function createApp(options: CreateAppOptions): BatonApp {
  const logger = options.logger ?? pino({ level: 'silent' });
  const stateless = options.stateless;
  if (stateless && stateless.keys.length === 0) {
    throw new HttpError(500, 'no-state-keys', 'Stateless mode needs at least one signing key (BATON_STATE_KEYS).');
  }
  const ownsManager = options.manager === undefined && !stateless;
  const manager = stateless
    ? undefined
    : (options.manager ?? createOrchestrationManager({ store: options.store ?? 'memory:' }));
  // Agents are built against a shared manager; stateless turns pass their own per request.
  const agentManager = manager ?? createOrchestrationManager({ store: memoryStore() });
  const agents = buildAgents(options, agentManager);
  const maxMessages = options.maxMessages ?? DEFAULT_MAX_MESSAGES;

  const app = new Hono();

  app.onError((error, c) => {
    // Hono's own middleware (bearer auth) throws these with a finished response.
    if (error instanceof HTTPException) return error.getResponse();
    const response = errorResponse(error);
    if (response.serverFault) logger.error({ err: error, path: c.req.path }, 'request failed');
    return c.json(response.body, response.status, response.headers);
  });
  app.notFound((c) =>
    c.json({ error: { code: 'not-found', message: `No route for ${c.req.method} ${c.req.path}.` } }, 404),
  );

  app.use(requestLog(logger));
  if (options.corsOrigins?.length) {
    app.use(
      '/api/*',
      cors({
        origin: [...options.corsOrigins],
        allowHeaders: ['content-type', 'authorization', SESSION_HEADER, STATE_HEADER],
        exposeHeaders: [SESSION_HEADER, STATE_HEADER],
      }),
    );
  }
  if (options.apiKey) {
    const message = (text: string) => ({
      error: { code: 'unauthorized', message: text, path: 'header.authorization' },
    });
    app.use(
      '/api/*',
      bearerAuth({
        token: options.apiKey,
        noAuthenticationHeader: { message: message('Send `Authorization: Bearer <key>` (BATON_API_KEY).') },
        invalidAuthenticationHeader: { message: message('The Authorization header is not `Bearer <key>`.') },
        invalidToken: { message: message('The API key is wrong.') },
      }),
    );
  }
  app.use(
    '/api/*',
    bodyLimit({
      maxSize: options.bodyLimit ?? DEFAULT_BODY_LIMIT,
      onError: (c) =>
        c.json(
          {
            error: {
              code: 'body-too-large',
              message: `The request body is larger than ${options.bodyLimit ?? DEFAULT_BODY_LIMIT} bytes.`,
              path: 'body',
            },
          },
          413,
        ),
    }),
  );

  const agentOf = (c: Context): Served => {
    const id = c.req.param('agentId') ?? '';
    const served = agents.get(id);
    if (!served) {
      const known = [...agents.keys()].join(', ') || 'none';
      throw new HttpError(404, 'unknown-agent', `No agent "${id}"; this server has: ${known}.`, {
        path: 'path.agentId',
      });
    }
    return served;
  };

  app.get('/healthz', async (c) => {
    const body: HealthResponse = { ok: true, store: 'stateless', agents: agents.size };
    if (manager) {
      try {
        const store = await manager.getStateManager().store();
        body.store = store.name;
        await store.get('baton-healthz');
      } catch (error) {
        const failure = errorResponse(error);
        return c.json({ ...body, ok: false, error: failure.body.error.message }, 503, failure.headers);
      }
    }
    return c.json(body);
  });

  app.get('/api/agents', (c) => c.json({ agents: [...agents.values()].map((served) => served.summary) }));
  app.get('/api/agents/:agentId', (c) => c.json(agentOf(c).detail));

  app.post('/api/chat/:agentId', async (c) => {
    const served = agentOf(c);
    const body = parseChatBody(parseJsonBody(await c.req.text()), maxMessages);
    const validated = await safeValidateUIMessages({ messages: body.messages });
    if (!validated.success) {
      throw new HttpError(400, 'invalid-messages', `body.messages: ${validated.error.message}`, {
        path: 'body.messages',
        cause: validated.error,
      });
    }
    const messages = validated.data as UIMessage[];
    const agentId = served.agent.id;

    // Where this turn's state lives: the shared store, or a throwaway one seeded from the token.
    const token = c.req.header(STATE_HEADER);
    let turnManager = manager;
    let sessionId: string;
    if (stateless) {
      const carried = token === undefined ? undefined : decodeState(token, stateless.keys);
      if (carried && body.sessionId !== undefined && body.sessionId !== carried.sessionId) {
        throw new HttpError(
          400,
          'session-mismatch',
          `body.sessionId is "${body.sessionId}" but the state token is for "${carried.sessionId}".`,
          { path: 'body.sessionId' },
        );
      }
      sessionId = carried?.sessionId ?? body.sessionId ?? crypto.randomUUID();
      turnManager = createOrchestrationManager({ store: memoryStore() });
      if (carried) await turnManager.getStateManager().modify(sessionId, () => carried);
    } else {
      sessionId = body.sessionId ?? crypto.randomUUID();
    }
    const claimed = await claimSession(turnManager!, sessionId, agentId);
    const headers: Record<string, string> = { [SESSION_HEADER]: sessionId };
    if (stateless) headers[STATE_HEADER] = signState(claimed, stateless);

    // The stream exists only after the turn has started, so step snapshots wait in a queue.
    let writer: { write(part: UIMessageChunk): void } | undefined;
    const queued: UIMessageChunk[] = [];
    const send = (part: UIMessageChunk): void => {
      if (writer) writer.write(part);
      else queued.push(part);
    };
    const orchestrationPart = (data: OrchestrationSnapshot): UIMessageChunk =>
      ({ type: 'data-orchestration', id: ORCHESTRATION_PART_ID, data }) as UIMessageChunk;

    const result = await served.agent.handleMessage({
      messages,
      sessionId,
      manager: turnManager!,
      abortSignal: c.req.raw.signal,
      onStep: (info) => send(orchestrationPart(stepSnapshot(agentId, info))),
      stream: {
        onCallbackError: (error: unknown, callback: string) =>
          logger.error({ err: error, sessionId, agentId, callback }, 'orchestration callback failed'),
      },
    });

    const forwardTurn = async (writer: { write(part: UIMessageChunk): void }) => {
      // Forwarded one chunk at a time so the final snapshot comes after the last text.
      const reader = toUIMessageStream({ stream: result.stream, sendStart: false, sendFinish: false }).getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        writer.write(value as UIMessageChunk);
      }
      await result.finalOrchestrationState;
      // One read of the final state serves the snapshot and, when stateless, the token. The
      // session exists (claimed above) unless it was deleted during the turn.
      const state = (await turnManager!.getStateManager().getState(sessionId)) ?? createState(sessionId, Date.now());
      const finalSnapshot = restingSnapshot(agentId, state, explainState(turnManager!, served, state), true);
      if (stateless) finalSnapshot.stateToken = signState(state, stateless);
      writer.write(orchestrationPart(finalSnapshot));
      writer.write({
        type: 'finish',
        finishReason: await Promise.resolve(result.finishReason).catch(() => 'error' as const),
      });
    };
    const stream = createUIMessageStream<BatonUIMessage>({
      onError: (error) => {
        logger.warn({ err: error, sessionId, agentId }, 'chat stream failed');
        return error instanceof Error ? error.message : String(error);
      },
      execute: async ({ writer: streamWriter }) => {
        streamWriter.write({ type: 'start', messageMetadata: { sessionId, agentId } });
        writer = streamWriter as unknown as { write(part: UIMessageChunk): void };
        for (const part of queued.splice(0)) writer.write(part);
        try {
          await forwardTurn(writer);
        } finally {
          // The throwaway store of a stateless turn goes once the turn is over, however it ended.
          if (stateless) await turnManager!.close();
        }
      },
    });
    return createUIMessageStreamResponse({ stream, headers });
  });

  /** The session named in the path, its owner checked; in stateless mode from the token. */
  const sessionOf = async (
    c: Context,
  ): Promise<{ served: Served; state: OrchestrationState; sessionManager: OrchestrationManager }> => {
    const sessionId = parseSessionId(c.req.param('sessionId') ?? '', 'path.sessionId');
    let state: OrchestrationState | null;
    let sessionManager = manager;
    if (stateless) {
      const token = c.req.header(STATE_HEADER);
      if (token === undefined) {
        throw new HttpError(
          401,
          'missing-state-token',
          `This server is stateless: send the session's state in the ${STATE_HEADER} header.`,
          { path: `header.${STATE_HEADER}` },
        );
      }
      state = decodeState(token, stateless.keys);
      if (state.sessionId !== sessionId) {
        throw new HttpError(
          400,
          'session-mismatch',
          `The state token is for session "${state.sessionId}", not "${sessionId}".`,
          { path: 'path.sessionId' },
        );
      }
      sessionManager = createOrchestrationManager({ store: memoryStore() });
      await sessionManager.getStateManager().modify(sessionId, () => state!);
    } else {
      state = await manager!.getStateManager().getState(sessionId);
    }
    if (state === null) {
      throw new HttpError(404, 'session-not-found', `No session "${sessionId}" (it may have expired).`, {
        path: 'path.sessionId',
      });
    }
    const served = state.agentId === undefined ? undefined : agents.get(state.agentId);
    if (!served) {
      throw new HttpError(
        409,
        'session-without-agent',
        state.agentId === undefined
          ? `Session "${sessionId}" was not created by an agent of this server.`
          : `Session "${sessionId}" belongs to agent "${state.agentId}", which this server does not serve.`,
        { path: 'path.sessionId' },
      );
    }
    return { served, state, sessionManager: sessionManager! };
  };

  app.get('/api/sessions/:sessionId', async (c) => {
    const { served, state, sessionManager } = await sessionOf(c);
    const explanation = explainState(sessionManager, served, state);
    if (stateless) await sessionManager.close();
    return c.json(sessionResponse(served.agent.id, state, explanation));
  });

  app.post('/api/sessions/:sessionId/reset', async (c) => {
    const { served, state, sessionManager } = await sessionOf(c);
    const reset = (await sessionManager.getStateManager().resetState(state.sessionId)) ?? state;
    const explanation = explainState(sessionManager, served, reset);
    if (stateless) {
      await sessionManager.close();
      c.header(STATE_HEADER, signState(reset, stateless));
    }
    return c.json(sessionResponse(served.agent.id, reset, explanation));
  });

  app.delete('/api/sessions/:sessionId', async (c) => {
    const { state, sessionManager } = await sessionOf(c);
    // Stateless: nothing is kept here; the client forgets its token.
    if (!stateless) await sessionManager.removeSession(state.sessionId);
    else await sessionManager.close();
    return c.body(null, 204);
  });

  for (const path of ['/api/agents', '/api/agents/:agentId', '/api/chat/:agentId', '/api/sessions/:sessionId']) {
    app.all(path, (c) => {
      throw new HttpError(405, 'method-not-allowed', `${c.req.method} is not supported on ${c.req.path}.`, {
        headers: { allow: allowedMethods(path) },
      });
    });
  }

  const webRoot = options.webRoot === undefined ? DEFAULT_WEB_ROOT : options.webRoot;
  if (webRoot !== false && existsSync(webRoot)) app.use('*', inspector(webRoot));

  return Object.assign(app, {
    manager,
    close: async () => {
      if (ownsManager) await manager?.close();
    },
  });
}

function allowedMethods(path: string): string {
  if (path === '/api/chat/:agentId') return 'POST';
  if (path === '/api/sessions/:sessionId') return 'GET, DELETE';
  return 'GET';
}

function buildAgents(options: CreateAppOptions, manager: OrchestrationManager): Map<string, Served> {
  const agents = new Map<string, Served>();
  for (const entry of options.agents) {
    const served: ServedAgent = isServedAgent(entry) ? entry : { template: entry };
    const template = served.template;
    if (agents.has(template.id)) {
      throw new HttpError(500, 'duplicate-agent', `Two agents have the id "${template.id}".`);
    }
    const model = served.model ?? options.model;
    const agent = createAgent(template, {
      manager,
      ...(model !== undefined ? { model } : {}),
      ...(options.tools ? { tools: options.tools } : {}),
      ...(options.env ? { env: options.env } : {}),
    });
    const steps = template.orchestration?.steps ?? [];
    const defaultStep = template.orchestration?.defaultStep ?? steps.find((step) => step.isDefault)?.name ?? null;
    const summary: AgentSummary = {
      id: template.id,
      name: template.name ?? template.id,
      description: template.description ?? '',
      tools: [...template.tools],
      steps: steps.map((step) => step.name),
      defaultStep,
    };
    const stepDetails: StepSummary[] = steps.map((step) => ({
      name: step.name,
      description: step.description ?? null,
      isDefault: step.isDefault === true || step.name === defaultStep,
      conditions: (step.conditions ?? []).map((condition) => ({ ...condition })),
      availableTools: step.availableTools
        ? { allowed: [...(step.availableTools.allowed ?? [])], denied: [...(step.availableTools.denied ?? [])] }
        : null,
      sequence: (step.sequence ?? []).map((position) => (Array.isArray(position) ? [...position] : [position])),
      resetSequenceOn: [...(step.resetSequenceOn ?? [])],
    }));
    agents.set(template.id, {
      agent,
      summary,
      detail: {
        ...summary,
        template: structuredClone(template) as Record<string, unknown>,
        issues: [...(served.warnings ?? [])],
        stepDetails,
        graph: templateGraph(template),
        mermaid: toMermaid(template),
      },
    });
  }
  return agents;
}

function isServedAgent(entry: AgentTemplate | ServedAgent): entry is ServedAgent {
  // A template always has a string id; a ServedAgent wraps one under `template`.
  return typeof (entry as { id?: unknown }).id !== 'string' && typeof entry.template === 'object';
}

function toolNames(served: Served): string[] {
  return Object.keys(served.agent.tools);
}

/**
 * Every tool allowed or why not, from a state already read: what `manager.explain` answers,
 * including its step selection, without a second store read.
 */
function explainState(manager: OrchestrationManager, served: Served, state: OrchestrationState): Explanation {
  const plan = manager.plan(served.agent.template);
  return explainTools(plan, handleMessage(plan, state, undefined).state, toolNames(served));
}

/**
 * Stamps the session with its agent on first use, atomically, and refuses a session that
 * another agent owns: its steps and sequence position mean nothing to a different template.
 */
async function claimSession(
  manager: OrchestrationManager,
  sessionId: string,
  agentId: string,
): Promise<OrchestrationState> {
  const state = await manager
    .getStateManager()
    .modify(sessionId, (current) => (current.agentId === undefined ? { ...current, agentId } : current));
  if (state.agentId !== agentId) {
    throw new HttpError(
      409,
      'session-of-another-agent',
      `Session "${sessionId}" belongs to agent "${state.agentId}"; start a new session for "${agentId}".`,
      { path: 'body.sessionId' },
    );
  }
  return state;
}

function decodeState(token: string, keys: readonly string[]): OrchestrationState {
  try {
    return decodeStateToken(token, { keys: [...keys] });
  } catch (error) {
    if (error instanceof StateTokenError) throw error;
    throw new HttpError(401, 'invalid-state-token', String(error), { path: `header.${STATE_HEADER}`, cause: error });
  }
}

function signState(state: OrchestrationState, stateless: NonNullable<CreateAppOptions['stateless']>): string {
  return encodeStateToken(state, {
    keys: [...stateless.keys],
    ...(stateless.ttl !== undefined ? { ttl: stateless.ttl } : {}),
  });
}

/** One line per request: method, path, status, time, and the session when there is one. */
function requestLog(logger: Logger): MiddlewareHandler {
  return async (c, next) => {
    const started = performance.now();
    await next();
    const status = c.res.status;
    const entry = {
      method: c.req.method,
      path: c.req.path,
      status,
      ms: Math.round((performance.now() - started) * 10) / 10,
      sessionId: c.res.headers.get(SESSION_HEADER) ?? undefined,
    };
    if (status >= 500) logger.error(entry, 'request');
    else if (status >= 400) logger.warn(entry, 'request');
    else logger.info(entry, 'request');
  };
}

/** The inspector's files, and its `index.html` for any other page path (client-side routes). */
function inspector(root: string): MiddlewareHandler {
  let handler: MiddlewareHandler | undefined;
  return async (c, next) => {
    if (c.req.method !== 'GET' && c.req.method !== 'HEAD') return next();
    if (c.req.path.startsWith('/api/') || c.req.path === '/healthz') return next();
    // Imported on first use: only Node serves files from disk; other runtimes skip the page.
    if (handler === undefined) {
      const { serveStatic } = await import('@hono/node-server/serve-static');
      const files = serveStatic({ root });
      const index = serveStatic({ root, rewriteRequestPath: () => '/index.html' });
      handler = async (context, proceed) => {
        // serveStatic answers by returning a Response; returned from inside a `next` callback it
        // would be dropped (the context never finalized: a 500), so the page is passed on here.
        let page: Response | undefined;
        const response = await files(context, async () => {
          page = (await index(context, proceed)) ?? undefined;
        });
        return response ?? page;
      };
    }
    return handler(c, next);
  };
}
