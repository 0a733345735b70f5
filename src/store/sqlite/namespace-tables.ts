import type Database from "better-sqlite3";
import type { NamespaceSummary } from "../../domain/records.js";
import type { NamespaceCount } from "../../domain/retention.js";

interface NamespaceRow {
  namespace: string;
  sessions: number;
  events: number;
  watches: number;
  pending_notices: number;
  updated_at_ms: number;
}

function summaryFromRow(row: NamespaceRow): NamespaceSummary {
  return {
    name: row.namespace,
    sessions: row.sessions,
    events: row.events,
    watches: row.watches,
    pendingNotices: row.pending_notices,
    updatedAtMs: row.updated_at_ms,
  };
}

/**
 * Reads of the `namespaces` table: each namespace's counts, which triggers keep in the transaction that
 * changes them (migration 7), so nothing here counts a table. Callers own the transactions.
 */
export class NamespaceTables {
  private readonly overCap;
  private readonly pendingTotal;
  private readonly page;

  constructor(db: Database.Database) {
    this.overCap = db.prepare<[number], NamespaceCount>(
      "SELECT namespace, events AS n FROM namespaces WHERE events > ? ORDER BY namespace",
    );
    this.pendingTotal = db.prepare<[], { n: number }>("SELECT coalesce(sum(pending_notices), 0) AS n FROM namespaces");
    // `only` is a JSON array of names, or null for every namespace.
    this.page = db.prepare<[string, string | null, string | null, number], NamespaceRow>(
      `SELECT * FROM namespaces
       WHERE namespace > ? AND (sessions > 0 OR watches > 0) AND (? IS NULL OR namespace IN (SELECT value FROM json_each(?)))
       ORDER BY namespace LIMIT ?`,
    );
  }

  /** The namespaces holding a session or a cursor, by name, strictly after `after`; only those in `only` when given. */
  list(after: string | undefined, only: readonly string[] | undefined, limit: number): NamespaceSummary[] {
    const names = only === undefined ? null : JSON.stringify(only);
    return this.page.all(after ?? "", names, names, limit).map(summaryFromRow);
  }

  /** The namespaces holding more than `maxEvents` events, with their counts, by name. */
  overEventCap(maxEvents: number): NamespaceCount[] {
    return this.overCap.all(maxEvents);
  }

  /** How many pairs have a pending notice, in every namespace. */
  countPending(): number {
    return this.pendingTotal.get()!.n;
  }
}
