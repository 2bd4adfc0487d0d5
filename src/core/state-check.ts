/**
 * Checks of what comes from outside (a store, a token, a caller): session ids, and a whole
 * session state read back, each refused with an {@link InvalidArgumentError} that names what is
 * wrong and where.
 */
import { InvalidArgumentError } from './errors.js';
import { sessionLogProblem } from './session-log.js';
import { APPROVALS_LIMIT, type OrchestrationState, REPLAY_LIMIT } from './state.js';

/** Longest session id accepted, in UTF-16 code units. */
export const MAX_SESSION_ID_LENGTH = 4096;

/**
 * Throws an {@link InvalidArgumentError} unless `sessionId` is a usable session id:
 * a non-empty string of at most {@link MAX_SESSION_ID_LENGTH} characters.
 */
export function assertSessionId(sessionId: unknown, path = 'sessionId'): asserts sessionId is string {
  if (typeof sessionId !== 'string') {
    throw new InvalidArgumentError(path, `expected a string, got ${describeType(sessionId)}`);
  }
  if (sessionId.length === 0) {
    throw new InvalidArgumentError(path, 'the session id is empty; pass a non-empty string');
  }
  if (sessionId.length > MAX_SESSION_ID_LENGTH) {
    throw new InvalidArgumentError(
      path,
      `the session id is ${sessionId.length} characters long; the limit is ${MAX_SESSION_ID_LENGTH}`,
    );
  }
}

/**
 * {@link assertSessionId} for a store that keeps ids as UTF-8 text (SQLite, PostgreSQL): an
 * unpaired UTF-16 surrogate is refused too, because UTF-8 encodes every lone surrogate as
 * U+FFFD, and two such ids (or one and the id spelled with U+FFFD) would share one session.
 */
export function assertTextSessionId(sessionId: unknown): asserts sessionId is string {
  assertSessionId(sessionId);
  if (/\p{Cs}/u.test(sessionId)) {
    throw new InvalidArgumentError('sessionId', 'the session id contains an unpaired UTF-16 surrogate');
  }
}

/** A short human description of a value's type, for error messages. */
export function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : typeof value;
}

/**
 * Checks that `value` is a well-formed {@link OrchestrationState} (as read back from a store
 * or a token) and returns it; throws an {@link InvalidArgumentError} naming the bad field.
 */
