import type Database from "better-sqlite3";
import { effectOfKind, type StoredEvent } from "../model/event.js";
import type { SessionId } from "../model/session-key.js";
import { applyAck, applyMaterialEvent, isPending, seedCursor } from "../notices/cursor-machine.js";
import { CursorTables } from "./cursor-tables.js";
import { EventTables } from "./event-tables.js";
import { LinkTables } from "./link-tables.js";
import { openDatabase, type Durability } from "./open-database.js";
import type {
  AckInput,
  AckOutcome,
  AdoptInput,
  LinkRecord,
  ScanCommit,
  AppendInput,
  AppendOutcome,
  CursorRecord,
  PairChange,
  PruneStep,
  RetentionPolicy,
  SessionHead,
  SessionStatus,
  Store,
} from "./store.js";

/** The session a watcher key stands for: agent-qualified keys carry their agent id. */
function isWatcherOf(watcherKey: string, session: SessionId): boolean {
  return watcherKey === session.key && watcherKey.startsWith(`agent:${session.agentId}:`);
}

/** A write's result: its own value, and the pairs whose pending notice it changed. */
type WriteResult<T> = { value: T; changes: PairChange[] };

/** A write waiting for the next group commit. */
interface QueuedWrite {
  write: () => WriteResult<unknown>;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * The SQLite backend. Each method runs one short synchronous transaction (`BEGIN IMMEDIATE` when it
 * writes). Appends and acks, the frequent writes, are group-committed: those that arrive in the same
 * turn of the event loop share one transaction, each inside its own savepoint, so one refused write
 * never affects another and a commit is paid once per batch. Pair changes are announced to feed
 * listeners after the commit.
 */
export class SqliteStore implements Store {
  private readonly events: EventTables;
  private readonly cursors: CursorTables;
  private readonly links: LinkTables;
  private readonly listeners = new Set<(changes: readonly PairChange[]) => void>();
  private readonly savepoint;
  private readonly writeBatchTx;
  private queuedWrites: QueuedWrite[] = [];
  private readonly statusTx;
  private readonly deleteTx;
  private readonly pruneTx;
  private readonly watchTx;
  private readonly adoptTx;
  private readonly scanTx;

  private constructor(private readonly db: Database.Database) {
    this.events = new EventTables(db);
    this.cursors = new CursorTables(db);
    this.links = new LinkTables(db);
    // Called inside writeBatchTx, a transaction function runs as a savepoint: a failing write rolls back alone.
    this.savepoint = db.transaction((write: () => WriteResult<unknown>) => write());
    this.writeBatchTx = db.transaction((writes: readonly QueuedWrite[]) =>
      writes.map((queued): WriteResult<unknown> | { error: unknown } => {
        try {
          return this.savepoint(queued.write);
        } catch (error) {
          // Some failures (SQLITE_FULL, I/O errors) make SQLite roll back the whole transaction: then no
          // write of this batch is stored, and all of them must fail.
          if (!this.db.inTransaction) throw error;
          return { error };
        }
      }),
    );
    this.statusTx = db.transaction((session: SessionId, changesSince: number | undefined, limit: number) =>
      this.statusInTransaction(session, changesSince, limit),
    );
    this.deleteTx = db.transaction((session: SessionId) => {
      const eventsRemoved = this.events.deleteSession(session);
      let cursorsRemoved = this.cursors.removeOfTarget(session);
      if (isWatcherOf(session.key, session)) cursorsRemoved += this.cursors.removeOfWatcher(session.key);
      return { eventsRemoved, cursorsRemoved, linkRemoved: this.links.remove(session) };
    });
    this.pruneTx = db.transaction((policy: RetentionPolicy): PruneStep => {
      const eventsRemoved = this.events.pruneEvents(policy.cutoffMs, policy.maxEvents, policy.maxRowsPerStep);
      const cursorsRemoved = this.cursors.pruneUntouched(policy.cutoffMs, policy.maxRowsPerStep - eventsRemoved);
      return { eventsRemoved, cursorsRemoved, done: eventsRemoved + cursorsRemoved < policy.maxRowsPerStep };
    });
    this.watchTx = db.transaction((watcherKey: string, target: SessionId, nowMs: number): CursorRecord => {
      const existing = this.cursors.get(watcherKey, target);
      if (existing === undefined) return this.cursors.put(watcherKey, target, seedCursor(this.events.versionOf(target)), nowMs);
      this.cursors.touch(watcherKey, target, nowMs);
      return { ...existing, updatedAtMs: nowMs };
    });
    this.adoptTx = db.transaction((input: AdoptInput) => this.adoptInTransaction(input));
    this.scanTx = db.transaction((scanned: LinkRecord, commit: ScanCommit) => this.scanInTransaction(scanned, commit));
  }

