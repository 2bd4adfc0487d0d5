/**
 * Cooperation with the event loop. A turn whose model and tools never wait on I/O (the offline
 * model, a local model computing in-process, CPU-bound tools) runs as one long chain of
 * promise callbacks, and Node runs every pending promise callback before it returns to the
 * event loop. Measured with 50 connections and the offline model: while such chains ran, the
 * server accepted about two new connections a second (the rest waited in the kernel's accept
 * queue, some for the whole 10 s run), so the first requests of a burst took 5-10 s while
 * later ones took 300 ms. Starting each model step in a later turn of the event loop gives
 * accepts and reads their turn: all 50 connections were accepted at once, and the tail
 * shrank to the queueing the turn limiter decides. With a remote model it costs one
 * `setImmediate` per model step, next to a network round trip.
 */
import type { TurnPacer } from './turn-limiter.js';

/** Resolves in a later turn of the event loop, after pending I/O callbacks ran. */
export function nextEventLoopTurn(): Promise<void> {
  return new Promise((resolve) => {
    // setImmediate runs after the poll phase (Node, Bun, Deno); elsewhere a timer does the same.
    if (typeof setImmediate === 'function') setImmediate(resolve);
    else setTimeout(resolve, 0);
  });
}

/** Options of {@link eventLoopPacer}. */
export interface EventLoopPacerOptions {
  /** Longest the event loop may take to come round for one more turn to start (default 20 ms). */
  maxDelayMs?: number;
}

/**
 * A {@link TurnPacer} that admits one more turn per turn of the event loop, and only while the
 * loop comes round within `maxDelayMs`: it measures how long a `setImmediate` takes to run,
 * which is how long everything else in the process (other turns, I/O) kept the loop busy. A
 * burst arriving at once therefore starts one turn a loop, each after the loop showed it has
 * time to spare, instead of all together; turns that wait on the network leave the loop idle,
 * so they keep being admitted, one a loop.
 */
export function eventLoopPacer(options: EventLoopPacerOptions = {}): TurnPacer {
  const maxDelayMs = options.maxDelayMs ?? 20;
  let probing = false;
  let delay = 0;
  let wake: () => void = () => undefined;
  const probe = () => {
    if (probing) return;
    probing = true;
    const scheduled = performance.now();
    nextEventLoopTurn().then(() => {
      probing = false;
      delay = performance.now() - scheduled;
      wake();
    });
  };
  return {
    admit() {
      const admitted = !probing && delay <= maxDelayMs;
      // Either way the loop is measured again: after this start, or until it has time.
      probe();
      return admitted;
    },
    onChange(callback) {
      wake = callback;
    },
  };
}
