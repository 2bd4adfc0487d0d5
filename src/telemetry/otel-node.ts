/**
 * `baton serve --otel` and `baton mcp --otel`: an OpenTelemetry trace pipeline for the process,
 * exporting over OTLP/HTTP (JSON) to `$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else
 * `$OTEL_EXPORTER_OTLP_ENDPOINT/v1/traces`, else `http://localhost:4318/v1/traces`; the
 * exporter reads the other standard `OTEL_EXPORTER_OTLP_*` variables (headers, timeout)
 * itself.
 *
 * It records, in one trace per traced request:
 *
 * - a `SERVER` span per request, by OpenTelemetry's own HTTP instrumentation
 *   (`@opentelemetry/instrumentation-http`): it continues the client's trace when the request
 *   carries `traceparent` (W3C trace context), ends when the (streamed) answer is done, and is
 *   named after the route `createApp` reports (`POST /api/chat/:agentId`). Reads without
 *   `traceparent` are not traced (see {@link isTracedRequest}): the inspector polls;
 * - the AI SDK's own spans (`invoke_agent`, `step n`, `chat`, `execute_tool`) when
 *   `@ai-sdk/otel` is installed: its `OpenTelemetry` integration is registered with the AI SDK.
 *   What they record of messages and tools is decided per call by `createApp`'s
 *   `telemetry.recordContent` (off unless `--otel-record-content`);
 * - every orchestration decision, by `createApp`'s `telemetry` option, with the tracer of
 *   this pipeline ({@link OtelExport.tracer});
 * - on every span of a request, the session and agent it served (a request scope, filled by
 *   `createApp`; see `request-scope.ts`).
 *
 * The SDK packages are optional peer dependencies, loaded only here: a missing one is one
 * {@link MissingDependencyError} naming the `npm install` command for all that are missing.
 */
import { createRequire } from 'node:module';
import { MissingDependencyError } from '../core/errors.js';
import { loadOptionalDependency } from '../stores/optional-dependency.js';
import { TELEMETRY_SCOPE, type TelemetryTracer } from './otel.js';
import { createRequestScopeProcessor } from './request-scope.js';

/** Where OTLP/HTTP goes when no environment variable says otherwise. */
export const DEFAULT_OTLP_ENDPOINT = 'http://localhost:4318';

/** Options of {@link startOtelExport}. */
export interface OtelExportOptions {
  /** The environment to read `OTEL_*` from (the exporter also reads `process.env` itself). */
  env: Readonly<Record<string, string | undefined>>;
  /** `service.version` of the resource. */
  serviceVersion?: string;
  /** The command whose `--otel` starts the pipeline, named when a package is missing (default `baton serve`). */
  command?: string;
}

/** A running export pipeline; see the module comment. */
export interface OtelExport {
  /** The URL spans are posted to. */
  readonly endpoint: string;
  /** True when the AI SDK's spans are recorded too (`@ai-sdk/otel` is installed). */
  readonly aiSdkSpans: boolean;
  /** The tracer of this pipeline, for Baton's decisions (`createApp({ telemetry: { tracer } })`). */
  readonly tracer: TelemetryTracer;
  /** Exports what is buffered and unregisters everything this pipeline registered. */
  shutdown(): Promise<void>;
}

/** The part of an incoming request {@link isTracedRequest} looks at (a node:http `IncomingMessage` fits). */
export interface IncomingRequestHead {
  method?: string | undefined;
  headers: Readonly<Record<string, string | string[] | undefined>>;
}

/** Methods that only read: the inspector polls with them. */
const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Whether the server traces a request: every request that may change something (a chat turn,
 * a session reset or deletion), and a read only when the client traces it (it sends
 * `traceparent`). The inspector polls the session, its events and the health check every
 * second or so; a span per poll would bury the turns. Pass it to your own
 * `HttpInstrumentation` as `ignoreIncomingRequestHook: (request) => !isTracedRequest(request)`.
 */
