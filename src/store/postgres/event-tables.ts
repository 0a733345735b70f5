import type { StoredEvent } from "../../domain/event.js";
import type { SessionHead, SessionStatus } from "../../domain/records.js";
import { keyPageBounds, recentPageStart, sessionPageStart, type SessionId, type SessionOrder } from "../../domain/session-key.js";
import { eventFromRow, eventsFromConcatenation, headFromRow, type EventRow, type HeadRow } from "../rows.js";
import type { PostgresDatabase } from "./connection.js";
import { rawSql, sessionIs, sql, type Queryable, type SqlQuery } from "./pg-sql.js";

/** An event found by its dedupe key, with its session's state version. */
export interface DedupedEvent {
  event: StoredEvent;
  stateVersion: number;
}

/** An event a write batch inserts, with what its row needs besides the event. */
export interface EventInsert {
  event: StoredEvent;
  dedupeKey: string | undefined;
  nowMs: number;
}

/** A dedupe key within its namespace, for maps: a namespace holds no space, so the first one splits it. */
export function dedupeIdFromKey(namespace: string, dedupeKey: string): string {
  return `${namespace} ${dedupeKey}`;
}

/** The namespace and dedupe key of a `dedupeIdFromKey` id. */
function dedupeKeyFromId(id: string): { namespace: string; dedupeKey: string } {
  const space = id.indexOf(" ");
  return { namespace: id.slice(0, space), dedupeKey: id.slice(space + 1) };
}

const eventColumns = rawSql(`e.sequence, h.namespace, h.agent_id, h.session_key, e.kind, e.actor_type, e.actor_id, e.run_id, e.summary,
  e.occurred_at_ms, e.outcome, e.channel, e.turns, e.catalog_id, e.host_id, e.wire`);

const headColumns = rawSql(`namespace, agent_id, session_key, state_version, pruned_through, updated_at_ms,
  EXISTS (SELECT 1 FROM upstream_links AS l
    WHERE l.namespace = heads.namespace AND l.agent_id = heads.agent_id AND l.session_key = heads.session_key) AS has_upstream`);

/**
 * The statements of a retention step that choose events to remove (SPEC §4: a step costs the rows it
 * removes): each walks an index in its order and stops at its LIMIT, with sequential and bitmap scans off
 * for the step (see PostgresStore.pruneStep).
 */
export const eventPruneChoices = {
  /** Events older than the cutoff, oldest first. */
  olderThan: (cutoffMs: number, limit: number): SqlQuery =>
    sql`SELECT sequence FROM events WHERE occurred_at_ms < ${cutoffMs} ORDER BY occurred_at_ms LIMIT ${limit}`,
  /** A namespace's oldest events. */
  oldestOf: (namespace: string, count: number): SqlQuery => sql`SELECT sequence FROM events WHERE namespace = ${namespace} ORDER BY sequence LIMIT ${count}`,
};

/** The statement of a page of a namespace's heads (of one agent, when given) in `order` (exported for the plan test). */
export function sessionsPageQuery(namespace: string, agentId: string | undefined, order: SessionOrder, limit: number): SqlQuery {
  switch (order.by) {
    case "agent": {
      const start = sessionPageStart(agentId, order.after);
      return agentId === undefined
        ? sql`SELECT ${headColumns} FROM heads WHERE namespace = ${namespace} AND (agent_id, session_key) > (${start.agentId}, ${start.key})
              ORDER BY agent_id, session_key LIMIT ${limit}`
        : sql`SELECT ${headColumns} FROM heads WHERE namespace = ${namespace} AND agent_id = ${agentId} AND session_key > ${start.key}
              ORDER BY session_key LIMIT ${limit}`;
    }
    // By key among a prefix's keys (index heads_by_key; one agent: the unique key), and most recently
    // changed first (heads_by_time, heads_of_agent_by_time): each page is a seek and a read of its rows.
    case "key": {
      const page = keyPageBounds(order);
      return agentId === undefined
        ? sql`SELECT ${headColumns} FROM heads WHERE namespace = ${namespace} AND session_key >= ${page.from} AND session_key <= ${page.last}
              AND (session_key, agent_id) > (${page.afterKey}, ${page.afterAgentId}) ORDER BY session_key, agent_id LIMIT ${limit}`
        : sql`SELECT ${headColumns} FROM heads WHERE namespace = ${namespace} AND agent_id = ${agentId} AND session_key >= ${page.from}
              AND session_key <= ${page.last} AND session_key > ${page.afterAgentId === agentId ? page.afterKey : ""}
              ORDER BY session_key LIMIT ${limit}`;
    }
    case "recent": {
      const start = recentPageStart(agentId, order.after);
      return agentId === undefined
        ? sql`SELECT ${headColumns} FROM heads WHERE namespace = ${namespace}
              AND (updated_at_ms, agent_id, session_key) < (${start.updatedAtMs}, ${start.agentId}, ${start.key})
              ORDER BY updated_at_ms DESC, agent_id DESC, session_key DESC LIMIT ${limit}`
        : sql`SELECT ${headColumns} FROM heads WHERE namespace = ${namespace} AND agent_id = ${agentId}
              AND (updated_at_ms, session_key) < (${start.updatedAtMs}, ${start.key})
              ORDER BY updated_at_ms DESC, session_key DESC LIMIT ${limit}`;
    }
  }
}

