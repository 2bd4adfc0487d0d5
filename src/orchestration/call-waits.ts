/**
 * Requests that wait for running calls (SPEC section 7). A request whose answer depends on how a
 * running call of its session ends is not refused: its turn waits here until the session
 * changes, then asks again. One per manager, shared by its turns:
 *
 * - a write this manager makes to a session wakes that session's waiters at once;
 * - a turn that holds the completion of a call in its buffer (to save a round trip) is asked to
 *   write it as soon as someone waits on its session, so a buffered completion never holds a
 *   waiter up;
 * - a call running in another process is seen ending by polling the store, from 10 ms apart
 *   doubling to 200 ms apart (a read per poll, none while nothing waits).
 *
 * A wait ends at its deadline (`waitMs` of the manager, default 30 s) or, when
 * {@link MAX_WAITING} requests already wait on the session in this process, at once; the request
 * is then refused as `pending`, saying which.
 */
import type { OrchestrationState } from '../core/state.js';
import type { ToolDecision, WaitEnd } from '../core/transition.js';

/** Most requests that wait on one session in one process; beyond, a request is refused at once. */
export const MAX_WAITING = 256;

/** Default bound of a wait: 30 seconds. */
export const DEFAULT_WAIT_MS = 30_000;

const FIRST_POLL_MS = 10;
const LAST_POLL_MS = 200;

/** How a wait ended. */
export type WaitOutcome =
  | { readonly outcome: 'changed' }
  | { readonly outcome: 'timeout'; readonly waitedMs: number }
  | { readonly outcome: 'queue-full'; readonly queued: number };

interface Waiter {
  readonly ids: readonly string[];
  readonly resolve: (outcome: WaitOutcome) => void;
}

/** The waits of one manager's sessions (see the module comment). */
export class CallWaits {
  readonly #read: (sessionId: string) => Promise<OrchestrationState | null>;
  readonly #clock: () => number;
  readonly #waiting = new Map<string, Set<Waiter>>();
  readonly #holders = new Map<string, Set<() => void>>();

  constructor(read: (sessionId: string) => Promise<OrchestrationState | null>, clock: () => number = Date.now) {
    this.#read = read;
    this.#clock = clock;
  }

  /** True when a request waits on the session in this process. */
  has(sessionId: string): boolean {
    return (this.#waiting.get(sessionId)?.size ?? 0) > 0;
  }

  /**
   * Registers `flush`, which writes what a turn holds of the session's call endings, to run when
   * a request starts waiting on the session; {@link release} unregisters it.
   */
  hold(sessionId: string, flush: () => void): void {
    let set = this.#holders.get(sessionId);
    if (set === undefined) {
      set = new Set();
      this.#holders.set(sessionId, set);
    }
    set.add(flush);
  }

  /** Unregisters a flush {@link hold} registered. */
  release(sessionId: string, flush: () => void): void {
    const set = this.#holders.get(sessionId);
    if (set === undefined) return;
    set.delete(flush);
    if (set.size === 0) this.#holders.delete(sessionId);
  }

  /** The session was written by this process: its waiters ask again. */
  changed(sessionId: string): void {
    const set = this.#waiting.get(sessionId);
    if (set === undefined) return;
    for (const waiter of [...set]) waiter.resolve({ outcome: 'changed' });
  }

  /**
   * Waits until the session changes in a way that may have ended one of the calls `ids`, or until
   * `deadline` (milliseconds on the manager's clock). Resolves to how the wait ended.
   */
  wait(sessionId: string, ids: readonly string[], deadline: number, started: number): Promise<WaitOutcome> {
    let set = this.#waiting.get(sessionId);
    if (set !== undefined && set.size >= MAX_WAITING) {
      return Promise.resolve({ outcome: 'queue-full', queued: set.size });
    }
    const remaining = deadline - this.#clock();
    if (remaining <= 0) return Promise.resolve({ outcome: 'timeout', waitedMs: this.#clock() - started });
    if (set === undefined) {
      set = new Set();
      this.#waiting.set(sessionId, set);
    }
    const waiting = set;
    return new Promise<WaitOutcome>((resolve) => {
      let poll: ReturnType<typeof setTimeout> | undefined;
      let every = FIRST_POLL_MS;
      const waiter: Waiter = {
        ids,
        resolve: (outcome) => {
          clearTimeout(poll);
          clearTimeout(bound);
          waiting.delete(waiter);
          if (waiting.size === 0 && this.#waiting.get(sessionId) === waiting) this.#waiting.delete(sessionId);
          resolve(outcome);
        },
      };
      const bound = setTimeout(
        () => waiter.resolve({ outcome: 'timeout', waitedMs: this.#clock() - started }),
        remaining,
      );
      const check = () => {
        this.#read(sessionId).then(
          (state) => {
            if (!waiting.has(waiter)) return;
            if (!stillRunning(state, ids, this.#clock())) waiter.resolve({ outcome: 'changed' });
            else schedule();
          },
          // A store that does not answer now may answer at the next poll; the bound ends the wait.
          () => {
            if (waiting.has(waiter)) schedule();
          },
        );
      };
      const schedule = () => {
        poll = setTimeout(check, every);
        every = Math.min(LAST_POLL_MS, every * 2);
      };
      waiting.add(waiter);
      schedule();
      // A completion this process holds unwritten is written now, so nobody waits on it.
      for (const flush of [...(this.#holders.get(sessionId) ?? [])]) flush();
    });
  }
}

/**
 * True when one of the calls `ids` still runs in `state` at `now`. A call whose lease ended has
 * not: its process died, and the next write releases it.
 */
function stillRunning(state: OrchestrationState | null, ids: readonly string[], now: number): boolean {
  for (const entry of state?.pending ?? []) {
    if (entry.kind === 'call' && entry.done !== true && entry.expiresAt > now && ids.includes(entry.id)) return true;
  }
  return false;
}

/**
 * Asks `ask` for a tool call's decision until it is one: while the answer waits for running calls
 * (`waitFor`), waits for them on `waits`, then asks again; past `waitMs` or with the session's
 * queue full, asks once more with `waited`, which gets the final `pending` refusal. The shells'
 * one loop (a turn's requests, the seed API's `requestTool`).
 */
export async function decideWaiting(
  waits: CallWaits,
  sessionId: string,
  first: ToolDecision,
  ask: (waited?: WaitEnd) => ToolDecision | Promise<ToolDecision>,
  waitMs: number,
  clock: () => number,
): Promise<ToolDecision> {
  let decision = first;
  const started = clock();
  const deadline = started + waitMs;
  while (!decision.allowed && decision.waitFor !== undefined) {
    const ended = await waits.wait(sessionId, decision.waitFor, deadline, started);
    if (ended.outcome === 'changed') decision = await ask();
    else if (ended.outcome === 'timeout') decision = await ask({ cause: 'wait-bound', waitedMs: ended.waitedMs });
    else decision = await ask({ cause: 'queue-full', queued: ended.queued });
  }
  return decision;
}
