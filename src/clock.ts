/** A source of wall-clock time in milliseconds since the Unix epoch. Injected everywhere time matters. */
export interface Clock {
  nowMs(): number;
}

/** The real clock. The only place in `src/` that reads the system time. */
export const systemClock: Clock = {
  nowMs: () => Date.now(),
};
