import { stat } from "node:fs/promises";
import { performance } from "node:perf_hooks";
import { setTimeout as pause } from "node:timers/promises";
import type Database from "better-sqlite3";
import type { EventEncoder, StoredEvent } from "../../domain/event.js";
import type {
  AckInput,
  AckOutcome,
  AdoptInput,
  AppendInput,
  AppendOutcome,
  CursorRecord,
  CursorsRead,
  LinkRecord,
  NamespaceSummary,
  PairChange,
  PruneStep,
  RetentionPolicy,
  ScanCommit,
  SessionHead,
  SessionStatus,
  WatchRequest,
} from "../../domain/records.js";
import { watcherIdFromKey, type SessionId } from "../../domain/session-key.js";
import type { PairPosition, WatcherRange } from "../../domain/pair-order.js";
import { runFlagAfter, planOwnText, type RunFlag } from "../../domain/run-flags.js";
import { appendNeedsTargetCursors, planAppend, type AppendReads } from "../../domain/append-plan.js";
import { applyAcks, isSessionItself, pairChangesFromRemoved, watchCursor } from "../../domain/cursor-rules.js";
import { linkUpdatedAtAfterReset, planAdoption, planScanCommit, scanCommitOutcome } from "../../domain/upstream-link.js";
import { planNamespaceTrim, pruneCursorBudget, pruneNeedsCounts, pruneStepOutcome } from "../../domain/retention.js";
import { ActivityTables } from "./activity-tables.js";
import { CursorTables } from "./cursor-tables.js";
import { EventTables } from "./event-tables.js";
import { GroupCommit, type WriteGate } from "./group-commit.js";
import { LinkTables } from "./link-tables.js";
import { NamespaceTables } from "./namespace-tables.js";
import { Checkpointer } from "./checkpointer.js";
import { openDatabase, type OpenedDatabase } from "./open-database.js";
import type { CommitObserver, Durability, Store, WriteResult } from "../store.js";
import { StorageTracker, type StorageObserver } from "../storage-tracker.js";

/** Who hears what a SQLite store does (each is optional), and its page cache's size. */
export interface SqliteStoreOptions {
  /** The serving connection's page cache, in bytes (default `defaultCacheBytes`, 32 MiB). */
  cacheBytes?: number | undefined;
  /** The write-ahead log's length, in pages, at which the checkpointer works to start it over (tests shorten it). */
  longLogFrames?: number | undefined;
  /** Full storage, and space again. */
  storage?: StorageObserver | undefined;
  /** Each group commit's time, and its oldest write's wait. */
  commits?: CommitObserver | undefined;
  /** A background checkpoint that failed (its SQLite code); it is tried again at the next interval. */
  checkpointFailed?: ((code: string) => void) | undefined;
}

/** How often the worker thread checkpoints the WAL. */
const checkpointIntervalMs = 100;
/**
 * A long series of writes (`catchUpBackground`) waits while more of the log than this is not yet copied
 * back (4 KiB pages: 16 MiB), or while a log long enough to start over is not all copied: far below the
 * bound at which every commit of the serving connection would copy the log itself.
 */
const notCopiedPauseFrames = 4096;

/**
 * The SQLite backend: SQL and transactions only; each method reads, asks a plan or rule of domain/
 * (append-plan, cursor-rules, upstream-link, retention) and writes what it says. Each method runs one short
 * synchronous transaction (`BEGIN IMMEDIATE` when it writes); appends and acks are group-committed
 * (store/sqlite/group-commit). Pair changes are announced to feed listeners after the commit.
 */