  private acksInTransaction(acks: readonly AckInput[], nowMs: number): WriteResult<AckOutcome[]> {
    const changes: PairChange[] = [];
    const value = acks.map((ack): AckOutcome => {
      const cursor = this.cursors.get(ack.watcherKey, ack.target);
      if (cursor === undefined) return { acknowledged: false, reopened: false };
      const step = applyAck(cursor, ack.notifiedVersion, ack.reconciledThrough);
      if (!step.acknowledged) return { acknowledged: false, reopened: false, cursor };
      changes.push({ watcherKey: ack.watcherKey, target: ack.target });
      return { acknowledged: true, reopened: step.reopened, cursor: this.cursors.put(ack.watcherKey, ack.target, step.cursor, nowMs) };
    });
    return { value, changes };
  }

  /** Appends the `adopted` event and creates or refreshes the link, in one transaction. */
  private adoptInTransaction(input: AdoptInput) {
    const appended = this.appendInTransaction(input.adoptedEvent);
    if (!appended.value.recorded) throw new Error("an adopted event is never gated");
    const wanted = input.link;
    if (wanted === undefined) return { event: appended.value.event, changes: appended.changes };
    const existing = this.links.get(wanted.session);
    const sameSource = existing !== undefined && existing.source === wanted.source && existing.threadId === wanted.threadId;
    const link = this.links.put({
      ...wanted,
      marker: sameSource ? existing.marker : wanted.marker,
      missedChecks: sameSource ? existing.missedChecks : 0,
      ...(sameSource && existing.lastScannedAtMs !== undefined ? { lastScannedAtMs: existing.lastScannedAtMs } : {}),
    });
    return { event: appended.value.event, link, changes: appended.changes };
  }

  /** Applies a scan result if the link is unchanged since the scan began. */
  private scanInTransaction(scanned: LinkRecord, commit: ScanCommit) {
    const current = this.links.get(scanned.session);
    const unchanged =
      current !== undefined &&
      current.source === scanned.source &&
      current.threadId === scanned.threadId &&
      current.marker === scanned.marker &&
      current.missedChecks === scanned.missedChecks &&
      current.updatedAtMs === scanned.updatedAtMs;
    if (!unchanged) return { committed: false, changes: [] as PairChange[] };
    let event: StoredEvent | undefined;
    let changes: PairChange[] = [];
    if (commit.event !== undefined) {
      const appended = this.appendInTransaction(commit.event);
      if (appended.value.recorded) event = appended.value.event;
      changes = appended.changes;
    }
    if (commit.removeLink === true) this.links.remove(scanned.session);
    else this.links.recordScan(scanned.session, commit.marker, commit.missedChecks, commit.nowMs);
    return { committed: true, event, changes };
  }

  /** Opens the database file at `path` (see `openDatabase`); the caller must `close()` the store. */
  static open(path: string, durability: Durability): SqliteStore {
    return new SqliteStore(openDatabase(path, durability));
  }

  append(input: AppendInput): Promise<AppendOutcome> {
    return this.enqueueWrite(() => this.appendInTransaction(input));
  }

  /** Queues a write for the next group commit; it settles after that commit. */
  private enqueueWrite<T>(write: () => WriteResult<T>): Promise<T> {
    return new Promise((resolve, reject) => {
      this.queuedWrites.push({ write, resolve: resolve as (value: unknown) => void, reject });
      if (this.queuedWrites.length === 1) setImmediate(() => this.commitQueuedWrites());
    });
  }

  /** Commits every queued write in one transaction and settles each one's promise. */
  private commitQueuedWrites(): void {
    const batch = this.queuedWrites;
    if (batch.length === 0) return;
    this.queuedWrites = [];
    let results: (WriteResult<unknown> | { error: unknown })[];
    try {
      results = this.writeBatchTx.immediate(batch);
    } catch (error) {
      for (const queued of batch) queued.reject(error);
      return;
    }
    const changes: PairChange[] = [];
    results.forEach((result, i) => {
      if ("error" in result) return batch[i]!.reject(result.error);
      changes.push(...result.changes);
      batch[i]!.resolve(result.value);
    });
    this.announce(changes);
  }

  private appendInTransaction(input: AppendInput): WriteResult<AppendOutcome> {
    if (input.dedupeKey !== undefined) {
      const existing = this.events.eventByDedupeKey(input.dedupeKey);
      if (existing !== undefined) {
        const session = { agentId: existing.agentId, key: existing.sessionKey };
        const outcome = {
          recorded: true,
          deduplicated: true,
          event: existing,
          stateVersion: this.events.versionOf(session),
          noticesOpened: 0,
        } as const;
        return { value: outcome, changes: [] };
      }
    }
    const watchers = input.notifyWatcherKeys.filter((key) => !isWatcherOf(key, input.session));
    if (input.onlyIfWatched && watchers.length === 0 && !this.cursors.isWatched(input.session)) {
      return { value: { recorded: false, stateVersion: this.events.versionOf(input.session) }, changes: [] };
    }
    const event = this.events.insertEvent(input);
    const { changes, opened } = this.updateCursors(event, input, watchers);
    return { value: { recorded: true, deduplicated: false, event, stateVersion: event.sequence, noticesOpened: opened }, changes };
  }

