/**
 * OpenTelemetry for orchestration decisions: a listener that records every
 * {@link OrchestrationEvent} (the step chosen and tools offered, a call reserved or rejected
 * and why, a sequence advanced, completed or left incomplete, a budget spent, and any event
 * type added later) as a span event named `baton.<event type>`, with the event's fields as
 * `baton.*` attributes.
 *
 * Where an event lands is decided by the active OpenTelemetry context when the engine emits
 * it, which is the context of the code that asked for the decision:
 *
 * - a span is active and recording: the event is added to it. With the AI SDK's telemetry on
 *   (`@ai-sdk/otel`), a tool's `execute` runs inside the SDK's `execute_tool <name>` span, so
 *   the reservation of that call, and whatever its request wrote (the previous call's
 *   completion: `sequence-advanced`, `step-changed`), sit on that span, under the SDK's
 *   `step n` and `invoke_agent` spans. Decisions taken in the SDK's callbacks (`prepareStep`,
 *   `toolApproval`, `onStepEnd`, `onEnd`) run in the caller's context, because the SDK makes
 *   only its tool and model-call spans active; they land on the caller's span (the HTTP
 *   request's, with `baton serve --otel`), the parent of `invoke_agent`.
 * - otherwise (no span, or one that has ended or was not sampled): a short span of the same
 *   name is started under the active context and carries the event, so nothing is lost and
 *   a parent that was not sampled keeps its children out too.
 *
 * Either span gets the session's attributes (`gen_ai.conversation.id`, `baton.session_id`), and
 * so does every span of the request when `createApp` serves it with telemetry on (its request
 * scope, `request-scope.ts`): a trace backend finds a session's turns whichever span it searches.
 *
 * `@opentelemetry/api` is an optional peer dependency, loaded when a telemetry object is
 * created: without it {@link createTelemetry} returns a listener that records nothing, and
 * nothing fails.
 */
import { unevaluatedRuleMessage } from '../core/call-rules.js';
import type { OrchestrationEvent, ToolDenial } from '../core/events.js';
import type { EventListener, OrchestrationManager } from '../orchestration/orchestration-manager.js';
import { loadOptionalDependency } from '../stores/optional-dependency.js';
import { addRequestAttributes, sessionAttributes } from './request-scope.js';

/** The instrumentation scope name of Baton's spans and events. */
export const TELEMETRY_SCOPE = 'baton';

/** Prefix of every span, span event and attribute Baton records. */
export const TELEMETRY_PREFIX = 'baton';

/** A value an OpenTelemetry attribute may hold. */
export type TelemetryAttributeValue = string | number | boolean | string[] | number[] | boolean[];

/** Attributes as OpenTelemetry takes them. */
export type TelemetryAttributes = Record<string, TelemetryAttributeValue>;

/**
 * The part of an OpenTelemetry `Span` Baton uses. Declared here so that the types of this
 * module do not need `@opentelemetry/api` installed; its `Span` fits.
 */
export interface TelemetrySpan {
  addEvent(name: string, attributes?: TelemetryAttributes): unknown;
  setAttributes(attributes: TelemetryAttributes): unknown;
  isRecording(): boolean;
  end(): void;
}

/** The part of an OpenTelemetry `Tracer` Baton uses; `@opentelemetry/api`'s `Tracer` fits. */
export interface TelemetryTracer {
  startSpan(
    name: string,
    options?: { kind?: number; attributes?: TelemetryAttributes },
    context?: never,
  ): TelemetrySpan;
}

/** Options of {@link createTelemetry}. */
export interface TelemetryOptions {
  /** The tracer to record with. Default: the `baton` tracer of the global tracer provider. */
  tracer?: TelemetryTracer;
}

/** What {@link createTelemetry} returns. */
export interface OrchestrationTelemetry {
  /** False when `@opentelemetry/api` is not installed (or failed to load): nothing is recorded. */
  readonly enabled: boolean;
  /** Why telemetry is off, when it is (the load failure). */
  readonly unavailable: Error | undefined;
  /** Records one event; pass it as a manager's `onEvent`, or use {@link instrument}. */
  readonly listener: EventListener;
  /** Subscribes {@link listener} to `manager`; returns the function that unsubscribes. */
  instrument(manager: OrchestrationManager): () => void;
}

/** The slice of `@opentelemetry/api` this module calls. */
interface OtelApi {
  context: { active(): unknown };
  trace: {
    getSpan(context: unknown): TelemetrySpan | undefined;
    getTracer(name: string, version?: string): TelemetryTracer;
  };
}

/** SpanKind.INTERNAL of `@opentelemetry/api` (a const enum there; the value is fixed by the spec). */
const SPAN_KIND_INTERNAL = 0;

/**
 * Creates the orchestration telemetry (see the module comment). It is cheap when nothing
 * listens: with no tracer provider registered, the global tracer's spans do not record.
 */