export function isTracedRequest(request: IncomingRequestHead): boolean {
  return !READS.has((request.method ?? 'GET').toUpperCase()) || request.headers.traceparent !== undefined;
}

/** The slices of the SDK packages this module calls (their full types stay out of Baton's). */
interface Api {
  context: {
    setGlobalContextManager(manager: unknown): boolean;
    disable(): void;
  };
  trace: {
    setGlobalTracerProvider(provider: unknown): boolean;
    disable(): void;
  };
  propagation: {
    setGlobalPropagator(propagator: unknown): boolean;
    disable(): void;
  };
}
interface Core {
  CompositePropagator: new (options: { propagators: unknown[] }) => unknown;
  W3CTraceContextPropagator: new () => unknown;
  W3CBaggagePropagator: new () => unknown;
}
interface HttpInstrumentationModule {
  HttpInstrumentation: new (config: {
    ignoreIncomingRequestHook: (request: IncomingRequestHead) => boolean;
    disableOutgoingRequestInstrumentation: boolean;
  }) => { setTracerProvider(provider: unknown): void; disable(): void };
}
interface SdkTrace {
  TracerProvider: new (options: {
    resource: unknown;
    spanProcessors: unknown[];
  }) => {
    shutdown(): Promise<void>;
    getTracer(name: string, version?: string): TelemetryTracer;
  };
  BatchSpanProcessor: new (options: { exporter: unknown; scheduledDelayMillis?: number }) => unknown;
}
interface ContextAsyncHooks {
  AsyncLocalStorageContextManager: new () => { enable(): unknown };
}
interface Resources {
  resourceFromAttributes(attributes: Record<string, string>): { merge(other: unknown): unknown };
  detectResources(config: { detectors: unknown[] }): unknown;
  envDetector: unknown;
}
interface OtlpHttp {
  OTLPTraceExporter: new () => unknown;
}
interface AiSdkOtel {
  OpenTelemetry: new () => object;
}
interface AiTelemetryRegistry {
  registerTelemetry(...integrations: object[]): void;
}

/** The traces URL the exporter posts to, by the OTLP exporter specification's rules. */
export function otlpTracesEndpoint(env: Readonly<Record<string, string | undefined>>): string {
  const specific = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (specific) return specific;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || DEFAULT_OTLP_ENDPOINT;
  return `${base.replace(/\/+$/, '')}/v1/traces`;
}

/**
 * Starts the trace pipeline (see the module comment) and registers it as the process's global
 * tracer provider, context manager and propagator. Throws {@link MissingDependencyError} when an
 * SDK package is missing.
 */