export class SqliteStore implements Store {
  private readonly events: EventTables;
  private readonly cursors: CursorTables;
  private readonly links: LinkTables;
  private readonly activity: ActivityTables;
  private readonly namespaces: NamespaceTables;
  private readonly listeners = new Set<(changes: readonly PairChange[], changeNumber: number) => void>();
  /**
   * Commits that changed pairs, counted: each is announced with its number as it commits, in the same
   * synchronous turn, so a read always reflects exactly the changes numbered up to the count.
   */
  private changeCount = 0;
  private readonly groupCommit: GroupCommit;
  private readonly writeTx;
  private readonly storage: StorageTracker;
  private readonly db: Database.Database;
  /** Checkpoints the WAL on a worker thread (absent for an in-memory database). */
  private readonly checkpointer: Checkpointer | undefined;

  private constructor(
    private readonly opened: OpenedDatabase,
    private readonly encodeEvent: EventEncoder,
    { storage, commits, checkpointFailed, longLogFrames }: SqliteStoreOptions,
  ) {
    const db = opened.db;
    this.db = db;
    this.storage = new StorageTracker(storage);
    // A failed checkpoint is tried again at the next interval; the serving connection's bound still holds.
    this.checkpointer =
      db.name === ":memory:" ? undefined : new Checkpointer(db.name, checkpointIntervalMs, checkpointFailed ?? (() => undefined), longLogFrames);
    this.events = new EventTables(db);
    this.cursors = new CursorTables(db);
    this.links = new LinkTables(db);
    this.activity = new ActivityTables(db);
    this.namespaces = new NamespaceTables(db);
    this.groupCommit = new GroupCommit(
      db,
      (changes) => {
        this.announce(changes);
      },
      (error) => this.storage.observe(error),
      commits,
      this.gate,
    );
    this.writeTx = db.transaction((write: () => WriteResult<unknown>) => write());
  }

  /**
   * Opens the database file at `path` (see `openDatabase`); `encodeEvent` gives each new event its stored
   * wire bytes; the observers, when given, hear what the store does. The caller must `close()` the store.
   */
  static open(path: string, durability: Durability, encodeEvent: EventEncoder, options: SqliteStoreOptions = {}): SqliteStore {
    return new SqliteStore(openDatabase(path, durability, options.cacheBytes), encodeEvent, options);
  }

  /**
   * The checkpointer's write gate (an open one without a checkpointer). A write that runs at once passes it
   * if it can, and goes ahead anyway when the worker holds it (that only spoils one attempt of the
   * worker's to start the log over); the group commit's batches wait for it.
   */
  private get gate(): WriteGate {
    return this.checkpointer ?? { tryBeginWrite: () => true, endWrite: () => undefined };
  }

  /** Runs one write in its own `BEGIN IMMEDIATE` transaction and announces its pair changes after the commit. */
  private runWrite<T>(write: () => WriteResult<T>): T {
    let result: WriteResult<T>;
    const passed = this.gate.tryBeginWrite();
    try {
      result = this.writeTx.immediate(write) as WriteResult<T>;
    } catch (error) {
      this.storage.observe(error);
      throw error;
    } finally {
      if (passed) this.gate.endWrite();
    }
    this.storage.observe(undefined);
    this.announce(result.changes);
    return result.value;
  }

  append(input: AppendInput): Promise<AppendOutcome> {
    return this.groupCommit.enqueue(() => this.appendInTransaction(input));
  }

  /** An append inside the caller's transaction: read → plan → write. */
  private appendInTransaction(input: AppendInput): WriteResult<AppendOutcome> {
    const plan = planAppend(input, this.appendReads(input), () => this.events.nextSequence(), this.encodeEvent);
    switch (plan.action) {
      case "deduplicated":
        return { value: plan.outcome, changes: [] };
      case "gated":
        return { value: { recorded: false, stateVersion: this.events.versionOf(input.session) }, changes: [] };
      case "record":
        this.events.insertEvent(plan.event, input.dedupeKey, input.nowMs);
        for (const cursor of plan.cursorWrites) this.cursors.put(cursor);
        return { value: plan.outcome, changes: plan.changes };
    }
  }

