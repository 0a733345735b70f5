import type { SessionId, SessionOrder } from "../domain/session-key.js";
import type { StoredEvent } from "../domain/event.js";
import type { RunFlag } from "../domain/run-flags.js";
import type { PairPosition, WatcherRange } from "../domain/pair-order.js";
import type {
  CursorRecord,
  CursorsRead,
  PairChange,
  AckInput,
  AckOutcome,
  LinkRecord,
  AdoptInput,
  ScanCommit,
  AppendInput,
  AppendOutcome,
  NamespaceSummary,
  SessionHead,
  SessionStatus,
  PruneStep,
  RetentionPolicy,
  WatchProvenance,
  WatchRequest,
} from "../domain/records.js";

/**
 * How durable a commit is before its write is answered. SQLite's `synchronous` setting: NORMAL survives a
 * process crash, FULL also a power loss; PostgreSQL's `synchronous_commit` follows it.
 */
export type Durability = "normal" | "full";

/** Which cursors ListWatches pages through: a namespace's, by provenance, watcher and/or target, after a (watcher, target) position. */
export interface WatchFilter {
  namespace: string;
  provenance?: WatchProvenance | undefined;
  watcherKey?: string | undefined;
  target?: SessionId | undefined;
  after?: readonly [string, string, string] | undefined;
  limit: number;
}

/** A write's result: its own value, and the pairs whose pending notice it opened, changed or closed. */
export interface WriteResult<T> {
  value: T;
  changes: PairChange[];
}

/**
 * Durable state behind the services. One method per transactional operation; every method is atomic
 * and returns a promise, so a backend that talks to a server can implement the same interface.
 * Expected outcomes are values; only real faults throw.
 */
