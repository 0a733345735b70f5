import type Database from "better-sqlite3";
import type { ActorType, EventKind, RunOutcome, StoredEvent } from "../model/event.js";
import type { SessionId } from "../model/session-key.js";
import { encodeStateEvent } from "../model/event-wire.js";
import type { AppendInput, EventWire, SessionHead } from "./store.js";

export interface EventRow {
  sequence: number;
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
  wire: Buffer;
}

interface HeadRow {
  agent_id: string;
  session_key: string;
  state_version: number;
  pruned_through: number;
  updated_at_ms: number;
  has_upstream: number;
}

/** Converts a stored row to an event. The columns were written by `insertEvent`, so they are trusted. */
export function eventFromRow(row: EventRow): StoredEvent {
  const event: StoredEvent = {
    sequence: row.sequence,
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

function headFromRow(row: HeadRow): SessionHead {
  return {
    session: { agentId: row.agent_id, key: row.session_key },
    stateVersion: row.state_version,
    prunedThrough: row.pruned_through,
    updatedAtMs: row.updated_at_ms,
    hasUpstream: row.has_upstream === 1,
  };
}

const headColumns = `agent_id, session_key, state_version, pruned_through, updated_at_ms,
  EXISTS (SELECT 1 FROM upstream_links AS l WHERE l.agent_id = heads.agent_id AND l.session_key = heads.session_key)
    AS has_upstream`;

export const eventColumns =
  "sequence, agent_id, session_key, kind, actor_type, actor_id, run_id, summary, occurred_at_ms, outcome, channel, turns, catalog_id, host_id";

/**
 * Prepared statements over the `events` and `heads` tables. Callers own the transactions; nothing here
 * opens one.
 */
export class EventTables {
  private readonly insert;
  private readonly nextSequence;
  private readonly byDedupeKey;
  private readonly upsertHead;
  private readonly head;
  private readonly after;
  private readonly earliest;
  private readonly headsFrom;
  private readonly headsOfAgentFrom;
  private readonly deleteOfSession;
  private readonly deleteHeadRow;
  private readonly oldEvents;
  private readonly oldestEvents;
  private readonly countEvents;
  private readonly raiseWatermark;
  private readonly deleteOne;

  constructor(db: Database.Database) {
    this.insert = db.prepare<unknown[]>(
      `INSERT INTO events (sequence, agent_id, session_key, kind, actor_type, actor_id, run_id, summary,
         occurred_at_ms, outcome, channel, turns, catalog_id, host_id, dedupe_key, wire)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.nextSequence = db
      .prepare<[], number>("SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0) + 1")
      .pluck();
    this.byDedupeKey = db.prepare<[string], EventRow>(`SELECT ${eventColumns}, wire FROM events WHERE dedupe_key = ?`);
    this.upsertHead = db.prepare<[string, string, number, number]>(
      `INSERT INTO heads (agent_id, session_key, state_version, updated_at_ms) VALUES (?, ?, ?, ?)
       ON CONFLICT (agent_id, session_key) DO UPDATE
       SET state_version = max(state_version, excluded.state_version), updated_at_ms = excluded.updated_at_ms`,
    );
    this.head = db.prepare<[string, string], HeadRow>(
      `SELECT ${headColumns} FROM heads WHERE agent_id = ? AND session_key = ?`,
    );
    this.after = db.prepare<[string, string, number, number], EventWire>(
      `SELECT sequence, wire FROM events WHERE agent_id = ? AND session_key = ? AND sequence > ?
       ORDER BY sequence LIMIT ?`,
    );
    this.earliest = db.prepare<[string, string], { first: number | null }>(
      "SELECT min(sequence) AS first FROM events WHERE agent_id = ? AND session_key = ?",
    );
    this.headsFrom = db.prepare<[string, string, number], HeadRow>(
      `SELECT ${headColumns} FROM heads WHERE (agent_id, session_key) > (?, ?) ORDER BY agent_id, session_key LIMIT ?`,
    );
    this.headsOfAgentFrom = db.prepare<[string, string, number], HeadRow>(
      `SELECT ${headColumns} FROM heads WHERE agent_id = ? AND session_key > ? ORDER BY session_key LIMIT ?`,
    );
    this.deleteOfSession = db.prepare<[string, string]>("DELETE FROM events WHERE agent_id = ? AND session_key = ?");
    this.deleteHeadRow = db.prepare<[string, string]>("DELETE FROM heads WHERE agent_id = ? AND session_key = ?");
    this.oldEvents = db.prepare<[number, number], Pick<EventRow, "sequence" | "agent_id" | "session_key">>(
      "SELECT sequence, agent_id, session_key FROM events WHERE occurred_at_ms < ? LIMIT ?",
    );
    this.oldestEvents = db.prepare<[number], Pick<EventRow, "sequence" | "agent_id" | "session_key">>(
      "SELECT sequence, agent_id, session_key FROM events ORDER BY sequence LIMIT ?",
    );
    this.countEvents = db.prepare<[], { n: number }>("SELECT count(*) AS n FROM events");
    this.raiseWatermark = db.prepare<[number, string, string]>(
      "UPDATE heads SET pruned_through = max(pruned_through, ?) WHERE agent_id = ? AND session_key = ?",
    );
    this.deleteOne = db.prepare<[number]>("DELETE FROM events WHERE sequence = ?");
  }

  /** Inserts an event with the next sequence and returns it, wire bytes included. */
  insertEvent(input: AppendInput): StoredEvent {
    const { session, payload } = input;
    // The sequence is part of the wire bytes, so it is taken before the insert: AUTOINCREMENT's counter
    // is never below any sequence issued, and an explicit larger one moves the counter on.
    const event: StoredEvent = {
      sequence: this.nextSequence.get()!,
      agentId: session.agentId,
      sessionKey: session.key,
      kind: input.kind,
      actorType: input.actorType,
      summary: input.summary,
      occurredAtMs: input.occurredAtMs,
      payload: { ...payload },
      wire: new Uint8Array(0),
    };
    if (input.actorId !== undefined) event.actorId = input.actorId;
    if (input.runId !== undefined) event.runId = input.runId;
    event.wire = encodeStateEvent(event);
    this.insert.run(
      event.sequence,
      session.agentId,
      session.key,
      input.kind,
      input.actorType,
      input.actorId ?? null,
      input.runId ?? null,
      input.summary,
      input.occurredAtMs,
      payload.outcome ?? null,
      payload.channel ?? null,
      payload.turns ?? null,
      payload.catalogId ?? null,
      payload.hostId ?? null,
      input.dedupeKey ?? null,
      event.wire,
    );
    return event;
  }

  /** The event holding `dedupeKey`, if one is retained. */
  eventByDedupeKey(dedupeKey: string): StoredEvent | undefined {
    const row = this.byDedupeKey.get(dedupeKey);
    return row === undefined ? undefined : eventFromRow(row);
  }

  /** Moves a session's head to `sequence` (never down). */
  bumpHead(session: SessionId, sequence: number, nowMs: number): void {
    this.upsertHead.run(session.agentId, session.key, sequence, nowMs);
  }

  /** The session's head, if it has one. */
  headOf(session: SessionId): SessionHead | undefined {
    const row = this.head.get(session.agentId, session.key);
    return row === undefined ? undefined : headFromRow(row);
  }

  /** The session's state version: 0 when it has no head. */
  versionOf(session: SessionId): number {
    return this.head.get(session.agentId, session.key)?.state_version ?? 0;
  }

  /** Up to `limit` events of the session with sequence above `afterSequence`, ascending, in wire form. */
  eventsAfter(session: SessionId, afterSequence: number, limit: number): EventWire[] {
    return this.after.all(session.agentId, session.key, afterSequence, limit);
  }

  /** The smallest retained sequence of the session, 0 when none is retained. */
  earliestSequence(session: SessionId): number {
    return this.earliest.get(session.agentId, session.key)?.first ?? 0;
  }

  /** Heads ordered by (agent id, key), strictly after `after`. */
  heads(agentId: string | undefined, after: SessionId | undefined, limit: number): SessionHead[] {
    const rows =
      agentId === undefined
        ? this.headsFrom.all(after?.agentId ?? "", after?.key ?? "", limit)
        : this.headsOfAgentFrom.all(agentId, after !== undefined && after.agentId === agentId ? after.key : "", limit);
    return rows.map(headFromRow);
  }

  /** Deletes the session's events and head; returns how many events went. */
  deleteSession(session: SessionId): number {
    const { changes } = this.deleteOfSession.run(session.agentId, session.key);
    this.deleteHeadRow.run(session.agentId, session.key);
    return changes;
  }

  /**
   * Removes up to `limit` events that occurred before `cutoffMs` and then, within what is left of
   * `limit`, the oldest events beyond `maxEvents`. Each affected session's prune watermark is raised
   * before its rows go. Returns how many rows were removed.
   */
  pruneEvents(cutoffMs: number, maxEvents: number, limit: number): number {
    const old = this.oldEvents.all(cutoffMs, limit);
    this.removeEvents(old);
    let removed = old.length;
    if (removed < limit) {
      const excess = this.countEvents.get()!.n - maxEvents;
      if (excess > 0) {
        const oldest = this.oldestEvents.all(Math.min(excess, limit - removed));
        this.removeEvents(oldest);
        removed += oldest.length;
      }
    }
    return removed;
  }

  /** Raises each affected session's prune watermark to its highest removed sequence, then deletes the rows. */
  private removeEvents(rows: readonly Pick<EventRow, "sequence" | "agent_id" | "session_key">[]): void {
    const watermarks = new Map<string, { agentId: string; key: string; sequence: number }>();
    for (const row of rows) {
      const id = `${row.agent_id}\u0000${row.session_key}`;
      const mark = watermarks.get(id);
      if (mark === undefined) watermarks.set(id, { agentId: row.agent_id, key: row.session_key, sequence: row.sequence });
      else mark.sequence = Math.max(mark.sequence, row.sequence);
    }
    for (const mark of watermarks.values()) this.raiseWatermark.run(mark.sequence, mark.agentId, mark.key);
    for (const row of rows) this.deleteOne.run(row.sequence);
  }
}
