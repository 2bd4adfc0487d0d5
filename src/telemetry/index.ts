/**
 * `baton-agents/telemetry`: orchestration decisions as OpenTelemetry span events, and the OTLP/HTTP
 * pipeline of `baton serve --otel`. See `docs/telemetry.md`.
 */
export {
  createTelemetry,
  eventAttributes,
  type OrchestrationTelemetry,
  spanEventName,
  TELEMETRY_PREFIX,
  TELEMETRY_SCOPE,
  type TelemetryAttributes,
  type TelemetryAttributeValue,
  type TelemetryOptions,
  type TelemetrySpan,
  type TelemetryTracer,
} from './otel.js';
export {
  DEFAULT_OTLP_ENDPOINT,
  type IncomingRequestHead,
  isTracedRequest,
  type OtelExport,
  type OtelExportOptions,
  otlpTracesEndpoint,
  startOtelExport,
} from './otel-node.js';
export { createRequestScopeProcessor } from './request-scope.js';
