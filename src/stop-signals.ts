/**
 * What a signal means once a stop has begun. A supervisor that signals a process group (systemd's default
 * `KillMode=control-group`, `kill -TERM -PGID`, one Ctrl-C in a terminal) reaches the server twice when it
 * runs under npm: once directly, and once forwarded by npm. The same signal again within a second of the
 * first is that same stop; any other signal, or the same one later (a second Ctrl-C), exits at once.
 */

/** How long after the first signal the same signal is taken as the same stop. */
export const sameStopWithinMs = 1000;

export type SignalAfterStop = "same stop" | "exit now";

export function signalAfterStop(first: { signal: NodeJS.Signals; atMs: number }, signal: NodeJS.Signals, atMs: number): SignalAfterStop {
  return signal === first.signal && atMs - first.atMs < sameStopWithinMs ? "same stop" : "exit now";
}