/**
 * Statements over the `events` and `heads` tables. Events refer to their session by the head's
 * `session_id`. Reads of their own go to the database (one statement, one snapshot); the rest run on the
 * transaction they are given.
 */
export class EventTables {
  constructor(private readonly db: PostgresDatabase) {}

  /** The events holding any of these dedupe ids (`dedupeIdFromKey`), with their sessions' versions, by id. */
  async byDedupeIds(q: Queryable, ids: readonly string[]): Promise<Map<string, DedupedEvent>> {
    const found = new Map<string, DedupedEvent>();
    if (ids.length === 0) return found;
    const keys = ids.map(dedupeKeyFromId);
    const rows = await q.query<EventRow & { state_version: number; dedupe_key: string }>(sql`
      SELECT ${eventColumns}, h.state_version, e.dedupe_key
      FROM unnest(${keys.map((k) => k.namespace)}::text[], ${keys.map((k) => k.dedupeKey)}::text[]) AS d (n, k)
      JOIN events AS e ON e.namespace = d.n AND e.dedupe_key = d.k
      JOIN heads AS h USING (session_id)`);
    for (const row of rows) found.set(dedupeIdFromKey(row.namespace, row.dedupe_key), { event: eventFromRow(row), stateVersion: row.state_version });
    return found;
  }

  /** The event of `namespace` holding `dedupeKey`, with its session's version, if one is retained. */
  async byDedupeKey(q: Queryable, namespace: string, dedupeKey: string): Promise<DedupedEvent | undefined> {
    return (await this.byDedupeIds(q, [dedupeIdFromKey(namespace, dedupeKey)])).get(dedupeIdFromKey(namespace, dedupeKey));
  }

  /** The session's state version: 0 when it has no head. */
  async versionOf(q: Queryable, session: SessionId): Promise<number> {
    const [row] = await q.query<{ state_version: number }>(sql`SELECT state_version FROM heads WHERE ${sessionIs(session)}`);
    return row?.state_version ?? 0;
  }

  /**
   * Inserts events (with the sequences already taken) in one statement, moving each session's head to its
   * highest (creating it with its first event).
   */
  insert(rows: readonly EventInsert[]): SqlQuery {
    const column = <T>(pick: (row: EventInsert) => T): T[] => rows.map(pick);
    return sql`
      WITH r AS (
        SELECT * FROM unnest(
          ${column((r) => r.event.sequence)}::int8[], ${column((r) => r.event.namespace)}::text[], ${column((r) => r.event.agentId)}::text[],
          ${column((r) => r.event.sessionKey)}::text[], ${column((r) => r.event.kind)}::text[],
          ${column((r) => r.event.actorType)}::text[], ${column((r) => r.event.actorId ?? null)}::text[],
          ${column((r) => r.event.runId ?? null)}::text[], ${column((r) => r.event.summary)}::text[],
          ${column((r) => r.event.occurredAtMs)}::int8[], ${column((r) => r.event.payload.outcome ?? null)}::text[],
          ${column((r) => r.event.payload.channel ?? null)}::text[], ${column((r) => r.event.payload.turns ?? null)}::int8[],
          ${column((r) => r.event.payload.catalogId ?? null)}::text[], ${column((r) => r.event.payload.hostId ?? null)}::text[],
          ${column((r) => r.dedupeKey ?? null)}::text[], ${column((r) => Buffer.from(r.event.wire).toString("hex"))}::text[],
          ${column((r) => r.nowMs)}::int8[]
        ) AS r (sequence, namespace, agent_id, session_key, kind, actor_type, actor_id, run_id, summary, occurred_at_ms, outcome,
                channel, turns, catalog_id, host_id, dedupe_key, wire_hex, now_ms)
      ),
      head AS (
        INSERT INTO heads (namespace, agent_id, session_key, state_version, updated_at_ms)
        SELECT namespace, agent_id, session_key, max(sequence), max(now_ms) FROM r GROUP BY namespace, agent_id, session_key
        ON CONFLICT (namespace, agent_id, session_key) DO UPDATE
        SET state_version = greatest(heads.state_version, excluded.state_version), updated_at_ms = excluded.updated_at_ms
        RETURNING session_id, namespace, agent_id, session_key
      )
      INSERT INTO events (sequence, session_id, namespace, kind, actor_type, actor_id, run_id, summary, occurred_at_ms, outcome,
        channel, turns, catalog_id, host_id, dedupe_key, wire)
      SELECT r.sequence, head.session_id, r.namespace, r.kind, r.actor_type, r.actor_id, r.run_id, r.summary, r.occurred_at_ms,
        r.outcome, r.channel, r.turns, r.catalog_id, r.host_id, r.dedupe_key, decode(r.wire_hex, 'hex')
      FROM r JOIN head ON head.namespace = r.namespace AND head.agent_id = r.agent_id AND head.session_key = r.session_key`;
  }

