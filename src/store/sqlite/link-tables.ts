import type Database from "better-sqlite3";
import { sessionPageStart, type SessionId } from "../../domain/session-key.js";
import type { LinkRecord } from "../../domain/records.js";
import { linkFromRow, type LinkRow } from "../rows.js";
import { isLocalTranscript, linkSourceToText } from "../../domain/upstream-link.js";

/** Prepared statements over the `upstream_links` table. Callers own the transactions. */
export class LinkTables {
  private readonly one;
  private readonly upsert;
  private readonly setScan;
  private readonly deleteOne;
  private readonly watched;
  private readonly setUpdated;
  private readonly watchedIn;
  private readonly pageAll;
  private readonly pageOfAgent;
  private readonly bySource;
  private readonly byThread;

  constructor(db: Database.Database) {
    this.one = db.prepare<[string, string, string], LinkRow>(
      "SELECT * FROM upstream_links WHERE namespace = ? AND agent_id = ? AND session_key = ?",
    );
    this.upsert = db.prepare<[string, string, string, string, string, string, string, string, number, number | null, number]>(
      `INSERT INTO upstream_links (namespace, agent_id, session_key, catalog_id, host_id, thread_id, source, marker, missed_checks,
         last_scanned_at_ms, updated_at_ms)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (namespace, agent_id, session_key) DO UPDATE
       SET catalog_id = excluded.catalog_id, host_id = excluded.host_id, thread_id = excluded.thread_id,
           source = excluded.source, marker = excluded.marker, missed_checks = excluded.missed_checks,
           last_scanned_at_ms = excluded.last_scanned_at_ms, updated_at_ms = excluded.updated_at_ms`,
    );
    this.setScan = db.prepare<[string, number, number, string, string, string]>(
      `UPDATE upstream_links SET marker = ?, missed_checks = ?, last_scanned_at_ms = ?
       WHERE namespace = ? AND agent_id = ? AND session_key = ?`,
    );
    this.setUpdated = db.prepare<[number, string, string, string]>(
      "UPDATE upstream_links SET updated_at_ms = ? WHERE namespace = ? AND agent_id = ? AND session_key = ?",
    );
    this.deleteOne = db.prepare<[string, string, string]>("DELETE FROM upstream_links WHERE namespace = ? AND agent_id = ? AND session_key = ?");
    const watchedLink = `EXISTS (SELECT 1 FROM cursors AS c
      WHERE c.namespace = l.namespace AND c.target_agent_id = l.agent_id AND c.target_key = l.session_key)`;
    this.watched = db.prepare<[], LinkRow>(
      `SELECT * FROM upstream_links AS l WHERE ${watchedLink} ORDER BY namespace, agent_id, session_key`,
    );
    this.watchedIn = db.prepare<[string], LinkRow>(
      `SELECT * FROM upstream_links AS l WHERE namespace = ? AND ${watchedLink} ORDER BY agent_id, session_key`,
    );
    this.pageAll = db.prepare<[string, string, string, number], LinkRow>(
      "SELECT * FROM upstream_links WHERE namespace = ? AND (agent_id, session_key) > (?, ?) ORDER BY agent_id, session_key LIMIT ?",
    );
    // Without statistics SQLite would read the namespace's whole primary key range: name the index.
    this.bySource = db.prepare<[string, string, number], LinkRow>(
      "SELECT * FROM upstream_links INDEXED BY upstream_links_by_source WHERE namespace = ? AND source = ? LIMIT ?",
    );
    this.byThread = db.prepare<[string, string, number], LinkRow>(
      "SELECT * FROM upstream_links INDEXED BY upstream_links_by_thread WHERE namespace = ? AND thread_id = ? LIMIT ?",
    );
    this.pageOfAgent = db.prepare<[string, string, string, number], LinkRow>(
      "SELECT * FROM upstream_links WHERE namespace = ? AND agent_id = ? AND session_key > ? ORDER BY session_key LIMIT ?",
    );
  }

  /** A hook's links: local transcript links whose source is `path`, else whose thread id is `threadId` (Store.hookLinks). */
  hookLinks(namespace: string, lookup: { path: string | undefined; threadId: string }, limit: number): LinkRecord[] {
    const bySource = lookup.path === undefined ? [] : this.bySource.all(namespace, linkSourceToText({ kind: "transcript", path: lookup.path }), limit);
    const rows = bySource.length > 0 || lookup.threadId === "" ? bySource : this.byThread.all(namespace, lookup.threadId, limit);
    return rows.map(linkFromRow).filter(isLocalTranscript);
  }

  /** The link of a session, if any. */
  get(session: SessionId): LinkRecord | undefined {
    const row = this.one.get(session.namespace, session.agentId, session.key);
    return row === undefined ? undefined : linkFromRow(row);
  }

  /** Creates or replaces a session's link. */
  put(link: LinkRecord): LinkRecord {
    this.upsert.run(
      link.session.namespace,
      link.session.agentId,
      link.session.key,
      link.catalogId,
      link.hostId,
      link.threadId,
      linkSourceToText(link.source),
      link.marker,
      link.missedChecks,
      link.lastScannedAtMs ?? null,
      link.updatedAtMs,
    );
    return link;
  }

  /** Records a scan: the new marker, the miss streak and the scan time. */
  recordScan(session: SessionId, marker: string, missedChecks: number, scannedAtMs: number): void {
    this.setScan.run(marker, missedChecks, scannedAtMs, session.namespace, session.agentId, session.key);
  }

  /** Sets a link's update time (a reset: scans of it in flight no longer match it). */
  setUpdatedAt(session: SessionId, updatedAtMs: number): void {
    this.setUpdated.run(updatedAtMs, session.namespace, session.agentId, session.key);
  }

  /** Removes a session's link; true when there was one. */
  remove(session: SessionId): boolean {
    return this.deleteOne.run(session.namespace, session.agentId, session.key).changes > 0;
  }

  /** Links whose session is the target of at least one cursor: of `namespace`, or of every namespace. */
  watchedLinks(namespace?: string): LinkRecord[] {
    return (namespace === undefined ? this.watched.all() : this.watchedIn.all(namespace)).map(linkFromRow);
  }

  /** A page of a namespace's links ordered by (agent id, key), strictly after `after`. */
  page(namespace: string, agentId: string | undefined, after: SessionId | undefined, limit: number): LinkRecord[] {
    const start = sessionPageStart(agentId, after);
    const rows =
      agentId === undefined
        ? this.pageAll.all(namespace, start.agentId, start.key, limit)
        : this.pageOfAgent.all(namespace, agentId, start.key, limit);
    return rows.map(linkFromRow);
  }
}
