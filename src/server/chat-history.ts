/**
 * The checks a conversation must pass before a turn starts, beyond the shape of its parts (the
 * AI SDK's `validateUIMessages` checks that, and each tool input against the agent's schema).
 * A history the model loop cannot continue would otherwise fail only once the stream had
 * started: a 200 whose stream says "An error occurred.". Each refusal is a
 * `400 invalid-history` naming the part, and nothing has run yet.
 *
 * What a history may hold (see docs/http-api.md):
 * - tool parts only in assistant messages;
 * - finished calls (`output-available`, `output-error`, `output-denied`), of any tool: one the
 *   agent no longer has stays history (the AI SDK omits its output);
 * - a call still being written (`input-streaming`): the client stopped the answer, and the
 *   AI SDK leaves the call out;
 * - an unanswered approval request (`approval-requested`) before the last user message: the
 *   user moved on, and the AI SDK drops it;
 * - an answered approval (`approval-responded`) for a tool of the agent: a denial anywhere (it
 *   is the call's result), an approval only in the last step of the last message, where the next
 *   turn runs the approved call (the AI SDK's human-in-the-loop flow; the orchestration still
 *   decides).
 *
 * Refused: a call with no result (`input-available`), an approval request the history ends
 * without answering, an approval granted in an earlier message or an earlier step of the last
 * one (its call never ran), any approval part for a tool the agent does not have, and a tool
 * part in a user message.
 *
 * A granted approval makes the server run a call the client names, with the input the client
 * sends, so it is accepted only as this server issued it: signed (the AI SDK's
 * `approval.signature`) under the secret of this agent, session and user message (the request's
 * latest, which the turn that asked answered too), for this approval id, call id, tool and input;
 * its call the only tool part with its id; and, on the session as it is before the turn
 * ({@link checkGrantsUsable}), a call the session has not decided yet, that user message the one
 * the session last handled, and an approval the session asked a person for and has not used. A
 * forged, altered, moved or replayed approval, or an automatic decision answered yes, is
 * refused, and nothing runs.
 */
import { inputDigest } from '../ai-sdk/input-digest.js';
import type { SignedToolApproval, ToolApprovalScope } from '../ai-sdk/tool-approval-secret.js';
import { latestUserMessage } from '../core/messages.js';
import type { OrchestrationState } from '../core/state.js';
import { hasSeen } from '../core/transition.js';
import { callIdKey } from '../orchestration/turn.js';
import type { ApprovalKeys } from './approval-keys.js';
import { HttpError } from './http-errors.js';

/** A message as the body schema let it through: a role and typed parts, the rest unchecked. */
export interface LooseMessage {
  role: string;
  parts: readonly { type: string; [field: string]: unknown }[];
}

/** What checks the approvals a history grants: the server's keys, and whose turn it is. */
export interface HistoryApprovals {
  keys: ApprovalKeys;
  /**
   * The agent and the session the request continues, and the user message it answers (`turn`),
   * or undefined for a new session (which cannot hold an approval). Asked only when the history
   * grants one.
   */
  scope: () => ToolApprovalScope | undefined;
}

/** An approval the history grants, checked to be one this server issued. */
export interface Grant {
  /** `body.messages[i].parts[j]`. */
  at: string;
  toolCallId: string;
  toolName: string;
  /** The digest of the call's input (`inputDigest`), as the session keeps an approval it asked for. */
  digest: string;
}

/** What a checked history grants: its approvals, and the number of the key that signed them. */
export interface CheckedHistory {
  grants: readonly Grant[];
  /** The approval key the grants were signed under (the turn signs with it too); undefined without grants. */
  key: number | undefined;
}

/**
 * Throws `invalid-history` at the first part a turn could not continue from, or whose approval
 * this server did not issue; see the module comment. It runs before the AI SDK's validation (so
 * that an approval for a tool the agent lacks is reported as such, not as an input with no
 * schema), so it trusts no field but `type`.
 */
