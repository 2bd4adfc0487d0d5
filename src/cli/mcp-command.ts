/**
 * The `mcp` sub-command: `baton mcp <template> [options] -- <upstream command...>`, an MCP server
 * in front of upstream MCP servers that applies the template (see `src/mcp/gateway.ts`). The MCP
 * SDK is loaded only when the command runs.
 */
import type { Readable, Writable } from 'node:stream';
import { Command, Option } from 'commander';
import { BatonError, MissingDependencyError } from '../core/errors.js';
import { createOrchestrationManager } from '../orchestration/orchestration-manager.js';
import { redact, storeUrlProblem } from '../stores/resolve-store.js';
import { createTelemetry } from '../telemetry/otel.js';
import { type OtelExport, startOtelExport } from '../telemetry/otel-node.js';
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
import { readPolicyFile } from './policy-file.js';
import type { CliContext } from './program.js';
import { readTemplateFile } from './template-file.js';

/** Reported to MCP clients as the gateway's version, and as the traces' `service.version`. */
const VERSION = '0.1.0';

/** Default store of `baton mcp`: a session lives as long as its connection (use --store to keep it). */
export const DEFAULT_MCP_STORE = 'memory:';

/** Flags of `baton mcp`. */
interface McpFlags {
  upstream: string[];
  session?: string;
  store: string;
  http?: number;
  host: string;
  cors: string;
  eventLog: number;
  lease?: number;
  policy?: string;
  callTimeout?: number;
  maxTurns?: number;
  maxQueuedTurns?: number;
  sessionIdle?: number;
  watch?: number;
  maxSessions?: number;
  trustAnnotationChanges?: boolean;
  otel: boolean;
}