export function assertState(value: unknown, path = 'state'): OrchestrationState {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidArgumentError(path, `expected an object, got ${describeType(value)}`);
  }
  const s = value as Record<string, unknown>;
  // Every store checks every state it writes: no closures or iterator callbacks on this path.
  if (typeof s.sessionId !== 'string') failField(path, s, 'sessionId', 'a string');
  if (s.activeStep !== undefined && typeof s.activeStep !== 'string') failField(path, s, 'activeStep', 'a string');
  if (!isStringArray(s.recentlyUsedTools)) {
    failField(path, s, 'recentlyUsedTools', 'an array of strings');
  }
  if (!isCount(s.sequenceIndex)) failField(path, s, 'sequenceIndex', 'a non-negative integer');
  const usage = s.cumulativeTokenUsage as Record<string, unknown> | undefined;
  if (
    typeof usage !== 'object' ||
    usage === null ||
    !isCount(usage.promptTokens) ||
    !isCount(usage.completionTokens) ||
    !isCount(usage.totalTokens)
  ) {
    failField(path, s, 'cumulativeTokenUsage', 'an object of non-negative integer token counts');
  }
  if (!isCount(s.createdAt)) failField(path, s, 'createdAt', 'a non-negative integer');
  if (!isCount(s.lastAccessed)) failField(path, s, 'lastAccessed', 'a non-negative integer');
  if (!isCount(s.ttl)) failField(path, s, 'ttl', 'a non-negative integer');
  if (!isCount(s.version)) failField(path, s, 'version', 'a non-negative integer');
  if (s.lastMessageKey !== undefined && typeof s.lastMessageKey !== 'string')
    failField(path, s, 'lastMessageKey', 'a string');
  if (s.agentId !== undefined && typeof s.agentId !== 'string') failField(path, s, 'agentId', 'a string');
  if (s.toolCallIds !== undefined && !isStringArray(s.toolCallIds)) {
    failField(path, s, 'toolCallIds', 'an array of strings');
  }
  if (
    s.stepTokens !== undefined &&
    !(
      typeof s.stepTokens === 'object' &&
      s.stepTokens !== null &&
      !Array.isArray(s.stepTokens) &&
      Object.values(s.stepTokens).every(isCount)
    )
  ) {
    failField(path, s, 'stepTokens', 'an object of token counts by step name');
  }
  if (s.pending !== undefined && !(Array.isArray(s.pending) && s.pending.every(isPendingEntry))) {
    failField(path, s, 'pending', 'an array of pending log entries (call, message, used or counted)');
  }
  if (s.counts !== undefined && !isCounts(s.counts)) {
    failField(
      path,
      s,
      'counts',
      'an object of limit counts ({ n, key?, at?, calls? }, with as many calls as at) by rule id',
    );
  }
  if (
    s.approvals !== undefined &&
    !(Array.isArray(s.approvals) && s.approvals.length <= APPROVALS_LIMIT && s.approvals.every(isApproval))
  ) {
    failField(
      path,
      s,
      'approvals',
      `an array of at most ${APPROVALS_LIMIT} approvals ({ id, tool, digest, rule?, at })`,
    );
  }
  if (s.toolUses !== undefined && !isCount(s.toolUses)) failField(path, s, 'toolUses', 'a non-negative integer');
  if (s.replay !== undefined && !isReplayRecord(s.replay)) {
    failField(path, s, 'replay', 'a replay record ({ turn, offers, calls: [{ id, tool?, digest?, allowed }] })');
  }
  if (s.log !== undefined) {
    const problem = sessionLogProblem(s.log);
    if (problem !== undefined) throw new InvalidArgumentError(`${path}.log`, problem);
  }
  if (s.facts !== undefined && !isFacts(s.facts)) {
    failField(path, s, 'facts', 'an object of facts by name ({ value } or { unknown: reason })');
  }
  if (s.labels !== undefined && !isStringArray(s.labels)) failField(path, s, 'labels', 'an array of label names');
  if (s.resetLabels !== undefined && !isStringArray(s.resetLabels)) {
    failField(path, s, 'resetLabels', 'an array of label names');
  }
  return value as OrchestrationState;
}

function isFacts(value: unknown): boolean {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  return Object.values(value).every((fact: unknown) => {
    const f = fact as Record<string, unknown> | null;
    return typeof f === 'object' && f !== null && ('value' in f || typeof f.unknown === 'string');
  });
}

/** A call entry's result writes: facts set (a value or why unknown) and labels raised. */
function isWrites(value: unknown): boolean {
  const w = value as Record<string, unknown> | null;
  if (typeof w !== 'object' || w === null) return false;
  const factsOk =
    w.facts === undefined ||
    (Array.isArray(w.facts) &&
      w.facts.every((fact: unknown) => {
        const f = fact as Record<string, unknown> | null;
        return typeof f === 'object' && f !== null && typeof f.name === 'string';
      }));
  return factsOk && (w.labels === undefined || isStringArray(w.labels));
}

function failField(path: string, s: Record<string, unknown>, field: string, expected: string): never {
  throw new InvalidArgumentError(`${path}.${field}`, `expected ${expected}, got ${describeType(s[field])}`);
}

function isStringArray(value: unknown): value is string[] {
  if (!Array.isArray(value)) return false;
  for (let i = 0; i < value.length; i++) if (typeof value[i] !== 'string') return false;
  return true;
}

