import type Database from "better-sqlite3";
import type { NamespaceCount } from "../../domain/retention.js";

/**
 * Reads of the `namespaces` table: each namespace's counts, which triggers keep in the transaction that
 * changes them (migration 7), so nothing here counts a table. Callers own the transactions.
 */
export class NamespaceTables {
  private readonly overCap;
  private readonly pendingTotal;

  constructor(db: Database.Database) {
    this.overCap = db.prepare<[number], NamespaceCount>(
      "SELECT namespace, events AS n FROM namespaces WHERE events > ? ORDER BY namespace",
    );
    this.pendingTotal = db.prepare<[], { n: number }>("SELECT coalesce(sum(pending_notices), 0) AS n FROM namespaces");
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