export function startOtelExport(options: OtelExportOptions): OtelExport {
  const missing: string[] = [];
  const feature = `Exporting traces (\`${options.command ?? 'baton serve'} --otel\`)`;
  const load = <Module>(name: string): Module | undefined => {
    try {
      return loadOptionalDependency<Module>(name, feature);
    } catch (error) {
      // Absent packages are gathered into one message; one that is there but broken is its
      // own problem, reported as it is.
      if (MissingDependencyError.isInstance(error) && moduleNotFound(error.cause)) {
        missing.push(name);
        return undefined;
      }
      throw error;
    }
  };
  const api = load<Api>('@opentelemetry/api');
  const sdk = load<SdkTrace>('@opentelemetry/sdk-trace');
  const hooks = load<ContextAsyncHooks>('@opentelemetry/context-async-hooks');
  const resources = load<Resources>('@opentelemetry/resources');
  const otlp = load<OtlpHttp>('@opentelemetry/exporter-trace-otlp-http');
  const core = load<Core>('@opentelemetry/core');
  const http = load<HttpInstrumentationModule>('@opentelemetry/instrumentation-http');
  if (!api || !sdk || !hooks || !resources || !otlp || !core || !http) {
    throw new MissingDependencyError(missing.join(' '), feature);
  }

  const env = options.env;
  const delay = Number(env.OTEL_BSP_SCHEDULE_DELAY);
  const resource = resourceFromAttributes(resources, {
    'service.name': 'baton',
    ...(options.serviceVersion ? { 'service.version': options.serviceVersion } : {}),
  });
  const provider = new sdk.TracerProvider({
    resource,
    spanProcessors: [
      // First, so that a span carries its request's session and agent before it is exported.
      createRequestScopeProcessor(),
      new sdk.BatchSpanProcessor({
        exporter: new otlp.OTLPTraceExporter(),
        // The SDK no longer reads OTEL_BSP_SCHEDULE_DELAY itself; honour the standard variable.
        ...(Number.isFinite(delay) && delay >= 0 ? { scheduledDelayMillis: delay } : {}),
      }),
    ],
  });
  // Without an async context manager no span is ever "active" across an await, and nothing
  // would nest. These calls return false when something else registered first; then that wins.
  const ownsContext = api.context.setGlobalContextManager(new hooks.AsyncLocalStorageContextManager().enable());
  // The AI SDK's integration records through the global provider; Baton's own spans use this
  // provider directly, so they are exported here even when another provider is global.
  const ownsProvider = api.trace.setGlobalTracerProvider(provider);
  // OTEL_PROPAGATORS' default: W3C trace context (`traceparent`) and baggage.
  const ownsPropagator = api.propagation.setGlobalPropagator(
    new core.CompositePropagator({
      propagators: [new core.W3CTraceContextPropagator(), new core.W3CBaggagePropagator()],
    }),
  );
  const instrumentation = new http.HttpInstrumentation({
    ignoreIncomingRequestHook: (request) => !isTracedRequest(request),
    // The server's side only: model calls go through fetch, which this does not see anyway.
    disableOutgoingRequestInstrumentation: true,
  });
  instrumentation.setTracerProvider(provider);
  // The instrumentation patches node:http when it is next required; the server (and
  // @hono/node-server) loaded it long ago, and every copy is the same module, so require it.
  createRequire(import.meta.url)('node:http');

  const aiIntegration = registerAiSdkSpans();
  const tracer = provider.getTracer(TELEMETRY_SCOPE, options.serviceVersion);

  return {
    endpoint: otlpTracesEndpoint(env),
    aiSdkSpans: aiIntegration !== undefined,
    tracer,
    async shutdown() {
      instrumentation.disable();
      if (aiIntegration) unregisterAiSdkSpans(aiIntegration);
      try {
        await provider.shutdown();
      } finally {
        // Only what this pipeline registered: another library's globals stay.
        if (ownsProvider) api.trace.disable();
        if (ownsContext) api.context.disable();
        if (ownsPropagator) api.propagation.disable();
      }
    },
  };
}

function moduleNotFound(cause: unknown): boolean {
  return typeof cause === 'object' && cause !== null && (cause as { code?: unknown }).code === 'MODULE_NOT_FOUND';
}

function resourceFromAttributes(resources: Resources, defaults: Record<string, string>): unknown {
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over Baton's defaults.
  return resources
    .resourceFromAttributes(defaults)
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
}

/** Registers `@ai-sdk/otel`'s integration with the AI SDK, when both are installed. */
function registerAiSdkSpans(): object | undefined {
  let otel: AiSdkOtel;
  let ai: AiTelemetryRegistry;
  try {
    otel = loadOptionalDependency<AiSdkOtel>('@ai-sdk/otel', 'AI SDK spans');
    ai = loadOptionalDependency<AiTelemetryRegistry>('ai', 'AI SDK spans');
  } catch {
    return undefined; // optional: the orchestration's own spans are recorded all the same
  }
  const integration = new otel.OpenTelemetry();
  ai.registerTelemetry(integration);
  return integration;
}

/** Removes the integration from the AI SDK's global list (`registerTelemetry` has no inverse). */
function unregisterAiSdkSpans(integration: object): void {
  const registry = (globalThis as { AI_SDK_TELEMETRY_INTEGRATIONS?: object[] }).AI_SDK_TELEMETRY_INTEGRATIONS;
  const index = registry?.indexOf(integration) ?? -1;
  if (registry && index >= 0) registry.splice(index, 1);
}
