/**
 * `baton serve --otel`: an OpenTelemetry trace pipeline for the server process, exporting over
 * OTLP/HTTP (JSON) to `$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else
 * `$OTEL_EXPORTER_OTLP_ENDPOINT/v1/traces`, else `http://localhost:4318/v1/traces`; the
 * exporter reads the other standard `OTEL_EXPORTER_OTLP_*` variables (headers, timeout)
 * itself.
 *
 * It records three things in one trace per API request:
 *
 * - a `SERVER` span per `/api` request (`POST /api/chat`), active while the request is handled
 *   and ended when its (streamed) body is done, so everything below shares its trace;
 * - the AI SDK's own spans (`invoke_agent`, `step n`, `chat`, `execute_tool`) when
 *   `@ai-sdk/otel` is installed: its `OpenTelemetry` integration is registered with the AI SDK;
 * - every orchestration event, through {@link createTelemetry}'s listener on the manager.
 *
 * The SDK packages are optional peer dependencies, loaded only here: a missing one is one
 * {@link MissingDependencyError} naming the `npm install` command for all that are missing.
 */
import { MissingDependencyError } from '../core/errors.js';
import type { OrchestrationManager } from '../orchestration/orchestration-manager.js';
import { loadOptionalDependency } from '../stores/optional-dependency.js';
import {
  createTelemetry,
  type OrchestrationTelemetry,
  TELEMETRY_SCOPE,
  type TelemetryAttributes,
  type TelemetrySpan,
} from './otel.js';

/** Where OTLP/HTTP goes when no environment variable says otherwise. */
export const DEFAULT_OTLP_ENDPOINT = 'http://localhost:4318';

/** Options of {@link startOtelExport}. */
export interface OtelExportOptions {
  /** The environment to read `OTEL_*` from (the exporter also reads `process.env` itself). */
  env: Readonly<Record<string, string | undefined>>;
  /** `service.version` of the resource. */
  serviceVersion?: string;
}

/** A fetch handler, as `@hono/node-server` calls it. */
export type FetchHandler = (request: Request, ...rest: never[]) => Response | Promise<Response>;

/** A running export pipeline; see the module comment. */
export interface OtelExport {
  /** The URL spans are posted to. */
  readonly endpoint: string;
  /** True when the AI SDK's spans are recorded too (`@ai-sdk/otel` is installed). */
  readonly aiSdkSpans: boolean;
  /** The orchestration telemetry recording into this pipeline. */
  readonly telemetry: OrchestrationTelemetry;
  /** Records the manager's events; returns the function that stops it. */
  instrument(manager: OrchestrationManager): () => void;
  /** `fetch` with a `SERVER` span around every `/api` request. */
  traceRequests<F extends FetchHandler>(fetch: F): F;
  /** Exports what is buffered and unregisters everything this pipeline registered. */
  shutdown(): Promise<void>;
}

