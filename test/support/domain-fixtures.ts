/** Records the domain's unit tests build on: one target session, a fixed now, appends and cursors on it. */
import type { EventKind, StoredEvent } from "../../src/domain/event.js";
import type { AppendInput, CursorRecord } from "../../src/domain/records.js";
import type { SessionId } from "../../src/domain/session-key.js";

export const target: SessionId = { namespace: "default", agentId: "ops", key: "agent:ops:worker" };
export const nowMs = 1_000;

/** An append of `kind` to `target` at `nowMs`, naming no watcher and without the gate, unless `extra` says so. */
export function input(kind: EventKind, extra: Partial<AppendInput> = {}): AppendInput {
  return {
    session: target,
    kind,
    actorType: kind === "human_direct_message" ? "human" : "agent",
    summary: "s",
    occurredAtMs: nowMs,
    payload: {},
    notifyWatcherKeys: [],
    onlyIfWatched: false,
    nowMs,
    ...extra,
  };
}

/** An explicit cursor of `watcherKey` on `target` with marks L, N, M. */
export function cursor(watcherKey: string, acked: number, notified: number, material: number): CursorRecord {
  return { watcherKey, target, acked, notified, material, updatedAtMs: 1, provenance: "explicit", extraKinds: [] };
}

/** An event already recorded on `target` (sequence 4), as a dedupe hit or an adoption finds it. */
export const recorded: StoredEvent = {
  sequence: 4,
  namespace: "default",
  agentId: "ops",
  sessionKey: "agent:ops:worker",
  kind: "goal_changed",
  actorType: "agent",
  summary: "s",
  occurredAtMs: 5,
  payload: {},
  wire: new Uint8Array([1]),
};
