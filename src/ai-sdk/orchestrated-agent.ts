/**
 * `createOrchestratedAgent()`: an AI SDK `ToolLoopAgent` built once and orchestrated per call.
 * The session is a call option (`agent.stream({ messages, options: { sessionId } })`), checked
 * by the agent's `callOptionsSchema`; its `prepareCall` makes that call's orchestration (guarded
 * tools, `prepareStep`, `toolApproval`), and the call's own callbacks carry its token usage and
 * end, so one agent serves any number of sessions at once with enforcement and usage intact.
 *
 * Why the calls are overridden: `prepareCall` can set a call's tools and hooks but not its
 * callbacks (the agent's own callbacks win), and the agent's callbacks are shared by every
 * call. So `generate()` and `stream()` give each call its own slot, which `prepareCall` fills
 * (it finds the slot by the call's messages array, a fresh one per call), and pass the slot's
 * callbacks as the call's own.
 */
import {
  type GenerateTextEndEvent,
  type GenerateTextResult,
  type ModelMessage,
  type OutputInterface,
  type StepResult,
  type StreamTextResult,
  ToolLoopAgent,
  type ToolLoopAgentSettings,
  type ToolSet,
} from 'ai';
import { z } from 'zod/v4';
import type { OrchestrationSource } from '../core/compile.js';
import type { ChatMessage } from '../core/messages.js';
import { managerSchema } from '../core/option-issues.js';
import type { OrchestrationState } from '../core/state.js';
import type { ToolAnnotations } from '../core/tool-annotations.js';
import type { OrchestrationManager } from '../orchestration/orchestration-manager.js';
import { assertOrchestratedAgentSettings } from './check-orchestrate-options.js';
import {
  type CallStart,
  type Orchestration,
  OrchestrationWiringError,
  orchestrate,
  type RuntimeContext,
  type StepInfo,
} from './orchestrate.js';

/** The call options of an {@link OrchestratedAgent}: the session, and per-call hooks. */
export interface OrchestratedCallOptions {
  /** The session the call belongs to. */
  sessionId: string;
  /** The manager for this call only, instead of the agent's (e.g. one per request of a stateless server). */
  manager?: OrchestrationManager | undefined;
  /** The conversation for message conditions, when it differs from the messages (e.g. UI messages). */
  conversation?: readonly ChatMessage[] | undefined;
  /** The agent the call runs for (see `orchestrate({ agentId })`). */
  agentId?: string | undefined;
  /**
   * The session as the caller already stored it with this call's user message (see
   * `orchestrate({ sessionState })`): the first model step needs no store round trip.
   */
  sessionState?: OrchestrationState | undefined;
  /** The caller made up `sessionId` for this call: no store read before the first step (see `orchestrate({ newSession })`). */
  newSession?: boolean | undefined;
  /** Called before every model step of this call with the step's orchestration. */
  onStep?: ((info: StepInfo) => void | PromiseLike<void>) | undefined;
  /** Receives this call's orchestration failures, instead of the agent's `onError`. */
  onError?: ((error: unknown) => void) | undefined;
  /**
   * The AI SDK's `experimental_toolApprovalSecret` for this call: signs its approval requests and
   * verifies the approvals its messages grant (derive one per session with `toolApprovalSecret()`).
   */
  toolApprovalSecret?: string | Uint8Array | undefined;
}

const isFunction = (value: unknown) => typeof value === 'function';

