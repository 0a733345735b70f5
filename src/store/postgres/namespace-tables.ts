import type { NamespaceSummary } from "../../domain/records.js";
import type { NamespaceCount } from "../../domain/retention.js";
import type { PostgresDatabase } from "./connection.js";
import { sql, type Queryable } from "./pg-sql.js";

/**
 * Reads of the `namespaces` table: each namespace's counts, which statement triggers keep in the
 * transaction that changes them (migration 7), so nothing here counts a table.
 */
export class NamespaceTables {
  constructor(private readonly db: PostgresDatabase) {}

  /** The namespaces holding more than `maxEvents` events, with their counts, by name. */
  overEventCap(q: Queryable, maxEvents: number): Promise<NamespaceCount[]> {
    return q.query<NamespaceCount>(sql`SELECT namespace, events AS n FROM namespaces WHERE events > ${maxEvents} ORDER BY namespace`);
  }

  /** The namespaces holding a session or a cursor, by name, strictly after `after`; only those in `only` when given. */
  list(after: string | undefined, only: readonly string[] | undefined, limit: number): Promise<NamespaceSummary[]> {
    return this.db.query<NamespaceSummary>(sql`
      SELECT namespace AS name, sessions, events, watches, pending_notices AS "pendingNotices", updated_at_ms AS "updatedAtMs"
      FROM namespaces
      WHERE namespace > ${after ?? ""} AND (sessions > 0 OR watches > 0)
        ${only === undefined ? sql`` : sql`AND namespace = ANY(${[...only]}::text[])`}
      ORDER BY namespace LIMIT ${limit}`);
  }

  /** How many pairs have a pending notice, in every namespace. */
  async countPending(): Promise<number> {
    const [row] = await this.db.query<{ n: number }>(sql`SELECT coalesce(sum(pending_notices), 0)::int8 AS n FROM namespaces`);
    return row!.n;
  }
}
