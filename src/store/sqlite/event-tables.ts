import type Database from "better-sqlite3";
import type { StoredEvent } from "../../domain/event.js";
import { keyPageBounds, recentPageStart, sessionPageStart, type SessionId, type SessionOrder } from "../../domain/session-key.js";
import type { EventWire, SessionHead } from "../../domain/records.js";
import { pruneWatermarks } from "../../domain/retention.js";
import { ChangeStamps } from "../change-stamps.js";
import { eventFromRow, eventsFromConcatenation, headFromRow, type EventRow, type HeadRow } from "../rows.js";

/** An event about to be pruned: its sequence and its session. */
interface RemovedRow {
  sequence: number;
  session_id: number;
}

/** A session's head as SessionStatus reads it, with its smallest retained sequence (0: none retained). */
export interface StatusHead {
  sessionId: number;
  stateVersion: number;
  prunedThrough: number;
  earliestSequence: number;
}

const headColumns = `namespace, agent_id, session_key, state_version, pruned_through, updated_at_ms,
  EXISTS (SELECT 1 FROM upstream_links AS l
    WHERE l.namespace = heads.namespace AND l.agent_id = heads.agent_id AND l.session_key = heads.session_key) AS has_upstream`;

/** A session by namespace, agent id and key: three parameters. */
const sessionIs = "namespace = ? AND agent_id = ? AND session_key = ?";

/**
 * Prepared statements over the `events` and `heads` tables. Events refer to their session by the head's
 * integer `session_id`. Callers own the transactions; nothing here opens one. Every write here bumps the
 * change stamps of the sessions it touches.
 */
export class EventTables {
  /** Change stamps of the sessions' SessionStatus answers: every method here that writes bumps them. */
  readonly stamps = new ChangeStamps();
  private readonly insert;
  private readonly nextSequenceOf;
  private readonly byDedupeKey;
  private readonly upsertHead;
  private readonly head;
  private readonly statusHeadOf;
  private readonly after;
  private readonly headsFrom;
  private readonly headsOfAgentFrom;
  private readonly headsByKeyFrom;
  private readonly headsOfAgentByKeyFrom;
  private readonly headsRecentFrom;
  private readonly headsOfAgentRecentFrom;
  private readonly deleteOfSession;
  private readonly deleteHeadRow;
  private readonly oldEvents;
  private readonly oldestEventsIn;
  private readonly raiseWatermark;
  private readonly deleteOne;