/** Checks the call options before anything runs, so a missing session id fails the call at once. */
export const orchestratedCallOptionsSchema = z.object({
  sessionId: z.string().min(1, 'an orchestrated agent call needs options.sessionId'),
  manager: z
    .custom<OrchestrationManager>(
      (value) => managerSchema.safeParse(value).success,
      'expected an OrchestrationManager (createOrchestrationManager())',
    )
    .optional(),
  conversation: z
    .array(z.custom<ChatMessage>((value) => typeof value === 'object' && value !== null, 'expected a message'))
    .optional(),
  agentId: z.string().min(1).optional(),
  sessionState: z
    .custom<OrchestrationState>((value) => typeof value === 'object' && value !== null, 'expected a session state')
    .optional(),
  newSession: z.boolean().optional(),
  onStep: z.custom<(info: StepInfo) => void | PromiseLike<void>>(isFunction, 'expected a function').optional(),
  onError: z.custom<(error: unknown) => void>(isFunction, 'expected a function').optional(),
  // z.custom, not z.instanceof: the declarations must also build against zod 3.25's zod/v4.
  toolApprovalSecret: z
    .union([z.string().min(1), z.custom<Uint8Array>((value) => value instanceof Uint8Array, 'expected bytes')])
    .optional(),
});

/** Settings of {@link createOrchestratedAgent}: a `ToolLoopAgent`'s, plus the orchestration. */
export type OrchestratedAgentSettings<
  TOOLS extends ToolSet,
  RUNTIME_CONTEXT extends RuntimeContext = RuntimeContext,
  OUTPUT extends OutputInterface = TextOutput,
> = ToolLoopAgentSettings<OrchestratedCallOptions, TOOLS, RUNTIME_CONTEXT, OUTPUT> & {
  /** Every tool of the agent; each call gets them guarded by its session's orchestration. */
  tools: TOOLS;
  /** The manager that keeps the sessions (a call may pass its own as `options.manager`). */
  manager: OrchestrationManager;
  /** The template or its `orchestration` block. */
  config: OrchestrationSource;
  /** What the tools declare (MCP annotations), by name, for annotation selectors: see `orchestrate({ toolAnnotations })`. */
  toolAnnotations?: ReadonlyMap<string, ToolAnnotations>;
  /**
   * Receives orchestration failures of every call (a state write, a callback that threw).
   * Default `console.error`. (`onError` stays the AI SDK's: errors of a streamed call.)
   */
  onOrchestrationError?: (error: unknown, sessionId: string) => void;
};

/** The parameters of one call of an {@link OrchestratedAgent}. */
export type OrchestratedGenerateParameters<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext> = Parameters<
  ToolLoopAgent<OrchestratedCallOptions, TOOLS, RUNTIME_CONTEXT>['generate']
>[0];

/** The parameters of one streamed call of an {@link OrchestratedAgent}. */
export type OrchestratedStreamParameters<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext> = Parameters<
  ToolLoopAgent<OrchestratedCallOptions, TOOLS, RUNTIME_CONTEXT>['stream']
>[0];

/** A call's result with its orchestration (`settled()`, `sequenceIncomplete()`, `lastStep()`). */
export interface WithOrchestration<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext> {
  readonly orchestration: Orchestration<TOOLS, RUNTIME_CONTEXT>;
}

/** One call's orchestration, made by `prepareCall` once the call options are checked. */
interface CallSlot<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext> {
  orchestration?: Orchestration<TOOLS, RUNTIME_CONTEXT>;
}

/** The slot of each call, by the call's own messages array (a fresh array per call). */
const slots = new WeakMap<readonly ModelMessage[], CallSlot<ToolSet, RuntimeContext>>();

/** The output of a call without an `output` setting: text (the AI SDK's own default). */
export type TextOutput = OutputInterface<string, string, never>;

/** A `ToolLoopAgent` whose every call is orchestrated for the session its options name. */
export class OrchestratedAgent<
  TOOLS extends ToolSet,
  RUNTIME_CONTEXT extends RuntimeContext = RuntimeContext,
  OUTPUT extends OutputInterface = TextOutput,
