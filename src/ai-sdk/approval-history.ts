/**
 * What a request's history says about approvals, read where the AI SDK reads it: the calls a
 * person approved (which the AI SDK runs before the first model step) and those a person denied
 * (which it answers itself and never runs), both from the history's last message.
 */
import type { ModelMessage } from 'ai';

const NO_CALLS: readonly string[] = [];

/**
 * True when the call is one the AI SDK resumes from the request's history: a call a person
 * approved, which it runs before the first model step. As the AI SDK finds them: the history's
 * last message is a tool message that approves (`tool-approval-response`, `approved: true`) an
 * approval request of the history for this call id. And no model step of this call of the AI
 * SDK was prepared yet: a call after one is the model's, whatever id it carries. So a model that
 * repeats the id of a call in the history (one a person denied, or never answered) gets it
 * decided as a new call, with its approval asked again, even in an app that replaced the
 * orchestration's `prepareStep`; and the history is scanned only when it ends in approvals.
 */
export function isResumedCall(messages: readonly ModelMessage[], toolCallId: string, preparedSteps: number): boolean {
  return preparedSteps === 0 && answeredCalls(messages, true).includes(toolCallId);
}

/**
 * The call ids whose approval request (in the history's assistant messages) the history's last
 * message answers with `approved`, where the AI SDK collects the answers it acts on before the
 * first model step. The rest of the history is scanned only when the last message holds such an
 * answer.
 */
function answeredCalls(messages: readonly ModelMessage[], approved: boolean): readonly string[] {
  const last = messages.at(-1);
  if (last?.role !== 'tool') return NO_CALLS;
  const answers = new Set<string>();
  for (const part of last.content)
    if (part.type === 'tool-approval-response' && part.approved === approved) answers.add(part.approvalId);
  if (answers.size === 0) return NO_CALLS;
  const calls = new Set<string>();
  for (const message of messages) {
    if (message.role !== 'assistant' || typeof message.content === 'string') continue;
    for (const part of message.content) {
      if (part.type === 'tool-approval-request' && answers.has(part.approvalId)) calls.add(part.toolCallId);
    }
  }
  return [...calls];
}

/**
 * Most denials of one request handed to the session: a real request answers the approvals of one
 * model step, and a client's tool message naming hundreds would push the session's real call
 * ids out of its bounded list of seen ids (which is what refuses an approval replayed later).
 */
const DENIALS_LIMIT = 16;

/**
 * The call ids whose approval the history's last message denies, where the AI SDK collects
 * approvals (it answers them with `execution-denied`, and never runs them). A call the message
 * both approves and denies counts as denied: the AI SDK acts on a call's first answer, but
 * conflicting answers are no approval, so Baton refuses it. Like {@link isResumedCall}, the
 * history is scanned only when the last message holds a denial.
 */
export function deniedCalls(messages: readonly ModelMessage[]): readonly string[] {
  return answeredCalls(messages, false).slice(0, DENIALS_LIMIT);
}
