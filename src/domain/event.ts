/** The kinds of material change the signal log records (SPEC §3). */
export const eventKinds = [
  "human_direct_message",
  "goal_changed",
  "upstream_missing",
  "child_spawned",
  "run_completed",
  "run_failed",
  "compacted",
  "adopted",
  "created",
  "imported",
] as const;
export type EventKind = (typeof eventKinds)[number];

export type ActorType = "human" | "agent" | "system";
export type RunOutcome = "error" | "timeout" | "cancelled";

/** How an event of a kind affects cursors. */
export type KindEffect = "notify" | "seed" | "ledger";

/** What an event of `kind` does to cursors: notifying kinds open notices, spawns seed the parent's cursor. */
export function effectFromKind(kind: EventKind): KindEffect {
  switch (kind) {
    case "human_direct_message":
    case "goal_changed":
    case "upstream_missing":
      return "notify";
    case "child_spawned":
      return "seed";
    case "run_completed":
    case "run_failed":
    case "compacted":
    case "adopted":
    case "created":
    case "imported":
      return "ledger";
    default: {
      const never: never = kind;
      throw new Error(`unknown event kind ${String(never)}`);
    }
  }
}

/** Typed metadata of an event. Absent fields are `undefined`, never empty strings. */
export interface EventPayload {
  outcome?: RunOutcome;
  channel?: string;
  turns?: number;
  catalogId?: string;
  hostId?: string;
  /** Why a run failed (run_failed only): one line, never message text. */
  reason?: string;
}

/** The ledger-only kinds a watcher may ask to be notified of too (SPEC §12.3). */
export const extraMaterialKinds = ["run_completed", "run_failed", "compacted"] as const;
export type ExtraMaterialKind = (typeof extraMaterialKinds)[number];

/** True when `kind` is one a watcher may name among its extra material kinds. */
export function isExtraMaterialKind(kind: EventKind): kind is ExtraMaterialKind {
  return (extraMaterialKinds as readonly EventKind[]).includes(kind);
}

/** One entry of the signal log: its fields. Times are milliseconds since the Unix epoch. */
export interface EventFields {
  sequence: number;
  /** The namespace of the event's session (never on the wire: a client knows the namespace it asked in). */
  namespace: string;
  agentId: string;
  sessionKey: string;
  kind: EventKind;
  actorType: ActorType;
  actorId?: string;
  runId?: string;
  summary: string;
  occurredAtMs: number;
  payload: EventPayload;
}

/** An event as stored: its fields and its StateEvent wire bytes, written once when it was appended. */
export interface StoredEvent extends EventFields {
  wire: Uint8Array;
}

/** Encodes an event's fields as StateEvent wire bytes; the store is given one by its owner. */
export type EventEncoder = (event: EventFields) => Uint8Array;

/** How far back an event time may reach. */
export const maxEventAgeMs = 24 * 60 * 60 * 1000;

/** Clamps an event time (ms since the epoch) into [now - 24 h, now]. */
export function clampEventTime(occurredAtMs: number, nowMs: number): number {
  return Math.min(nowMs, Math.max(nowMs - maxEventAgeMs, occurredAtMs));
}
