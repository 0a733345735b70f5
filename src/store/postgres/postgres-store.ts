import { performance } from "node:perf_hooks";
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
import type { PairPosition, WatcherRange } from "../../domain/pair-order.js";
import { watcherIdFromKey, type SessionId } from "../../domain/session-key.js";
import { planOwnText, runFlagAfter, type RunFlag } from "../../domain/run-flags.js";
import { applyAcks, isSessionItself, pairChangesFromRemoved, pairKey, watchCursor } from "../../domain/cursor-rules.js";
import { appendNeedsTargetCursors, planAppend, type AppendReads } from "../../domain/append-plan.js";
import { linkUpdatedAtAfterReset, planAdoption, planScanCommit, scanCommitOutcome } from "../../domain/upstream-link.js";
import { planNamespaceTrim, pruneCursorBudget, pruneNeedsCounts, pruneStepOutcome } from "../../domain/retention.js";
import { settleWithin } from "../../settle-within.js";
import { ChangeStamps } from "../change-stamps.js";
import { StorageTracker, type StorageObserver } from "../storage-tracker.js";
import type { ClaimLedger, CommitObserver, Durability, Store, WatchFilter, WriteResult } from "../store.js";
import { ClaimTables } from "./claim-tables.js";
import { ActivityTables } from "./activity-tables.js";
import { ClockTables, type StatusChanges } from "./clock-tables.js";
import { DatabaseUnreachableError, PostgresDatabase, type PgDeadlines } from "./connection.js";
import { CursorTables } from "./cursor-tables.js";
import { dedupeIdFromKey, eventPruneChoices, EventTables } from "./event-tables.js";
import { PairChangeFeed } from "./feed.js";
import { GroupCommit } from "./group-commit.js";
import { LeaseTables } from "./lease-tables.js";
import { LinkTables } from "./link-tables.js";
import { migratePostgres } from "./migrations.js";
import { NamespaceTables } from "./namespace-tables.js";
import { sql } from "./pg-sql.js";
import type { PostgresTarget } from "./postgres-url.js";
import type { WriteBatch, WriteHints } from "./write-batch.js";

/** How long the feed's rows are kept: a replica away for longer resynchronises its subscribers instead. */
const pairChangesKeptMs = 60 * 60 * 1000;

/** Expired incarnations whose claims one sweep frees, at most. */
const expiredHoldersPerSweep = 100;

/** Where a PostgreSQL store connects, and who this replica is. */
export interface PostgresStoreOptions {
  target: PostgresTarget;
  /** The schema holding the tables; created or migrated on open. */
  schema: string;
  durability: Durability;
  /** The replica's node id: local transcript links belong to the node that adopted them. */
  nodeId: string;
  encodeEvent: EventEncoder;
  nowMs: () => number;
  /** Told when a read of other replicas' changes fails (it is tried again on the next wake-up or tick). */
  onFeedError?: (error: unknown) => void;
  /** Deadlines of round trips to the database (tests shorten them). */
  deadlines?: PgDeadlines;
  /** Hears of writes refused for lack of space (a full disk or tablespace, a quota), and of space again. */
  storage?: StorageObserver;
  /** Hears how long each write transaction took, and how long its oldest write waited for it. */
  commits?: CommitObserver;
}

/**
 * The PostgreSQL backend (SPEC §11): any number of replicas share one schema. SQL and transactions only, as
 * in SqliteStore: each method reads, asks a plan or rule of the domain, and writes what it says, through the
 * table families (one file each). Writes are group-committed under the clock row lock
 * (store/postgres/group-commit), each batch with its own cache of what it read and wrote
 * (store/postgres/write-batch); single-statement reads see one snapshot, and since commit order is
 * sequence order, every snapshot holds a gap-free prefix of the log. Pair changes reach this replica's
 * listeners at once after a local commit, and from other replicas through LISTEN/NOTIFY plus a catch-up
 * read (store/postgres/feed).
 */