/** The slices of the SDK packages this module calls (their full types stay out of Baton's). */
interface Api {
  context: {
    active(): unknown;
    with<T>(context: unknown, fn: () => T): T;
    setGlobalContextManager(manager: unknown): boolean;
    disable(): void;
  };
  trace: {
    setSpan(context: unknown, span: unknown): unknown;
    setGlobalTracerProvider(provider: unknown): boolean;
    disable(): void;
  };
}
type ServerSpanStarter = (
  name: string,
  options?: { kind?: number; attributes?: TelemetryAttributes },
  context?: never,
) => ServerSpan;
interface ServerSpan extends TelemetrySpan {
  setAttribute(key: string, value: string | number): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  recordException(exception: unknown): unknown;
}
interface SdkTrace {
  TracerProvider: new (options: {
    resource: unknown;
    spanProcessors: unknown[];
  }) => {
    shutdown(): Promise<void>;
    getTracer(name: string, version?: string): { startSpan: ServerSpanStarter };
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

/** SpanKind.SERVER and SpanStatusCode.ERROR of `@opentelemetry/api` (fixed by the spec). */
const SPAN_KIND_SERVER = 1;
const STATUS_ERROR = 2;

/** The traces URL the exporter posts to, by the OTLP exporter specification's rules. */
export function otlpTracesEndpoint(env: Readonly<Record<string, string | undefined>>): string {
  const specific = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (specific) return specific;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || DEFAULT_OTLP_ENDPOINT;
  return `${base.replace(/\/+$/, '')}/v1/traces`;
}

/**
 * Starts the trace pipeline (see the module comment) and registers it as the process's global
 * tracer provider and context manager. Throws {@link MissingDependencyError} when an SDK
 * package is missing.
 */
export function startOtelExport(options: OtelExportOptions): OtelExport {
  const missing: string[] = [];
  const load = <Module>(name: string): Module | undefined => {
    try {
      return loadOptionalDependency<Module>(name, 'Exporting traces (`baton serve --otel`)');
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
  if (!api || !sdk || !hooks || !resources || !otlp) {
    throw new MissingDependencyError(missing.join(' '), 'Exporting traces (`baton serve --otel`)');
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
      new sdk.BatchSpanProcessor({
        exporter: new otlp.OTLPTraceExporter(),
        // The SDK no longer reads OTEL_BSP_SCHEDULE_DELAY itself; honour the standard variable.
        ...(Number.isFinite(delay) && delay >= 0 ? { scheduledDelayMillis: delay } : {}),
      }),
    ],
  });
  // Without an async context manager no span is ever "active" across an await, and nothing
  // would nest. Both calls return false when something else registered first; then that wins.
  const ownsContext = api.context.setGlobalContextManager(new hooks.AsyncLocalStorageContextManager().enable());
  // The AI SDK's integration records through the global provider; Baton's own spans use this
  // provider directly, so they are exported here even when another provider is global.
  const ownsProvider = api.trace.setGlobalTracerProvider(provider);

  const aiIntegration = registerAiSdkSpans();
  const tracer = provider.getTracer(TELEMETRY_SCOPE, options.serviceVersion);
  const telemetry = createTelemetry({ tracer });
  const unsubscribes = new Set<() => void>();

  return {
    endpoint: otlpTracesEndpoint(env),
    aiSdkSpans: aiIntegration !== undefined,
    telemetry,
    instrument(manager) {
      const unsubscribe = telemetry.instrument(manager);
      unsubscribes.add(unsubscribe);
      return () => {
        unsubscribes.delete(unsubscribe);
        unsubscribe();
      };
    },
    traceRequests<F extends FetchHandler>(fetch: F): F {
      const traced = async (request: Request, ...rest: never[]): Promise<Response> => {
        const url = new URL(request.url);
        if (!url.pathname.startsWith('/api/')) return fetch(request, ...rest);
        const span = tracer.startSpan(`${request.method} ${routeOf(url.pathname)}`, {
          kind: SPAN_KIND_SERVER,
          attributes: { 'http.request.method': request.method, 'url.path': url.pathname },
        });
        const active = api.trace.setSpan(api.context.active(), span);
        let response: Response;
        try {
          response = await api.context.with(active, () => fetch(request, ...rest));
        } catch (error) {
          span.recordException(error);
          span.setStatus({ code: STATUS_ERROR });
          span.end();
          throw error;
        }
        span.setAttribute('http.response.status_code', response.status);
        if (response.status >= 500) span.setStatus({ code: STATUS_ERROR });
        return endWithBody(response, () => span.end());
      };
      return traced as F;
    },
    async shutdown() {
      for (const unsubscribe of unsubscribes) unsubscribe();
      unsubscribes.clear();
      if (aiIntegration) unregisterAiSdkSpans(aiIntegration);
      try {
        await provider.shutdown();
      } finally {
        // Only what this pipeline registered: another library's globals stay.
        if (ownsProvider) api.trace.disable();
        if (ownsContext) api.context.disable();
      }
    },
  };
}

function moduleNotFound(cause: unknown): boolean {
  return typeof cause === 'object' && cause !== null && (cause as { code?: unknown }).code === 'MODULE_NOT_FOUND';
}

/** `/api/chat/cognitive-reasoner` → `/api/chat`: span names must not grow with ids. */
function routeOf(pathname: string): string {
  return pathname.split('/').slice(0, 3).join('/');
}

/** The response, whose body ends `end()` once read or cancelled (a chat answer streams). */
function endWithBody(response: Response, end: () => void): Response {
  if (response.body === null) {
    end();
    return response;
  }
  let ended = false;
  const once = () => {
    if (!ended) {
      ended = true;
      end();
    }
  };
  const reader = response.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          once();
          controller.close();
        } else controller.enqueue(value);
      } catch (error) {
        once();
        controller.error(error);
      }
    },
    cancel(reason) {
      once();
      return reader.cancel(reason);
    },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
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