/** `baton mcp <template> [--upstream …] [--session id] [--store url] [--http port] -- <command…>`. */
export function mcpCommand(context: CliContext): Command {
  return new Command('mcp')
    .description(
      'An MCP server in front of upstream MCP servers: offers only the tools the active step allows, refuses the others before they reach the upstream.',
    )
    .argument(
      '<template>',
      'agent template (.json) whose tools, steps, sequences and rules apply (an approve rule asks the person through MCP elicitation; a decline is final and recorded)',
    )
    .argument('[command...]', 'the upstream MCP server to start, after "--" (stdio)')
    .addOption(
      new Option(
        '--upstream <spec>',
        'an upstream: <url> (Streamable HTTP), or name=<url or command> (repeat for several; their tools become name__tool)',
      )
        .argParser((value: string, previous: string[] | undefined) => [...(previous ?? []), value])
        .default([]),
    )
    .option('--session <id>', 'continue this orchestration session (stdio; default: a new one per connection)')
    .addOption(
      storeOption(
        context,
        'session state: memory: | sqlite:<path> | redis://host:6379[/<database>] | postgres://… (shared by several gateways); checked before the gateway starts',
        DEFAULT_MCP_STORE,
      ),
    )
    .addOption(
      new Option('--http <port>', 'serve Streamable HTTP on this port (0 picks a free one) instead of stdio').argParser(
        portNumber('--http'),
      ),
    )
    .addOption(
      hostOption(
        'interface to listen on with --http (on loopback, the default, only requests for loopback names are answered)',
      ),
    )
    .addOption(
      corsOption(
        context,
        "with --http: comma-separated origins whose pages may call /mcp and the API from a browser (any other origin's writes are refused)",
      ),
    )
    .addOption(eventLogOption('decisions kept per session for GET /api/sessions/:id/events (0: none)'))
    .addOption(policyOption())
    .addOption(
      leaseOption(
        "how long a running call's reservation lasts without renewal (renewed while the upstream runs; default 15000)",
      ),
    )
    .addOption(
      new Option(
        '--call-timeout <ms>',
        'most time an upstream request may take (progress notifications restart it; default 60000; an upstream gets at least 60000 to start)',
      ).argParser(integer('--call-timeout', 1)),
    )
    .addOption(maxTurnsOption('with --http: most tool calls that run at once (more wait)'))
    .addOption(maxQueuedTurnsOption('with --http: tool calls that wait for a slot; more are refused (default 1024)'))
    .addOption(
      new Option(
        '--watch <ms>',
        're-read each session this often and tell the client when its tools changed elsewhere (another gateway on a shared --session, a reset over HTTP); default off',
      ).argParser(integer('--watch', 1)),
    )
    .addOption(
      new Option(
        '--session-idle <ms>',
        'with --http: close an MCP session (and its upstream connections) after this long without a request (default 1800000)',
      ).argParser(integer('--session-idle', 1)),
    )
    .addOption(
      new Option('--max-sessions <n>', 'with --http: most MCP sessions open at once (default 256)').argParser(
        integer('--max-sessions', 1),
      ),
    )
    .option(
      '--trust-annotation-changes',
      "take an upstream's later re-declaration of a tool's annotations even when it widens what the template allows (default: a session judges each tool by what it first declared, and ignores such a change)",
    )
    .option(
      '--otel',
      'export traces over OTLP/HTTP to $OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4318): every orchestration decision of every session (a call reserved or refused and why, a step changed, an approval asked or declined) and, with --http, the /mcp requests; never tool inputs or outputs (see docs/telemetry.md)',
      false,
    )
    .addHelpText(
      'after',
      [
        '',
        'Upstreams: each session starts its own. One that exits (or a URL one that stops answering) is',
        'restarted after 100 ms, the wait doubling up to 10 s while it keeps failing; after 8 failures',
        'within a minute the session gives up on it. Meanwhile its tools are not offered (the client',
        'gets tools/list_changed when they go and come back) and calls of them are answered with why;',
        'stderr says what happened, naming the session and the upstream. A spawned upstream gets this',
        "process's environment without the npm_* variables npm and npx set for baton itself.",
        '',
      ].join('\n') +
        '\nEnvironment: BATON_API_KEY (with --http: require Authorization: Bearer), BATON_STORE, OTEL_EXPORTER_OTLP_ENDPOINT and the other OTEL_* variables (with --otel).\n\nExamples:\n  baton mcp policy.json -- npx -y @modelcontextprotocol/server-filesystem /tmp/work\n  baton mcp policy.json --upstream https://mcp.example.com/mcp --http 8080\n  baton mcp policy.json --upstream fs="npx -y @modelcontextprotocol/server-filesystem /tmp/work" --upstream docs=https://docs.example.com/mcp',
    )
    .action(async (templatePath: string, command: string[], flags: McpFlags) => {
      const fail = (message: string) => {
        context.stderr.write(`baton mcp: ${message}\n`);
        context.setExitCode(1);
      };
      const storeProblem = storeUrlProblem(flags.store);
      if (storeProblem) return fail(`--store: ${storeProblem}`);
      const read = await readTemplateFile(templatePath);
      if (!read.ok) {
        return fail(
          `${templatePath} is not a valid template:\n${read.issues.map((issue) => `  ${issue.line ? `${issue.line}:${issue.column} ` : ''}${issue.message}`).join('\n')}`,
        );
      }
      try {
        // An optional peer (it has no root module, so one of its own is loaded to find it): a
        // missing one is said with the command that installs it, as for the stores.
        await import('@modelcontextprotocol/sdk/types.js');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND') throw error;
        return fail(new MissingDependencyError('@modelcontextprotocol/sdk', 'The MCP gateway (baton mcp)').message);
      }
      const gatewayModule = await import('../mcp/gateway.js');
      const upstreamModule = await import('../mcp/gateway-upstream.js');
      let upstreams: import('../mcp/gateway-upstream.js').UpstreamSpec[];
      try {
        upstreams = flags.upstream.map(upstreamModule.parseUpstream);
        if (command.length > 0) upstreams.unshift({ command: command[0]!, args: command.slice(1) });
      } catch (error) {
        return fail((error as Error).message);
      }
      let policy: import('../core/policy.js').CompiledPolicy | undefined;
      if (flags.policy !== undefined) {
        const loaded = await readPolicyFile(flags.policy);
        if (!loaded.ok) return fail(loaded.message);
        policy = loaded.policy;
      }
      const manager = createOrchestrationManager({
        store: flags.store,
        eventLog: flags.eventLog,
        ...(flags.lease !== undefined ? { leaseMs: flags.lease } : {}),
        ...(policy !== undefined ? { policy } : {}),
      });
      try {
        await manager.getStateManager().getState('baton-startup-check');
      } catch (error) {
        await manager.close().catch(() => undefined);
        return fail(`cannot open the store ${redact(flags.store)}: ${(error as Error).message}`);
      }
      const say = (line: string) => context.stderr.write(`${line}\n`);
      let otel: OtelExport | undefined;
      if (flags.otel) {
        try {
          otel = startOtelExport({ env: context.env, serviceVersion: VERSION, command: 'baton mcp' });
        } catch (error) {
          await manager.close().catch(() => undefined);
          return fail(error instanceof Error ? error.message : String(error));
        }
        say(`Traces: OTLP/HTTP to ${otel.endpoint}`);
      }
      const options = {
        template: read.template,
        upstreams,
        manager,
        callTimeoutMs: flags.callTimeout,
        watchMs: flags.watch,
        trustAnnotationChanges: flags.trustAnnotationChanges === true,
        env: context.env,
        version: VERSION,
        onError: (error: unknown) => say(`baton mcp: ${error instanceof Error ? error.message : String(error)}`),
      };
      let stopRecording: (() => void) | undefined;
      try {
        if (flags.http === undefined) {
          // Over HTTP the app records the decisions (and names the requests' sessions); here the
          // manager's listener alone does.
          if (otel) stopRecording = createTelemetry({ tracer: otel.tracer }).instrument(manager);
          const { serveStdio } = await import('../mcp/gateway-serve.js');
          await serveStdio({
            ...options,
            sessionId: flags.session,
            // The protocol owns stdout; everything for people goes to stderr.
            stdin: context.stdin as unknown as Readable,
            stdout: context.stdout as unknown as Writable,
            signal: context.signal,
          });
        } else {
          const { serveHttp } = await import('../mcp/gateway-http.js');
          const served = await serveHttp({
            ...options,
            port: flags.http,
            host: flags.host,
            corsOrigins: flags.cors
              .split(',')
              .map((origin) => origin.trim())
              .filter(Boolean),
            ...(context.env.BATON_API_KEY ? { apiKey: context.env.BATON_API_KEY } : {}),
            ...(flags.maxTurns !== undefined ? { maxTurns: flags.maxTurns } : {}),
            ...(flags.maxQueuedTurns !== undefined ? { maxQueuedTurns: flags.maxQueuedTurns } : {}),
            ...(flags.sessionIdle !== undefined ? { sessionIdleMs: flags.sessionIdle } : {}),
            ...(flags.maxSessions !== undefined ? { maxSessions: flags.maxSessions } : {}),
            ...(otel ? { telemetry: { tracer: otel.tracer } } : {}),
            signal: context.signal,
            say,
          });
          await served.closed;
        }
      } catch (error) {
        if (error instanceof gatewayModule.GatewaySetupError || BatonError.isInstance(error)) {
          fail((error as Error).message);
        } else if (error instanceof upstreamModule.UpstreamError) {
          fail(error.message);
        } else {
          throw error;
        }
      } finally {
        stopRecording?.();
        // What is still buffered is exported before the process may exit.
        await otel?.shutdown().catch(() => undefined);
        await manager.close().catch(() => undefined);
      }
    });
}
