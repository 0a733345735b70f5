/** How the console writes times, enums and sessions. */
import { timestampMs, type Timestamp } from "@bufbuild/protobuf/wkt";
import { ActorType, EventKind, WatchProvenance, type SessionRef } from "../../gen/sessionstate/v1/types_pb.js";

/** A time as `2026-12-06 14:05:09Z` (UTC, to the second); "—" when absent. */
export function formatTime(timestamp: Timestamp | undefined): string {
  if (timestamp === undefined) return "—";
  return formatMs(timestampMs(timestamp));
}

export function formatMs(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19).replace("T", " ")}Z`;
}

/** Milliseconds of a timestamp; 0 when absent. */
export function msOf(timestamp: Timestamp | undefined): number {
  return timestamp === undefined ? 0 : timestampMs(timestamp);
}

/** `goal_changed` for EventKind.GOAL_CHANGED. */
export function kindName(kind: EventKind): string {
  return (EventKind[kind] ?? String(kind)).toLowerCase();
}

export function actorName(actor: ActorType): string {
  return (ActorType[actor] ?? String(actor)).toLowerCase();
}

export function provenanceName(provenance: WatchProvenance): string {
  return (WatchProvenance[provenance] ?? String(provenance)).toLowerCase();
}

/** `1 link`, `3 links`. */
export function plural(n: number | bigint, one: string, many = `${one}s`): string {
  return `${count(n)} ${n === 1 || n === 1n ? one : many}`;
}

/** A duration as the largest whole unit that fits: `90 s`, `15 min`, `6 h`, `1 day`. */
export function formatDuration(ms: number): string {
  if (ms % 86_400_000 === 0) return plural(ms / 86_400_000, "day");
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  return `${ms / 1000} s`;
}

/** A count with thousands separators. */
export function count(n: bigint | number): string {
  return n.toLocaleString("en-US");
}

/** The route of a session's view. */
export function sessionHref(namespace: string, session: Pick<SessionRef, "key" | "agentId"> | undefined): string {
  if (session === undefined) return "#/";
  return `#/ns/${encodeURIComponent(namespace)}/session/${encodeURIComponent(session.agentId)}/${encodeURIComponent(session.key)}`;
}
