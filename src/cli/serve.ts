/**
 * `baton serve`: loads every template of a folder, picks each agent's model, opens the store
 * and listens. The HTTP API itself is `createApp()`; this file is only the process around it.
 */

import { readdir, stat } from 'node:fs/promises';
import { type Server, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { join, resolve } from 'node:path';
import type { Writable } from 'node:stream';
import { styleText } from 'node:util';
import { createAdaptorServer, type Http2Bindings, type HttpBindings } from '@hono/node-server';
import type { ToolSet } from 'ai';
import { pino } from 'pino';
import { BatonError } from '../core/errors.js';
import type { CompiledPolicy } from '../core/policy.js';
import type { AgentTemplate } from '../core/schema.js';
import { createOrchestrationManager, type OrchestrationManager } from '../orchestration/orchestration-manager.js';
import {
  type BatonApp,
  createApp,
  DEFAULT_EVENT_LOG,
  type ServedAgent,
  type StatelessOptions,
} from '../server/create-app.js';
import { listen, ServeSetupError, urlOf } from '../server/listen.js';
import { isLoopback, loopbackHostsOnly } from '../server/loopback.js';
import { redact } from '../stores/resolve-store.js';
import { parseSigningKeys, parseStateKeys } from '../stores/state-token.js';
import { type OtelExport, startOtelExport } from '../telemetry/otel-node.js';
import { chooseModel } from './chat.js';
import { readPolicyFile } from './policy-file.js';
import { type FileIssue, formatFileIssue, readTemplateFile } from './template-file.js';
import { assertToolsProvided, loadToolModule } from './tool-module.js';

// Where serve-command.ts and serve-workers.ts have always found them.
export { listen, ServeSetupError, urlOf } from '../server/listen.js';

/** Options of {@link runServe}, as the `serve` command parsed them. */
export interface ServeOptions {
  /** A folder of templates (`*.json`) or one template file. */
  agentsPath: string;
  port: number;
  host: string;
  /** Store URL; with `stateless`, used only for {@link ServeOptions.replayStore}. */
  store: string;
  /**
   * Stateless mode: where the replay guard keeps each session's high-water mark, a store every
   * process shares (`--workers` sets it to `store`). Default: this process's memory.
   */
  replayStore?: string | undefined;
  /** Model spec for every agent; default each template's own, else offline. */
  model?: string | undefined;
  /** A module whose named exports are the app's AI SDK tools (`--tools`; see `tool-module.ts`). */
  toolsPath?: string | undefined;
  stateless: boolean;
  corsOrigins: string[];
  bodyLimit?: number | undefined;
  maxMessages?: number | undefined;
  /** Most characters of text in one message (`createApp`'s `maxMessageChars`). */
  maxMessageChars?: number | undefined;
  /** Most time for a client to send the request headers, in ms (default {@link DEFAULT_HEADERS_TIMEOUT_MS}). */
  headersTimeoutMs?: number | undefined;
  /** Most time for a client to send the whole request, in ms; 0 for none (default {@link DEFAULT_REQUEST_TIMEOUT_MS}). */
  requestTimeoutMs?: number | undefined;
  /** How long an idle keep-alive connection stays open, in ms (default {@link DEFAULT_KEEP_ALIVE_TIMEOUT_MS}). */
  keepAliveTimeoutMs?: number | undefined;
  /**
   * Set in a worker of `--workers` (its cluster id): the server prints no banner (the primary
   * prints one for all), only worker 1 prints template warnings, and every log line carries
   * `worker: <id>`.
   */
  worker?: number | undefined;
  /**
   * Set in a worker of `--workers`: the URL the primary listens at. This process then listens
   * on no port: it serves the connections the primary hands it ({@link RunningServer.accept}).
   */
  primaryUrl?: string | undefined;
  /** Chat turns that run at once (`createApp`'s `maxTurns`). */
  maxTurns?: number | undefined;
  /** Chat turns that wait for a slot (`createApp`'s `maxQueuedTurns`). */
  maxQueuedTurns?: number | undefined;
  /** Decisions kept per session for timelines (the manager's `eventLog`; default {@link DEFAULT_EVENT_LOG}). */
  eventLog?: number | undefined;
  /** Lease of a reserved tool call in ms (`createApp`'s `leaseMs`; default 15,000). */
  leaseMs?: number | undefined;
  /** The operator's policy file (`--policy`): read and checked at startup. */
  policyPath?: string | undefined;
  /** Delay of each offline-model chunk in ms, so that streaming can be watched. */
  offlineDelayMs: number;
  /** Export traces over OTLP/HTTP (`docs/telemetry.md`). */
  otel?: boolean | undefined;
  /**
   * With `otel`: the AI SDK's spans record what users and tools said too (messages,
   * instructions, tool definitions, inputs and outputs); see `createApp`'s `telemetry.recordContent`.
   */
  otelRecordContent?: boolean | undefined;
  logLevel: string;
  env: Readonly<Record<string, string | undefined>>;
  stdout: Writable & { isTTY?: boolean };
  stderr: Writable;
  /** Stops the server when aborted. */
  signal: AbortSignal;
  /** Tool implementations over the built-in ones (`createApp`'s `tools`). */
  tools?: ToolSet | undefined;
}

/** A started server: where it listens, and how to stop it. */
export interface RunningServer {
  url: string;
  app: BatonApp;
  /** What it printed (or, in a worker, would have printed) once listening: URL, store, agents. */
  banner: readonly string[];
  /**
   * Serves a connection accepted elsewhere (by the primary of `--workers`), as if this server
   * had accepted it; after `signal` aborted, closes it instead.
   */
  accept(socket: Socket): void;
  /** Resolves once the server stopped, after `signal` aborted. */
  closed: Promise<void>;
}

/**
 * Default `--headers-timeout`: a client that has not sent its request headers after 10 s gets a
 * 408 and its connection is closed, so slow-header clients (slowloris) cannot hold sockets.
 */
export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000;
/**
 * Default `--request-timeout`: the whole request (headers and body, not the streamed answer)
 * must arrive within 60 s; a 1 MiB body needs about 140 kbit/s for that.
 */
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;
/**
 * Default `--keep-alive-timeout`: Node's own 5 s. Behind a proxy or load balancer that keeps
 * idle connections open longer (AWS ALB: 60 s), set it above the proxy's, or the proxy may
 * send a request on a connection this server is closing.
 */
export const DEFAULT_KEEP_ALIVE_TIMEOUT_MS = 5_000;

/** Loads the agents, starts listening and resolves once the server accepts connections. */
export async function startServer(options: ServeOptions): Promise<RunningServer> {
  const paint = (format: Parameters<typeof styleText>[0], text: string) =>
    options.stdout.isTTY ? styleText(format, text, { validateStream: false }) : text;
  // With --workers the primary prints one banner for all, and one worker the warnings.
  const announce = options.worker === undefined;
  const banner: string[] = [];
  const say = (line: string) => {
    banner.push(line);
    if (announce) options.stdout.write(`${line}\n`);
  };
  const timeouts = httpTimeouts(options);
  if (options.otelRecordContent && !options.otel) {
    throw new ServeSetupError('--otel-record-content needs --otel: it says what the exported traces record.');
  }

  const templates = await loadAgents(options.agentsPath);
  // The embedding program's tools (CliContext.tools), then the --tools module's over them.
  const tools = { ...options.tools, ...(options.toolsPath ? await loadToolModule(options.toolsPath) : {}) };
  assertToolsProvided(
    templates.map(({ template }) => template),
    tools,
    options.toolsPath,
  );
  const served: ServedAgent[] = [];
  const modelLines: string[] = [];
  for (const { template, warnings } of templates) {
    if (options.worker === undefined || options.worker === 1) {
      for (const warning of warnings) options.stderr.write(`${formatFileIssue(warning)}\n`);
    }
    let chosen: ReturnType<typeof chooseModel>;
    try {
      chosen = chooseModel(template, options.model, options.env, options.offlineDelayMs);
    } catch (error) {
      // A --model (or BATON_MODEL) this process cannot use: an unknown provider, a missing key
      // or package. The user fixes it, so it is one line, as baton chat says it, not a stack.
      if (!BatonError.isInstance(error)) throw error;
      throw new ServeSetupError(error.message);
    }
    served.push({ template, warnings, model: chosen.llm });
    modelLines.push(
      `  ${paint('bold', template.id.padEnd(24))} ${chosen.label}${chosen.notice ? paint('yellow', `  (${chosen.notice})`) : ''}`,
    );
  }

  let approvalKeys: string[] | undefined;
  if (options.env.BATON_APPROVAL_KEYS !== undefined) {
    try {
      approvalKeys = parseSigningKeys(options.env.BATON_APPROVAL_KEYS, 'BATON_APPROVAL_KEYS');
    } catch (error) {
      throw new ServeSetupError(error instanceof Error ? error.message : String(error));
    }
  }

  let policy: CompiledPolicy | undefined;
  if (options.policyPath !== undefined) {
    const loaded = await readPolicyFile(options.policyPath);
    if (!loaded.ok) throw new ServeSetupError(loaded.message);
    policy = loaded.policy;
  }

  let manager: OrchestrationManager | undefined;
  let stateless: StatelessOptions | undefined;
  if (options.stateless) {
    const raw = options.env.BATON_STATE_KEYS;
    if (!raw?.trim()) {
      throw new ServeSetupError(
        '--stateless needs BATON_STATE_KEYS: comma-separated signing keys of at least 32 bytes (the first signs).',
      );
    }
    try {
      stateless = {
        keys: parseStateKeys(raw),
        ...(options.replayStore !== undefined ? { replayStore: options.replayStore } : {}),
        ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
        ...(policy !== undefined ? { policy } : {}),
      };
    } catch (error) {
      throw new ServeSetupError(`BATON_STATE_KEYS: ${error instanceof Error ? error.message : String(error)}`);
    }
  } else {
    manager = createOrchestrationManager({
      store: options.store,
      eventLog: options.eventLog ?? DEFAULT_EVENT_LOG,
      ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
      ...(policy !== undefined ? { policy } : {}),
    });
    try {
      // Opened now, so a wrong URL or a server that is down stops the start, not the first chat.
      await manager.getStateManager().getState('baton-startup-check');
    } catch (error) {
      await manager.close().catch(() => undefined);
      throw new ServeSetupError(
        `cannot open the store ${redact(options.store)}: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }

  let otel: OtelExport | undefined;
  if (options.otel) {
    try {
      otel = startOtelExport({ env: options.env });
    } catch (error) {
      await manager?.close().catch(() => undefined);
      throw new ServeSetupError(error instanceof Error ? error.message : String(error));
    }
  }

  const logger = pino(
    { level: options.logLevel, base: options.worker === undefined ? undefined : { worker: options.worker } },
    options.stdout,
  );
  const app = createApp({
    agents: served,
    tools,
    ...(manager ? { manager } : {}),
    ...(stateless ? { stateless } : {}),
    // Without keys: the state keys (stateless), or a key made now, which --workers shares.
    ...(approvalKeys ? { approvalKeys } : {}),
    env: options.env,
    ...(options.env.BATON_API_KEY ? { apiKey: options.env.BATON_API_KEY } : {}),
    corsOrigins: options.corsOrigins,
    ...(options.bodyLimit !== undefined ? { bodyLimit: options.bodyLimit } : {}),
    ...(options.maxMessages !== undefined ? { maxMessages: options.maxMessages } : {}),
    ...(options.maxMessageChars !== undefined ? { maxMessageChars: options.maxMessageChars } : {}),
    ...(options.maxTurns !== undefined ? { maxTurns: options.maxTurns } : {}),
    ...(options.maxQueuedTurns !== undefined ? { maxQueuedTurns: options.maxQueuedTurns } : {}),
    ...(otel ? { telemetry: { tracer: otel.tracer, recordContent: options.otelRecordContent ?? false } } : {}),
    logger,
  });

  const server = createAdaptorServer({
    fetch: closeWhenBodyUnread(isLoopback(options.host) ? loopbackHostsOnly(app.fetch) : app.fetch),
    hostname: options.host,
    serverOptions: {
      headersTimeout: timeouts.headers,
      requestTimeout: timeouts.request,
      keepAliveTimeout: timeouts.keepAlive,
      // Node checks the headers and request timeouts only this often (30 s by default,
      // which would let a 10 s headers timeout fire after up to 40 s).
      connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(timeouts.headers / 4))),
    },
  }) as Server;
  // Connections accepted here and handed over alike: stopping waits for every one of them.
  const open = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });

  let url: string;
  if (options.primaryUrl !== undefined) {
    url = options.primaryUrl;
    // Node starts checking the headers and request timeouts (and tracking connections for
    // closeIdleConnections) when a server emits 'listening'. This one never listens: its
    // connections come from the primary, and they need those timeouts all the same.
    server.emit('listening');
  } else {
    try {
      await listen(server, options);
    } catch (error) {
      await manager?.close().catch(() => undefined);
      await otel?.shutdown().catch(() => undefined);
      throw error;
    }
    url = urlOf(server.address() as AddressInfo);
  }
  say(`Baton listening on ${url}`);
  say(
    `Store: ${stateless ? `none (stateless: state travels in the x-orchestration-state header${options.replayStore ? `; replay marks in ${redact(options.replayStore)}` : ''})` : redact(options.store)}`,
  );
  say(`Agents (${served.length}):`);
  for (const line of modelLines) say(line);
  if (otel) {
    const content = options.otelRecordContent
      ? 'message and tool content recorded'
      : 'message and tool content not recorded';
    say(
      `Traces: OTLP/HTTP to ${otel.endpoint} (${otel.aiSdkSpans ? `with AI SDK spans; ${content}` : 'AI SDK spans: npm install @ai-sdk/otel'})`,
    );
  }
  say(`Inspector: ${url}/   API: ${url}/api/agents   Stop: Ctrl-C`);

  const closed = new Promise<void>((resolveClosed) => {
    const stop = () => {
      // Open chat streams would hold the stop forever; give them a moment, then cut them.
      const force = setTimeout(() => server.closeAllConnections(), 2000);
      force.unref();
      // Stops listening (if this process listens) and closes the idle connections.
      server.close();
      void Promise.all([...open].map((socket) => new Promise((resolve) => socket.once('close', resolve))))
        .then(() => {
          clearTimeout(force);
          // Spans still buffered are exported before the process is told it may exit.
          return Promise.all([manager?.close(), otel?.shutdown()]);
        })
        .catch(() => undefined)
        .then(() => resolveClosed());
    };
    if (options.signal.aborted) stop();
    else options.signal.addEventListener('abort', stop, { once: true });
  });
  const accept = (socket: Socket) => {
    if (options.signal.aborted) socket.destroy();
    // Documented by node:http: a server serves a connection emitted to it like one it accepted.
    else server.emit('connection', socket);
  };
  return { url, app, banner, accept, closed };
}

/** The node:http timeouts of {@link ServeOptions}, defaulted and checked against each other. */
function httpTimeouts(options: ServeOptions): { headers: number; request: number; keepAlive: number } {
  const headers = options.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS;
  const request = options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const keepAlive = options.keepAliveTimeoutMs ?? DEFAULT_KEEP_ALIVE_TIMEOUT_MS;
  // Node refuses to start otherwise; this says which flags to change.
  if (request !== 0 && headers > request) {
    throw new ServeSetupError(
      `--headers-timeout (${headers} ms) must not exceed --request-timeout (${request} ms): the headers are part of the request.`,
    );
  }
  return { headers, request, keepAlive };
}

type Fetch = (request: Request, env: HttpBindings | Http2Bindings) => Response | Promise<Response>;

/**
 * Answers with `Connection: close` when the request has not fully arrived by the time its
 * answer is ready (a 413 refused on its Content-Length, a 401 or 503 sent before the body was
 * read); Node then closes the socket after the answer. Keeping such a connection alive would
 * promise a client a connection that is then cut: @hono/node-server drains an unread body for at
 * most 500 ms or 64 MB and then destroys the socket, so a keep-alive client's next request failed
 * (199 of 20,000 in a mixed load test). A whole body already received is discarded by Node
 * itself, and that connection stays alive.
 */
function closeWhenBodyUnread(fetch: Fetch): Fetch {
  return (request, env) => {
    const response = fetch(request, env);
    const { incoming, outgoing } = env;
    // HTTP/2 has no Connection header. A request without a body (most GETs) is complete at once,
    // and a synchronous answer stays synchronous: @hono/node-server writes it without a promise.
    if (!(outgoing instanceof ServerResponse) || incoming.complete) return response;
    const socket = incoming.socket;
    return Promise.resolve(response).then(async (answer) => {
      // The part of a body that came in the same packet as the headers is parsed just after the
      // request event, which may be after an early answer: give the parser that turn.
      if (!incoming.complete) await new Promise((resolve) => setImmediate(resolve));
      if (!incoming.complete && !outgoing.headersSent) {
        outgoing.setHeader('connection', 'close');
        outgoing.once('finish', () => lingerBeforeClosing(socket));
      }
      return answer;
    });
  };
}

/** How long the rest of an unread body is still read after an answer that closes the connection. */
const LINGER_MS = 2_000;

/**
 * A lingering close, as nginx does it: once the answer is written, Node ends the socket and
 * destroys it as soon as its side is flushed, so a client still sending its body meets a reset
 * (EPIPE) before it reads the answer. Instead the socket keeps reading (the body is discarded)
 * until the client closes its side or {@link LINGER_MS} pass. Runs just after Node's own
 * `finish` handler has asked for the destroy; if Node ever destroys at once, this does nothing.
 */
function lingerBeforeClosing(socket: Socket): void {
  if (socket.destroyed) return;
  socket.removeListener('finish', socket.destroy);
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
  socket.once('end', () => socket.destroy());
}

interface LoadedAgent {
  template: AgentTemplate;
  warnings: FileIssue[];
  file: string;
}

/** Every `*.json` template of a folder (or the one file given), validated; all problems at once. */
async function loadAgents(path: string): Promise<LoadedAgent[]> {
  const absolute = resolve(path);
  let files: string[];
  try {
    const info = await stat(absolute);
    files = info.isDirectory()
      ? (await readdir(absolute))
          .filter((name) => name.endsWith('.json'))
          .sort()
          .map((name) => join(absolute, name))
      : [absolute];
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new ServeSetupError(
      code === 'ENOENT' ? `no such file or folder: ${path}` : `cannot read ${path}: ${String(error)}`,
    );
  }
  if (files.length === 0) throw new ServeSetupError(`no agent templates (*.json) in ${path}`);

  const loaded: LoadedAgent[] = [];
  const failures: string[] = [];
  for (const file of files) {
    const result = await readTemplateFile(file);
    if (result.ok) loaded.push({ template: result.template, warnings: result.warnings, file });
    else failures.push(...result.issues.map((issue) => formatFileIssue(issue)));
  }
  if (failures.length > 0) {
    throw new ServeSetupError(`some templates do not load; fix them or serve another folder:\n${failures.join('\n')}`);
  }
  const seen = new Map<string, string>();
  for (const { template, file } of loaded) {
    const other = seen.get(template.id);
    if (other) throw new ServeSetupError(`two templates have the id "${template.id}": ${other} and ${file}`);
    seen.set(template.id, file);
  }
  return loaded;
}