export class PostgresStore implements Store {
  private readonly listeners = new Set<(changes: readonly PairChange[], changeNumber: number) => void>();
  private readonly gapListeners = new Set<() => void>();
  /** Stamps of the sessions' SessionStatus answers: bumped by this replica's commits and by the feed. */
  private readonly stamps = new ChangeStamps();
  private readonly db: PostgresDatabase;
  private readonly events: EventTables;
  private readonly cursors: CursorTables;
  private readonly links: LinkTables;
  private readonly activity: ActivityTables;
  private readonly namespaces: NamespaceTables;
  private readonly leases: LeaseTables;
  private readonly claimTables: ClaimTables;
  private readonly clock: ClockTables;
  private readonly groupCommit: GroupCommit;
  /** Listening to other replicas' changes: from `start()` on. */
  private feed: PairChangeFeed | undefined;

  /**
   * A store that has not talked to the database yet: `start()` connects (and may be tried again until it
   * succeeds); `open()` does both. Nothing may be asked of it before `start()` has resolved.
   */
  constructor(private readonly options: PostgresStoreOptions) {
    const db = new PostgresDatabase({
      target: options.target,
      schema: options.schema,
      durability: options.durability,
      ...(options.deadlines === undefined ? {} : { deadlines: options.deadlines }),
    });
    this.db = db;
    this.events = new EventTables(db);
    this.cursors = new CursorTables(db);
    this.links = new LinkTables(db, options.nodeId);
    this.activity = new ActivityTables(db);
    this.namespaces = new NamespaceTables(db);
    this.leases = new LeaseTables(db);
    this.claimTables = new ClaimTables(db);
    this.clock = new ClockTables(`sessionstate_${options.schema}`);
    this.groupCommit = new GroupCommit(
      db,
      { events: this.events, cursors: this.cursors, clock: this.clock },
      {
        reserve: (changeSeq) => this.feed?.reserveOwn(changeSeq) ?? (() => undefined),
        announce: (changes, changeNumber) => this.announce(changes, changeNumber),
        statusChanged: (status) => this.bumpStamps(status),
      },
      options.nowMs,
      new StorageTracker(options.storage),
      options.commits,
    );
  }

  /** Connects, creates or migrates the schema, and starts listening for other replicas' changes. Close it. */
  static async open(options: PostgresStoreOptions): Promise<PostgresStore> {
    const store = new PostgresStore(options);
    try {
      await store.start();
      return store;
    } catch (error) {
      await store.close();
      throw error;
    }
  }

  /**
   * Creates or migrates the schema and starts listening for other replicas' changes. Throws when the
   * database cannot be reached (then it may be called again) or the schema is newer than this program.
   */
  async start(): Promise<void> {
    if (this.feed !== undefined) return;
    const client = await this.db.connectClient("migration");
    const swallow = (): void => undefined;
    client.on("error", swallow);
    try {
      await migratePostgres(client, this.options.schema);
    } finally {
      await client.end().catch(() => undefined);
    }
    const feed = new PairChangeFeed(this.db, this.clock, await this.clock.changeNumber(this.db), {
      changes: (changes, status) => {
        this.bumpStamps(status);
        for (const { changeNumber, pairs } of changes) this.announce(pairs, changeNumber);
      },
      gap: () => {
        this.stamps.bumpAll();
        for (const listener of this.gapListeners) listener();
      },
      error: (error) => this.options.onFeedError?.(error),
    });
    await feed.start();
    this.feed = feed;
  }

  /** True while the database answers round trips (SPEC §11: health follows it). */
  get isReachable(): boolean {
    return this.db.isReachable;
  }

  /** Calls `listener` with false when the database stops answering and with true when it answers again. */
  onReachabilityChange(listener: (reachable: boolean) => void): () => void {
    return this.db.onReachabilityChange(listener);
  }

  /** Runs one write, group-committed with whatever else is queued; `hints` name the rows it reads up front. */
  private runWrite<T>(write: (batch: WriteBatch) => Promise<WriteResult<T>>, hints?: WriteHints): Promise<T> {
    return this.groupCommit.enqueue(write, hints);
  }

