import type { CursorRecord, CursorsRead, PairChange } from "../../domain/records.js";
import { pageStartIn, type PairPosition, type WatcherRange } from "../../domain/pair-order.js";
import type { SessionId } from "../../domain/session-key.js";
import type { WatchFilter } from "../store.js";
import { cursorFromRow, extraKindsToColumn, type CursorRow } from "../rows.js";
import type { PostgresDatabase } from "./connection.js";
import { sql, type Queryable, type SqlQuery } from "./pg-sql.js";

/** A target's cursors: `namespace`, `target_agent_id`, `target_key`. */
function targetIs(target: SessionId): SqlQuery {
  return sql`namespace = ${target.namespace} AND target_agent_id = ${target.agentId} AND target_key = ${target.key}`;
}

/** One pair's cursor. */
function pairIs(watcherKey: string, target: SessionId): SqlQuery {
  return sql`${targetIs(target)} AND watcher_key = ${watcherKey}`;
}

/** The cursors of some pairs, in one statement. */
function ofPairs(pairs: readonly PairChange[]): SqlQuery {
  return sql`
    SELECT c.* FROM cursors AS c
    JOIN unnest(${pairs.map((p) => p.target.namespace)}::text[], ${pairs.map((p) => p.watcherKey)}::text[],
                ${pairs.map((p) => p.target.agentId)}::text[], ${pairs.map((p) => p.target.key)}::text[]) AS t (n, w, a, k)
      ON c.namespace = t.n AND c.watcher_key = t.w AND c.target_agent_id = t.a AND c.target_key = t.k`;
}

/**
 * Statements over the `cursors` table. Reads of their own go to the database; reads inside a write
 * transaction run on the transaction they are given; writes are statements the write batch runs (it keeps
 * its cache of cursors in step with them: store/postgres/write-batch).
 */
export class CursorTables {
  constructor(private readonly db: PostgresDatabase) {}

  /** Every cursor on each of `targets`, in one statement. */
  async ofTargets(q: Queryable, targets: readonly SessionId[]): Promise<CursorRecord[]> {
    if (targets.length === 0) return [];
    const rows = await q.query<CursorRow>(sql`
      SELECT c.* FROM cursors AS c
      JOIN unnest(${targets.map((t) => t.namespace)}::text[], ${targets.map((t) => t.agentId)}::text[], ${targets.map((t) => t.key)}::text[]) AS t (n, a, k)
        ON c.namespace = t.n AND c.target_agent_id = t.a AND c.target_key = t.k`);
    return rows.map(cursorFromRow);
  }

  /** The cursors of the pairs that have one. */
  async ofPairs(q: Queryable, pairs: readonly PairChange[]): Promise<CursorRecord[]> {
    if (pairs.length === 0) return [];
    return (await q.query<CursorRow>(ofPairs(pairs))).map(cursorFromRow);
  }

  /** The cursor of a pair, if any. */
  async get(q: Queryable, watcherKey: string, target: SessionId): Promise<CursorRecord | undefined> {
    const [row] = await q.query<CursorRow>(sql`SELECT * FROM cursors WHERE ${pairIs(watcherKey, target)}`);
    return row === undefined ? undefined : cursorFromRow(row);
  }

  /** Creates or overwrites the cursors of some pairs (each pair once), in one statement. */
  put(cursors: readonly CursorRecord[]): SqlQuery {
    const column = <T>(pick: (c: CursorRecord) => T): T[] => cursors.map(pick);
    return sql`
      INSERT INTO cursors (namespace, watcher_key, target_agent_id, target_key, acked, notified, material, updated_at_ms,
        provenance, extra_kinds)
      SELECT * FROM unnest(${column((c) => c.target.namespace)}::text[], ${column((c) => c.watcherKey)}::text[],
        ${column((c) => c.target.agentId)}::text[], ${column((c) => c.target.key)}::text[], ${column((c) => c.acked)}::int8[],
        ${column((c) => c.notified)}::int8[], ${column((c) => c.material)}::int8[], ${column((c) => c.updatedAtMs)}::int8[],
        ${column((c) => c.provenance)}::text[], ${column((c) => extraKindsToColumn(c.extraKinds))}::text[])
      ON CONFLICT (namespace, watcher_key, target_agent_id, target_key) DO UPDATE
      SET acked = excluded.acked, notified = excluded.notified, material = excluded.material, updated_at_ms = excluded.updated_at_ms,
          provenance = excluded.provenance, extra_kinds = excluded.extra_kinds`;
  }

