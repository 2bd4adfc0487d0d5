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
import { getToolName, isToolUIPart, type UIMessage } from 'ai';
import { HttpError } from './http-errors.js';

/** Throws `invalid-history` at the first part a turn could not continue from; see the module comment. */
export function checkHistory(messages: readonly UIMessage[], agentTools: ReadonlySet<string>): void {
  let lastUser = -1;
  messages.forEach((message, index) => {
    if (message.role === 'user') lastUser = index;
  });
  const last = messages.length - 1;
  messages.forEach((message, m) => {
    message.parts.forEach((part, p) => {
      if (!isToolUIPart(part)) return;
      const at = `body.messages[${m}].parts[${p}]`;
      const refuse = (field: string, why: string): never => {
        throw new HttpError('invalid-history', `${at}${field}: ${why}`, { path: `${at}${field}` });
      };
      const name = getToolName(part);
      const call = `the call "${part.toolCallId}" of "${name}"`;
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
          if (part.approval.approved && m !== last) {
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
