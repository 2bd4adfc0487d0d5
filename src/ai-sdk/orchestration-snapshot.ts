/**
 * Orchestration snapshots: what a chat stream's `data-orchestration` parts carry (before every
 * model step, and at the end of the turn) and what a session view reports. A model step's
 * snapshot is its step decision; a session at rest is its explanation (`explain`), which is that
 * same decision with every tool judged: nothing here derives an answer of its own, so a snapshot
 * never disagrees with what enforcement decides. The HTTP server and `orchestrationParts()` build
 * them here, so a route of your own streams the same shapes as `baton serve`.
 */
import type { UIMessage } from 'ai';
import type { SequenceView } from '../core/engine.js';
import type { LoggedFact } from '../core/session-log.js';
import type { FactValue, OrchestrationState, TokenUsage } from '../core/state.js';
import type { Explanation } from '../core/transition.js';
import type { SequenceIncomplete, StepInfo } from './orchestrate.js';

/** The data parts Baton adds to a chat's UI messages: `data-orchestration`, carrying an {@link OrchestrationSnapshot}. */
export type OrchestrationDataParts = { orchestration: OrchestrationSnapshot };

/**
 * A UI message of an orchestrated chat, typed for `useChat<OrchestrationUIMessage>()`: its
 * `data-orchestration` parts (and `onData`'s) carry {@link OrchestrationSnapshot}s.
 */
export type OrchestrationUIMessage<METADATA = unknown> = UIMessage<METADATA, OrchestrationDataParts>;

/** The active sequence of a session, when its step has one. */
export interface SequenceProgress {
  /** Positions; each lists its alternative tools. */
  tools: string[][];
  /** How many positions are done. */
  index: number;
  length: number;
  completed: boolean;
  /** True when no allowed tool can fill the current position. */
  blocked: boolean;
}

/**
 * The payload of every `data-orchestration` part of a chat stream (one part, id
 * `orchestration`, replaced in place after every model step) and the core of a session view.
 */
export interface OrchestrationSnapshot {
  sessionId: string;
  agentId: string;
  /** Model step of the turn this snapshot precedes (0 = first), or null for the end of the turn. */
  stepNumber: number | null;
  activeStep: string | null;
  stepDescription: string | null;
  sequence: SequenceProgress | null;
  allowedTools: string[];
  recentlyUsedTools: string[];
  tokenUsage: TokenUsage;
  /** True on the part sent after the turn ended (the state then is final). */
  final: boolean;
  /**
   * Shadow mode (the template's or the active step's `shadow`): every tool is offered and
   * nothing is enforced; `wouldOffer` lists what enforcement would have offered.
   */
  shadow?: { wouldOffer: string[] };
  /** A spent token budget: no tool is offered (reported only, in shadow mode). */
  budget?: { scope: 'session' | 'step'; step: string | null; limit: number; used: number };
  /**
   * On the final part only, when the turn ended with the active step's sequence unfinished (the
   * model answered first, or the turn waits for a person's approval).
   */
  sequenceIncomplete?: SequenceIncompleteSummary;
  /**
   * The facts completed calls' results set (SPEC section 11), by name: `{ value }` (JSON) or
   * `{ unknown: why }` (rules that read it refuse). In the event log's entries a value of more
   * than 256 characters of JSON is `{ omitted: <its length> }`: the log does not copy it into
   * every entry. Absent while the session has none.
   */
  facts?: Record<string, FactValue | LoggedFact>;
  /** The labels completed calls' results raised, in the order they rose. Absent while none is. */
  labels?: string[];
  /** Stateless mode only: the signed state to send back as `x-orchestration-state` next time. */
  stateToken?: string;
}

/** Where a turn left an unfinished sequence (the `sequence-incomplete` event). */
export interface SequenceIncompleteSummary {
  step: string;
  /** Positions done, of `length`. */
  index: number;
  length: number;
  /** The tools that would fill the next position. */
  expected: string[];
  /** The step has `requireSequence`. */
  required: boolean;
  /** The turn stopped for a person to approve a tool call. */
  awaitingApproval: boolean;
}