  /** Removes a pair's cursor, answering it. */
  remove(watcherKey: string, target: SessionId): SqlQuery {
    return sql`DELETE FROM cursors WHERE ${pairIs(watcherKey, target)} RETURNING *`;
  }

  /** Removes every cursor a watcher of `namespace` holds, answering them. */
  removeOfWatcher(namespace: string, watcherKey: string): SqlQuery {
    return sql`DELETE FROM cursors WHERE namespace = ${namespace} AND watcher_key = ${watcherKey} RETURNING *`;
  }

  /** Removes every cursor on `session` and, when `asWatcher`, every cursor it holds, answering them. */
  removeOfSession(session: SessionId, asWatcher: boolean): SqlQuery {
    return sql`
      DELETE FROM cursors WHERE namespace = ${session.namespace}
        AND ((target_agent_id = ${session.agentId} AND target_key = ${session.key}) OR (${asWatcher} AND watcher_key = ${session.key}))
      RETURNING *`;
  }

  /**
   * Removes up to `limit` cursors untouched since `cutoffMs`, answering them: by their time's index, oldest
   * first (SPEC §4: a step costs the rows it removes).
   */
  removeUntouched(cutoffMs: number, limit: number): SqlQuery {
    return sql`
      DELETE FROM cursors WHERE (namespace, watcher_key, target_agent_id, target_key) IN (${untouchedCursors(cutoffMs, limit)})
      RETURNING *`;
  }

  /** The cursors of some pairs, read with the change number it reflects (see `readThrough`). */
  getCursors(pairs: readonly PairChange[]): Promise<CursorsRead> {
    return pairs.length === 0 ? this.readThrough(sql`SELECT * FROM cursors WHERE false`) : this.readThrough(ofPairs(pairs));
  }

  /** Up to `limit` pending cursors of `namespace` whose watcher key is in `range`, strictly after `after`, in pair order. */
  pendingPage(namespace: string, range: WatcherRange, after: PairPosition | undefined, limit: number): Promise<CursorsRead> {
    const [w, a, k] = pageStartIn(range, after);
    return this.readThrough(
      sql`
        SELECT * FROM cursors
        WHERE namespace = ${namespace} AND (watcher_key, target_agent_id, target_key) > (${w}, ${a}, ${k})
          AND watcher_key <= ${range.last} AND notified > acked
        ORDER BY watcher_key, target_agent_id, target_key LIMIT ${limit}`,
      true,
    );
  }

  /** A page of a namespace's cursors ordered by (watcher, target agent, target key), strictly after `after`. */
  async page(filter: WatchFilter): Promise<CursorRecord[]> {
    const [w, a, k] = filter.after ?? ["", "", ""];
    const { watcherKey, target } = filter;
    const rows = await this.db.query<CursorRow>(sql`
      SELECT * FROM cursors
      WHERE namespace = ${filter.namespace} AND (watcher_key, target_agent_id, target_key) > (${w}, ${a}, ${k})
        ${filter.provenance === undefined ? sql`` : sql`AND provenance = ${filter.provenance}`}
        ${watcherKey === undefined ? sql`` : sql`AND watcher_key = ${watcherKey}`}
        ${target === undefined ? sql`` : sql`AND target_agent_id = ${target.agentId} AND target_key = ${target.key}`}
      ORDER BY watcher_key, target_agent_id, target_key LIMIT ${filter.limit}`);
    return rows.map(cursorFromRow);
  }

  /**
   * Cursor rows read with the clock's change number in the same statement (one snapshot: since commit order is
   * change order, it holds exactly the changes numbered up to it). A read that finds no cursor still answers
   * one row, with the number and no cursor.
   */
  private async readThrough(cursors: SqlQuery, inPairOrder = false): Promise<CursorsRead> {
    const order = inPairOrder ? sql`ORDER BY c.watcher_key, c.target_agent_id, c.target_key` : sql``;
    const rows = await this.db.query<CursorRow & { through: number }>(sql`
      SELECT k.change_seq AS through, c.* FROM clock AS k LEFT JOIN LATERAL (${cursors}) AS c ON true WHERE k.id = 1 ${order}`);
    return { cursors: rows.filter((row) => row.watcher_key !== null).map(cursorFromRow), through: rows[0]!.through };
  }
}

/** Cursors untouched since the cutoff, by their time's index, oldest first. */
export function untouchedCursors(cutoffMs: number, limit: number): SqlQuery {
  return sql`
    SELECT namespace, watcher_key, target_agent_id, target_key FROM cursors
    WHERE updated_at_ms < ${cutoffMs} ORDER BY updated_at_ms LIMIT ${limit}`;
}