export function createTelemetry(options: TelemetryOptions = {}): OrchestrationTelemetry {
  const loaded = loadApi();
  if (loaded instanceof Error) return disabledTelemetry(loaded);
  const api = loaded;
  // Resolved per event when no tracer is given, so a provider registered after this call
  // (the usual order in an app's startup file) still gets the events.
  const tracerOf = (): TelemetryTracer => options.tracer ?? api.trace.getTracer(TELEMETRY_SCOPE);
  const listener: EventListener = (event) => {
    const name = spanEventName(event.type);
    const active = api.context.active();
    const span = api.trace.getSpan(active);
    if (span?.isRecording()) {
      span.addEvent(name, eventAttributes(event));
      // The span did work for this session: a trace backend finds it by the session, and so
      // every span of the request (when a request scope is active).
      const session = sessionAttributes(event.sessionId);
      span.setAttributes(session);
      addRequestAttributes(session);
      return;
    }
    // The context type is opaque to this module: whatever `context.active()` returned is what
    // `startSpan` takes as its parent.
    const own = tracerOf().startSpan(name, { kind: SPAN_KIND_INTERNAL }, active as never);
    // Not sampled, or no provider registered: the attributes are not even built.
    if (own.isRecording()) {
      const attributes = eventAttributes(event);
      own.setAttributes({ ...attributes, ...sessionAttributes(event.sessionId) });
      own.addEvent(name, attributes);
      addRequestAttributes(sessionAttributes(event.sessionId));
    }
    own.end();
  };
  return {
    enabled: true,
    unavailable: undefined,
    listener,
    instrument: (manager) => manager.subscribe(listener),
  };
}

/** The span event (and short span) name of an event type: `baton.tool-rejected`. */
export function spanEventName(type: string): string {
  return `${TELEMETRY_PREFIX}.${type}`;
}

/**
 * The attributes Baton records for `event`: every field but `type`, named `baton.<field>` in
 * snake case, nested objects flattened with dots (`reason.code` → `baton.reason.code`), lists
 * of strings, numbers or booleans kept as lists and anything else as JSON. Unknown event types
 * get the same treatment, so events added later are recorded without a change here. A rule's
 * evaluation failure is recorded without the evaluator's words, which may quote the call's
 * arguments (see `withoutContent`).
 */
export function eventAttributes(event: OrchestrationEvent | { readonly type: string }): TelemetryAttributes {
  const attributes: TelemetryAttributes = {};
  for (const [key, value] of Object.entries(event)) {
    if (key === 'type') continue;
    flatten(`${TELEMETRY_PREFIX}.${snakeCase(key)}`, key === 'reason' ? withoutContent(value) : value, attributes, 0);
  }
  return attributes;
}

/**
 * A refusal's reason as telemetry may carry it. A rule that could not be evaluated says why in
 * the evaluator's words (`evaluationError`, and in its message), which may quote the call's
 * arguments ("Invalid duration string: <the argument>", "No such key: <the argument>"): that is
 * for the model, which sent them, and not for a trace backend, where tool input never goes
 * unless the app opts in. The rule and the fact that it could not be evaluated stay.
 */
function withoutContent(reason: unknown): unknown {
  if (typeof reason !== 'object' || reason === null || !('evaluationError' in reason)) return reason;
  const { evaluationError: _words, ...rest } = reason as ToolDenial & { code: 'rule' };
  return { ...rest, message: unevaluatedRuleMessage(rest.rule) };
}

/** Nested objects deeper than this are recorded as JSON rather than flattened further. */
const MAX_DEPTH = 3;

function flatten(name: string, value: unknown, into: TelemetryAttributes, depth: number): void {
  if (value === undefined || value === null) return;
  switch (typeof value) {
    case 'string':
    case 'number':
    case 'boolean':
      into[name] = value;
      return;
    case 'object':
      break;
    default:
      return; // functions, symbols, bigints: not data an event carries
  }
  if (Array.isArray(value)) {
    into[name] = homogeneousList(value) ?? JSON.stringify(value);
    return;
  }
  if (depth >= MAX_DEPTH) {
    into[name] = JSON.stringify(value);
    return;
  }
  for (const [key, nested] of Object.entries(value as Record<string, unknown>)) {
    flatten(`${name}.${snakeCase(key)}`, nested, into, depth + 1);
  }
}

/** The list as an attribute value when all its items are of one primitive type. */
function homogeneousList(list: readonly unknown[]): string[] | number[] | boolean[] | undefined {
  if (list.every((item) => typeof item === 'string')) return [...list] as string[];
  if (list.every((item) => typeof item === 'number')) return [...list] as number[];
  if (list.every((item) => typeof item === 'boolean')) return [...list] as boolean[];
  return undefined;
}

/** Field names seen so far, converted once: events reuse a handful of names. */
const snakeCases = new Map<string, string>();

function snakeCase(key: string): string {
  let converted = snakeCases.get(key);
  if (converted === undefined) {
    converted = key.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
    // Bounded: an event type with ever-new field names must not grow this without end.
    if (snakeCases.size < 1000) snakeCases.set(key, converted);
  }
  return converted;
}

function loadApi(): OtelApi | Error {
  try {
    return loadOptionalDependency<OtelApi>('@opentelemetry/api', 'Baton telemetry');
  } catch (error) {
    // Telemetry is never worth failing an app for: without the package it records nothing.
    return error instanceof Error ? error : new Error(String(error));
  }
}

function disabledTelemetry(unavailable: Error): OrchestrationTelemetry {
  const listener: EventListener = () => {};
  return { enabled: false, unavailable, listener, instrument: (manager) => manager.subscribe(listener) };
}
