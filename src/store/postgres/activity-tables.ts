import type { RunFlag } from "../../domain/run-flags.js";
import type { SessionId } from "../../domain/session-key.js";
import { runFlagFromRow, type RunFlagRow } from "../rows.js";
import type { PostgresDatabase } from "./connection.js";
import { sessionIs, sql, type Queryable, type SqlQuery } from "./pg-sql.js";

/**
 * Statements over `run_flags` and `own_texts`: what gateways report for the monitor, shared by every
 * replica. Reads of their own go to the database; the rest run in the write transaction they are given.
 */
export class ActivityTables {
  constructor(private readonly db: PostgresDatabase) {}

  /** A session's run flag, if a gateway ever reported one: read on `q` (a write transaction) or the database. */
  async runFlag(session: SessionId, q: Queryable = this.db): Promise<RunFlag | undefined> {
    const [row] = await q.query<RunFlagRow>(sql`SELECT active, starts, refreshed_at_ms FROM run_flags WHERE ${sessionIs(session)}`);
    return row === undefined ? undefined : runFlagFromRow(row);
  }

  putRunFlag(session: SessionId, flag: RunFlag): SqlQuery {
    return sql`
      INSERT INTO run_flags (namespace, agent_id, session_key, active, starts, refreshed_at_ms)
      VALUES (${session.namespace}, ${session.agentId}, ${session.key}, ${flag.active}, ${flag.starts}, ${flag.refreshedAtMs})
      ON CONFLICT (namespace, agent_id, session_key) DO UPDATE
      SET active = excluded.active, starts = excluded.starts, refreshed_at_ms = excluded.refreshed_at_ms`;
  }

  /** The session's remembered own-text digests, oldest first. */
  async ownTextDigests(session: SessionId): Promise<string[]> {
    const rows = await this.db.query<{ digest: string }>(sql`SELECT digest FROM own_texts WHERE ${sessionIs(session)} ORDER BY position`);
    return rows.map((row) => row.digest);
  }

  /** The position of the session's newest own-text digest; 0 when it has none. */
  async newestOwnTextPosition(q: Queryable, session: SessionId): Promise<number> {
    const [row] = await q.query<{ newest: number }>(sql`SELECT coalesce(max(position), 0) AS newest FROM own_texts WHERE ${sessionIs(session)}`);
    return row!.newest;
  }

  /** Adds a digest at `position`, and removes the session's digests at or below `trimThrough`. */
  addOwnText(session: SessionId, position: number, digest: string, trimThrough: number): SqlQuery[] {
    return [
      sql`INSERT INTO own_texts (namespace, agent_id, session_key, position, digest)
          VALUES (${session.namespace}, ${session.agentId}, ${session.key}, ${position}, ${digest})`,
      sql`DELETE FROM own_texts WHERE ${sessionIs(session)} AND position <= ${trimThrough}`,
    ];
  }

  /** Forgets everything reported about a session. */
  removeSession(session: SessionId): SqlQuery[] {
    return [sql`DELETE FROM run_flags WHERE ${sessionIs(session)}`, sql`DELETE FROM own_texts WHERE ${sessionIs(session)}`];
  }
}