export function checkHistory(
  messages: readonly LooseMessage[],
  agentTools: ReadonlySet<string>,
  approvals: HistoryApprovals,
): CheckedHistory {
  let lastUser = -1;
  messages.forEach((message, index) => {
    if (message.role === 'user') lastUser = index;
  });
  const last = messages.length - 1;
  const lastStep = lastStepStart(messages[last]);
  const grants: Grant[] = [];
  let key: number | undefined;
  let scope: ToolApprovalScope | undefined | null = null;
  messages.forEach((message, m) => {
    message.parts.forEach((part, p) => {
      const name = toolName(part);
      if (name === undefined) return;
      const at = `body.messages[${m}].parts[${p}]`;
      const refusal = (field: string, why: string) =>
        new HttpError('invalid-history', `${at}${field}: ${why}`, { path: `${at}${field}` });
      const call = `the call ${JSON.stringify(part.toolCallId)} of "${name}"`;
      if (message.role !== 'assistant') {
        throw refusal('.type', `a tool part in a ${message.role} message; tool calls belong to assistant messages`);
      }
      const approval = part.state === 'approval-requested' || part.state === 'approval-responded';
      if (approval && !agentTools.has(name)) {
        throw refusal('.type', `an approval for "${name}", which this agent does not have`);
      }
      switch (part.state) {
        case 'input-available':
          throw refusal(
            '.state',
            `${call} has no result; send its output (state "output-available" or "output-error"), or leave the call out`,
          );
        case 'approval-requested':
          if (m > lastUser) {
            throw refusal(
              '.state',
              `${call} awaits an approval; answer it (state "approval-responded" with approval.approved) before continuing`,
            );
          }
          break;
        case 'approval-responded': {
          const granted = part.approval as { approved?: unknown; id?: unknown; signature?: unknown } | undefined;
          if (granted?.approved !== true) break;
          // The AI SDK runs only the approvals of the model messages' last one: the last step of
          // the last message. Anywhere else, the turn would fail once started ("Tool result is
          // missing"), with the call neither run nor denied.
          if (m !== last || p < lastStep) {
            const where =
              m !== last
                ? 'in an earlier message'
                : `in an earlier step of its message (a later one starts at body.messages[${m}].parts[${lastStep}])`;
            throw refusal(
              '.state',
              `${call} was approved ${where} but never ran; an approval can only be answered in the last step of the last message, where the AI SDK runs it`,
            );
          }
          if (typeof part.toolCallId !== 'string' || typeof granted.id !== 'string') break; // the AI SDK's validation says what is wrong
          if (typeof granted.signature !== 'string' || granted.signature === '') {
            throw refusal(
              '.approval.signature',
              `${call} is approved without the signature of the approval request; this server runs an approved call only as it asked for its approval (send approval.signature back unchanged)`,
            );
          }
          if (sharesId(messages, part, 'toolCallId', part.toolCallId)) {
            throw refusal(
              '.toolCallId',
              `${call} is approved, but another tool part of the history has the same call id`,
            );
          }
          if (sharesId(messages, part, 'approval', granted.id)) {
            throw refusal(
              '.approval.id',
              `${call} is approved, but another tool part of the history has the same approval id`,
            );
          }
          if (scope === null) scope = approvals.scope();
          if (scope === undefined) {
            throw refusal(
              '.approval',
              `${call} is approved, but this request starts a new session; an approval is valid only in the session that asked for it (send its sessionId)`,
            );
          }
          const signed: SignedToolApproval = {
            approvalId: granted.id,
            toolCallId: part.toolCallId,
            toolName: name,
            input: part.input,
            signature: granted.signature as string,
          };
          const signer = approvals.keys.verify(signed, scope, key);
          if (signer === undefined) {
            throw refusal(
              '.approval.signature',
              `${call} is approved, but this server did not ask for that approval: its signature does not match this agent, session, user message, approval id, call id, tool and input`,
            );
          }
          key = signer;
          grants.push({ at, toolCallId: part.toolCallId, toolName: name, digest: inputDigest(part.input) });
          break;
        }
        default:
          break;
      }
    });
  });
  return { grants, key };
}

/**
 * Throws `invalid-history` for a grant the session cannot use, checked on the session as it is
 * before the turn (`state`; null when there is none): its call was already seen in this session
 * (an approval is used once, and a refusal or a denial is final); the session's latest handled
 * user message is not the request's, so the approval answers a turn the session has moved on
 * from (or the session was deleted or expired since); or the session keeps no approval it asked
 * a person for this call, tool and input. The AI SDK signs every approval request it issues,
 * also the automatic ones of calls its approval hook decided without a person: the signature
 * says this server issued the request, the session says a person was asked.
 */
export function checkGrantsUsable(
  history: CheckedHistory,
  messages: readonly LooseMessage[],
  state: OrchestrationState | null,
): void {
  const answered = latestUserMessage(messages as Parameters<typeof latestUserMessage>[0])?.key;
  for (const grant of history.grants) {
    const call = `the call ${JSON.stringify(grant.toolCallId)} of "${grant.toolName}"`;
    const refusal = (why: string) =>
      new HttpError('invalid-history', `${grant.at}.approval: ${why}`, { path: `${grant.at}.approval` });
    // The session keeps a long id as its key (see callIdKey).
    if (state !== null && hasSeen(state, callIdKey(grant.toolCallId))) {
      throw refusal(`${call} was already decided in this session; an approval is used once`);
    }
    if (state === null || answered === undefined || state.lastMessageKey !== answered) {
      throw refusal(
        `${call} was approved for a turn this session has moved on from (it has handled another message since, or was deleted); ask again`,
      );
    }
    const id = callIdKey(grant.toolCallId);
    const asked = state.approvals?.some(
      (approval) => approval.id === id && approval.tool === grant.toolName && approval.digest === grant.digest,
    );
    if (asked !== true) {
      throw refusal(
        `${call} is approved, but this session did not ask a person to approve that call with that input, or that approval was used; only an approval request a person was shown can be answered`,
      );
    }
  }
}

/**
 * The parts that start a model step in an assistant message, as the AI SDK's
 * `convertToModelMessages` splits it: each step becomes model messages of its own.
 */
const STEP_STARTS: ReadonlySet<string> = new Set(['step-start', 'steering-message']);

/** The index of the part that starts the last step of `message`, or -1 when it has one step only. */
function lastStepStart(message: LooseMessage | undefined): number {
  const parts = message?.parts ?? [];
  for (let p = parts.length - 1; p >= 0; p--) if (STEP_STARTS.has(parts[p]!.type)) return p;
  return -1;
}

/** True when a tool part other than `part` has `id` as its call id (`toolCallId`) or approval id (`approval`). */
function sharesId(
  messages: readonly LooseMessage[],
  part: LooseMessage['parts'][number],
  field: 'toolCallId' | 'approval',
  id: string,
): boolean {
  return messages.some((message) =>
    message.parts.some((other) => {
      if (other === part || toolName(other) === undefined) return false;
      const value = field === 'toolCallId' ? other.toolCallId : (other.approval as { id?: unknown } | undefined)?.id;
      return value === id;
    }),
  );
}

/** The tool a part is about (`tool-<name>`, or a `dynamic-tool`'s `toolName`), or undefined. */
function toolName(part: { type: string; [field: string]: unknown }): string | undefined {
  if (part.type.startsWith('tool-')) return part.type.slice('tool-'.length);
  if (part.type === 'dynamic-tool') return typeof part.toolName === 'string' ? part.toolName : '';
  return undefined;
}
