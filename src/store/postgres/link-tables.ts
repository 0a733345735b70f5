import type { LinkRecord } from "../../domain/records.js";
import { sessionPageStart, type SessionId } from "../../domain/session-key.js";
import { isLocalTranscript, linkSourceToText } from "../../domain/upstream-link.js";
import { linkFromRow, type LinkRow } from "../rows.js";
import type { PostgresDatabase } from "./connection.js";
import { sessionIs, sql, type Queryable, type SqlQuery } from "./pg-sql.js";

/**
 * Statements over the `upstream_links` table. A local transcript's link carries the node id of the replica
 * that adopted it (`node_id`): only that node can read the file (SPEC §11). Reads of their own go to the
 * database; the rest run in the write transaction they are given.
 */
export class LinkTables {
  constructor(
    private readonly db: PostgresDatabase,
    /** This replica's node id. */
    private readonly nodeId: string,
  ) {}

  /** The link of a session, if any: read on `q` (a write transaction) or the database. */
  async get(session: SessionId, q: Queryable = this.db): Promise<LinkRecord | undefined> {
    const [row] = await q.query<LinkRow>(sql`SELECT * FROM upstream_links WHERE ${sessionIs(session)}`);
    return row === undefined ? undefined : linkFromRow(row);
  }

  /** Creates or replaces a link; a local transcript's as this node's. */
  put(link: LinkRecord): SqlQuery {
    const nodeId = isLocalTranscript(link) ? this.nodeId : null;
    return sql`
      INSERT INTO upstream_links (namespace, agent_id, session_key, catalog_id, host_id, thread_id, source, marker, missed_checks,
        last_scanned_at_ms, updated_at_ms, node_id)
      VALUES (${link.session.namespace}, ${link.session.agentId}, ${link.session.key}, ${link.catalogId}, ${link.hostId},
        ${link.threadId}, ${linkSourceToText(link.source)}, ${link.marker}, ${link.missedChecks}, ${link.lastScannedAtMs ?? null},
        ${link.updatedAtMs}, ${nodeId})
      ON CONFLICT (namespace, agent_id, session_key) DO UPDATE
      SET catalog_id = excluded.catalog_id, host_id = excluded.host_id, thread_id = excluded.thread_id,
          source = excluded.source, marker = excluded.marker, missed_checks = excluded.missed_checks,
          last_scanned_at_ms = excluded.last_scanned_at_ms, updated_at_ms = excluded.updated_at_ms, node_id = excluded.node_id`;
  }

  /** Records a committed scan: the marker, the miss streak and when it was scanned. */
  recordScan(session: SessionId, marker: string, missedChecks: number, scannedAtMs: number): SqlQuery {
    return sql`
      UPDATE upstream_links SET marker = ${marker}, missed_checks = ${missedChecks}, last_scanned_at_ms = ${scannedAtMs}
      WHERE ${sessionIs(session)}`;
  }

  /** Sets a link's update time. */
  setUpdatedAt(session: SessionId, updatedAtMs: number): SqlQuery {
    return sql`UPDATE upstream_links SET updated_at_ms = ${updatedAtMs} WHERE ${sessionIs(session)}`;
  }

  /** Removes a session's link; its row count says whether there was one. */
  remove(session: SessionId): SqlQuery {
    return sql`DELETE FROM upstream_links WHERE ${sessionIs(session)}`;
  }

  /** A page of a namespace's links ordered by (agent id, key), strictly after `after`. */
  async page(namespace: string, agentId: string | undefined, after: SessionId | undefined, limit: number): Promise<LinkRecord[]> {
    const start = sessionPageStart(agentId, after);
    const rows =
      agentId === undefined
        ? await this.db.query<LinkRow>(sql`
            SELECT * FROM upstream_links WHERE namespace = ${namespace} AND (agent_id, session_key) > (${start.agentId}, ${start.key})
            ORDER BY agent_id, session_key LIMIT ${limit}`)
        : await this.db.query<LinkRow>(sql`
            SELECT * FROM upstream_links WHERE namespace = ${namespace} AND agent_id = ${agentId} AND session_key > ${start.key}
            ORDER BY session_key LIMIT ${limit}`);
    return rows.map(linkFromRow);
  }

  /** A hook's links: this node's local transcript links whose source is `path`, else whose thread id is `threadId` (Store.hookLinks). */
  async hookLinks(namespace: string, lookup: { path: string | undefined; threadId: string }, limit: number): Promise<LinkRecord[]> {
    if (lookup.path !== undefined) {
      const rows = await this.db.query<LinkRow>(hookLinksBySource(namespace, lookup.path, this.nodeId, limit));
      if (rows.length > 0) return rows.map(linkFromRow);
    }
    if (lookup.threadId === "") return [];
    return (await this.db.query<LinkRow>(hookLinksByThread(namespace, lookup.threadId, this.nodeId, limit))).map(linkFromRow);
  }

  /**
   * Watched links (the target of at least one cursor) that this replica may scan: paired-node links, and
   * local transcripts adopted on this node id; of `namespace`, or of every namespace.
   */
  async watched(namespace?: string): Promise<LinkRecord[]> {
    const rows = await this.db.query<LinkRow>(sql`
      SELECT * FROM upstream_links AS l
      WHERE (l.node_id IS NULL OR l.node_id = ${this.nodeId})
        ${namespace === undefined ? sql`` : sql`AND l.namespace = ${namespace}`}
        AND EXISTS (SELECT 1 FROM cursors AS c
          WHERE c.namespace = l.namespace AND c.target_agent_id = l.agent_id AND c.target_key = l.session_key)
      ORDER BY namespace, agent_id, session_key`);
    return rows.map(linkFromRow);
  }
}

/** A node's links of a namespace whose source is the transcript `path` (index upstream_links_by_source). */
export function hookLinksBySource(namespace: string, path: string, nodeId: string, limit: number): SqlQuery {
  return sql`
    SELECT * FROM upstream_links WHERE namespace = ${namespace} AND source = ${linkSourceToText({ kind: "transcript", path })}
      AND node_id = ${nodeId}
    LIMIT ${limit}`;
}

/** A node's links of a namespace whose thread id is `threadId` (index upstream_links_by_thread). */
export function hookLinksByThread(namespace: string, threadId: string, nodeId: string, limit: number): SqlQuery {
  return sql`SELECT * FROM upstream_links WHERE namespace = ${namespace} AND thread_id = ${threadId} AND node_id = ${nodeId} LIMIT ${limit}`;
}
