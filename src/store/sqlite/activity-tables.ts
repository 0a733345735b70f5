import type Database from "better-sqlite3";
import type { RunFlag } from "../../domain/run-flags.js";
import type { SessionId } from "../../domain/session-key.js";
import { runFlagFromRow, type RunFlagRow } from "../rows.js";

/** Prepared statements over `run_flags` and `own_texts`. Callers own the transactions. */
export class ActivityTables {
  private readonly flag;
  private readonly putFlag;
  private readonly digests;
  private readonly lastPosition;
  private readonly insertText;
  private readonly trimTexts;
  private readonly deleteFlag;
  private readonly deleteTexts;

  constructor(db: Database.Database) {
    this.flag = db.prepare<[string, string, string], RunFlagRow>(
      "SELECT active, starts, refreshed_at_ms FROM run_flags WHERE namespace = ? AND agent_id = ? AND session_key = ?",
    );
    this.putFlag = db.prepare<[string, string, string, number, number, number]>(
      `INSERT INTO run_flags (namespace, agent_id, session_key, active, starts, refreshed_at_ms) VALUES (?, ?, ?, ?, ?, ?)
       ON CONFLICT (namespace, agent_id, session_key) DO UPDATE
       SET active = excluded.active, starts = excluded.starts, refreshed_at_ms = excluded.refreshed_at_ms`,
    );
    this.digests = db
      .prepare<[string, string, string], string>("SELECT digest FROM own_texts WHERE namespace = ? AND agent_id = ? AND session_key = ? ORDER BY position")
      .pluck();
    this.lastPosition = db
      .prepare<[string, string, string], number>("SELECT coalesce(max(position), 0) FROM own_texts WHERE namespace = ? AND agent_id = ? AND session_key = ?")
      .pluck();
    this.insertText = db.prepare<[string, string, string, number, string]>(
      "INSERT INTO own_texts (namespace, agent_id, session_key, position, digest) VALUES (?, ?, ?, ?, ?)",
    );
    this.trimTexts = db.prepare<[string, string, string, number]>(
      "DELETE FROM own_texts WHERE namespace = ? AND agent_id = ? AND session_key = ? AND position <= ?",
    );
    this.deleteFlag = db.prepare<[string, string, string]>("DELETE FROM run_flags WHERE namespace = ? AND agent_id = ? AND session_key = ?");
    this.deleteTexts = db.prepare<[string, string, string]>("DELETE FROM own_texts WHERE namespace = ? AND agent_id = ? AND session_key = ?");
  }

  runFlag(session: SessionId): RunFlag | undefined {
    const row = this.flag.get(session.namespace, session.agentId, session.key);
    return row === undefined ? undefined : runFlagFromRow(row);
  }

  putRunFlag(session: SessionId, flag: RunFlag): void {
    this.putFlag.run(session.namespace, session.agentId, session.key, flag.active ? 1 : 0, flag.starts, flag.refreshedAtMs);
  }

  ownTextDigests(session: SessionId): string[] {
    return this.digests.all(session.namespace, session.agentId, session.key);
  }

  /** The position of the session's newest own-text digest; 0 when it has none. */
  newestOwnTextPosition(session: SessionId): number {
    return this.lastPosition.get(session.namespace, session.agentId, session.key)!;
  }

  /** Adds a digest at `position` and removes the session's digests at or below `trimThrough`. */
  addOwnText(session: SessionId, position: number, digest: string, trimThrough: number): void {
    this.insertText.run(session.namespace, session.agentId, session.key, position, digest);
    this.trimTexts.run(session.namespace, session.agentId, session.key, trimThrough);
  }

  /** Forgets everything reported about a session. */
  removeSession(session: SessionId): void {
    this.deleteFlag.run(session.namespace, session.agentId, session.key);
    this.deleteTexts.run(session.namespace, session.agentId, session.key);
  }
}