export interface Store {
  /** Appends one event with its head bump (and its cursor updates) in one transaction. */
  append(input: AppendInput): Promise<AppendOutcome>;
  /** Reads a session's version and, when `changesSince` is given and not above it, up to `limit` events after it. */
  sessionStatus(session: SessionId, changesSince: number | undefined, limit: number): Promise<SessionStatus>;
  /**
   * A number that changes whenever the session's SessionStatus answer may change (its head or its events):
   * an answer read after the stamp holds for as long as the stamp stays the same. It changes with every
   * write the backend has heard of; see statusStampsCurrent for writes it may not have heard of yet.
   */
  statusStamp(session: SessionId): number;
  /**
   * Resolves once every stamp holds each write committed before the call, by any process: only then may an
   * answer be served for its unchanged stamp; `undefined` when they do already (SQLite: one process owns
   * the database, and its writes bump them as they commit). Rejects when that cannot be known in time.
   */
  statusStampsCurrent(): Promise<void> | undefined;
  /**
   * Sessions of a namespace with a head (of one agent, when given) in `order`, after its `after`; each page
   * a seek in an index and a read of its own rows.
   */
  listSessions(filter: { namespace: string; agentId?: string | undefined; order: SessionOrder; limit: number }): Promise<SessionHead[]>;
  /** The state version of each session, `undefined` where it has no head; same order as asked. */
  getStateVersions(sessions: readonly SessionId[]): Promise<(number | undefined)[]>;
  /** Removes a session's events, head, upstream link, run flag, own texts and cursors in both directions. */
  deleteSession(session: SessionId): Promise<{ eventsRemoved: number; cursorsRemoved: number; linkRemoved: boolean }>;
  /**
   * Registers `watcherKey` (agent-qualified, not the target itself) on `target` as `request` asks (explicit,
   * with no extra kinds, by default): see domain/cursor-rules' watchCursor for what happens to an existing pair.
   */
  watch(watcherKey: string, target: SessionId, nowMs: number, request?: WatchRequest): Promise<CursorRecord>;
  /** Removes a pair's cursor; true when there was one. */
  unwatch(watcherKey: string, target: SessionId): Promise<boolean>;
  /** A page of a namespace's cursors, filtered by watcher and/or target, ordered by (watcher, target), strictly after `after`. */
  listWatches(filter: WatchFilter): Promise<CursorRecord[]>;
  /**
   * Removes every cursor a watcher of `namespace` holds; returns how many. The watcher's own upstream link,
   * if it has one, gets a later update time, so a scan of it in flight is discarded (SPEC §12.4).
   */
  resetWatcher(namespace: string, watcherKey: string, nowMs: number): Promise<number>;
  /** The cursors of the pairs that have one, read in one snapshot, in no particular order, with the change number it reflects. */
  getCursors(pairs: readonly PairChange[]): Promise<CursorsRead>;
  /**
   * Up to `limit` pending cursors of `namespace` whose watcher key is in `range`, strictly after `after` in
   * pair order (domain/pair-order), in that order, read in one snapshot with the change number it reflects:
   * an index seek, so a page costs its own rows whatever else is pending.
   */
  pendingPage(namespace: string, range: WatcherRange, after: PairPosition | undefined, limit: number): Promise<CursorsRead>;
  /** Applies acknowledgements in order, in one transaction; one outcome per ack. */
  ackNotices(acks: readonly AckInput[], nowMs: number): Promise<AckOutcome[]>;
  /**
   * Subscribes to the feed of pairs whose pending notice opened, changed or closed, delivered after the
   * change is durable, each commit's pairs with its change number: in number order, except that this
   * process's own commits may come before lower numbers of other processes' that it has not read yet.
   * Listeners read the notice itself from the store. Returns the unsubscribe function.
   */
  onPairChanges(listener: (changes: readonly PairChange[], changeNumber: number) => void): () => void;
  /**
   * The change number up to which every pair change has been handed to the feed's listeners: no change
   * numbered this low or lower is still to come.
   */
  changesHeardThrough(): number;
  /**
   * Subscribes to gaps in that feed: changes it missed for good (a replica cut off from its database for
   * longer than other replicas' changes are kept). Listeners must read every pending pair again. Never
   * called on SQLite, whose feed cannot miss a change.
   */
  onFeedGap(listener: () => void): () => void;
  /**
   * Records an adoption: appends the `adopted` event (deduplicated per session) and creates the link, or
   * refreshes it when the source is the same (keeping its marker and miss streak).
   */
  adopt(input: AdoptInput): Promise<{ event: StoredEvent; link?: LinkRecord }>;
  /** The link of a session, if any. */
  getLink(session: SessionId): Promise<LinkRecord | undefined>;
  /** A page of a namespace's links ordered by (agent id, key), strictly after `after`. */
  listLinks(filter: { namespace: string; agentId?: string | undefined; after?: SessionId | undefined; limit: number }): Promise<LinkRecord[]>;
  /**
   * A hook's links (SPEC §8.2): the local transcript links of `namespace` that this replica may read whose
   * source is the transcript `path` (a real path) or, when none is or no path is given, whose thread id is
   * `threadId`. A seek in an index, whatever else is stored; at most `limit`.
   */
  hookLinks(namespace: string, lookup: { path: string | undefined; threadId: string }, limit: number): Promise<LinkRecord[]>;
  /** Links whose session is the target of at least one cursor: in `namespace`, or in every namespace. */
  watchedLinks(namespace?: string): Promise<LinkRecord[]>;
  /**
   * Applies a scan result in one transaction, if the link still equals `scanned` (same source, marker,
   * miss streak and update time) and, when the commit names the run count it began with, no run is active
   * and none started since (domain/upstream-link: isScanCommittable); otherwise changes nothing and answers
   * `committed: false`.
   */
  commitScan(scanned: LinkRecord, commit: ScanCommit): Promise<{ committed: boolean; event?: StoredEvent; noticesOpened?: number }>;
  /** Records that a run started (`true`) or ended on a session (see domain/run-flags). */
  setRunActive(session: SessionId, active: boolean, nowMs: number): Promise<void>;
  /** A session's run flag, if a gateway ever reported one. */
  runFlag(session: SessionId): Promise<RunFlag | undefined>;
  /** Adds the digest of a text the gateway sent upstream, keeping the session's newest `keep`. */
  recordOwnText(session: SessionId, digest: string, keep: number): Promise<void>;
  /** The session's remembered own-text digests, oldest first. */
  ownTextDigests(session: SessionId): Promise<string[]>;
  /** The size of the stored state by file (SQLite: `db` and `wal`; PostgreSQL: the schema as `db`), in bytes. */
  databaseBytes(): Promise<ReadonlyArray<readonly [file: string, bytes: number]>>;
  /** How many pairs have a pending notice. */
  countPendingNotices(): Promise<number>;
  /**
   * The namespaces that hold a session or a cursor, by name, strictly after `after`; only those in `only`
   * when given. Their counts are kept as the data changes: nothing here counts a table.
   */
  listNamespaces(filter: { after?: string | undefined; only?: readonly string[] | undefined; limit: number }): Promise<NamespaceSummary[]>;
  /**
   * Takes or renews the lease of `job` (a job that runs on one replica at a time) for `holder` for
   * `ttlMs`; true while `holder` holds it. A lease not renewed in time passes to the next who asks.
   */
  tryLease(job: string, holder: string, ttlMs: number): Promise<boolean>;
  /** Runs one bounded retention step. */
  pruneStep(policy: RetentionPolicy): Promise<PruneStep>;
  /**
   * Resolves once the store's background work has caught up with its writes, or after `limitMs`: a long
   * series of writes (a retention pass) waits for it between steps, so that it never outruns that work.
   * SQLite: the write-ahead log, copied back by the checkpointer, has started over (it never does under
   * writes without a pause, and at its bound the serving thread would copy it itself). At once where
   * there is no such work (PostgreSQL).
   */
  catchUpBackground(limitMs: number): Promise<void>;
  /** Closes the store, checkpointing its journal. */
  close(): Promise<void>;
}