> extends ToolLoopAgent<OrchestratedCallOptions, TOOLS, RUNTIME_CONTEXT, OUTPUT> {
  constructor(settings: OrchestratedAgentSettings<TOOLS, RUNTIME_CONTEXT, OUTPUT>) {
    assertOrchestratedAgentSettings(settings);
    const { manager, config, onOrchestrationError, prepareCall, toolAnnotations } = settings;
    super({
      ...settings,
      // The agent's call options are the session and its hooks: checked before anything runs.
      callOptionsSchema: orchestratedCallOptionsSchema,
      prepareCall: async (call) => {
        const slot = slots.get(call.messages ?? []) as CallSlot<TOOLS, RUNTIME_CONTEXT> | undefined;
        if (slot === undefined) {
          throw new OrchestrationWiringError(
            'prepareStep',
            'this call did not come through OrchestratedAgent.generate() or stream(), so it has no orchestration',
          );
        }
        const prepared = prepareCall ? await prepareCall(call) : call;
        const { sessionId, conversation, onStep, agentId, sessionState, newSession } = call.options;
        const report =
          call.options.onError ?? ((error: unknown) => (onOrchestrationError ?? defaultOnError)(error, sessionId));
        const orchestration = orchestrate<TOOLS, RUNTIME_CONTEXT>({
          manager: call.options.manager ?? manager,
          config,
          sessionId,
          tools: prepared.tools ?? settings.tools,
          messages: conversation ?? prepared.messages ?? call.messages ?? [],
          onError: report,
          ...(toolAnnotations ? { toolAnnotations } : {}),
          ...(onStep ? { onStep } : {}),
          ...(agentId !== undefined ? { agentId } : {}),
          ...(sessionState !== undefined ? { sessionState } : {}),
          ...(newSession !== undefined ? { newSession } : {}),
          ...(prepared.instructions !== undefined ? { instructions: prepared.instructions } : {}),
          ...(prepared.activeTools ? { activeTools: prepared.activeTools } : {}),
          ...(prepared.toolChoice ? { toolChoice: prepared.toolChoice } : {}),
          ...(prepared.prepareStep ? { prepareStep: prepared.prepareStep } : {}),
          ...(prepared.toolApproval ? { toolApproval: prepared.toolApproval } : {}),
        });
        slot.orchestration = orchestration;
        const { toolApprovalSecret } = call.options;
        return {
          ...prepared,
          ...(toolApprovalSecret !== undefined ? { experimental_toolApprovalSecret: toolApprovalSecret } : {}),
          tools: orchestration.tools,
          prepareStep: orchestration.prepareStep,
          toolApproval: orchestration.toolApproval,
          // Both are applied by the orchestration's prepareStep, combined with what it allows.
          activeTools: undefined,
          toolChoice: undefined,
        };
      },
    });
  }

  /** Generates an answer for the session of `options.sessionId`, orchestrated. */
  override async generate(
    parameters: OrchestratedGenerateParameters<TOOLS, RUNTIME_CONTEXT>,
  ): Promise<GenerateTextResult<TOOLS, RUNTIME_CONTEXT, OUTPUT> & WithOrchestration<TOOLS, RUNTIME_CONTEXT>> {
    const { slot, messages } = startCall<TOOLS, RUNTIME_CONTEXT>(parameters);
    const { prompt: _prompt, ...rest } = parameters;
    try {
      const result = await super.generate({
        ...rest,
        messages,
        ...composedCallbacks(slot, parameters),
      });
      return Object.assign(result, { orchestration: orchestrationOf(slot) });
    } finally {
      // A call that threw ends its turn here: the writes of the tools that ran still count.
      // Failures were reported to onError; the result's orchestration.settled() rejects with them.
      await slot.orchestration?.settled().catch(() => undefined);
    }
  }

  /** Streams an answer for the session of `options.sessionId`, orchestrated. */
  override async stream(
    parameters: OrchestratedStreamParameters<TOOLS, RUNTIME_CONTEXT>,
  ): Promise<StreamTextResult<TOOLS, RUNTIME_CONTEXT, OUTPUT> & WithOrchestration<TOOLS, RUNTIME_CONTEXT>> {
    const { slot, messages } = startCall<TOOLS, RUNTIME_CONTEXT>(parameters);
    const { prompt: _prompt, ...rest } = parameters;
    // An aborted stream calls neither onEnd nor the call's callbacks: end the turn here.
    parameters.abortSignal?.addEventListener('abort', () => void slot.orchestration?.settled().catch(() => undefined), {
      once: true,
    });
    const result = await super.stream({
      ...rest,
      messages,
      // streamText calls onEnd after an error too, so the turn ends there either way.
      ...composedCallbacks(slot, parameters),
    });
    return Object.assign(result, { orchestration: orchestrationOf(slot) });
  }
}

