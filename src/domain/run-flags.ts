/**
 * The rules of what gateways report for the monitor (SPEC §8, §11): whether a run is active on a
 * session, and the session's recent own texts (where a new one goes, which are trimmed). Kept in the store so every replica sees the same; pure
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

/**
 * Where a new own-text digest goes and what is trimmed: it takes the position after the newest, and only
 * the newest `keep` are kept (positions at or below `trimThrough` go).
 */
export function planOwnText(newestPosition: number, keep: number): { position: number; trimThrough: number } {
  const position = newestPosition + 1;
  return { position, trimThrough: position - keep };
}