/**
 * Hears how long each write transaction of a store took, for the metrics: where a write's time goes
 * between its arrival and its answer (SPEC §11's bounds; what stalls a notice).
 */
export interface CommitObserver {
  /**
   * A transaction of `writes` writes committed `seconds` after it began; its oldest write had waited
   * `waitedSeconds` in the store's queue before that.
   */
  committed(seconds: number, writes: number, waitedSeconds: number): void;
}

/** A consumer group's claim on a pair's pending notice as the shared ledger holds it (SPEC §6.1 across replicas). */
export interface ClaimRow {
  group: string;
  pair: PairChange;
  /** The notice claimed (N). */
  notified: number;
  deliveryCount: number;
  /** The compare-and-set token of the next take. */
  generation: number;
  /** The member holding it, when one does and its incarnation is alive; with its address. */
  holder?: string;
  peer?: string;
}

/** A take of a claim: the row as it must still be, and what it becomes. */
export interface ClaimTake {
  group: string;
  pair: PairChange;
  /** The row's generation as read; undefined: there was no row. */
  expectedGeneration: number | undefined;
  notified: number;
  deliveryCount: number;
  claimId: string;
  holder: string;
  incarnation: string;
  peer: string;
}

/**
 * The claims of consumer groups that every replica sees (PostgreSQL). Claims are held by members of an
 * incarnation of a replica, which is alive while it renews its row in time; a take succeeds only for a
 * live incarnation and a row unchanged since it was read. Freeing claims is a write whose pairs reach the
 * group's members on every replica through the feed.
 */
export interface ClaimLedger {
  startHolder(incarnation: string, ttlMs: number): Promise<void>;
  /** False when the incarnation had expired: it never lives again. */
  renewHolder(incarnation: string, ttlMs: number): Promise<boolean>;
  endHolder(incarnation: string): Promise<void>;
  read(namespace: string, group: string, pairs: readonly PairChange[]): Promise<ClaimRow[]>;
  /** Held claims of the pairs in every group (Cursor.claimed_by). */
  heldOf(pairs: readonly PairChange[]): Promise<ClaimRow[]>;
  /** Takes the claims whose rows are as read and whose notices are still pending, for a live incarnation, at once: the ids taken. */
  take(takes: readonly ClaimTake[]): Promise<Set<string>>;
  /** Frees claims by id and tells their groups' members; the number freed. */
  free(claimIds: readonly string[]): Promise<number>;
  /** Forgets a claim whose notice is no longer pending as claimed. */
  forget(claimId: string): Promise<void>;
  /** Frees the claims of expired incarnations (up to a bound) and tells their groups' members; the number freed. */
  freeExpired(): Promise<number>;
  /** Removes up to `limit` rows of notices acknowledged while nobody held them. */
  removeSettled(limit: number): Promise<number>;
}
