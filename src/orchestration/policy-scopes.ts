/**
 * The operator's limits that count across sessions (SPEC section 11: `scope` `principal`,
 * `agent`, `global`). Each scope's counts live in a record of their own in the manager's store,
 * under the session id `baton:policy:<scope>:<key>` (the principal's name, the agent's id, or
 * `*`), judged with the same transition as a session: a call is reserved there (atomically, with
 * a lease, counted while it runs) before its session decides it, and released when its session
 * refuses it; its completion, failure or abandonment is passed on, and so are its lease
 * renewals. A call whose answer depends on the scope's running calls waits for them there, as in
 * a session.
 *
 * A scope's record is a session like any other: it lives as long as the store keeps sessions
 * (the sliding TTL, `maxSessions`). Keep the store's TTL above the longest period the operator's
 * limits count over.
 */
import type { CompiledPolicy, PolicyScope } from '../core/policy.js';
import type { ToolDecision, TransitionInput, WaitEnd } from '../core/transition.js';
import { decideWaiting } from './call-waits.js';
import type { OrchestrationManager } from './orchestration-manager.js';
import { waitsOf } from './orchestration-manager.js';
import { callIdKey } from './turn.js';

/** Who a call is for: what the cross-session scopes are keyed by. */
export interface CallOwner {
  /** The session the call belongs to. */
  readonly sessionId: string;
  /** The caller (an API key's name, a token's subject; `context.principal` in the library), if known. */
  readonly principal: string | undefined;
  /** The agent (template id) the session runs, if known. */
  readonly agentId: string | undefined;
}

/** One scope record a call is reserved in. */
export interface ScopeHold {
  readonly scope: PolicyScope;
  /** The scope record's session id. */
  readonly recordId: string;
  /** The call's id in the record (its session's id and its own, so sessions' ids never meet). */
  readonly callId: string;
}

/** Who is counted when no principal is known: every anonymous caller shares one count. */
export const ANONYMOUS = 'anonymous';

/** The scope records a call of `tool` would be reserved in under `policy`. */
export function scopesOf(
  policy: CompiledPolicy | undefined,
  tool: string,
  owner: CallOwner,
  toolCallId: string,
): ScopeHold[] {
  if (policy === undefined || policy.scopes.length === 0) return [];
  const holds: ScopeHold[] = [];
  for (const scope of policy.scopes) {
    if (!scope.rules.some((rule) => rule.matches(tool))) continue;
    const key =
      scope.scope === 'principal'
        ? (owner.principal ?? ANONYMOUS)
        : scope.scope === 'agent'
          ? (owner.agentId ?? '*')
          : '*';
    holds.push({
      scope,
      recordId: `baton:policy:${scope.scope}:${key}`,
      // The session's id, length first, then the call's: unambiguous, and text every store keeps.
      callId: callIdKey(`${owner.sessionId.length}:${owner.sessionId}:${toolCallId}`),
    });
  }
  return holds;
}

/**
 * Reserves the call in each of `holds`, in order, waiting (up to the manager's `waitMs`) where
 * the answer depends on the scope's running calls. Resolves to undefined when every scope took
 * it, else to the first refusal (the reservations already made are released).
 */
export async function reserveInScopes(
  manager: OrchestrationManager,
  holds: readonly ScopeHold[],
  input: Extract<TransitionInput, { type: 'tool-requested' }>,
  ruleContext: Readonly<Record<string, unknown>> | undefined,
): Promise<Extract<ToolDecision, { allowed: false }> | undefined> {
  const taken: ScopeHold[] = [];
  for (const hold of holds) {
    const ask = async (waited?: WaitEnd): Promise<ToolDecision> => {
      const request: TransitionInput = {
        ...input,
        toolCallId: hold.callId,
        agentTools: [input.tool],
        offered: undefined,
        turnId: undefined,
        ...(waited ? { waited } : {}),
      };
      const applied = await manager.apply(hold.scope.plan, undefined, hold.recordId, [request], ruleContext);
      return applied.decisions[0] as ToolDecision;
    };
    const clock = () => manager.getStateManager().clock();
    const decision = await decideWaiting(waitsOf(manager), hold.recordId, await ask(), ask, manager.waitMs, clock);
    if (!decision.allowed) {
      await settleInScopes(manager, taken, 'tool-failed');
      return { ...decision, toolCallId: input.toolCallId, allowedTools: [] };
    }
    taken.push(hold);
  }
  return undefined;
}

/** Passes a call's end on to the scope records it was reserved in. */
export async function settleInScopes(
  manager: OrchestrationManager,
  holds: readonly ScopeHold[],
  how: 'tool-completed' | 'tool-failed' | 'tool-abandoned' | 'lease-renewed',
): Promise<void> {
  await Promise.all(
    holds.map((hold) =>
      manager.apply(hold.scope.plan, undefined, hold.recordId, [{ type: how, toolCallId: hold.callId }]),
    ),
  );
}