  constructor(db: Database.Database) {
    this.insert = db.prepare<unknown[]>(
      `INSERT INTO events (sequence, session_id, namespace, kind, actor_type, actor_id, run_id, summary, occurred_at_ms, outcome,
         channel, turns, catalog_id, host_id, dedupe_key, wire)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    this.nextSequenceOf = db
      .prepare<[], number>("SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0) + 1")
      .pluck();
    this.byDedupeKey = db.prepare<[string, string], EventRow>(
      `SELECT e.sequence, h.namespace, h.agent_id, h.session_key, e.kind, e.actor_type, e.actor_id, e.run_id, e.summary,
         e.occurred_at_ms, e.outcome, e.channel, e.turns, e.catalog_id, e.host_id, e.wire
       FROM events AS e JOIN heads AS h USING (session_id) WHERE e.namespace = ? AND e.dedupe_key = ?`,
    );
    this.upsertHead = db
      .prepare<[string, string, string, number, number], number>(
        `INSERT INTO heads (namespace, agent_id, session_key, state_version, updated_at_ms) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (namespace, agent_id, session_key) DO UPDATE
         SET state_version = max(state_version, excluded.state_version), updated_at_ms = excluded.updated_at_ms
         RETURNING session_id`,
      )
      .pluck();
    this.head = db.prepare<[string, string, string], HeadRow>(`SELECT ${headColumns} FROM heads WHERE ${sessionIs}`);
    this.statusHeadOf = db.prepare<[string, string, string], StatusHead>(
      `SELECT session_id AS sessionId, state_version AS stateVersion, pruned_through AS prunedThrough,
         coalesce((SELECT min(sequence) FROM events AS e WHERE e.session_id = heads.session_id), 0) AS earliestSequence
       FROM heads WHERE ${sessionIs}`,
    );
    this.after = db
      .prepare<[number, number, number], [string | null, Buffer | null]>(
        `SELECT group_concat(sequence || ':' || length(wire)), CAST(group_concat(wire, x'') AS BLOB)
         FROM (SELECT sequence, wire FROM events WHERE session_id = ? AND sequence > ? ORDER BY sequence LIMIT ?)`,
      )
      .raw(true);
    this.headsFrom = db.prepare<[string, string, string, number], HeadRow>(
      `SELECT ${headColumns} FROM heads WHERE namespace = ? AND (agent_id, session_key) > (?, ?) ORDER BY agent_id, session_key LIMIT ?`,
    );
    this.headsOfAgentFrom = db.prepare<[string, string, string, number], HeadRow>(
      `SELECT ${headColumns} FROM heads WHERE namespace = ? AND agent_id = ? AND session_key > ? ORDER BY session_key LIMIT ?`,
    );
    // By key among a prefix's keys (index heads_by_key; one agent: the primary key), and most recently
    // changed first (heads_by_time, heads_of_agent_by_time): each page is a seek and a read of its rows.
    this.headsByKeyFrom = db.prepare<[string, string, string, string, string, number], HeadRow>(
      `SELECT ${headColumns} FROM heads WHERE namespace = ? AND session_key >= ? AND session_key <= ? AND (session_key, agent_id) > (?, ?)
       ORDER BY session_key, agent_id LIMIT ?`,
    );
    this.headsOfAgentByKeyFrom = db.prepare<[string, string, string, string, string, number], HeadRow>(
      `SELECT ${headColumns} FROM heads WHERE namespace = ? AND agent_id = ? AND session_key >= ? AND session_key <= ? AND session_key > ?
       ORDER BY session_key LIMIT ?`,
    );
    this.headsRecentFrom = db.prepare<[string, number, string, string, number], HeadRow>(
      `SELECT ${headColumns} FROM heads WHERE namespace = ? AND (updated_at_ms, agent_id, session_key) < (?, ?, ?)
       ORDER BY updated_at_ms DESC, agent_id DESC, session_key DESC LIMIT ?`,
    );
    this.headsOfAgentRecentFrom = db.prepare<[string, string, number, string, number], HeadRow>(
      `SELECT ${headColumns} FROM heads WHERE namespace = ? AND agent_id = ? AND (updated_at_ms, session_key) < (?, ?)
       ORDER BY updated_at_ms DESC, session_key DESC LIMIT ?`,
    );
    this.deleteOfSession = db.prepare<[string, string, string]>(
      `DELETE FROM events WHERE session_id = (SELECT session_id FROM heads WHERE ${sessionIs})`,
    );
    this.deleteHeadRow = db.prepare<[string, string, string]>(`DELETE FROM heads WHERE ${sessionIs}`);
    this.oldEvents = db.prepare<[number, number], RemovedRow>(
      "SELECT sequence, session_id FROM events WHERE occurred_at_ms < ? LIMIT ?",
    );
    this.oldestEventsIn = db.prepare<[string, number], RemovedRow>(
      "SELECT sequence, session_id FROM events WHERE namespace = ? ORDER BY sequence LIMIT ?",
    );
    this.raiseWatermark = db.prepare<[number, number]>(
      "UPDATE heads SET pruned_through = max(pruned_through, ?) WHERE session_id = ?",
    );
    this.deleteOne = db.prepare<[number]>("DELETE FROM events WHERE sequence = ?");
  }

  /**
   * The sequence the next inserted event gets. AUTOINCREMENT's counter is never below any sequence issued,
   * so it is taken before the insert (the sequence is part of the event's wire bytes).
   */
  nextSequence(): number {
    return this.nextSequenceOf.get()!;
  }

  /**
   * Inserts an event (with the sequence from `nextSequence`) and moves its session's head to it (never
   * down; the head is created with the session's first event).
   */
  insertEvent(event: StoredEvent, dedupeKey: string | undefined, nowMs: number): void {
    const { payload } = event;
    const session = { namespace: event.namespace, agentId: event.agentId, key: event.sessionKey };
    this.stamps.bump(session);
    const sessionId = this.upsertHead.get(event.namespace, event.agentId, event.sessionKey, event.sequence, nowMs)!;
    this.insert.run(
      event.sequence,
      sessionId,
      event.namespace,
      event.kind,
      event.actorType,
      event.actorId ?? null,
      event.runId ?? null,
      event.summary,
      event.occurredAtMs,
      payload.outcome ?? null,
      payload.channel ?? null,
      payload.turns ?? null,
      payload.catalogId ?? null,
      payload.hostId ?? null,
      dedupeKey ?? null,
      event.wire,
    );
  }

  /** The event of `namespace` holding `dedupeKey`, if one is retained (each namespace has its own keys). */
  eventByDedupeKey(namespace: string, dedupeKey: string): StoredEvent | undefined {
    const row = this.byDedupeKey.get(namespace, dedupeKey);
    return row === undefined ? undefined : eventFromRow(row);
  }

  /** The session's head, if it has one. */
  headOf(session: SessionId): SessionHead | undefined {
    const row = this.head.get(session.namespace, session.agentId, session.key);
    return row === undefined ? undefined : headFromRow(row);
  }

  /** The session's state version: 0 when it has no head. */
  versionOf(session: SessionId): number {
    return this.head.get(session.namespace, session.agentId, session.key)?.state_version ?? 0;
  }

  /** What SessionStatus needs of a session's head, in one statement; `undefined` when it has no head. */
  statusHead(session: SessionId): StatusHead | undefined {
    return this.statusHeadOf.get(session.namespace, session.agentId, session.key);
  }

  /**
   * Up to `limit` events of session `sessionId` with sequence above `afterSequence`, ascending, in wire form,
   * read as one row (see eventsFromConcatenation): 20 blobs as 20 Buffers made a SessionStatus call cost
   * 215 instead of 128 ms of CPU per 1,000 under load (h2load, no answer cache). SQLite fixes no order for
   * an aggregate's rows (in practice it is the subquery's); the order is checked there.
   */
  eventsAfter(sessionId: number, afterSequence: number, limit: number): EventWire[] {
    const [lengths, bytes] = this.after.get(sessionId, afterSequence, limit)!;
    return eventsFromConcatenation(lengths, bytes);
  }

  /** A namespace's heads ordered by (agent id, key), strictly after `after`. */
  heads(namespace: string, agentId: string | undefined, order: SessionOrder, limit: number): SessionHead[] {
    return this.headRows(namespace, agentId, order, limit).map(headFromRow);
  }

  private headRows(namespace: string, agentId: string | undefined, order: SessionOrder, limit: number): HeadRow[] {
    switch (order.by) {
      case "agent": {
        const start = sessionPageStart(agentId, order.after);
        return agentId === undefined
          ? this.headsFrom.all(namespace, start.agentId, start.key, limit)
          : this.headsOfAgentFrom.all(namespace, agentId, start.key, limit);
      }
      case "key": {
        const page = keyPageBounds(order);
        return agentId === undefined
          ? this.headsByKeyFrom.all(namespace, page.from, page.last, page.afterKey, page.afterAgentId, limit)
          : this.headsOfAgentByKeyFrom.all(namespace, agentId, page.from, page.last, page.afterAgentId === agentId ? page.afterKey : "", limit);
      }
      case "recent": {
        const start = recentPageStart(agentId, order.after);
        return agentId === undefined
          ? this.headsRecentFrom.all(namespace, start.updatedAtMs, start.agentId, start.key, limit)
          : this.headsOfAgentRecentFrom.all(namespace, agentId, start.updatedAtMs, start.key, limit);
      }
    }
  }

  /** Deletes the session's events and head; returns how many events went. */
  deleteSession(session: SessionId): number {
    this.stamps.bump(session);
    const { changes } = this.deleteOfSession.run(session.namespace, session.agentId, session.key);
    this.deleteHeadRow.run(session.namespace, session.agentId, session.key);
    return changes;
  }

  /** Removes up to `limit` events that occurred before `cutoffMs` (watermarks first); returns how many went. */
  pruneOlderThan(cutoffMs: number, limit: number): number {
    return this.removeEvents(this.oldEvents.all(cutoffMs, limit));
  }

  /** Removes a namespace's `count` oldest events (watermarks first); returns how many went. */
  pruneOldestOf(namespace: string, count: number): number {
    return this.removeEvents(this.oldestEventsIn.all(namespace, count));
  }

  /** Raises each affected session's prune watermark to its highest removed sequence, then deletes the rows. */
  private removeEvents(rows: readonly RemovedRow[]): number {
    if (rows.length > 0) this.stamps.bumpAll();
    const marks = pruneWatermarks(rows.map((row) => ({ sessionId: row.session_id, sequence: row.sequence })));
    for (const [sessionId, sequence] of marks) this.raiseWatermark.run(sequence, sessionId);
    for (const row of rows) this.deleteOne.run(row.sequence);
    return rows.length;
  }
}