  /** What an append's plan needs: the event holding its dedupe key (with its session's version), its target's cursors. */
  private appendReads(input: AppendInput): AppendReads {
    const event = input.dedupeKey === undefined ? undefined : this.events.eventByDedupeKey(input.session.namespace, input.dedupeKey);
    if (event !== undefined) {
      const stateVersion = this.events.versionOf({ namespace: event.namespace, agentId: event.agentId, key: event.sessionKey });
      return { duplicate: { event, stateVersion }, cursorsOnTarget: [] };
    }
    return { cursorsOnTarget: appendNeedsTargetCursors(input) ? this.cursors.ofTargetSession(input.session) : [] };
  }

  private announce(changes: readonly PairChange[]): void {
    if (changes.length === 0) return;
    const changeNumber = ++this.changeCount;
    for (const listener of this.listeners) listener(changes, changeNumber);
  }

  onPairChanges(listener: (changes: readonly PairChange[], changeNumber: number) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Every change is announced as it commits: none is ever still to come. */
  changesHeardThrough(): number {
    return this.changeCount;
  }

  /**
   * Two statements and no transaction: this process is the file's only writer and runs synchronously, so
   * no write can come between them.
   */
  async sessionStatus(session: SessionId, changesSince: number | undefined, limit: number): Promise<SessionStatus> {
    const head = this.events.statusHead(session);
    const stateVersion = head?.stateVersion ?? 0;
    if (changesSince === undefined || changesSince > stateVersion) return { stateVersion };
    if (head === undefined) return { stateVersion, changes: { events: [], truncated: false, historyGap: false, earliestAvailableSequence: 0 } };
    const events = this.events.eventsAfter(head.sessionId, changesSince, limit + 1);
    const truncated = events.length > limit;
    if (truncated) events.length = limit;
    return {
      stateVersion,
      changes: { events, truncated, historyGap: changesSince < head.prunedThrough, earliestAvailableSequence: head.earliestSequence },
    };
  }

  statusStamp(session: SessionId): number {
    return this.events.stamps.of(session);
  }

  /** Always current: this process owns the database, and its writes bump the stamps as they commit. */
  statusStampsCurrent(): undefined {
    return undefined;
  }

  /** Never called: the feed is this process's own commits, announced as they commit. */
  onFeedGap(): () => void {
    return () => undefined;
  }

  async listSessions(filter: Parameters<Store["listSessions"]>[0]): Promise<SessionHead[]> {
    return this.events.heads(filter.namespace, filter.agentId, filter.order, filter.limit);
  }

  async getStateVersions(sessions: readonly SessionId[]): Promise<(number | undefined)[]> {
    return sessions.map((session) => this.events.headOf(session)?.stateVersion);
  }

  async deleteSession(session: SessionId) {
    return this.runWrite(() => {
      const eventsRemoved = this.events.deleteSession(session);
      const removed = this.cursors.removeOfTarget(session);
      if (isSessionItself(session.key, session)) removed.push(...this.cursors.removeOfWatcher(session.namespace, session.key));
      this.activity.removeSession(session);
      const value = { eventsRemoved, cursorsRemoved: removed.length, linkRemoved: this.links.remove(session) };
      return { value, changes: pairChangesFromRemoved(removed) };
    });
  }

  async watch(watcherKey: string, target: SessionId, nowMs: number, request?: WatchRequest): Promise<CursorRecord> {
    return this.runWrite(() => {
      const existing = this.cursors.get(watcherKey, target);
      const effect = watchCursor(watcherKey, target, existing, this.events.versionOf(target), nowMs, request);
      if (effect.write === "put") this.cursors.put(effect.cursor);
      else if (effect.write === "touch") this.cursors.touch(watcherKey, target, nowMs);
      return { value: effect.cursor, changes: effect.pairChanges };
    });
  }

  async unwatch(watcherKey: string, target: SessionId): Promise<boolean> {
    return this.runWrite(() => {
      const removed = this.cursors.remove(watcherKey, target);
      return { value: removed !== undefined, changes: removed === undefined ? [] : pairChangesFromRemoved([removed]) };
    });
  }

  async listWatches(filter: Parameters<Store["listWatches"]>[0]): Promise<CursorRecord[]> {
    return this.cursors.page(filter);
  }

  async resetWatcher(namespace: string, watcherKey: string, nowMs: number): Promise<number> {
    return this.runWrite(() => {
      const removed = this.cursors.removeOfWatcher(namespace, watcherKey);
      const session = watcherIdFromKey(watcherKey, namespace);
      const link = session === undefined ? undefined : this.links.get(session);
      if (link !== undefined) this.links.setUpdatedAt(link.session, linkUpdatedAtAfterReset(link, nowMs));
      return { value: removed.length, changes: pairChangesFromRemoved(removed) };
    });
  }

  async getCursors(pairs: readonly PairChange[]): Promise<CursorsRead> {
    // Synchronous reads with no commit between them: one snapshot.
    return { cursors: pairs.flatMap((pair) => this.cursors.get(pair.watcherKey, pair.target) ?? []), through: this.changeCount };
  }

  async pendingPage(namespace: string, range: WatcherRange, after: PairPosition | undefined, limit: number): Promise<CursorsRead> {
    return { cursors: this.cursors.pendingPage(namespace, range, after, limit), through: this.changeCount };
  }

  ackNotices(acks: readonly AckInput[], nowMs: number): Promise<AckOutcome[]> {
    return this.groupCommit.enqueue(() => {
      const effects = applyAcks(acks, (watcherKey, target) => this.cursors.get(watcherKey, target), nowMs);
      for (const cursor of effects.cursorWrites) this.cursors.put(cursor);
      return { value: effects.outcomes, changes: effects.pairChanges };
    });
  }

  async adopt(input: AdoptInput): Promise<{ event: StoredEvent; link?: LinkRecord }> {
    return this.runWrite((): WriteResult<{ event: StoredEvent; link?: LinkRecord }> => {
      const appended = this.appendInTransaction(input.adoptedEvent);
      const adoption = planAdoption(appended.value, input.link === undefined ? undefined : this.links.get(input.link.session), input);
      if (adoption.link !== undefined) this.links.put(adoption.link);
      return { value: adoption, changes: appended.changes };
    });
  }

  async getLink(session: SessionId): Promise<LinkRecord | undefined> {
    return this.links.get(session);
  }

  async listLinks(filter: Parameters<Store["listLinks"]>[0]): Promise<LinkRecord[]> {
    return this.links.page(filter.namespace, filter.agentId, filter.after, filter.limit);
  }

  async hookLinks(namespace: string, lookup: { path: string | undefined; threadId: string }, limit: number): Promise<LinkRecord[]> {
    return this.links.hookLinks(namespace, lookup, limit);
  }

  async watchedLinks(namespace?: string): Promise<LinkRecord[]> {
    return this.links.watchedLinks(namespace);
  }

  async commitScan(scanned: LinkRecord, commit: ScanCommit): Promise<{ committed: boolean; event?: StoredEvent; noticesOpened?: number }> {
    return this.runWrite((): WriteResult<{ committed: boolean; event?: StoredEvent; noticesOpened?: number }> => {
      const plan = planScanCommit(this.links.get(scanned.session), scanned, commit, this.activity.runFlag(scanned.session));
      if (plan.action === "discard") return { value: { committed: false }, changes: [] };
      const appended = plan.append === undefined ? undefined : this.appendInTransaction(plan.append);
      if (plan.link === "remove") this.links.remove(scanned.session);
      else this.links.recordScan(scanned.session, plan.link.marker, plan.link.missedChecks, plan.link.scannedAtMs);
      return { value: scanCommitOutcome(appended?.value), changes: appended?.changes ?? [] };
    });
  }

  async setRunActive(session: SessionId, active: boolean, nowMs: number): Promise<void> {
    this.runWrite(() => {
      this.activity.putRunFlag(session, runFlagAfter(this.activity.runFlag(session), active, nowMs));
      return { value: undefined, changes: [] };
    });
  }

  async runFlag(session: SessionId): Promise<RunFlag | undefined> {
    return this.activity.runFlag(session);
  }

  async recordOwnText(session: SessionId, digest: string, keep: number): Promise<void> {
    this.runWrite(() => {
      const { position, trimThrough } = planOwnText(this.activity.newestOwnTextPosition(session), keep);
      this.activity.addOwnText(session, position, digest, trimThrough);
      return { value: undefined, changes: [] };
    });
  }

  async ownTextDigests(session: SessionId): Promise<string[]> {
    return this.activity.ownTextDigests(session);
  }

  async countPendingNotices(): Promise<number> {
    return this.namespaces.countPending();
  }

  async listNamespaces(filter: Parameters<Store["listNamespaces"]>[0]): Promise<NamespaceSummary[]> {
    return this.namespaces.list(filter.after, filter.only, filter.limit);
  }

  /** Always true: this process owns the database file, so no other process runs its jobs. */
  async tryLease(): Promise<boolean> {
    return true;
  }

  async pruneStep(policy: RetentionPolicy): Promise<PruneStep> {
    return this.runWrite(() => {
      let eventsRemoved = this.events.pruneOlderThan(policy.cutoffMs, policy.maxRowsPerStep);
      const counts = pruneNeedsCounts(policy, eventsRemoved) ? this.namespaces.overEventCap(policy.maxEvents) : [];
      for (const { namespace, count } of planNamespaceTrim(counts, policy, eventsRemoved)) {
        eventsRemoved += this.events.pruneOldestOf(namespace, count);
      }
      const removed = this.cursors.pruneUntouched(policy.cutoffMs, pruneCursorBudget(policy, eventsRemoved));
      return { value: pruneStepOutcome(policy, eventsRemoved, removed.length), changes: pairChangesFromRemoved(removed) };
    });
  }

  async catchUpBackground(limitMs: number): Promise<void> {
    const checkpointer = this.checkpointer;
    if (checkpointer === undefined) return;
    const deadline = performance.now() + limitMs;
    // Behind: much of the log is not copied yet, or a long log is not all copied (once it is, the next
    // write, this series' own, starts it over).
    const behind = (): boolean => {
      const { inLog, notCopied } = checkpointer.logFrames;
      return notCopied > notCopiedPauseFrames || (inLog >= checkpointer.longLogFrames && notCopied > 0);
    };
    while (behind() && performance.now() < deadline) await pause(5);
  }

  /**
   * Caps the database at `pages` pages (SQLite `max_page_count`; it never goes below the current size), or
   * lifts the cap with `undefined`. Writes beyond the cap fail with SQLITE_FULL, as on a full disk.
   */
  limitPages(pages: number | undefined): number {
    return this.db.pragma(`max_page_count = ${pages ?? 4294967294}`, { simple: true }) as number;
  }

  /** The size of the database file and of its write-ahead log (0 for a file that does not exist). */
  async databaseBytes(): Promise<[string, number][]> {
    const size = (path: string): Promise<number> => stat(path).then((info) => info.size, () => 0);
    return [
      ["db", await size(this.db.name)],
      ["wal", await size(`${this.db.name}-wal`)],
    ];
  }

  /** Runs SQLite's integrity check; "ok" when the file is sound. */
  integrityCheck(): string {
    return this.db.pragma("integrity_check", { simple: true }) as string;
  }

  /** Commits what is queued, stops the checkpointer, then closes the database (its last checkpoint) and the lock. */
  async close(): Promise<void> {
    this.groupCommit.flush();
    this.listeners.clear();
    await this.checkpointer?.stop();
    this.opened.close();
  }
}
