/**
 * The tools panel's rows, from the orchestration snapshot the page shows (the same one the
 * sequence strip draws): a tool is allowed exactly when the snapshot offered it. The reasons of
 * blocked tools come from the server's explanation (`GET /api/sessions/:id`) of that same state,
 * looked up by {@link stateKey}, because a stream part carries no reasons.
 */
import type { OrchestrationSnapshot, ToolStatus } from './types.js';

/** One row of the tools panel. */
export interface LiveTool {
  tool: string;
  allowed: boolean;
  /**
   * Why a blocked tool is blocked (or, in shadow mode, why enforcement would have blocked it);
   * null until the server has explained this state.
   */
  reason: ToolStatus['reason'] | null;
  /** Shadow mode: offered because nothing is enforced, but enforcement would have blocked it. */
  wouldBlock: boolean;
  /** Rules on calls that may still refuse a call of it, or ask a person, depending on its input. */
  rules: NonNullable<ToolStatus['rules']>;
}

/** Shown for a blocked tool whose reason the server has not given for this state (yet). */
export const NOT_OFFERED = 'not offered to the model for this step';

/**
 * What the explanation of a session depends on: the active step, the sequence position and the
 * tool history. Two snapshots with the same key have the same allowed tools and reasons.
 */
export function stateKey(snapshot: OrchestrationSnapshot): string {
  const sequence = snapshot.sequence;
  return JSON.stringify([
    snapshot.sessionId,
    snapshot.activeStep,
    sequence ? [sequence.index, sequence.completed] : null,
    snapshot.recentlyUsedTools,
  ]);
}

/**
 * Every tool of the agent as `snapshot` decided it, with the reasons of `explained` (the
 * server's per-tool view of the same state, if the page has it). Without a snapshot (no message
 * sent yet) nothing is decided: null.
 */
export function liveTools(
  agentTools: readonly string[],
  snapshot: OrchestrationSnapshot | null,
  explained: readonly ToolStatus[] | undefined,
): LiveTool[] | null {
  if (!snapshot) return null;
  const offered = new Set(snapshot.allowedTools);
  const enforced = snapshot.shadow ? new Set(snapshot.shadow.wouldOffer) : undefined;
  const reasons = new Map((explained ?? []).map((status) => [status.tool, status.reason]));
  const rules = new Map((explained ?? []).map((status) => [status.tool, status.rules ?? []]));
  // The explanation also lists tools the orchestration names but the agent lacks.
  const names = [
    ...agentTools,
    ...(explained ?? []).map((status) => status.tool).filter((t) => !agentTools.includes(t)),
  ];
  return names.map((tool) => {
    const allowed = offered.has(tool);
    const wouldBlock = allowed && enforced !== undefined && !enforced.has(tool);
    // The server explains a shadow session as enforced, so its reason for a tool is the reason
    // enforcement would have refused it: what a team reads before switching enforcement on.
    const reason = allowed && !wouldBlock ? undefined : (reasons.get(tool) ?? null);
    return { tool, allowed, reason, wouldBlock, rules: rules.get(tool) ?? [] };
  });
}
