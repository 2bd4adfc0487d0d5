/**
 * The `serve` sub-command: parses its flags and hands over to {@link startServer}.
 */
import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import type { Writable } from 'node:stream';
import { Command, InvalidArgumentError, Option } from 'commander';
import { DEFAULT_MAX_MESSAGE_CHARS } from '../server/create-app.js';
import {
  corsOption,
  eventLogOption,
  hostOption,
  integer,
  leaseOption,
  maxQueuedTurnsOption,
  maxTurnsOption,
  policyOption,
  portNumber,
  storeOption,
} from './options.js';
import type { CliContext } from './program.js';
import {
  DEFAULT_HEADERS_TIMEOUT_MS,
  DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
  DEFAULT_REQUEST_TIMEOUT_MS,
  type ServeOptions,
  ServeSetupError,
  startServer,
} from './serve.js';
import { runServeWorker, startServeWorkers } from './serve-workers.js';

/** Default port of `baton serve`. */
export const DEFAULT_PORT = 4000;
/** Default store of `baton serve`: durable and embedded. */
export const DEFAULT_SERVE_STORE = 'sqlite:.baton/state.db';

/** `auto` (one worker per available core) or a whole number >= 1. */
function workerCount(value: string): number {
  if (value === 'auto') return availableParallelism();
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) {
    throw new InvalidArgumentError('--workers must be "auto" (one per core) or a whole number >= 1.');
  }
  return n;
}

