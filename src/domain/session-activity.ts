/**
 * The rules of what gateways report for the monitor (SPEC §8, §11): whether a run is active on a
 * session, and the session's recent own texts. Kept in the store so every replica sees the same; pure
 * functions here, so every backend applies the same rules.
 */

/** How many of a session's own upstream texts are remembered for self-echo detection. */
export const ownTextsKept = 10;

/** A run flag not refreshed for this long no longer counts: a crashed gateway cannot keep a session busy. */
export const runFlagLifetimeMs = 6 * 60 * 60 * 1000;

/** A session's run flag as stored: `starts` counts the runs ever started, so a scan can tell one began. */
export interface RunFlag {
  active: boolean;
  starts: number;
  refreshedAtMs: number;
}

/** The flag after a gateway reports a run started (`true`) or ended. Every report refreshes it. */
export function runFlagAfter(existing: RunFlag | undefined, active: boolean, nowMs: number): RunFlag {
  return { active, starts: (existing?.starts ?? 0) + (active ? 1 : 0), refreshedAtMs: nowMs };
}

/** True while a reported run counts as active: reported active and refreshed within the lifetime. */
export function isRunActive(flag: RunFlag | undefined, nowMs: number): boolean {
  return flag !== undefined && flag.active && nowMs - flag.refreshedAtMs < runFlagLifetimeMs;
}
