/**
 * `baton serve`: loads every template of a folder, picks each agent's model, opens the store
 * and listens. The HTTP API itself is `createApp()`; this file is only the process around it.
 */
import { readdir, stat } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import type { Writable } from 'node:stream';
import { styleText } from 'node:util';
import { serve } from '@hono/node-server';
import { pino } from 'pino';
import { BatonError } from '../core/errors.js';
import type { AgentTemplate } from '../core/schema.js';
import { createOrchestrationManager, type OrchestrationManager } from '../orchestration/orchestration-manager.js';
import { type BatonApp, createApp, type ServedAgent } from '../server/create-app.js';
import { redact } from '../stores/resolve-store.js';
import { parseStateKeys } from '../stores/state-token.js';
import { type OtelExport, startOtelExport } from '../telemetry/otel-node.js';
import { chooseModel } from './chat.js';
import { type FileIssue, formatFileIssue, readTemplateFile } from './template-file.js';

/** Options of {@link runServe}, as the `serve` command parsed them. */
export interface ServeOptions {
  /** A folder of templates (`*.json`) or one template file. */
  agentsPath: string;
  port: number;
  host: string;
  /** Store URL; ignored with `stateless`. */
  store: string;
  /** Model spec for every agent; default each template's own, else offline. */
  model?: string | undefined;
  stateless: boolean;
  corsOrigins: string[];
  bodyLimit?: number | undefined;
  maxMessages?: number | undefined;
  /** Chat turns that run at once (`createApp`'s `maxTurns`). */
  maxTurns?: number | undefined;
  /** Chat turns that wait for a slot (`createApp`'s `maxQueuedTurns`). */
  maxQueuedTurns?: number | undefined;
  /** Delay of each offline-model chunk in ms, so that streaming can be watched. */
  offlineDelayMs: number;
  /** Export traces over OTLP/HTTP (`docs/telemetry.md`). */
  otel?: boolean | undefined;
  logLevel: string;
  env: Readonly<Record<string, string | undefined>>;
  stdout: Writable & { isTTY?: boolean };
  stderr: Writable;
  /** Stops the server when aborted. */
  signal: AbortSignal;
}

/** A started server: where it listens, and how to stop it. */
export interface RunningServer {
  url: string;
  app: BatonApp;
  /** Resolves once the server stopped, after `signal` aborted. */
  closed: Promise<void>;
}

/** A failure to start that the user can fix: printed without a stack, exit code 1. */
export class ServeSetupError extends BatonError {
  constructor(message: string) {
    super('serve-setup', message);
    this.name = 'ServeSetupError';
  }
}

/** Loads the agents, starts listening and resolves once the server accepts connections. */
export async function startServer(options: ServeOptions): Promise<RunningServer> {
  const paint = (format: Parameters<typeof styleText>[0], text: string) =>
    options.stdout.isTTY ? styleText(format, text, { validateStream: false }) : text;
  const say = (line: string) => options.stdout.write(`${line}\n`);

  const templates = await loadAgents(options.agentsPath);
  const served: ServedAgent[] = [];
  const modelLines: string[] = [];
  for (const { template, warnings } of templates) {
    for (const warning of warnings) options.stderr.write(`${formatFileIssue(warning)}\n`);
    const chosen = chooseModel(template, options.model, options.env, options.offlineDelayMs);
    served.push({ template, warnings, model: chosen.llm });
    modelLines.push(
      `  ${paint('bold', template.id.padEnd(24))} ${chosen.label}${chosen.notice ? paint('yellow', `  (${chosen.notice})`) : ''}`,
    );
  }

  let manager: OrchestrationManager | undefined;
  let stateless: { keys: string[] } | undefined;
  if (options.stateless) {
    const raw = options.env.BATON_STATE_KEYS;
    if (!raw?.trim()) {
      throw new ServeSetupError(
        '--stateless needs BATON_STATE_KEYS: comma-separated signing keys of at least 32 bytes (the first signs).',
      );
    }
    try {
      stateless = { keys: parseStateKeys(raw) };
    } catch (error) {
      throw new ServeSetupError(`BATON_STATE_KEYS: ${error instanceof Error ? error.message : String(error)}`);
    }
  } else {
    manager = createOrchestrationManager({ store: options.store });
    try {
      // Opened now, so a wrong URL or a server that is down stops the start, not the first chat.
      await (await manager.getStateManager().store()).get('baton-startup-check');
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
    if (manager) otel.instrument(manager);
  }

  const logger = pino({ level: options.logLevel, base: undefined }, options.stdout);
  const app = createApp({
    agents: served,
    ...(manager ? { manager } : {}),
    ...(stateless ? { stateless } : {}),
    env: options.env,
    ...(options.env.BATON_API_KEY ? { apiKey: options.env.BATON_API_KEY } : {}),
    corsOrigins: options.corsOrigins,
    ...(options.bodyLimit !== undefined ? { bodyLimit: options.bodyLimit } : {}),
    ...(options.maxMessages !== undefined ? { maxMessages: options.maxMessages } : {}),
    ...(options.maxTurns !== undefined ? { maxTurns: options.maxTurns } : {}),
    ...(options.maxQueuedTurns !== undefined ? { maxQueuedTurns: options.maxQueuedTurns } : {}),
    logger,
  });

  const server = await new Promise<Server>((resolveListening, reject) => {
    // Without createServer options, @hono/node-server makes a plain node:http server.
    const fetch = otel ? otel.traceRequests(app.fetch) : app.fetch;
    const listening = serve({ fetch, port: options.port, hostname: options.host }, () =>
      resolveListening(listening as Server),
    );
    listening.once('error', (error: NodeJS.ErrnoException) => {
      reject(
        new ServeSetupError(
          error.code === 'EADDRINUSE'
            ? `port ${options.port} on ${options.host} is in use; pass --port <another> (0 picks a free one).`
            : `cannot listen on ${options.host}:${options.port}: ${error.message}`,
        ),
      );
    });
  }).catch(async (error: unknown) => {
    await manager?.close().catch(() => undefined);
    await otel?.shutdown().catch(() => undefined);
    throw error;
  });

  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;
  say(`Baton listening on ${url}`);
  say(
    `Store: ${stateless ? 'none (stateless: state travels in the x-orchestration-state header)' : redact(options.store)}`,
  );
  say(`Agents (${served.length}):`);
  for (const line of modelLines) say(line);
  if (otel) {
    say(
      `Traces: OTLP/HTTP to ${otel.endpoint}${otel.aiSdkSpans ? ' (with AI SDK spans)' : ' (AI SDK spans: npm install @ai-sdk/otel)'}${manager ? '' : '; orchestration events are not recorded with --stateless'}`,
    );
  }
  say(`Inspector: ${url}/   API: ${url}/api/agents   Stop: Ctrl-C`);

  const closed = new Promise<void>((resolveClosed) => {
    const stop = () => {
      // Open chat streams would hold close() forever; give them a moment, then cut them.
      const force = setTimeout(() => server.closeAllConnections(), 2000);
      force.unref();
      server.close(() => {
        clearTimeout(force);
        // Spans still buffered are exported before the process is told it may exit.
        void Promise.all([manager?.close(), otel?.shutdown()])
          .catch(() => undefined)
          .then(() => resolveClosed());
      });
      server.closeIdleConnections();
    };
    if (options.signal.aborted) stop();
    else options.signal.addEventListener('abort', stop, { once: true });
  });
  return { url, app, closed };
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