function isPendingEntry(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const p = value as Record<string, unknown>;
  if (p.kind === 'message') return isMessage(p);
  if (p.kind === 'used') return typeof p.tool === 'string';
  if (p.kind === 'counted') {
    return typeof p.tool === 'string' && isStringArray(p.limits) && (p.message === undefined || isMessage(p.message));
  }
  return (
    p.kind === 'call' &&
    typeof p.id === 'string' &&
    typeof p.tool === 'string' &&
    isCount(p.expiresAt) &&
    (p.done === undefined || typeof p.done === 'boolean') &&
    (p.message === undefined || isMessage(p.message)) &&
    (p.limits === undefined || (Array.isArray(p.limits) && p.limits.every((id) => typeof id === 'string'))) &&
    (p.writes === undefined || isWrites(p.writes))
  );
}

function isCounts(value: unknown): boolean {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  return Object.values(value).every((count: unknown) => {
    const c = count as Record<string, unknown> | null;
    return (
      typeof c === 'object' &&
      c !== null &&
      isCount(c.n) &&
      (c.key === undefined || typeof c.key === 'string') &&
      (c.at === undefined || (Array.isArray(c.at) && c.at.every(isCount))) &&
      // A window's buckets: one count per bucket time.
      (c.calls === undefined ||
        (Array.isArray(c.calls) && Array.isArray(c.at) && c.calls.length === c.at.length && c.calls.every(isCount)))
    );
  });
}

function isReplayRecord(value: unknown): boolean {
  const r = value as Record<string, unknown> | null;
  if (typeof r !== 'object' || r === null || typeof r.turn !== 'string') return false;
  if (
    !Array.isArray(r.offers) ||
    r.offers.length > REPLAY_LIMIT ||
    !Array.isArray(r.calls) ||
    r.calls.length > REPLAY_LIMIT ||
    (r.usage !== undefined &&
      (!Array.isArray(r.usage) ||
        r.usage.length > REPLAY_LIMIT ||
        !r.usage.every((step) => Number.isSafeInteger(step) && step >= 0)))
  ) {
    return false;
  }
  const offersOk = r.offers.every((offer: unknown) => {
    if (offer === null) return true;
    const o = offer as Record<string, unknown>;
    return (
      typeof o === 'object' &&
      Array.isArray(o.tools) &&
      o.tools.every((tool) => typeof tool === 'string') &&
      (o.toolChoice === 'auto' || o.toolChoice === 'none' || o.toolChoice === 'required')
    );
  });
  const callsOk = r.calls.every((call: unknown) => {
    const c = call as Record<string, unknown>;
    const reason = c?.reason as Record<string, unknown> | undefined;
    return (
      typeof c === 'object' &&
      c !== null &&
      typeof c.id === 'string' &&
      (c.tool === undefined || typeof c.tool === 'string') &&
      (c.digest === undefined || typeof c.digest === 'string') &&
      typeof c.allowed === 'boolean' &&
      (c.ran === undefined || typeof c.ran === 'boolean') &&
      (c.allowedTools === undefined ||
        (Array.isArray(c.allowedTools) && c.allowedTools.every((tool) => typeof tool === 'string'))) &&
      (reason === undefined || (typeof reason.code === 'string' && typeof reason.message === 'string'))
    );
  });
  return offersOk && callsOk;
}

function isApproval(value: unknown): boolean {
  const a = value as Record<string, unknown> | null;
  return (
    typeof a === 'object' &&
    a !== null &&
    typeof a.id === 'string' &&
    typeof a.tool === 'string' &&
    typeof a.digest === 'string' &&
    (a.rule === undefined || typeof a.rule === 'string') &&
    typeof a.at === 'string'
  );
}

function isMessage(value: unknown): boolean {
  const m = value as Record<string, unknown> | null;
  return (
    typeof m === 'object' &&
    m !== null &&
    typeof m.key === 'string' &&
    (m.text === undefined || typeof m.text === 'string') &&
    (m.matches === undefined || (Array.isArray(m.matches) && m.matches.every(isCount)))
  );
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}
