/**
 * `orchestrationParts()`: Baton's `data-orchestration` parts in a UI message stream of your own,
 * the same parts `baton serve` streams (the server writes its answer with the same transform):
 * before every model step the orchestration that step runs under, right before the step's
 * `start-step`; after the last step, once the turn's writes are stored, the session at rest
 * (`final: true`), right before the message's `finish`. Every part has the id `orchestration`,
 * so `useChat` keeps one per message and replaces it in place, and `onData` sees each one.
 *
 * Why `onStep` and not the stream alone: a snapshot is taken when the step is prepared
 * (`prepareStep`), and the AI SDK may prepare the next step before a slow reader has read the
 * current one's `start-step`; the snapshots queue in step order and go out as their steps do.
 *
 * @example
 * ```ts
 * const parts = orchestrationParts({ manager, config: template });
 * const orchestration = orchestrate({ manager, config: template, sessionId: id, tools, onStep: parts.onStep });
 * const result = streamText({ model, messages: await convertToModelMessages(messages), ...orchestration });
 * return createUIMessageStreamResponse({ stream: parts.stream(result.toUIMessageStream(), orchestration) });
 * ```
 */
import type { ToolSet, UIDataTypes, UIMessageChunk } from 'ai';
import { z } from 'zod/v4';
import type { OrchestrationSource } from '../core/compile.js';
import { BatonError, InvalidArgumentError } from '../core/errors.js';
import { optionIssues, throwOnErrors } from '../core/option-issues.js';
import type { ToolAnnotations } from '../core/tool-annotations.js';
import type { OrchestrationManager } from '../orchestration/orchestration-manager.js';
import { configIssues, orchestrateOptionSchemas } from './check-orchestrate-options.js';
import type { Orchestration, StepInfo } from './orchestrate.js';
import {
  finalSnapshot,
  type OrchestrationDataParts,
  type OrchestrationSnapshot,
  stepSnapshot,
} from './orchestration-snapshot.js';

/** The id every `data-orchestration` part shares, so a client keeps one and replaces it in place. */
export const ORCHESTRATION_PART_ID = 'orchestration';

/** Options of {@link orchestrationParts}. */
export interface OrchestrationPartsOptions {
  /** The manager given to `orchestrate()`. */
  manager: OrchestrationManager;
  /** The template (or orchestration block) given to `orchestrate()`. */
  config: OrchestrationSource;
  /** The agent the parts name; default the template's `id` (required with an orchestration block). */
  agentId?: string;
  /** The `toolAnnotations` given to `orchestrate()`, so the final part judges annotation selectors as the turn did. */
  toolAnnotations?: ReadonlyMap<string, ToolAnnotations>;
}

/**
 * The options' shapes: the same schemas as `orchestrate()`'s options of the same names, so both
 * refuse a value with the same words. Typed on the options, so a new option does not compile
 * until it is checked here.
 */
const orchestrationPartsOptionsSchema = z.strictObject({
  manager: orchestrateOptionSchemas.manager,
  config: orchestrateOptionSchemas.config,
  agentId: orchestrateOptionSchemas.agentId.optional(),
  toolAnnotations: orchestrateOptionSchemas.toolAnnotations.optional(),
} satisfies { [K in keyof Required<OrchestrationPartsOptions>]: z.ZodType });

/** What of an {@link Orchestration} the parts read: its tools, and the turn once it has ended. */
export type OrchestrationOutcome = Pick<
  Orchestration<ToolSet>,
  'tools' | 'settled' | 'sessionState' | 'sequenceIncomplete' | 'lastStep'
>;

/** Baton's parts for one turn; see {@link orchestrationParts}. */
export interface OrchestrationParts {
  /** Pass as `orchestrate({ onStep })`: it takes each model step's snapshot. */
  readonly onStep: (info: StepInfo) => void;
  /**
   * Your UI message stream (`result.toUIMessageStream()`) with the parts added. At its end it
   * waits for `orchestration.settled()`, so the final part shows what the turn stored; a turn
   * that failed ends with an `error` part instead (a Baton error's message, else the AI SDK's
   * generic text).
   */
  stream<METADATA = unknown, DATA extends UIDataTypes = UIDataTypes>(
    stream: ReadableStream<UIMessageChunk<METADATA, DATA>>,
    orchestration: OrchestrationOutcome,
  ): ReadableStream<UIMessageChunk<METADATA, DATA & OrchestrationDataParts>>;
}

/**
 * Baton's `data-orchestration` parts for one turn of your own route (see the module comment):
 * create it per request, pass `onStep` to `orchestrate()`, and put the turn's UI message stream
 * through `stream()`. Its options are checked now: a `TemplateConfigError` lists every problem
 * (an unknown option with a did-you-mean, a value of the wrong type, a bad config), as
 * `orchestrate()` lists its own.
 */
