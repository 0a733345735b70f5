/**
 * Rows as both backends store them (the same column names in SQLite and PostgreSQL), and their
 * conversion to domain records: once, at the row boundary. Every row carries its namespace (SPEC §12.1). Booleans arrive as 0/1 from SQLite and as
 * booleans from PostgreSQL; both are read with `isTrue`.
 */
import type { ActorType, EventKind, ExtraMaterialKind, RunOutcome, StoredEvent } from "../domain/event.js";
import type { CursorRecord, EventWire, LinkRecord, SessionHead, WatchProvenance } from "../domain/records.js";
import type { RunFlag } from "../domain/run-flags.js";
import { linkSourceFromText } from "../domain/upstream-link.js";

export interface EventRow {
  sequence: number;
  namespace: string;
  agent_id: string;
  session_key: string;
  kind: string;
  actor_type: string;
  actor_id: string | null;
  run_id: string | null;
  summary: string;
  occurred_at_ms: number;
  outcome: string | null;
  channel: string | null;
  turns: number | null;
  catalog_id: string | null;
  host_id: string | null;
  wire: Uint8Array;
}

export interface HeadRow {
  namespace: string;
  agent_id: string;
  session_key: string;
  state_version: number;
  pruned_through: number;
  updated_at_ms: number;
  has_upstream: number | boolean;
}

export interface CursorRow {
  namespace: string;
  watcher_key: string;
  target_agent_id: string;
  target_key: string;
  acked: number;
  notified: number;
  material: number;
  updated_at_ms: number;
  provenance: string;
  /** Extra material kinds, comma-separated in their canonical order; empty for none. */
  extra_kinds: string;
}

export interface LinkRow {
  namespace: string;
  agent_id: string;
  session_key: string;
  catalog_id: string;
  host_id: string;
  thread_id: string;
  source: string;
  marker: string;
  missed_checks: number;
  last_scanned_at_ms: number | null;
  updated_at_ms: number;
}

export interface RunFlagRow {
  active: number | boolean;
  starts: number;
  refreshed_at_ms: number;
}

function isTrue(value: number | boolean): boolean {
  return value === true || value === 1;
}

/** Converts a stored row to an event. The columns were written by the store, so they are trusted. */
export function eventFromRow(row: EventRow): StoredEvent {
  const event: StoredEvent = {
    sequence: row.sequence,
    namespace: row.namespace,
    agentId: row.agent_id,
    sessionKey: row.session_key,
    kind: row.kind as EventKind,
    actorType: row.actor_type as ActorType,
    summary: row.summary,
    occurredAtMs: row.occurred_at_ms,
    payload: {},
    wire: row.wire,
  };
  if (row.actor_id !== null) event.actorId = row.actor_id;
  if (row.run_id !== null) event.runId = row.run_id;
  if (row.outcome !== null) event.payload.outcome = row.outcome as RunOutcome;
  if (row.channel !== null) event.payload.channel = row.channel;
  if (row.turns !== null) event.payload.turns = row.turns;
  if (row.catalog_id !== null) event.payload.catalogId = row.catalog_id;
  if (row.host_id !== null) event.payload.hostId = row.host_id;
  return event;
}

export function headFromRow(row: HeadRow): SessionHead {
  return {
    session: { namespace: row.namespace, agentId: row.agent_id, key: row.session_key },
    stateVersion: row.state_version,
    prunedThrough: row.pruned_through,
    updatedAtMs: row.updated_at_ms,
    hasUpstream: isTrue(row.has_upstream),
  };
}

export function cursorFromRow(row: CursorRow): CursorRecord {
  return {
    watcherKey: row.watcher_key,
    target: { namespace: row.namespace, agentId: row.target_agent_id, key: row.target_key },
    acked: row.acked,
    notified: row.notified,
    material: row.material,
    updatedAtMs: row.updated_at_ms,
    provenance: row.provenance as WatchProvenance,
    extraKinds: row.extra_kinds === "" ? [] : (row.extra_kinds.split(",") as ExtraMaterialKind[]),
  };
}

/** A cursor's extra material kinds as its row stores them. */
export function extraKindsToColumn(kinds: readonly ExtraMaterialKind[]): string {
  return kinds.join(",");
}

export function linkFromRow(row: LinkRow): LinkRecord {
  const link: LinkRecord = {
    session: { namespace: row.namespace, agentId: row.agent_id, key: row.session_key },
    catalogId: row.catalog_id,
    hostId: row.host_id,
    threadId: row.thread_id,
    source: linkSourceFromText(row.source),
    marker: row.marker,
    missedChecks: row.missed_checks,
    updatedAtMs: row.updated_at_ms,
  };
  if (row.last_scanned_at_ms !== null) link.lastScannedAtMs = row.last_scanned_at_ms;
  return link;
}

export function runFlagFromRow(row: RunFlagRow): RunFlag {
  return { active: isTrue(row.active), starts: row.starts, refreshedAtMs: row.refreshed_at_ms };
}

/**
 * A session's events read as one row: `lengths` lists "sequence:length" per event, comma-separated, and
 * `bytes` holds their wire bytes concatenated in the same order (both aggregates of one query see the rows
 * in one order). The events are views into `bytes`, ascending by sequence. Reading one blob instead of one
 * per event spares the collector a Buffer per event, which under load cost more than the rest of the read.
 */
export function eventsFromConcatenation(lengths: string | null, bytes: Uint8Array | null): EventWire[] {
  if (lengths === null || bytes === null) return [];
  const events: EventWire[] = [];
  let offset = 0;
  for (const entry of lengths.split(",")) {
    const colon = entry.indexOf(":");
    const length = Number(entry.slice(colon + 1));
    events.push({ sequence: Number(entry.slice(0, colon)), wire: bytes.subarray(offset, offset + length) });
    offset += length;
  }
  if (offset !== bytes.byteLength) throw new Error(`events read as one blob: ${offset} bytes listed, ${bytes.byteLength} read`);
  if (events.some((event, i) => i > 0 && event.sequence <= events[i - 1]!.sequence)) events.sort((a, b) => a.sequence - b.sequence);
  return events;
}
