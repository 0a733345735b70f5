import type Database from "better-sqlite3";
import type { SessionId } from "../../domain/session-key.js";
import type { CursorRecord } from "../../domain/records.js";
import type { WatchFilter } from "../store.js";
import { pageStartIn, type PairPosition, type WatcherRange } from "../../domain/pair-order.js";
import { cursorFromRow, extraKindsToColumn, type CursorRow } from "../rows.js";

/** Prepared statements over the `cursors` table. Callers own the transactions. */
export class CursorTables {
  private readonly one;
  private readonly upsert;
  private readonly touchRow;
  private readonly ofTarget;
  private readonly anyOfTarget;
  private readonly deleteOne;
  private readonly deleteOfWatcher;
  private readonly deleteOfTarget;
  private readonly pendingPageOf;
  private readonly pageAll;
  private readonly pageOfWatcher;
  private readonly pageOfTarget;
  private readonly pageOfPair;
  private readonly deleteUntouched;

  constructor(db: Database.Database) {
    const pair = "namespace = ? AND watcher_key = ? AND target_agent_id = ? AND target_key = ?";
    const target = "namespace = ? AND target_agent_id = ? AND target_key = ?";
    // A target's cursors through its index, always: without statistics SQLite takes the primary key's
    // leading `namespace = ?` as selective and reads every cursor of the namespace instead (a notice's
    // cost then grows with the pairs there). test/sqlite/query-plans.test.ts checks every statement's plan.
    const ofTargetTable = "cursors INDEXED BY cursors_by_target";
    this.one = db.prepare<[string, string, string, string], CursorRow>(`SELECT * FROM cursors WHERE ${pair}`);
    this.upsert = db.prepare<[string, string, string, string, number, number, number, number, string, string]>(
      `INSERT INTO cursors (namespace, watcher_key, target_agent_id, target_key, acked, notified, material, updated_at_ms,
         provenance, extra_kinds)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (namespace, watcher_key, target_agent_id, target_key) DO UPDATE
       SET acked = excluded.acked, notified = excluded.notified, material = excluded.material,
           updated_at_ms = excluded.updated_at_ms, provenance = excluded.provenance, extra_kinds = excluded.extra_kinds`,
    );
    this.touchRow = db.prepare<[number, string, string, string, string]>(`UPDATE cursors SET updated_at_ms = ? WHERE ${pair}`);
    this.ofTarget = db.prepare<[string, string, string], CursorRow>(`SELECT * FROM ${ofTargetTable} WHERE ${target}`);
    this.anyOfTarget = db.prepare<[string, string, string], { one: number }>(`SELECT 1 AS one FROM cursors WHERE ${target} LIMIT 1`);
    // Removals return what they removed, so the store can announce the notices they closed.
    this.deleteOne = db.prepare<[string, string, string, string], CursorRow>(`DELETE FROM cursors WHERE ${pair} RETURNING *`);
    this.deleteOfWatcher = db.prepare<[string, string], CursorRow>(
      "DELETE FROM cursors WHERE namespace = ? AND watcher_key = ? RETURNING *",
    );
    this.deleteOfTarget = db.prepare<[string, string, string], CursorRow>(`DELETE FROM ${ofTargetTable} WHERE ${target} RETURNING *`);
    // A page of pending cursors in pair order: a seek to the page's start into the partial index that holds
    // that order (the start is the row value, so that SQLite seeks by all three columns).
    this.pendingPageOf = db.prepare<[string, string, string, string, string, number], CursorRow>(
      `SELECT * FROM cursors INDEXED BY cursors_pending
       WHERE namespace = ? AND (watcher_key, target_agent_id, target_key) > (?, ?, ?) AND watcher_key <= ? AND notified > acked
       ORDER BY watcher_key, target_agent_id, target_key LIMIT ?`,
    );
    // The provenance filter is a GLOB pattern: "*" for every provenance.
    const after = "provenance GLOB ? AND (watcher_key, target_agent_id, target_key) > (?, ?, ?)";
    const order = "ORDER BY watcher_key, target_agent_id, target_key LIMIT ?";
    this.pageAll = db.prepare<[string, string, string, string, string, number], CursorRow>(
      `SELECT * FROM cursors WHERE namespace = ? AND ${after} ${order}`,
    );
    this.pageOfWatcher = db.prepare<[string, string, string, string, string, string, number], CursorRow>(
      `SELECT * FROM cursors WHERE namespace = ? AND watcher_key = ? AND ${after} ${order}`,
    );
    this.pageOfTarget = db.prepare<[string, string, string, string, string, string, string, number], CursorRow>(
      `SELECT * FROM ${ofTargetTable} WHERE ${target} AND ${after} ${order}`,
    );
    this.pageOfPair = db.prepare<[string, string, string, string, string, string, string, string, number], CursorRow>(
      `SELECT * FROM cursors WHERE ${pair} AND ${after} ${order}`,
    );
    this.deleteUntouched = db.prepare<[number, number], CursorRow>(
      `DELETE FROM cursors WHERE (namespace, watcher_key, target_agent_id, target_key) IN
         (SELECT namespace, watcher_key, target_agent_id, target_key FROM cursors WHERE updated_at_ms < ? LIMIT ?)
       RETURNING *`,
    );
  }

