import { toJsonString, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { ActorType, EventKind, WatchProvenance } from "../../gen/sessionstate/v1/types_pb.js";
import type { StateEvent } from "../../gen/sessionstate/v1/types_pb.js";
import { UsageError } from "./connection.js";

/**
 * One message as the API's JSON (proto3 JSON, as buf curl and Connect print it) on one line, zero values
 * included: a script reads `stateVersion` "0" or `acknowledged` false instead of a missing field.
 */
export function jsonLine<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>): string {
  return `${toJsonString(schema, message, { alwaysEmitImplicit: true })}\n`;
}

/** Rows under a header, each column as wide as its widest cell, two spaces apart. */
export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column]!)))
      .join("  ")
      .trimEnd();
  return `${[header, ...rows].map(line).join("\n")}\n`;
}

/** A timestamp in UTC (ISO 8601), or `-` when unset. */
export function timeText(timestamp: Timestamp | undefined): string {
  return timestamp === undefined ? "-" : timestampDate(timestamp).toISOString();
}

/** An enum value as people write it: `human_direct_message`, `agent`, `explicit`. */
export function enumText(names: Record<number, string>, value: number): string {
  return (names[value] ?? String(value)).toLowerCase();
}

/** One line of a session's log: sequence, time, kind, actor, summary. */
export function eventLine(event: StateEvent): string {
  const at = event.occurredAt === undefined ? "" : timestampDate(event.occurredAt).toISOString();
  const actor = `${enumText(ActorType, event.actorType)}${event.actorId === "" ? "" : ` ${event.actorId}`}`;
  return `  ${event.sequence}  ${at}  ${enumText(EventKind, event.kind)}  ${actor}  ${event.summary}`;
}

/**
 * Reads an enum flag written the way people write it: any case, `-` or `_`, with or without the proto
 * prefix (`goal-changed`, `GOAL_CHANGED`, `EVENT_KIND_GOAL_CHANGED`). The unspecified value is not offered.
 */
function enumFlag<E extends Record<string, string | number>>(names: E, prefix: string, flag: string, text: string): E[keyof E] {
  const wanted = text.trim().toUpperCase().replaceAll("-", "_");
  const bare = wanted.startsWith(prefix) ? wanted.slice(prefix.length) : wanted;
  const value = names[bare as keyof E];
  if (typeof value === "number" && value !== 0) return value as E[keyof E];
  const choices = Object.keys(names)
    .filter((name) => Number.isNaN(Number(name)) && names[name as keyof E] !== 0)
    .map((name) => name.toLowerCase().replaceAll("_", "-"));
  throw new UsageError(`${flag}: "${text}" is not one of ${choices.join(", ")}`);
}

export const eventKindFlag = (flag: string, text: string): EventKind => enumFlag(EventKind, "EVENT_KIND_", flag, text);
export const actorTypeFlag = (flag: string, text: string): ActorType => enumFlag(ActorType, "ACTOR_TYPE_", flag, text);
export const provenanceFlag = (flag: string, text: string): WatchProvenance => enumFlag(WatchProvenance, "WATCH_PROVENANCE_", flag, text);

/** A flag that holds a non-negative integer (a version or a count). */
export function countFlag(flag: string, text: string | undefined): bigint | undefined {
  if (text === undefined) return undefined;
  if (!/^\d+$/.test(text)) throw new UsageError(`${flag} must be a non-negative integer (got "${text}")`);
  return BigInt(text);
}

/** "1 event", "2 events"; "1 watch", "2 watches". */
export function counted(count: number | bigint, noun: string, plural = `${noun}s`): string {
  return `${count} ${count === 1 || count === 1n ? noun : plural}`;
}
