import type { ActorType, EventKind, EventPayload, StoredEvent } from "../model/event.js";
import type { SessionId } from "../model/session-key.js";

/** A watcher's cursor on a target, as stored. `acked <= notified <= material`; pending when notified > acked. */
export interface CursorRecord {
  watcherKey: string;
  target: SessionId;
  acked: number;
  notified: number;
  material: number;
  updatedAtMs: number;
}

/** A watcher/target pair whose pending notice opened, changed or closed. */
export interface PairChange {
  watcherKey: string;
  target: SessionId;
}

/** One validated acknowledgement. */
export interface AckInput {
  watcherKey: string;
  target: SessionId;
  notifiedVersion: number;
  reconciledThrough?: number;
}

/** What one acknowledgement did; `cursor` is absent when the pair has no cursor. */
export interface AckOutcome {
  acknowledged: boolean;
  reopened: boolean;
  cursor?: CursorRecord;
}

/** An adopted session's link to its upstream source. */
export interface LinkRecord {
  session: SessionId;
  catalogId: string;
  hostId: string;
  threadId: string;
  /** `file:<resolved path>` or `node:<node id>`. */
  source: string;
  /** A byte offset (files) or the newest item's uuid (nodes). */
  marker: string;
  /** Consecutive checks that found the source definitely gone. */
  missedChecks: number;
  lastScannedAtMs?: number;
  updatedAtMs: number;
}

/** An adoption: the `adopted` event, and the link to make (absent when the link was declined). */
export interface AdoptInput {
  adoptedEvent: AppendInput;
  link?: Omit<LinkRecord, "missedChecks" | "lastScannedAtMs">;
}

/** The durable result of one upstream check, applied only if the link is unchanged since the check began. */
export interface ScanCommit {
  marker: string;
  missedChecks: number;
  /** An event to append with it (human_direct_message or upstream_missing). */
  event?: AppendInput;
  /** Remove the link (after upstream_missing). */
  removeLink?: boolean;
  nowMs: number;
}

/** A validated, normalised event to append. Times are milliseconds since the Unix epoch. */
export interface AppendInput {
  session: SessionId;
  kind: EventKind;
  actorType: ActorType;
  actorId?: string;
  runId?: string;
  summary: string;
  /** Already clamped into [now - 24 h, now]. */
  occurredAtMs: number;
  payload: EventPayload;
  dedupeKey?: string;
  /** Normalised keys of watchers the producer names; bare keys among them are ignored. */
  notifyWatcherKeys: readonly string[];
  onlyIfWatched: boolean;
  nowMs: number;
}

/** What an append did. `stateVersion` is the version of the event's session after the call. */
export type AppendOutcome =
  | { recorded: false; stateVersion: number }
  | { recorded: true; deduplicated: boolean; event: StoredEvent; stateVersion: number; noticesOpened: number };

/** The durable head of a session: its version and prune watermark. */
export interface SessionHead {
  session: SessionId;
  stateVersion: number;
  prunedThrough: number;
  updatedAtMs: number;
  hasUpstream: boolean;
}

/** An event in wire form (StateEvent bytes), with its sequence. */
export interface EventWire {
  sequence: number;
  wire: Uint8Array;
}

/** The delta of a session after a version. */
export interface StateChanges {
  events: EventWire[];
  historyGap: boolean;
  truncated: boolean;
  /** Smallest retained sequence of the session; 0 when none is retained. */
  earliestAvailableSequence: number;
}

/** A session's status; `changes` is present when asked for and `changesSince <= stateVersion`. */
export interface SessionStatus {
  stateVersion: number;
  changes?: StateChanges;
}

/** What one bounded retention step removed; `done` when nothing is left to remove. */
export interface PruneStep {
  eventsRemoved: number;
  cursorsRemoved: number;
  done: boolean;
}

/** The retention policy applied by one prune step. */
export interface RetentionPolicy {
  /** Events that occurred before this time are removed; so are cursors untouched since it. */
  cutoffMs: number;
  /** The log keeps at most this many rows, the newest by sequence. */
  maxEvents: number;
  /** The most rows one step removes, so one step never blocks the server for long. */
  maxRowsPerStep: number;
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
  /** Sessions with a head, ordered by (agent id, key), strictly after `after`. */
  listSessions(filter: { agentId?: string; after?: SessionId; limit: number }): Promise<SessionHead[]>;
  /** The state version of each session, `undefined` where it has no head; same order as asked. */
  getStateVersions(sessions: readonly SessionId[]): Promise<(number | undefined)[]>;
  /** Removes a session's events, head, upstream link and cursors in both directions. */
  deleteSession(session: SessionId): Promise<{ eventsRemoved: number; cursorsRemoved: number; linkRemoved: boolean }>;
  /**
   * Registers `watcherKey` (agent-qualified, not the target itself) on `target` at the target's current
   * version; an existing cursor keeps its marks and has its lifetime refreshed.
   */
  watch(watcherKey: string, target: SessionId, nowMs: number): Promise<CursorRecord>;
  /** Removes a pair's cursor; true when there was one. */
  unwatch(watcherKey: string, target: SessionId): Promise<boolean>;
  /** A page of cursors, filtered by watcher and/or target, ordered by (watcher, target), strictly after `after`. */
  listWatches(filter: {
    watcherKey?: string;
    target?: SessionId;
    after?: readonly [string, string, string];
    limit: number;
  }): Promise<CursorRecord[]>;
  /** Removes every cursor a watcher holds; returns how many. */
  resetWatcher(watcherKey: string): Promise<number>;
  /** The cursor of one pair. */
  getCursor(watcherKey: string, target: SessionId): Promise<CursorRecord | undefined>;
  /** Pending cursors of the named watchers and of watchers whose key starts with one of the prefixes. */
  pendingCursors(watcherKeys: readonly string[], prefixes: readonly string[]): Promise<CursorRecord[]>;
  /** Applies acknowledgements in order, in one transaction; one outcome per ack. */
  ackNotices(acks: readonly AckInput[], nowMs: number): Promise<AckOutcome[]>;
  /**
   * Subscribes to the feed of pairs whose pending notice opened, changed or closed, delivered after the
   * change is durable. Listeners read the notice itself from the store. Returns the unsubscribe function.
   */
  onPairChanges(listener: (changes: readonly PairChange[]) => void): () => void;
  /**
   * Records an adoption: appends the `adopted` event (deduplicated per session) and creates the link, or
   * refreshes it when the source is the same (keeping its marker and miss streak).
   */
  adopt(input: AdoptInput): Promise<{ event: StoredEvent; link?: LinkRecord }>;
  /** The link of a session, if any. */
  getLink(session: SessionId): Promise<LinkRecord | undefined>;
  /** A page of links ordered by (agent id, key), strictly after `after`. */
  listLinks(filter: { agentId?: string; after?: SessionId; limit: number }): Promise<LinkRecord[]>;
  /** Links whose session is the target of at least one cursor. */
  watchedLinks(): Promise<LinkRecord[]>;
  /**
   * Applies a scan result in one transaction, if the link still equals `scanned` (same source, marker,
   * miss streak and update time); otherwise changes nothing and answers `committed: false`.
   */
  commitScan(scanned: LinkRecord, commit: ScanCommit): Promise<{ committed: boolean; event?: StoredEvent }>;
  /** How many pairs have a pending notice. */
  countPendingNotices(): Promise<number>;
  /** Runs one bounded retention step. */
  pruneStep(policy: RetentionPolicy): Promise<PruneStep>;
  /** Closes the store, checkpointing its journal. */
  close(): Promise<void>;
}