/** `baton serve [agentsDir] --port --store --model --stateless ...`. */
export function serveCommand(context: CliContext): Command {
  return new Command('serve')
    .description('Serve agents over HTTP: the chat API, session API and the inspector page at /.')
    .argument('[agents]', 'folder of agent templates (*.json), or one template file', 'examples/agents')
    .addOption(
      new Option('-p, --port <port>', 'port to listen on (0 picks a free one)')
        .argParser(portNumber('--port'))
        // $PORT as the platform set it, checked in the action (commander parses flags, not defaults).
        .default(context.env.PORT?.trim() ? context.env.PORT : DEFAULT_PORT),
    )
    .addOption(hostOption('interface to listen on'))
    .addOption(
      storeOption(
        context,
        'session state: sqlite:<path> | memory: | redis://host:6379[/<database>] | postgres://…; checked before the server starts',
        DEFAULT_SERVE_STORE,
      ),
    )
    .option(
      '-m, --model <spec>',
      'model for every agent: offline | openai:<model> | anthropic:<model> | openai-compatible:<model>@<baseURL> (default: $BATON_MODEL, else each template’s own, else offline when its key is not set)',
    )
    .option(
      '--tools <module>',
      'your tools: a .js (or, on Node.js 22.18+, .ts) module whose named exports are AI SDK tools, by the names templates use',
    )
    .option(
      '--stateless',
      'keep no state on the server: it travels signed in x-orchestration-state (keys from $BATON_STATE_KEYS)',
      false,
    )
    .addOption(corsOption(context, 'comma-separated origins allowed to call the API from a browser'))
    .addOption(new Option('--body-limit <bytes>', 'largest request body').argParser(integer('--body-limit', 1)))
    .addOption(
      new Option('--max-messages <n>', 'most messages in one chat request').argParser(integer('--max-messages', 1)),
    )
    .addOption(
      new Option(
        '--max-message-chars <n>',
        `most characters of text in one message; more is refused with 413 message-too-large (default ${DEFAULT_MAX_MESSAGE_CHARS})`,
      ).argParser(integer('--max-message-chars', 1)),
    )
    .addOption(
      maxTurnsOption(
        'most chat turns that run at once (default 256; beyond 4, only while the CPU has time to spare); more wait in a queue',
      ),
    )
    .addOption(
      maxQueuedTurnsOption('chat turns that wait for a slot; more are refused with 503 and Retry-After (default 1024)'),
    )
    .addOption(
      eventLogOption("decisions kept per session for the inspector's timeline (0: none; ignored with --stateless)"),
    )
    .addOption(policyOption())
    .addOption(
      leaseOption(
        "how long a running tool call's reservation lasts without renewal (its process renews it while the call runs; default 15000)",
      ),
    )
    .addOption(
      new Option(
        '--workers <n>',
        '"auto" (one per core) or a number: processes serving the same port; more than 1 needs a shared store (sqlite:, redis://, postgres://)',
      )
        .argParser(workerCount)
        .default(1),
    )
    .addOption(
      new Option('--headers-timeout <ms>', 'most time for a client to send its request headers; then 408 and close')
        .argParser(integer('--headers-timeout', 1))
        .default(DEFAULT_HEADERS_TIMEOUT_MS),
    )
    .addOption(
      new Option(
        '--request-timeout <ms>',
        'most time for a client to send its whole request, body included (not the streamed answer); 0 for none',
      )
        .argParser(integer('--request-timeout', 0))
        .default(DEFAULT_REQUEST_TIMEOUT_MS),
    )
    .addOption(
      new Option(
        '--keep-alive-timeout <ms>',
        'how long an idle keep-alive connection stays open; behind a proxy, set it above the proxy’s idle timeout',
      )
        .argParser(integer('--keep-alive-timeout', 1))
        .default(DEFAULT_KEEP_ALIVE_TIMEOUT_MS),
    )
    .addOption(
      new Option('--offline-delay <ms>', 'delay between the offline model’s stream chunks, to watch it stream')
        .argParser(integer('--offline-delay', 0))
        .default(0),
    )
    .option(
      '--otel',
      'export traces over OTLP/HTTP to $OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4318): requests, AI SDK spans and every orchestration decision, without what users and tools said (see docs/telemetry.md)',
      false,
    )
    .option(
      '--otel-record-content',
      'with --otel, export what users and tools said too: messages, instructions, tool definitions, tool inputs and outputs (personal data and secrets reach your trace backend)',
      false,
    )
    .addOption(
      new Option('--log-level <level>', 'request log level (JSON lines on stdout)')
        .choices(['trace', 'debug', 'info', 'warn', 'error', 'silent'])
        .default(context.env.BATON_LOG_LEVEL ?? 'info'),
    )
    .addHelpText(
      'after',
      '\nEnvironment: BATON_API_KEY (require Authorization: Bearer), BATON_STATE_KEYS (--stateless), BATON_APPROVAL_KEYS (sign tool approvals; default: the state keys, else a key made at start, so approvals do not survive a restart), BATON_STORE, BATON_MODEL, PORT.\n\nExamples:\n  baton serve examples/agents --model offline\n  baton serve agents/ --store redis://127.0.0.1:6379 --port 8080\n  baton serve agents/ --tools ./tools.js',
    )
    .action(
      async (
        agentsPath: string,
        flags: {
          port: number | string;
          host: string;
          store: string;
          model?: string;
          tools?: string;
          stateless: boolean;
          cors: string;
          bodyLimit?: number;
          maxMessages?: number;
          maxMessageChars?: number;
          headersTimeout: number;
          requestTimeout: number;
          keepAliveTimeout: number;
          workers: number;
          maxTurns?: number;
          maxQueuedTurns?: number;
          eventLog: number;
          lease?: number;
          policy?: string;
          offlineDelay: number;
          otel: boolean;
          otelRecordContent: boolean;
          logLevel: string;
        },
      ) => {
        let port: number;
        try {
          port = typeof flags.port === 'number' ? flags.port : portNumber('$PORT')(flags.port);
        } catch (error) {
          context.stderr.write(`baton serve: ${error instanceof Error ? error.message : String(error)}\n`);
          context.setExitCode(1);
          return;
        }
        const options: ServeOptions = {
          agentsPath,
          port,
          host: flags.host,
          store: flags.store,
          model: flags.model,
          toolsPath: flags.tools,
          stateless: flags.stateless,
          corsOrigins: flags.cors
            .split(',')
            .map((origin) => origin.trim())
            .filter(Boolean),
          bodyLimit: flags.bodyLimit,
          maxMessages: flags.maxMessages,
          maxMessageChars: flags.maxMessageChars,
          headersTimeoutMs: flags.headersTimeout,
          requestTimeoutMs: flags.requestTimeout,
          keepAliveTimeoutMs: flags.keepAliveTimeout,
          maxTurns: flags.maxTurns,
          maxQueuedTurns: flags.maxQueuedTurns,
          eventLog: flags.eventLog,
          leaseMs: flags.lease,
          ...(flags.policy !== undefined ? { policyPath: flags.policy } : {}),
          offlineDelayMs: flags.offlineDelay,
          otel: flags.otel,
          otelRecordContent: flags.otelRecordContent,
          logLevel: flags.logLevel,
          env: context.env,
          stdout: context.stdout as Writable & { isTTY?: boolean },
          stderr: context.stderr as Writable,
          signal: context.signal,
          ...(context.tools ? { tools: context.tools } : {}),
          // Workers share the stateless replay marks through the store; one process keeps them in memory.
          ...(flags.stateless && flags.workers > 1 ? { replayStore: flags.store } : {}),
        };
        try {
          if (cluster.isWorker) {
            // cluster re-ran this command line in a worker of --workers.
            await runServeWorker(options, context.setExitCode);
          } else if (flags.workers > 1) {
            await (await startServeWorkers(options, flags.workers)).closed;
          } else {
            await (await startServer(options)).closed;
          }
        } catch (error) {
          if (!ServeSetupError.isInstance(error) || error.code !== 'serve-setup') throw error;
          context.stderr.write(`baton serve: ${error.message}\n`);
          context.setExitCode(1);
        }
      },
    );
}