  /**
   * The cursor effects of one new event (SPEC §5). Returns the pairs whose pending notice changed, and how
   * many notices opened.
   */
  private updateCursors(
    event: StoredEvent,
    input: AppendInput,
    namedWatchers: readonly string[],
  ): { changes: PairChange[]; opened: number } {
    const target = input.session;
    const changes: PairChange[] = [];
    let opened = 0;
    const effect = effectOfKind(event.kind);
    switch (effect) {
      case "ledger":
        break;
      case "seed":
        for (const watcherKey of namedWatchers) {
          const previous = this.cursors.get(watcherKey, target);
          this.cursors.put(watcherKey, target, seedCursor(event.sequence), input.nowMs);
          if (previous !== undefined && isPending(previous)) changes.push({ watcherKey, target });
        }
        break;
      case "notify": {
        const concerned = new Map<string, CursorRecord | undefined>();
        for (const cursor of this.cursors.ofTargetSession(target)) concerned.set(cursor.watcherKey, cursor);
        for (const watcherKey of namedWatchers) if (!concerned.has(watcherKey)) concerned.set(watcherKey, undefined);
        for (const [watcherKey, cursor] of concerned) {
          if (event.actorId === watcherKey) continue; // a watcher is never told about what it did itself
          const next = applyMaterialEvent(cursor, event.sequence);
          this.cursors.put(watcherKey, target, next.cursor, input.nowMs);
          if (next.opened) {
            changes.push({ watcherKey, target });
            opened++;
          }
        }
        break;
      }
      default: {
        const never: never = effect;
        throw new Error(`unknown kind effect ${String(never)}`);
      }
    }
    return { changes, opened };
  }

  private announce(changes: readonly PairChange[]): void {
    if (changes.length === 0) return;
    for (const listener of this.listeners) listener(changes);
  }

  onPairChanges(listener: (changes: readonly PairChange[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
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

  async watch(watcherKey: string, target: SessionId, nowMs: number): Promise<CursorRecord> {
    if (isWatcherOf(watcherKey, target)) throw new Error("a session cannot watch itself");
    return this.watchTx.immediate(watcherKey, target, nowMs);
  }

  async unwatch(watcherKey: string, target: SessionId): Promise<boolean> {
    const removed = this.cursors.remove(watcherKey, target);
    if (removed) this.announce([{ watcherKey, target }]);
    return removed;
  }

  async listWatches(filter: Parameters<Store["listWatches"]>[0]): Promise<CursorRecord[]> {
    return this.cursors.page(filter);
  }

  async resetWatcher(watcherKey: string): Promise<number> {
    return this.cursors.removeOfWatcher(watcherKey);
  }

  async getCursor(watcherKey: string, target: SessionId): Promise<CursorRecord | undefined> {
    return this.cursors.get(watcherKey, target);
  }

  async pendingCursors(watcherKeys: readonly string[], prefixes: readonly string[]): Promise<CursorRecord[]> {
    return this.cursors.pending(watcherKeys, prefixes);
  }

  ackNotices(acks: readonly AckInput[], nowMs: number): Promise<AckOutcome[]> {
    return this.enqueueWrite(() => this.acksInTransaction(acks, nowMs));
  }

  async adopt(input: AdoptInput): Promise<{ event: StoredEvent; link?: LinkRecord }> {
    const { changes, ...adopted } = this.adoptTx.immediate(input);
    this.announce(changes);
    return adopted;
  }

  async getLink(session: SessionId): Promise<LinkRecord | undefined> {
    return this.links.get(session);
  }

  async listLinks(filter: { agentId?: string; after?: SessionId; limit: number }): Promise<LinkRecord[]> {
    return this.links.page(filter.agentId, filter.after, filter.limit);
  }

  async watchedLinks(): Promise<LinkRecord[]> {
    return this.links.watchedLinks();
  }

  async commitScan(scanned: LinkRecord, commit: ScanCommit): Promise<{ committed: boolean; event?: StoredEvent }> {
    const { changes, committed, event } = this.scanTx.immediate(scanned, commit);
    this.announce(changes);
    return event === undefined ? { committed } : { committed, event };
  }

  async countPendingNotices(): Promise<number> {
    return this.cursors.countPending();
  }

  async pruneStep(policy: RetentionPolicy): Promise<PruneStep> {
    return this.pruneTx.immediate(policy);
  }

  /**
   * Caps the database at `pages` pages (SQLite `max_page_count`; it never goes below the current size), or
   * lifts the cap with `undefined`. Writes beyond the cap fail with SQLITE_FULL, as on a full disk.
   */
  limitPages(pages: number | undefined): number {
    return this.db.pragma(`max_page_count = ${pages ?? 4294967294}`, { simple: true }) as number;
  }

  /** Runs SQLite's integrity check; "ok" when the file is sound. */
  integrityCheck(): string {
    return this.db.pragma("integrity_check", { simple: true }) as string;
  }

  async close(): Promise<void> {
    this.commitQueuedWrites();
    this.listeners.clear();
    if (this.db.open) this.db.close();
  }
}
