/**
 * Fair load: at most `maxTurns` chat turns run at once in a process, the next `maxQueued` wait
 * in arrival order, and any beyond that are refused at once with `503 server-busy` and
 * `Retry-After`. Without it, a burst of connections starts every turn together: the event loop
 * saturates, each turn streams slower, and the first requests of the burst stall for seconds.
 *
 * How many turns run may also follow the CPU: beyond `minTurns`, a turn starts only when a
 * pacer admits it (`eventLoopPacer` in event-loop.ts: one more per turn of the event loop, while
 * the loop answers quickly). Turns on a remote model mostly wait on the network, so many run at
 * once; turns on a CPU-bound model (the offline one) would only slow each other down, so few
 * do, and the others wait their turn instead of sharing the CPU with all of them.
 *
 * Written here rather than taken from p-limit or p-queue: a turn holds its slot after the
 * handler returned, until its stream ends, so a slot is a handle released by the caller; the
 * queue must refuse beyond a bound instead of growing; and a client that disconnects while
 * queued must leave the queue at once, not when its turn would have come.
 */
import { InvalidArgumentError } from '../core/errors.js';
import { HttpError } from './http-errors.js';

/** Options of {@link createTurnLimiter}. */
export interface TurnLimiterOptions {
  /** Turns that may run at once (>= 1). */
  maxTurns: number;
  /** Turns that may wait for a slot (>= 0); more are refused. */
  maxQueued: number;
  /**
   * Turns that run whatever the load (1 to `maxTurns`; default `maxTurns`, a fixed limit).
   * Beyond them a turn starts only when {@link TurnLimiterOptions.pacer} admits it.
   */
  minTurns?: number;
  /** Decides on turns beyond `minTurns` (default: admit them all, up to `maxTurns`). */
  pacer?: TurnPacer;
  /** Seconds a refused client is told to wait (`Retry-After`, default 1). */
  retryAfterSeconds?: number;
}

/** Decides whether one more turn may start now, beyond the ones that always may. */
export interface TurnPacer {
  /** True when one more turn may start now (it then starts). */
  admit(): boolean;
  /** Registers the function to call when `admit` may answer differently than it last did. */
  onChange(wake: () => void): void;
}

/** Frees a slot; calling it again does nothing. */
export type ReleaseSlot = () => void;

/** Limits the turns in flight; see the module comment. */
export interface TurnLimiter {
  /**
   * Resolves with a slot once one is free, in arrival order. Throws `server-busy` when the
   * queue is full; rejects with the signal's reason when it aborts while waiting.
   */
  acquire(signal?: AbortSignal): Promise<ReleaseSlot>;
  /** Turns running now. */
  readonly running: number;
  /** Turns waiting now. */
  readonly queued: number;
}

interface Waiter {
  grant(release: ReleaseSlot): void;
}

/** Creates a {@link TurnLimiter}. */
export function createTurnLimiter(options: TurnLimiterOptions): TurnLimiter {
  const { maxTurns, maxQueued } = options;
  if (!Number.isSafeInteger(maxTurns) || maxTurns < 1) {
    throw new InvalidArgumentError('maxTurns', `expected a whole number >= 1, got ${String(maxTurns)}`);
  }
  if (!Number.isSafeInteger(maxQueued) || maxQueued < 0) {
    throw new InvalidArgumentError('maxQueued', `expected a whole number >= 0, got ${String(maxQueued)}`);
  }
  const minTurns = options.minTurns ?? maxTurns;
  if (!Number.isSafeInteger(minTurns) || minTurns < 1 || minTurns > maxTurns) {
    throw new InvalidArgumentError('minTurns', `expected a whole number from 1 to maxTurns, got ${String(minTurns)}`);
  }
  const pacer = options.pacer;
  const retryAfter = String(options.retryAfterSeconds ?? 1);
  let running = 0;
  // Insertion-ordered, and a waiter that leaves is deleted in O(1).
  const waiting = new Set<Waiter>();

  // The pacer is asked last: admitting counts as a start to it.
  const canStart = () => running < minTurns || (running < maxTurns && (pacer === undefined || pacer.admit()));
  /** Starts the oldest waiters, as many as may start now; the rest wait for the next chance. */
  const startWaiters = () => {
    for (const next of waiting) {
      if (!canStart()) break;
      waiting.delete(next);
      running++;
      next.grant(slot());
    }
  };
  const slot = (): ReleaseSlot => {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      running--;
      startWaiters();
    };
  };
  pacer?.onChange(startWaiters);

  return {
    acquire(signal) {
      signal?.throwIfAborted();
      // A newcomer never overtakes a waiter.
      if (waiting.size === 0 && canStart()) {
        running++;
        return Promise.resolve(slot());
      }
      if (waiting.size >= maxQueued) {
        return Promise.reject(
          new HttpError(
            'server-busy',
            `The server is running ${running} turns and ${waiting.size} more are waiting; retry in ${retryAfter} s.`,
            { headers: { 'retry-after': retryAfter } },
          ),
        );
      }
      return new Promise<ReleaseSlot>((resolve, reject) => {
        const leave = () => {
          waiting.delete(waiter);
          reject(signal?.reason);
        };
        const waiter: Waiter = {
          grant(release) {
            signal?.removeEventListener('abort', leave);
            resolve(release);
          },
        };
        waiting.add(waiter);
        signal?.addEventListener('abort', leave, { once: true });
      });
    },
    get running() {
      return running;
    },
    get queued() {
      return waiting.size;
    },
  };
}
