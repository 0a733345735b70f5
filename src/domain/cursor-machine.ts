/**
 * The cursor state machine of SPEC §5-6, pure and free of I/O. A cursor holds three sequences of its
 * target: acked `L`, notified `N` and material `M`, with `L <= N <= M` always. A notice is pending
 * exactly when `N > L`; while one is pending `N` stays frozen, so any number of material events give
 * the watcher one notice.
 */
export interface CursorMarks {
  readonly acked: number;
  readonly notified: number;
  readonly material: number;
}

/** True when a notice is pending (`N > L`). */
export function isPending(cursor: CursorMarks): boolean {
  return cursor.notified > cursor.acked;
}

/**
 * The cursor of a spawn seed or an explicit watch: everything up to `version` counts as known, so no
 * notice is pending and history before it never produces one.
 */
export function seedCursor(version: number): CursorMarks {
  return { acked: version, notified: version, material: version };
}

/**
 * Applies a material event with sequence `sequence` to a watcher's cursor (`undefined`: the watcher
 * had none, so it starts at `L = 0`). Opens a notice when none is pending; otherwise `N` stays frozen.
 */
export function applyMaterialEvent(
  cursor: CursorMarks | undefined,
  sequence: number,
): { cursor: CursorMarks; opened: boolean } {
  const current = cursor ?? seedCursor(0);
  const material = Math.max(current.material, sequence);
  if (isPending(current)) return { cursor: { ...current, material }, opened: false };
  const opened = material > current.acked;
  return { cursor: { acked: current.acked, notified: opened ? material : current.notified, material }, opened };
}

/** The outcome of an acknowledgement. */
export interface AckTransition {
  cursor: CursorMarks;
  /** The ack matched the pending notice and moved the cursor. */
  acknowledged: boolean;
  /** Material events arrived after the notice opened, so a fresh notice opened for them. */
  reopened: boolean;
}

/**
 * Acknowledges the notice covering `notifiedVersion`. A stale or repeated ack (nothing pending, or
 * another version) changes nothing. Otherwise `L := N`, or with `reconciledThrough = V`,
 * `L := max(N, min(V, M))`; if `M > L` one fresh notice opens with `N := M`.
 */
export function applyAck(cursor: CursorMarks, notifiedVersion: number, reconciledThrough?: number): AckTransition {
  if (!isPending(cursor) || cursor.notified !== notifiedVersion) {
    return { cursor, acknowledged: false, reopened: false };
  }
  const acked =
    reconciledThrough === undefined
      ? cursor.notified
      : Math.max(cursor.notified, Math.min(reconciledThrough, cursor.material));
  const reopened = cursor.material > acked;
  return {
    cursor: { acked, notified: reopened ? cursor.material : acked, material: cursor.material },
    acknowledged: true,
    reopened,
  };
}
