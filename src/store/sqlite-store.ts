import type Database from "better-sqlite3";
import type { SessionId } from "../model/session-key.js";
import { EventTables } from "./event-tables.js";
import { openDatabase, type Durability } from "./open-database.js";
import type {
  AppendInput,
  AppendOutcome,
  PruneStep,
  RetentionPolicy,
  SessionHead,
  SessionStatus,
  Store,
} from "./store.js";

/**
 * The SQLite backend. Each method runs one short synchronous transaction (`BEGIN IMMEDIATE` when it
 * writes), so the promise it returns is already settled when the method returns.
 */
export class SqliteStore implements Store {
  private readonly events: EventTables;
  private readonly appendTx;
  private readonly statusTx;
  private readonly deleteTx;
  private readonly pruneTx;

  private constructor(private readonly db: Database.Database) {
    this.events = new EventTables(db);
    this.appendTx = db.transaction((input: AppendInput) => this.appendInTransaction(input));
    this.statusTx = db.transaction((session: SessionId, changesSince: number | undefined, limit: number) =>
      this.statusInTransaction(session, changesSince, limit),
    );
    this.deleteTx = db.transaction((session: SessionId) => {
      const eventsRemoved = this.events.deleteSession(session);
      return { eventsRemoved, cursorsRemoved: 0, linkRemoved: false };
    });
    this.pruneTx = db.transaction((policy: RetentionPolicy): PruneStep => {
      const eventsRemoved = this.events.pruneEvents(policy.cutoffMs, policy.maxEvents, policy.maxRowsPerStep);
      return { eventsRemoved, cursorsRemoved: 0, done: eventsRemoved < policy.maxRowsPerStep };
    });
  }

  /** Opens the database file at `path` (see `openDatabase`); the caller must `close()` the store. */
  static open(path: string, durability: Durability): SqliteStore {
    return new SqliteStore(openDatabase(path, durability));
  }

  async append(input: AppendInput): Promise<AppendOutcome> {
    return this.appendTx.immediate(input);
  }

  private appendInTransaction(input: AppendInput): AppendOutcome {
    if (input.dedupeKey !== undefined) {
      const existing = this.events.eventByDedupeKey(input.dedupeKey);
      if (existing !== undefined) {
        const session = { agentId: existing.agentId, key: existing.sessionKey };
        return { recorded: true, deduplicated: true, event: existing, stateVersion: this.events.versionOf(session) };
      }
    }
    const event = this.events.insertEvent(input);
    this.events.bumpHead(input.session, event.sequence, input.nowMs);
    return { recorded: true, deduplicated: false, event, stateVersion: event.sequence };
  }

  async sessionStatus(session: SessionId, changesSince: number | undefined, limit: number): Promise<SessionStatus> {
    return this.statusTx.deferred(session, changesSince, limit);
  }

  private statusInTransaction(session: SessionId, changesSince: number | undefined, limit: number): SessionStatus {
    const head = this.events.headOf(session);
    const stateVersion = head?.stateVersion ?? 0;
    if (changesSince === undefined || changesSince > stateVersion) return { stateVersion };
    const events = this.events.eventsAfter(session, changesSince, limit + 1);
    const truncated = events.length > limit;
    if (truncated) events.length = limit;
    return {
      stateVersion,
      changes: {
        events,
        truncated,
        historyGap: changesSince < (head?.prunedThrough ?? 0),
        earliestAvailableSequence: this.events.earliestSequence(session),
      },
    };
  }

  async listSessions(filter: { agentId?: string; after?: SessionId; limit: number }): Promise<SessionHead[]> {
    return this.events.heads(filter.agentId, filter.after, filter.limit);
  }

  async getStateVersions(sessions: readonly SessionId[]): Promise<(number | undefined)[]> {
    return sessions.map((session) => this.events.headOf(session)?.stateVersion);
  }

  async deleteSession(session: SessionId) {
    return this.deleteTx.immediate(session);
  }

  async pruneStep(policy: RetentionPolicy): Promise<PruneStep> {
    return this.pruneTx.immediate(policy);
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }
}
