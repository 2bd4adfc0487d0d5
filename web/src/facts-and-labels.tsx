/**
 * The session's facts and labels (what completed calls' results left for later rules): each fact
 * by name with its value shortened, or why it is unknown (a rule that reads it refuses); the
 * labels raised, which never go down within the session.
 */
import type { AgentDetailResponse, OrchestrationSnapshot } from './types.js';

/** Longest value shown in the list; the whole one (up to {@link TITLE_LENGTH}) is its tooltip. */
const SHOWN_LENGTH = 80;
const TITLE_LENGTH = 2_000;

type Fact = NonNullable<OrchestrationSnapshot['facts']>[string];

/** `text` cut to `length` characters, marked when it was cut. */
function shorten(text: string, length: number): string {
  return text.length > length ? `${text.slice(0, length - 1)}…` : text;
}

/** A fact's value or state as one line, and what its tooltip says. */
function factLine(fact: Fact): { text: string; title?: string; kind: 'value' | 'unknown' | 'omitted' } {
  if ('unknown' in fact) return { text: `unknown: ${fact.unknown}`, kind: 'unknown' };
  if ('omitted' in fact) {
    return {
      text: `${fact.omitted.toLocaleString('en-US')} characters of JSON, not kept in the event log`,
      kind: 'omitted',
    };
  }
  const json = JSON.stringify(fact.value) ?? 'null';
  return json.length > SHOWN_LENGTH
    ? { text: shorten(json, SHOWN_LENGTH), title: shorten(json, TITLE_LENGTH), kind: 'value' }
    : { text: json, kind: 'value' };
}

/** Whether the agent's template declares facts or labels (then the page shows where they go). */
export function declaresFacts(agent: AgentDetailResponse | null): boolean {
  const orchestration = agent?.template.orchestration as { facts?: unknown[]; labels?: unknown[] } | undefined;
  return (orchestration?.facts?.length ?? 0) + (orchestration?.labels?.length ?? 0) > 0;
}

/** Facts and labels of a snapshot; `testIdPrefix` keeps a second list's test ids apart (the session timeline's). */
export function FactsAndLabels({
  snapshot,
  testIdPrefix = '',
}: {
  snapshot: OrchestrationSnapshot | null;
  testIdPrefix?: string;
}) {
  const facts = Object.entries(snapshot?.facts ?? {});
  const labels = snapshot?.labels ?? [];
  if (facts.length === 0 && labels.length === 0) {
    return (
      <p className="muted" data-testid={`${testIdPrefix}facts-empty`}>
        No fact set and no label raised yet.
      </p>
    );
  }
  return (
    <div className="facts-and-labels">
      {labels.length > 0 && (
        <ul className="labels" data-testid={`${testIdPrefix}labels`} aria-label="Labels raised">
          {labels.map((label) => (
            <li key={label} className="badge badge-warn" data-testid={`${testIdPrefix}label`} data-label={label}>
              {label}
            </li>
          ))}
        </ul>
      )}
      {facts.length > 0 && (
        <dl className="facts" data-testid={`${testIdPrefix}facts`}>
          {facts.map(([name, fact]) => {
            const { text, title, kind } = factLine(fact);
            return (
              <div key={name} data-testid={`${testIdPrefix}fact`} data-fact={name} data-kind={kind}>
                <dt className="fact-name">{name}</dt>
                <dd className={`fact-value fact-${kind}`} title={title}>
                  {text}
                </dd>
              </div>
            );
          })}
        </dl>
      )}
    </div>
  );
}