  /**
   * A session's version and, when `changesSince` is given and not above it, up to `limit` events after it,
   * in one statement (so one snapshot: the head and the events agree), the events as one row as SQLite
   * reads them (store/rows: eventsFromConcatenation).
   */
  async status(session: SessionId, changesSince: number | undefined, limit: number): Promise<SessionStatus> {
    // Past 2^53 (Infinity from the service) is past every head: ask for no events.
    const after = changesSince === undefined || !Number.isSafeInteger(changesSince) ? Number.MAX_SAFE_INTEGER : changesSince;
    const [head] = await this.db.query<{ state_version: number; pruned_through: number; earliest: number; lengths: string | null; bytes: Uint8Array | null }>(sql`
      SELECT h.state_version, h.pruned_through,
        coalesce((SELECT min(sequence) FROM events AS m WHERE m.session_id = h.session_id), 0) AS earliest,
        e.lengths, e.bytes
      FROM heads AS h
      CROSS JOIN LATERAL (
        SELECT string_agg(sequence || ':' || octet_length(wire), ',' ORDER BY sequence) AS lengths,
          string_agg(wire, ''::bytea ORDER BY sequence) AS bytes
        FROM (
          SELECT sequence, wire FROM events AS x
          WHERE x.session_id = h.session_id AND x.sequence > ${after} ORDER BY x.sequence LIMIT ${limit + 1}
        ) AS page
      ) AS e
      WHERE ${sessionIs(session, "h")}`);
    const stateVersion = head?.state_version ?? 0;
    if (changesSince === undefined || changesSince > stateVersion) return { stateVersion };
    if (head === undefined) return { stateVersion, changes: { events: [], truncated: false, historyGap: false, earliestAvailableSequence: 0 } };
    const events = eventsFromConcatenation(head.lengths, head.bytes);
    const truncated = events.length > limit;
    if (truncated) events.length = limit;
    return {
      stateVersion,
      changes: { events, truncated, historyGap: changesSince < head.pruned_through, earliestAvailableSequence: head.earliest },
    };
  }

  /** A namespace's heads (of one agent, when given) in `order`, after its `after`. */
  async heads(namespace: string, agentId: string | undefined, order: SessionOrder, limit: number): Promise<SessionHead[]> {
    const rows = await this.db.query<HeadRow>(sessionsPageQuery(namespace, agentId, order, limit));
    return rows.map(headFromRow);
  }

  /** The state version of each session, `undefined` where it has no head; same order as asked. */
  async versions(sessions: readonly SessionId[]): Promise<(number | undefined)[]> {
    if (sessions.length === 0) return [];
    const rows = await this.db.query<{ i: number; state_version: number }>(sql`
      SELECT t.i, h.state_version
      FROM unnest(${sessions.map((s) => s.namespace)}::text[], ${sessions.map((s) => s.agentId)}::text[], ${sessions.map((s) => s.key)}::text[])
        WITH ORDINALITY AS t (n, a, k, i)
      JOIN heads AS h ON h.namespace = t.n AND h.agent_id = t.a AND h.session_key = t.k`);
    const versions: (number | undefined)[] = sessions.map(() => undefined);
    for (const row of rows) versions[row.i - 1] = row.state_version;
    return versions;
  }

  /** Deletes a session's events (answering how many) and then its head. */
  deleteSession(session: SessionId): { events: SqlQuery; head: SqlQuery } {
    return {
      events: sql`
        WITH gone AS (DELETE FROM events WHERE session_id = (SELECT session_id FROM heads WHERE ${sessionIs(session)}) RETURNING 1)
        SELECT count(*)::int8 AS n FROM gone`,
      head: sql`DELETE FROM heads WHERE ${sessionIs(session)}`,
    };
  }

  /**
   * Removes the events `chosen` (a statement answering their sequences), raising each affected session's
   * prune watermark to the highest sequence it loses, in the same statement; answers how many went.
   */
  removeChosen(chosen: SqlQuery): SqlQuery {
    return sql`
      WITH gone AS (DELETE FROM events WHERE sequence IN (${chosen}) RETURNING sequence, session_id),
      marks AS (SELECT session_id, max(sequence) AS through FROM gone GROUP BY session_id),
      raised AS (
        UPDATE heads SET pruned_through = greatest(heads.pruned_through, marks.through)
        FROM marks WHERE heads.session_id = marks.session_id RETURNING 1
      )
      SELECT count(*)::int8 AS n FROM gone`;
  }
}
