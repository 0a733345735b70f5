import { isNestedWatcher, type SessionId } from "./session-key.js";
import type { CursorRecord } from "./records.js";

/** A stale notice: what a watcher is told while its cursor on a target has `N > L`. */
export interface Notice {
  watcherKey: string;
  target: SessionId;
  /** L: reconcile with `changes_since` this version. */
  changesSince: number;
  /** N: the version the notice covers; the ack must name it. */
  notifiedVersion: number;
  /** Byte-stable while the notice is pending. */
  text: string;
  /** Main watchers of explicit pairs are woken; nested (`subagent:`) watchers and ambient pairs are not. */
  wake: boolean;
  /** `session-state:` + lower-case hex of the UTF-8 target key. */
  contextKey: string;
  /** Ambient pairs: the gateway replaces its queued entry for `contextKey` instead of adding one. */
  queueOnly: boolean;
}

/** The notice of a pending cursor. Pure: the same cursor always gives byte-identical text. */
export function noticeFromCursor(cursor: CursorRecord): Notice {
  const key = cursor.target.key;
  return {
    watcherKey: cursor.watcherKey,
    target: cursor.target,
    changesSince: cursor.acked,
    notifiedVersion: cursor.notified,
    text: `Session "${key}" changed (other actor). Reconcile before acting: session_status sessionKey "${key}" changesSince ${cursor.acked}.`,
    wake: cursor.provenance === "explicit" && !isNestedWatcher(cursor.watcherKey),
    contextKey: `session-state:${Buffer.from(key, "utf8").toString("hex")}`,
    queueOnly: cursor.provenance === "ambient",
  };
}