export function orchestrationParts(options: OrchestrationPartsOptions): OrchestrationParts {
  // Every problem at once, as `orchestrate()` reports its own: a misspelt `config` would
  // otherwise fail below as a TypeError, and a bad config when the manager compiles it.
  const issues = optionIssues(orchestrationPartsOptionsSchema, options);
  if (typeof options === 'object' && options !== null) {
    // Annotations that are not a Map are reported above; the config is judged without them.
    const annotations = options.toolAnnotations instanceof Map ? options.toolAnnotations : undefined;
    issues.push(...configIssues(options.manager, options.config, undefined, annotations));
  }
  throwOnErrors(issues, 'orchestrationParts() options');
  const agentId = options.agentId ?? templateId(options.config);
  if (agentId === undefined) {
    throw new InvalidArgumentError(
      'agentId',
      'orchestrationParts() names the agent in every part: pass agentId, or a template (with an id) as config',
    );
  }
  // Validated and compiled now (once per config object), so a bad config fails here.
  const plan = options.manager.plan(options.config, options.toolAnnotations);
  const steps: OrchestrationSnapshot[] = [];
  let stepsTaken = 0;
  return {
    onStep(info) {
      stepsTaken++;
      steps.push(stepSnapshot(agentId, info));
    },
    stream<METADATA, DATA extends UIDataTypes>(
      stream: ReadableStream<UIMessageChunk<METADATA, DATA>>,
      orchestration: OrchestrationOutcome,
    ) {
      type Chunk = UIMessageChunk<METADATA, DATA & OrchestrationDataParts>;
      const final = async (): Promise<OrchestrationSnapshot | undefined> => {
        await orchestration.settled();
        if (stepsTaken === 0 && orchestration.lastStep() !== undefined) {
          throw new InvalidArgumentError(
            'onStep',
            'orchestrationParts(): the model steps were not reported; pass parts.onStep as orchestrate({ onStep })',
          );
        }
        const state = orchestration.sessionState();
        // No model step was prepared (the call failed first): there is no turn to show.
        if (state === undefined) return undefined;
        const explanation = options.manager.explainState(plan, state, Object.keys(orchestration.tools));
        return finalSnapshot(agentId, state, explanation, orchestration.sequenceIncomplete());
      };
      return (stream as ReadableStream<UIMessageChunk>).pipeThrough(
        new TransformStream<UIMessageChunk, Chunk>(
          orchestrationPartsTransformer<Chunk>({
            steps,
            final,
            errorText: clientErrorText,
            write: (controller, chunk) => controller.enqueue(chunk as Chunk),
          }),
        ),
      );
    },
  };
}

/** How {@link orchestrationPartsTransformer} gets its parts and writes its chunks. */
export interface PartsWriterOptions<OUT> {
  /** Snapshots of the model steps not yet sent, in step order (filled by an `onStep`, emptied here). */
  steps: OrchestrationSnapshot[];
  /** The final snapshot, once the turn's writes are stored (undefined: none to send). */
  final: () => Promise<OrchestrationSnapshot | undefined>;
  /** The text of the `error` chunk sent when `final` fails. */
  errorText: (error: unknown) => string;
  /** Writes one chunk out (as is, or encoded). */
  write: (controller: TransformStreamDefaultController<OUT>, chunk: UIMessageChunk) => void;
  /** Writes what comes first (the server's `start`). */
  start?: (controller: TransformStreamDefaultController<OUT>) => void;
  /** Writes what comes last, after the final part and the stream's own `finish` (the server's). */
  end?: (controller: TransformStreamDefaultController<OUT>, failed: boolean) => Promise<void> | void;
}

/**
 * The one place that decides where Baton's parts go in a UI message stream (see the module
 * comment), for {@link orchestrationParts} and the HTTP server, which encodes in the same pass.
 */
export function orchestrationPartsTransformer<OUT>(options: PartsWriterOptions<OUT>): Transformer<UIMessageChunk, OUT> {
  const { steps, write } = options;
  let finish: UIMessageChunk | undefined;
  const sendSteps = (controller: TransformStreamDefaultController<OUT>) => {
    for (const snapshot of steps.splice(0)) write(controller, orchestrationPart(snapshot));
  };
  return {
    start(controller) {
      options.start?.(controller);
    },
    transform(chunk, controller) {
      // The snapshot of a step was taken in prepareStep, before the step began.
      if (chunk.type === 'start-step') sendSteps(controller);
      // The final part belongs to the message, so it goes before the message's finish.
      if (chunk.type === 'finish') {
        finish = chunk;
        return;
      }
      write(controller, chunk);
    },
    async flush(controller) {
      // A step that was prepared but never began (the turn was aborted) still shows what it offered.
      sendSteps(controller);
      let failed = false;
      try {
        const final = await options.final();
        if (final !== undefined) write(controller, orchestrationPart(final));
      } catch (error) {
        failed = true;
        write(controller, { type: 'error', errorText: options.errorText(error) });
      }
      if (finish) write(controller, finish);
      await options.end?.(controller, failed);
    },
  };
}

/** One `data-orchestration` chunk. */
function orchestrationPart(data: OrchestrationSnapshot): UIMessageChunk {
  return { type: 'data-orchestration', id: ORCHESTRATION_PART_ID, data } as UIMessageChunk;
}

/**
 * What a client is told of a failure: Baton's own messages say what to do; others (a
 * provider's) may carry details of the server, so the client gets the AI SDK's generic text.
 */
export function clientErrorText(error: unknown): string {
  return BatonError.isInstance(error) ? error.message : 'An error occurred.';
}

function templateId(config: OrchestrationSource): string | undefined {
  const id = (config as { id?: unknown; agentId?: unknown }).id ?? (config as { agentId?: unknown }).agentId;
  return typeof id === 'string' ? id : undefined;
}
