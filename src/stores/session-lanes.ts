/**
 * Per-session queues for networked stores: one process runs its own operations on a session
 * one after another. Racing them through compare-and-set or row locks would only turn them
 * into conflicts, retries and a pile-up of pooled connections.
 */

/** Runs `task` after the earlier tasks of the same session; see {@link createSessionLanes}. */
export type RunInLane = <T>(sessionId: string, deadline: number, task: () => Promise<T>) => Promise<T>;

/**
 * Creates a set of lanes. A task still queued at its `deadline` (a `performance.now()` time)
 * gives up without running and rejects with `giveUp(sessionId)`, so a queue that built up
 * during an outage drains in one timeout, not one timeout per entry. A task that has begun is
 * never cut short: it could still write, and reporting a failure then would be a lie.
 */
export function createSessionLanes(giveUp: (sessionId: string) => Error): RunInLane {
  const lanes = new Map<string, Promise<void>>();
  return <T>(sessionId: string, deadline: number, task: () => Promise<T>): Promise<T> => {
    const previous = lanes.get(sessionId);
    let result: Promise<T>;
    let tail: Promise<void>;
    if (previous === undefined) {
      result = task();
      tail = result.then(noop, noop);
    } else {
      let begun = false;
      let abandoned = false;
      const turn = previous.then(() => {
        if (abandoned) return undefined;
        begun = true;
        return task();
      });
      tail = turn.then(noop, noop);
      result = new Promise<T>((resolve, reject) => {
        const timer = setTimeout(
          () => {
            if (begun) return;
            abandoned = true;
            reject(giveUp(sessionId));
          },
          Math.max(0, deadline - performance.now()),
        );
        turn.then(
          (value) => {
            clearTimeout(timer);
            resolve(value as T);
          },
          (error: unknown) => {
            clearTimeout(timer);
            reject(error);
          },
        );
      });
    }
    lanes.set(sessionId, tail);
    void tail.then(() => {
      if (lanes.get(sessionId) === tail) lanes.delete(sessionId);
    });
    return result;
  };
}

function noop() {}
