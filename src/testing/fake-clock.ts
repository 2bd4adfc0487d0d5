/** A clock you move by hand, for tests of TTLs and timestamps. */
export interface FakeClock {
  /** The current time in milliseconds; pass it as a `now` option. */
  now: () => number;
  /** Moves the clock forward by `ms`. */
  advance(ms: number): void;
  /** Sets the clock to `ms`. */
  set(ms: number): void;
}

/** Creates a {@link FakeClock} starting at `start` milliseconds. */
export function createFakeClock(start = 0): FakeClock {
  let time = start;
  return {
    now: () => time,
    advance(ms) {
      time += ms;
    },
    set(ms) {
      time = ms;
    },
  };
}
