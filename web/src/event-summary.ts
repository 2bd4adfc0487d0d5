/**
 * One line for each logged decision of a session, as the session timeline lists them
 * ("step → ResearchMode", "offered: search", "refused deploy: ...", "fact quote set by
 * get_quote", "a person declined deploy"), and the kind of decision, which the timeline colours by.
 */
import type { LoggedEvent, SessionEventEntry } from './types.js';

/**
 * How the timeline marks a decision: `refusal` is orchestration's (a rule, the step, a budget),
 * `decline` a person's answer to an approval, `fact` a fact set or a label raised.
 */
export type EventKind =
  | 'step'
  | 'offer'
  | 'tool'
  | 'fact'
  | 'sequence'
  | 'refusal'
  | 'decline'
  | 'warning'
  | 'turn'
  | 'other';

/** A decision as the timeline lists it. */
export interface EventSummary {
  kind: EventKind;
  text: string;
}

const list = (tools: readonly string[]) => (tools.length > 0 ? tools.join(', ') : 'no tool');
const step = (name: string | undefined) => name ?? 'no step';

const RESETS: Record<Extract<LoggedEvent, { type: 'sequence-reset' }>['reason'], string> = {
  new_message: 'new message',
  out_of_sequence: 'out of sequence',
  message_condition: 'message condition',
};

const RELEASES: Record<Extract<LoggedEvent, { type: 'tool-released' }>['reason'], string> = {
  failed: 'the tool failed',
  abandoned: 'its outcome is unknown (cancelled or unanswered), so limits count it',
  expired: 'its lease expired',
  late: 'it completed after its lease',
};

/** ` by rules[0]` when a rule on calls refused the call, else nothing. */
const byRule = (reason: { code: string; rule?: string }) => (reason.rule === undefined ? '' : ` by ${reason.rule}`);

/** The timeline's line for one logged event. */
export function summarizeEvent(event: LoggedEvent): EventSummary {
  switch (event.type) {
    case 'step-changed':
      return { kind: 'step', text: event.from ? `step ${event.from} → ${step(event.to)}` : `step → ${step(event.to)}` };
    case 'tools-offered': {
      const text = `offered: ${list(event.tools)}`;
      // In shadow mode everything is offered; what enforcement would have offered is the news.
      return { kind: 'offer', text: event.shadow ? `${text} (would offer: ${list(event.wouldOffer ?? [])})` : text };
    }
    case 'tool-reserved':
      return { kind: 'tool', text: `reserved ${event.tool}` };
    case 'tool-recorded':
      return { kind: 'tool', text: `used ${event.tool}` };
    case 'tool-released':
      return { kind: 'warning', text: `released ${event.tool ?? event.toolCallId}: ${RELEASES[event.reason]}` };
    case 'tool-rejected':
      return { kind: 'refusal', text: `refused ${event.tool}${byRule(event.reason)}: ${event.reason.message}` };
    case 'tool-would-block':
      return {
        kind: 'warning',
        text: `would have refused ${event.tool}${byRule(event.reason)} (shadow mode): ${event.reason.message}`,
      };
    case 'fact-set':
      // The value is in the opened state; an unknown fact is news: the rules that read it refuse.
      return event.unknown === undefined
        ? { kind: 'fact', text: `fact ${event.fact} set by ${event.tool}` }
        : { kind: 'warning', text: `fact ${event.fact} unknown after ${event.tool}: ${event.unknown}` };
    case 'label-raised':
      return { kind: 'warning', text: `label ${event.label} raised by ${event.tool}` };
    case 'approval-requested':
      return { kind: 'warning', text: `asked a person to approve ${event.tool} (${event.rule}): ${event.reason}` };
    case 'approval-declined':
      return {
        kind: 'decline',
        text: `a person declined ${event.tool}${event.rule === undefined ? '' : ` (asked by ${event.rule})`}`,
      };
    case 'sequence-advanced':
      return { kind: 'sequence', text: `sequence ${event.index}/${event.length} (${event.tool})` };
    case 'sequence-completed':
      return { kind: 'sequence', text: `sequence of ${event.step} complete` };
    case 'sequence-reset':
      return { kind: 'sequence', text: `sequence reset from ${event.from} (${RESETS[event.reason]})` };
    case 'sequence-violation':
      return { kind: 'refusal', text: `out of sequence: ${event.tool} (expected ${list(event.expected)})` };
    case 'sequence-blocked':
      return { kind: 'refusal', text: `sequence blocked: ${list(event.expected)} not allowed` };
    case 'sequence-incomplete':
      return {
        kind: 'warning',
        text: `sequence left at ${event.index}/${event.length}${event.awaitingApproval ? ', awaiting approval' : ''} (next: ${list(event.expected)})`,
      };
    case 'budget-exceeded':
      return {
        kind: 'refusal',
        text: `token budget of ${event.scope === 'session' ? 'the session' : `step ${step(event.step)}`} spent (${event.used.toLocaleString('en-US')} of ${event.limit.toLocaleString('en-US')})${event.shadow ? ', shadow mode' : ''}`,
      };
    case 'turn-ended':
      return {
        kind: 'turn',
        text: `turn ended in ${step(event.step)}${event.awaitingApproval ? ', awaiting approval' : ''}`,
      };
    case 'session-reset':
      return { kind: 'turn', text: 'session reset' };
    default: {
      // A newer server may log decisions this page does not know: named, not hidden.
      const unknown: { type: string } = event;
      return { kind: 'other', text: unknown.type };
    }
  }
}

/**
 * The logged event of an entry. The API types it loosely (a newer server may add types), and
 * {@link summarizeEvent} names any type it does not know, so reading it as the events this page
 * knows is safe.
 */
export function loggedEvent(entry: SessionEventEntry): LoggedEvent {
  return entry.event as unknown as LoggedEvent;
}

/** Entries grouped by turn, in order. */
export function byTurn(entries: readonly SessionEventEntry[]): { turn: number; entries: SessionEventEntry[] }[] {
  const groups: { turn: number; entries: SessionEventEntry[] }[] = [];
  for (const entry of entries) {
    const last = groups.at(-1);
    if (last && last.turn === entry.turn) last.entries.push(entry);
    else groups.push({ turn: entry.turn, entries: [entry] });
  }
  return groups;
}