/** Creates an {@link OrchestratedAgent}: build it once, call it with `options: { sessionId }`. */
export function createOrchestratedAgent<
  TOOLS extends ToolSet,
  RUNTIME_CONTEXT extends RuntimeContext = RuntimeContext,
  OUTPUT extends OutputInterface = TextOutput,
>(
  settings: OrchestratedAgentSettings<TOOLS, RUNTIME_CONTEXT, OUTPUT>,
): OrchestratedAgent<TOOLS, RUNTIME_CONTEXT, OUTPUT> {
  return new OrchestratedAgent(settings);
}

function defaultOnError(error: unknown, sessionId: string): void {
  console.error(`[baton] orchestration failure in session ${sessionId}:`, error);
}

/** A slot for one call, registered under a fresh copy of its messages. */
function startCall<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext>(parameters: {
  prompt?: string | ModelMessage[] | undefined;
  messages?: ModelMessage[] | undefined;
}): { slot: CallSlot<TOOLS, RUNTIME_CONTEXT>; messages: ModelMessage[] } {
  const { prompt } = parameters;
  // A copy: two calls given the same array must not share a slot.
  const messages: ModelMessage[] =
    typeof prompt === 'string' ? [{ role: 'user', content: prompt }] : [...(prompt ?? parameters.messages ?? [])];
  const slot: CallSlot<TOOLS, RUNTIME_CONTEXT> = {};
  slots.set(messages, slot as CallSlot<ToolSet, RuntimeContext>);
  return { slot, messages };
}

/**
 * The call's `onStart`, `onStepEnd` and `onEnd`: the orchestration's first (it must see every
 * step before the app does), then the caller's own.
 */
function composedCallbacks<
  TOOLS extends ToolSet,
  RUNTIME_CONTEXT extends RuntimeContext,
  START extends CallStart,
  STEP extends StepResult<TOOLS, RUNTIME_CONTEXT>,
  END extends GenerateTextEndEvent<TOOLS, RUNTIME_CONTEXT>,
>(
  slot: CallSlot<TOOLS, RUNTIME_CONTEXT>,
  own: {
    onStart?: ((event: START) => unknown) | undefined;
    onStepEnd?: ((step: STEP) => unknown) | undefined;
    onEnd?: ((event: END) => unknown) | undefined;
  },
) {
  return {
    onStart: async (event: START) => {
      await slot.orchestration?.onStart(event);
      await own.onStart?.(event);
    },
    onStepEnd: async (step: STEP) => {
      await slot.orchestration?.onStepEnd(step);
      await own.onStepEnd?.(step);
    },
    onEnd: async (event: END) => {
      await slot.orchestration?.onEnd(event);
      await own.onEnd?.(event);
    },
  };
}

function orchestrationOf<TOOLS extends ToolSet, RUNTIME_CONTEXT extends RuntimeContext>(
  slot: CallSlot<TOOLS, RUNTIME_CONTEXT>,
): Orchestration<TOOLS, RUNTIME_CONTEXT> {
  if (slot.orchestration === undefined) {
    throw new OrchestrationWiringError('prepareStep', 'the agent call ended without preparing its orchestration');
  }
  return slot.orchestration;
}