  private bumpStamps(status: StatusChanges): void {
    if (status.all) this.stamps.bumpAll();
    for (const session of status.sessions) this.stamps.bump(session);
  }

  private announce(changes: readonly PairChange[], changeNumber: number): void {
    if (changes.length === 0) return;
    for (const listener of this.listeners) listener(changes, changeNumber);
  }

  onPairChanges(listener: (changes: readonly PairChange[], changeNumber: number) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** What the feed has read through (this replica's own commits are announced before it passes them). */
  changesHeardThrough(): number {
    return this.feed?.heardThrough ?? 0;
  }

  onFeedGap(listener: () => void): () => void {
    this.gapListeners.add(listener);
    return () => this.gapListeners.delete(listener);
  }

  append(input: AppendInput): Promise<AppendOutcome> {
    const hints: WriteHints = {
      ...(input.dedupeKey === undefined ? {} : { dedupeKeys: [dedupeIdFromKey(input.session.namespace, input.dedupeKey)] }),
      ...(appendNeedsTargetCursors(input) ? { targets: [input.session] } : {}),
    };
    return this.runWrite((batch) => this.appendIn(batch, input), hints);
  }

  /**
   * An append inside a write batch: read → plan → write. On the common path it reads nothing (its dedupe key
   * and its target's cursors were read up front with the batch) and writes nothing yet (its rows are held
   * back for the batch's one insert).
   */
  private async appendIn(batch: WriteBatch, input: AppendInput): Promise<WriteResult<AppendOutcome>> {
    const plan = planAppend(input, await this.appendReads(batch, input), () => batch.nextSequence(), this.options.encodeEvent);
    switch (plan.action) {
      case "deduplicated":
        return { value: plan.outcome, changes: [] };
      case "gated":
        return { value: { recorded: false, stateVersion: await batch.versionOf(input.session) }, changes: [] };
      case "record":
        batch.appendEvent(plan.event, input.dedupeKey, input.nowMs);
        batch.putCursors(plan.cursorWrites);
        return { value: plan.outcome, changes: plan.changes };
    }
  }

  /** What an append's plan needs: the event holding its dedupe key (with its session's version), its target's cursors. */
  private async appendReads(batch: WriteBatch, input: AppendInput): Promise<AppendReads> {
    const duplicate = input.dedupeKey === undefined ? undefined : await batch.dedupedEvent(input.session.namespace, input.dedupeKey);
    if (duplicate !== undefined) return { duplicate, cursorsOnTarget: [] };
    return { cursorsOnTarget: appendNeedsTargetCursors(input) ? await batch.cursorsOn(input.session) : [] };
  }

  sessionStatus(session: SessionId, changesSince: number | undefined, limit: number): Promise<SessionStatus> {
    return this.events.status(session, changesSince, limit);
  }

  /** The session's stamp as far as this replica has heard (see statusStampsCurrent). */
  statusStamp(session: SessionId): number {
    return this.stamps.of(session);
  }

  /**
   * Resolves once the stamps hold every write committed before the call, this replica's and the others':
   * the feed has read to the end in a read that began after it (calls at once share that read).
   */
  statusStampsCurrent(): Promise<void> {
    if (this.feed === undefined) return Promise.reject(new DatabaseUnreachableError("the store has not started"));
    return this.feed.heardAll();
  }

  listSessions(filter: Parameters<Store["listSessions"]>[0]): Promise<SessionHead[]> {
    return this.events.heads(filter.namespace, filter.agentId, filter.order, filter.limit);
  }

  getStateVersions(sessions: readonly SessionId[]): Promise<(number | undefined)[]> {
    return this.events.versions(sessions);
  }

  deleteSession(session: SessionId): Promise<{ eventsRemoved: number; cursorsRemoved: number; linkRemoved: boolean }> {
    return this.runWrite(async (batch) => {
      const { events, head } = this.events.deleteSession(session);
      const eventsRemoved = await batch.removeEvents(events);
      batch.send(head);
      const removed = await batch.removeCursors(this.cursors.removeOfSession(session, isSessionItself(session.key, session)));
      for (const statement of this.activity.removeSession(session)) batch.send(statement);
      const linkRemoved = (await batch.count(this.links.remove(session))) > 0;
      batch.sessionChanged(session);
      return { value: { eventsRemoved, cursorsRemoved: removed.length, linkRemoved }, changes: pairChangesFromRemoved(removed) };
    });
  }

  watch(watcherKey: string, target: SessionId, nowMs: number, request?: WatchRequest): Promise<CursorRecord> {
    return this.runWrite(async (batch) => {
      const [existing] = await batch.cursorsOf([{ watcherKey, target }]);
      const effect = watchCursor(watcherKey, target, existing, await batch.versionOf(target), nowMs, request);
      // A refreshed lifetime is written as the whole row too: one statement for every cursor of the batch.
      if (effect.write !== "none") batch.putCursors([effect.cursor]);
      return { value: effect.cursor, changes: effect.pairChanges };
    });
  }

  unwatch(watcherKey: string, target: SessionId): Promise<boolean> {
    return this.runWrite(async (batch) => {
      const removed = await batch.removeCursors(this.cursors.remove(watcherKey, target));
      return { value: removed.length > 0, changes: pairChangesFromRemoved(removed) };
    });
  }

  listWatches(filter: WatchFilter): Promise<CursorRecord[]> {
    return this.cursors.page(filter);
  }

  resetWatcher(namespace: string, watcherKey: string, nowMs: number): Promise<number> {
    return this.runWrite(async (batch) => {
      const removed = await batch.removeCursors(this.cursors.removeOfWatcher(namespace, watcherKey));
      const session = watcherIdFromKey(watcherKey, namespace);
      const link = session === undefined ? undefined : await this.links.get(session, batch);
      if (link !== undefined) batch.send(this.links.setUpdatedAt(link.session, linkUpdatedAtAfterReset(link, nowMs)));
      return { value: removed.length, changes: pairChangesFromRemoved(removed) };
    });
  }

  getCursors(pairs: readonly PairChange[]): Promise<CursorsRead> {
    return this.cursors.getCursors(pairs);
  }

  pendingPage(namespace: string, range: WatcherRange, after: PairPosition | undefined, limit: number): Promise<CursorsRead> {
    return this.cursors.pendingPage(namespace, range, after, limit);
  }

  ackNotices(acks: readonly AckInput[], nowMs: number): Promise<AckOutcome[]> {
    return this.runWrite(
      async (batch) => {
        const cursors = new Map((await batch.cursorsOf(acks)).map((cursor) => [pairKey(cursor.watcherKey, cursor.target), cursor]));
        const effects = applyAcks(acks, (watcherKey, target) => cursors.get(pairKey(watcherKey, target)), nowMs);
        batch.putCursors(effects.cursorWrites);
        return { value: effects.outcomes, changes: effects.pairChanges };
      },
      { targets: acks.map((ack) => ack.target) },
    );
  }

  adopt(input: AdoptInput): Promise<{ event: StoredEvent; link?: LinkRecord }> {
    return this.runWrite(async (batch): Promise<WriteResult<{ event: StoredEvent; link?: LinkRecord }>> => {
      const appended = await this.appendIn(batch, input.adoptedEvent);
      const existing = input.link === undefined ? undefined : await this.links.get(input.link.session, batch);
      const adoption = planAdoption(appended.value, existing, input);
      if (adoption.link !== undefined) batch.send(this.links.put(adoption.link));
      return { value: adoption, changes: appended.changes };
    });
  }

  getLink(session: SessionId): Promise<LinkRecord | undefined> {
    return this.links.get(session);
  }

  listLinks(filter: Parameters<Store["listLinks"]>[0]): Promise<LinkRecord[]> {
    return this.links.page(filter.namespace, filter.agentId, filter.after, filter.limit);
  }

  hookLinks(namespace: string, lookup: { path: string | undefined; threadId: string }, limit: number): Promise<LinkRecord[]> {
    return this.links.hookLinks(namespace, lookup, limit);
  }

  /** Watched links this replica may scan: paired-node links, and local transcripts adopted on this node id. */
  watchedLinks(namespace?: string): Promise<LinkRecord[]> {
    return this.links.watched(namespace);
  }

  commitScan(scanned: LinkRecord, commit: ScanCommit): Promise<{ committed: boolean; event?: StoredEvent; noticesOpened?: number }> {
    return this.runWrite(async (batch): Promise<WriteResult<{ committed: boolean; event?: StoredEvent; noticesOpened?: number }>> => {
      const [current, runFlag] = await Promise.all([this.links.get(scanned.session, batch), this.activity.runFlag(scanned.session, batch)]);
      const plan = planScanCommit(current, scanned, commit, runFlag);
      if (plan.action === "discard") return { value: { committed: false }, changes: [] };
      const appended = plan.append === undefined ? undefined : await this.appendIn(batch, plan.append);
      if (plan.link === "remove") batch.send(this.links.remove(scanned.session));
      else batch.send(this.links.recordScan(scanned.session, plan.link.marker, plan.link.missedChecks, plan.link.scannedAtMs));
      return { value: scanCommitOutcome(appended?.value), changes: appended?.changes ?? [] };
    });
  }

  setRunActive(session: SessionId, active: boolean, nowMs: number): Promise<void> {
    return this.runWrite(async (batch) => {
      batch.send(this.activity.putRunFlag(session, runFlagAfter(await this.activity.runFlag(session, batch), active, nowMs)));
      return { value: undefined, changes: [] };
    });
  }

  runFlag(session: SessionId): Promise<RunFlag | undefined> {
    return this.activity.runFlag(session);
  }

  recordOwnText(session: SessionId, digest: string, keep: number): Promise<void> {
    return this.runWrite(async (batch) => {
      const { position, trimThrough } = planOwnText(await this.activity.newestOwnTextPosition(batch, session), keep);
      for (const statement of this.activity.addOwnText(session, position, digest, trimThrough)) batch.send(statement);
      return { value: undefined, changes: [] };
    });
  }

  ownTextDigests(session: SessionId): Promise<string[]> {
    return this.activity.ownTextDigests(session);
  }

  countPendingNotices(): Promise<number> {
    return this.namespaces.countPending();
  }

  listNamespaces(filter: Parameters<Store["listNamespaces"]>[0]): Promise<NamespaceSummary[]> {
    return this.namespaces.list(filter.after, filter.only, filter.limit);
  }

  tryLease(job: string, holder: string, ttlMs: number): Promise<boolean> {
    return this.leases.tryLease(job, holder, ttlMs);
  }

  /** Gives up every lease `holder` holds, so another replica may take its jobs at once (graceful stop). */
  releaseLeases(holder: string): Promise<void> {
    return this.leases.releaseAll(holder);
  }

  /**
   * The consumer groups' claims every replica sees (SPEC §6.1). Reads and takes are single statements; a
   * write that frees claims runs under the clock lock like every write, so the pairs it frees reach the
   * group's members on every replica through the feed.
   */
  readonly claims: ClaimLedger = {
    startHolder: (incarnation, ttlMs) => this.claimTables.startHolder(incarnation, ttlMs),
    renewHolder: (incarnation, ttlMs) => this.claimTables.renewHolder(incarnation, ttlMs),
    endHolder: (incarnation) => this.claimTables.endHolder(incarnation),
    read: (namespace, group, pairs) => this.claimTables.read(namespace, group, pairs),
    heldOf: (pairs) => this.claimTables.heldOf(pairs),
    take: (take) => this.claimTables.take(take),
    free: (claimIds) =>
      this.runWrite(async (batch) => {
        const freed = await this.claimTables.free(batch, claimIds);
        return { value: freed.length, changes: freed };
      }),
    forget: (claimId) => this.claimTables.forget(claimId),
    freeExpired: async () => {
      const expired = await this.claimTables.expiredHolders(expiredHoldersPerSweep);
      if (expired.length === 0) return 0;
      return this.runWrite(async (batch) => {
        const freed = await this.claimTables.freeExpired(batch, expired);
        return { value: freed.length, changes: freed };
      });
    },
    removeSettled: (limit) => this.claimTables.removeSettled(limit),
  };

  /**
   * One bounded retention step under the clock lock, so it is ordered with every other write: events
   * older than the cutoff, then each namespace's oldest beyond `maxEvents` (each session's watermark raised to
   * what it loses, in the same statement), untouched cursors, and feed rows no replica needs any more.
   */
  pruneStep(policy: RetentionPolicy): Promise<PruneStep> {
    return this.runWrite(async (batch) => {
      // Each statement of the step walks an index in its order and stops at its LIMIT, so a step costs the
      // rows it removes. The planner could prefer to scan a whole table (with statistics that lag a bulk
      // load, or a LIMIT it expects to fill early: at 100,000 events, 10 ms a statement): for this step's
      // statements, it may not.
      batch.send(sql`SET LOCAL enable_seqscan = off`);
      batch.send(sql`SET LOCAL enable_bitmapscan = off`);
      let eventsRemoved = await batch.removeEvents(this.events.removeChosen(eventPruneChoices.olderThan(policy.cutoffMs, policy.maxRowsPerStep)));
      const counts = pruneNeedsCounts(policy, eventsRemoved) ? await this.namespaces.overEventCap(batch, policy.maxEvents) : [];
      for (const { namespace, count } of planNamespaceTrim(counts, policy, eventsRemoved)) {
        eventsRemoved += await batch.removeEvents(this.events.removeChosen(eventPruneChoices.oldestOf(namespace, count)));
      }
      const removed = await batch.removeCursors(this.cursors.removeUntouched(policy.cutoffMs, pruneCursorBudget(policy, eventsRemoved)));
      batch.send(this.clock.removeOld(this.options.nowMs() - pairChangesKeptMs, policy.maxRowsPerStep));
      batch.send(sql`SET LOCAL enable_seqscan TO DEFAULT`);
      batch.send(sql`SET LOCAL enable_bitmapscan TO DEFAULT`);
      // Which sessions lost events or had their watermark raised is not read back: every answer may have changed.
      if (eventsRemoved > 0) batch.everySessionChanged();
      return { value: pruneStepOutcome(policy, eventsRemoved, removed.length), changes: pairChangesFromRemoved(removed) };
    });
  }

  /** Nothing runs behind PostgreSQL's writes that a long series of them could outrun. */
  async catchUpBackground(): Promise<void> {}

  /** The size of the schema's tables and indexes, as `db`. */
  async databaseBytes(): Promise<[string, number][]> {
    const [row] = await this.db.query<{ bytes: number }>(sql`
      SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::int8 AS bytes
      FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
      WHERE n.nspname = ${this.options.schema} AND c.relkind = 'r'`);
    return [["db", row!.bytes]];
  }

  /**
   * Closes the store within about `timeoutMs` whatever the database does: writes in flight settle (each
   * has the round-trip deadline, and none waits while the database is away), the feed stops, and every
   * connection is ended, or destroyed if it does not end in time.
   */
  async close(timeoutMs = 2500): Promise<void> {
    const stopByMs = performance.now() + timeoutMs;
    const remainingMs = (): number => Math.max(0, stopByMs - performance.now());
    // A database that does not answer gets no goodbye: its connections are destroyed at once, which fails
    // whatever still waits on them. One that answers lets the writes in flight settle first.
    const reachable = this.db.isReachable;
    const closing = reachable ? undefined : this.db.close(0);
    const feedStopped = this.feed?.stop();
    await settleWithin(remainingMs(), Promise.all([this.groupCommit.idle(), reachable ? feedStopped : undefined]));
    this.listeners.clear();
    this.gapListeners.clear();
    await (closing ?? this.db.close(remainingMs()));
  }
}
