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
 *   is the call's result), an approval only in the last message, where the next turn runs the
 *   approved call (the AI SDK's human-in-the-loop flow; the orchestration still decides).
 *
 * Refused: a call with no result (`input-available`), an approval request the history ends
 * without answering, an approval granted in an earlier message (its call never ran), any
 * approval part for a tool the agent does not have, and a tool part in a user message.
 */
import { HttpError } from './http-errors.js';

/** A message as the body schema let it through: a role and typed parts, the rest unchecked. */
export interface LooseMessage {
  role: string;
  parts: readonly { type: string; [field: string]: unknown }[];
}

/**
 * Throws `invalid-history` at the first part a turn could not continue from; see the module
 * comment. It runs before the AI SDK's validation (so that an approval for a tool the agent
 * lacks is reported as such, not as an input with no schema), so it trusts no field but `type`.
 */
export function checkHistory(messages: readonly LooseMessage[], agentTools: ReadonlySet<string>): void {
  let lastUser = -1;
  messages.forEach((message, index) => {
    if (message.role === 'user') lastUser = index;
  });
  const last = messages.length - 1;
  messages.forEach((message, m) => {
    message.parts.forEach((part, p) => {
      const name = toolName(part);
      if (name === undefined) return;
      const at = `body.messages[${m}].parts[${p}]`;
      const refuse = (field: string, why: string): never => {
        throw new HttpError('invalid-history', `${at}${field}: ${why}`, { path: `${at}${field}` });
      };
      const call = `the call ${JSON.stringify(part.toolCallId)} of "${name}"`;
      if (message.role !== 'assistant') {
        refuse('.type', `a tool part in a ${message.role} message; tool calls belong to assistant messages`);
      }
      const approval = part.state === 'approval-requested' || part.state === 'approval-responded';
      if (approval && !agentTools.has(name)) {
        refuse('.type', `an approval for "${name}", which this agent does not have`);
      }
      switch (part.state) {
        case 'input-available':
          refuse(
            '.state',
            `${call} has no result; send its output (state "output-available" or "output-error"), or leave the call out`,
          );
          break;
        case 'approval-requested':
          if (m > lastUser) {
            refuse(
              '.state',
              `${call} awaits an approval; answer it (state "approval-responded" with approval.approved) before continuing`,
            );
          }
          break;
        case 'approval-responded':
          if ((part.approval as { approved?: unknown } | undefined)?.approved === true && m !== last) {
            refuse(
              '.state',
              `${call} was approved in an earlier message but never ran; an approval can only be answered in the last message`,
            );
          }
          break;
        default:
          break;
      }
    });
  });
}

/** The tool a part is about (`tool-<name>`, or a `dynamic-tool`'s `toolName`), or undefined. */
function toolName(part: { type: string; [field: string]: unknown }): string | undefined {
  if (part.type.startsWith('tool-')) return part.type.slice('tool-'.length);
  if (part.type === 'dynamic-tool') return typeof part.toolName === 'string' ? part.toolName : '';
  return undefined;
}
