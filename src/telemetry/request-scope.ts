/**
 * The session and agent of a request, on every span of it: a trace backend finds a session's
 * turns by `gen_ai.conversation.id` or `baton.session_id`, and an agent's by `baton.agent_id`,
 * whichever span of the trace it looks at.
 *
 * What a request serves is learnt while it is handled (the session of a new chat is chosen by
 * the turn, after the AI SDK's `invoke_agent` span has started), so the attributes cannot be
 * set once when a span starts. A request scope, carried in the OpenTelemetry context of the
 * request, holds them and every span started in it that is still open; attributes added to the
 * scope land on all of those spans, and spans started later get them at once. The server adds
 * its span to the scope itself; the others join through {@link createRequestScopeProcessor},
 * a span processor of the tracer provider (`baton serve --otel` registers it).
 *
 * `@opentelemetry/api` is loaded when first needed; without it there is no scope and nothing
 * here does anything.
 */
import { loadOptionalDependency } from '../stores/optional-dependency.js';
import type { TelemetryAttributes, TelemetrySpan } from './otel.js';

/** The attributes that name a session on a span: the GenAI convention's and Baton's own. */
export function sessionAttributes(sessionId: string): TelemetryAttributes {
  return { 'gen_ai.conversation.id': sessionId, 'baton.session_id': sessionId };
}

/** The attribute that names the agent on a span. */
export function agentAttributes(agentId: string): TelemetryAttributes {
  return { 'baton.agent_id': agentId };
}

/** The slice of `@opentelemetry/api` this module calls. */
interface ScopeApi {
  context: {
    active(): OtelContext;
    with<T>(context: OtelContext, fn: () => T): T;
  };
  trace: { getSpan(context: OtelContext): TelemetrySpan | undefined };
  createContextKey(description: string): symbol;
}
interface OtelContext {
  getValue(key: symbol): unknown;
  setValue(key: symbol, value: unknown): OtelContext;
}

/** The attributes of one request, and its spans still open. */
export interface RequestScope {
  /** Adds attributes to every open span of the request and to those it starts later. */
  add(attributes: TelemetryAttributes): void;
  /** Runs `fn` with this scope in the active context, so the spans it starts join. */
  run<T>(fn: () => T): T;
}

/**
 * Starts a scope for the request being handled, with the active span (the request's `SERVER`
 * span, whoever started it) in it. Undefined without `@opentelemetry/api`.
 */
export function startRequestScope(): RequestScope | undefined {
  const api = scopeApi();
  if (api === undefined) return undefined;
  const scope = new Scope();
  const span = api.trace.getSpan(api.context.active());
  if (span?.isRecording()) scope.join(span);
  const key = scopeKey(api);
  return {
    add: (attributes) => scope.add(attributes),
    run: (fn) => api.context.with(api.context.active().setValue(key, scope), fn),
  };
}

/**
 * Adds attributes to the request scope of the active context, if there is one (a request that
 * `createApp` serves with telemetry on).
 */
export function addRequestAttributes(attributes: TelemetryAttributes): void {
  const api = scopeApi();
  if (api === undefined) return;
  const scope = api.context.active().getValue(scopeKey(api));
  if (scope instanceof Scope) scope.add(attributes);
}

/**
 * A span processor (`@opentelemetry/sdk-trace`'s `SpanProcessor`) that puts every span started
 * in a request scope into it. Put it before the exporting processor:
 * `new TracerProvider({ spanProcessors: [createRequestScopeProcessor(), new BatchSpanProcessor(...)] })`.
 */
export function createRequestScopeProcessor(): {
  onStart(span: TelemetrySpan, parentContext: OtelContext): void;
  onEnd(span: object): void;
  forceFlush(): Promise<void>;
  shutdown(): Promise<void>;
} {
  const scopes = new WeakMap<object, Scope>();
  return {
    onStart(span, parentContext) {
      const api = scopeApi();
      if (api === undefined) return;
      const scope = parentContext.getValue(scopeKey(api));
      if (!(scope instanceof Scope)) return;
      scope.join(span);
      scopes.set(span, scope);
    },
    onEnd(span) {
      scopes.get(span)?.leave(span as TelemetrySpan);
    },
    forceFlush: async () => {},
    shutdown: async () => {},
  };
}

class Scope {
  readonly #attributes: TelemetryAttributes = {};
  readonly #open = new Set<TelemetrySpan>();

  join(span: TelemetrySpan): void {
    if (Object.keys(this.#attributes).length > 0) span.setAttributes(this.#attributes);
    this.#open.add(span);
  }

  leave(span: TelemetrySpan): void {
    this.#open.delete(span);
  }

  add(attributes: TelemetryAttributes): void {
    // Events repeat the session on every decision: only what changes is written.
    const changed: TelemetryAttributes = {};
    let any = false;
    for (const [key, value] of Object.entries(attributes)) {
      if (this.#attributes[key] !== value) {
        changed[key] = value;
        this.#attributes[key] = value;
        any = true;
      }
    }
    if (!any) return;
    for (const span of this.#open) {
      // A span that ended without the processor seeing it (the server's own) leaves here.
      if (span.isRecording()) span.setAttributes(changed);
      else this.#open.delete(span);
    }
  }
}

let loaded: ScopeApi | null | undefined;

function scopeApi(): ScopeApi | undefined {
  if (loaded === undefined) {
    try {
      loaded = loadOptionalDependency<ScopeApi>('@opentelemetry/api', 'Baton telemetry');
    } catch {
      loaded = null; // telemetry is never worth failing an app for
    }
  }
  return loaded ?? undefined;
}

/** The context key of the scope (`createContextKey` is `Symbol.for`: the same key on every call). */
function scopeKey(api: ScopeApi): symbol {
  return api.createContextKey('baton.request-scope');
}

/** The slice of `@opentelemetry/core` {@link setHttpRoute} calls. */
interface RouteCore {
  getRPCMetadata(context: OtelContext): { type: unknown; route?: string } | undefined;
  RPCType: { HTTP: unknown };
}

let loadedCore: RouteCore | null | undefined;

/**
 * Names the route of the request being handled (`/api/chat/:agentId`) for OpenTelemetry's HTTP
 * instrumentation, the way web frameworks' instrumentations do: it reads the route when the
 * request ends and sets `http.route` and the `SERVER` span's name from it. Does nothing
 * without that instrumentation (or without `@opentelemetry/core`, which it brings).
 */
export function setHttpRoute(route: string): void {
  const api = scopeApi();
  if (api === undefined) return;
  if (loadedCore === undefined) {
    try {
      loadedCore = loadOptionalDependency<RouteCore>('@opentelemetry/core', 'Baton telemetry');
    } catch {
      loadedCore = null;
    }
  }
  const metadata = loadedCore?.getRPCMetadata(api.context.active());
  if (metadata !== undefined && metadata.type === loadedCore?.RPCType.HTTP) metadata.route = route;
}