function sequenceProgress(sequence: SequenceView): SequenceProgress | null {
  if (sequence === undefined) return null;
  return {
    tools: sequence.tools.map((position) => [...position]),
    index: sequence.index,
    length: sequence.length,
    completed: sequence.completed,
    blocked: sequence.blocked,
  };
}

/** The snapshot sent before a model step, from what the model loop reported for it. */
export function stepSnapshot(agentId: string, info: StepInfo): OrchestrationSnapshot {
  return {
    sessionId: info.state.sessionId,
    agentId,
    stepNumber: info.stepNumber,
    activeStep: info.activeStep ?? null,
    stepDescription: info.stepDescription ?? null,
    sequence: sequenceProgress(info.sequence),
    allowedTools: [...info.allowedTools],
    recentlyUsedTools: [...info.state.recentlyUsedTools],
    tokenUsage: { ...info.state.cumulativeTokenUsage },
    final: false,
    ...(info.shadow ? { shadow: { wouldOffer: [...(info.wouldOffer ?? [])] } } : {}),
    ...(info.budget ? { budget: { ...info.budget, step: info.budget.step ?? null } } : {}),
    ...factsAndLabels(info.facts, info.labels),
  };
}

/**
 * The `facts` and `labels` fields of a snapshot: copies (a snapshot is handed to an app and to
 * JSON, never shared with the state), only those the session has.
 */
function factsAndLabels(
  facts: Readonly<Record<string, FactValue | LoggedFact>> | undefined,
  labels: readonly string[] | undefined,
): Pick<OrchestrationSnapshot, 'facts' | 'labels'> {
  const out: Pick<OrchestrationSnapshot, 'facts' | 'labels'> = {};
  if (facts !== undefined) {
    const copy: Record<string, FactValue | LoggedFact> = {};
    // Defined, not assigned: a fact may be named __proto__.
    for (const [name, fact] of Object.entries(facts)) {
      Object.defineProperty(copy, name, { value: { ...fact }, enumerable: true, writable: true, configurable: true });
    }
    if (Object.keys(copy).length > 0) out.facts = copy;
  }
  if (labels !== undefined && labels.length > 0) out.labels = [...labels];
  return out;
}

/**
 * The snapshot of a session at rest (after a turn, in the session routes and the event log).
 * `facts`: as the snapshot shows them, the state's unless given (an event log entry's, which
 * leaves long values out).
 */
export function restingSnapshot(
  agentId: string,
  state: OrchestrationState,
  explanation: Explanation,
  final: boolean,
  facts: Readonly<Record<string, FactValue | LoggedFact>> | undefined = state.facts,
): OrchestrationSnapshot {
  const snapshot: OrchestrationSnapshot = {
    sessionId: state.sessionId,
    agentId,
    stepNumber: null,
    activeStep: explanation.activeStep ?? null,
    stepDescription: explanation.stepDescription ?? null,
    sequence: sequenceProgress(explanation.sequence),
    allowedTools: [...explanation.allowedTools],
    recentlyUsedTools: [...state.recentlyUsedTools],
    tokenUsage: { ...state.cumulativeTokenUsage },
    final,
  };
  if (explanation.shadow) snapshot.shadow = { wouldOffer: [...(explanation.wouldOffer ?? [])] };
  if (explanation.budget) snapshot.budget = { ...explanation.budget, step: explanation.budget.step ?? null };
  if (facts !== undefined || state.labels !== undefined) Object.assign(snapshot, factsAndLabels(facts, state.labels));
  return snapshot;
}

/**
 * The snapshot sent after a turn, once its writes are stored: the session at rest, and where
 * the turn left an unfinished sequence (`incomplete`, the turn's `sequence-incomplete` event).
 */
export function finalSnapshot(
  agentId: string,
  state: OrchestrationState,
  explanation: Explanation,
  incomplete: SequenceIncomplete | undefined,
): OrchestrationSnapshot {
  const snapshot = restingSnapshot(agentId, state, explanation, true);
  if (incomplete !== undefined) {
    const { type: _type, sessionId: _session, expected, ...rest } = incomplete;
    snapshot.sequenceIncomplete = { ...rest, expected: [...expected] };
  }
  return snapshot;
}