  /** The cursor of a pair, if any. */
  get(watcherKey: string, target: SessionId): CursorRecord | undefined {
    const row = this.one.get(target.namespace, watcherKey, target.agentId, target.key);
    return row === undefined ? undefined : cursorFromRow(row);
  }

  /** Creates or overwrites the cursor of a pair. */
  put(cursor: CursorRecord): void {
    const { target } = cursor;
    this.upsert.run(
      target.namespace,
      cursor.watcherKey,
      target.agentId,
      target.key,
      cursor.acked,
      cursor.notified,
      cursor.material,
      cursor.updatedAtMs,
      cursor.provenance,
      extraKindsToColumn(cursor.extraKinds),
    );
  }

  /** Refreshes a cursor's lifetime without changing its marks. */
  touch(watcherKey: string, target: SessionId, nowMs: number): void {
    this.touchRow.run(nowMs, target.namespace, watcherKey, target.agentId, target.key);
  }

  /** Every cursor on `target`. */
  ofTargetSession(target: SessionId): CursorRecord[] {
    return this.ofTarget.all(target.namespace, target.agentId, target.key).map(cursorFromRow);
  }

  /** True when at least one cursor targets `target`. */
  isWatched(target: SessionId): boolean {
    return this.anyOfTarget.get(target.namespace, target.agentId, target.key) !== undefined;
  }

  /** Removes a pair's cursor; returns it, or `undefined` when there was none. */
  remove(watcherKey: string, target: SessionId): CursorRecord | undefined {
    const row = this.deleteOne.get(target.namespace, watcherKey, target.agentId, target.key);
    return row === undefined ? undefined : cursorFromRow(row);
  }

  /** Removes every cursor a watcher of `namespace` holds; returns them. */
  removeOfWatcher(namespace: string, watcherKey: string): CursorRecord[] {
    return this.deleteOfWatcher.all(namespace, watcherKey).map(cursorFromRow);
  }

  /** Removes every cursor on a target; returns them. */
  removeOfTarget(target: SessionId): CursorRecord[] {
    return this.deleteOfTarget.all(target.namespace, target.agentId, target.key).map(cursorFromRow);
  }

  /**
   * Up to `limit` pending cursors (`N > L`) of `namespace` whose watcher key is in `range`, strictly after
   * `after`, in pair order.
   */
  pendingPage(namespace: string, range: WatcherRange, after: PairPosition | undefined, limit: number): CursorRecord[] {
    const [w, a, k] = pageStartIn(range, after);
    return this.pendingPageOf.all(namespace, w, a, k, range.last, limit).map(cursorFromRow);
  }

  /** A page of a namespace's cursors ordered by (watcher, target agent, target key), strictly after `after`. */
  page(filter: WatchFilter): CursorRecord[] {
    const [w, a, k] = filter.after ?? ["", "", ""];
    const { namespace, watcherKey, target, limit } = filter;
    const p = filter.provenance ?? "*";
    const rows =
      watcherKey !== undefined && target !== undefined
        ? this.pageOfPair.all(namespace, watcherKey, target.agentId, target.key, p, w, a, k, limit)
        : watcherKey !== undefined
          ? this.pageOfWatcher.all(namespace, watcherKey, p, w, a, k, limit)
          : target !== undefined
            ? this.pageOfTarget.all(namespace, target.agentId, target.key, p, w, a, k, limit)
            : this.pageAll.all(namespace, p, w, a, k, limit);
    return rows.map(cursorFromRow);
  }

  /** Removes up to `limit` cursors untouched since `cutoffMs`; returns them. */
  pruneUntouched(cutoffMs: number, limit: number): CursorRecord[] {
    return this.deleteUntouched.all(cutoffMs, limit).map(cursorFromRow);
  }
}
