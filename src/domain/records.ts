/**
 * The records of the domain: what the services hand to a store and what a store gives back. Plain data,
 * shared by every backend, the rule functions and the services; nothing here does I/O.
 */
import type { ActorType, EventKind, EventPayload, ExtraMaterialKind, StoredEvent } from "./event.js";
import type { SessionId } from "./session-key.js";
import type { LinkSource } from "./upstream-link.js";

/**
 * How a watcher came to watch (SPEC §12.2): `explicit` (Watch, a spawn, a notifying append that names it)
 * or `ambient` (a main session following a group session its person speaks in: never woken, queue only).
 */
export type WatchProvenance = "explicit" | "ambient";

/** A watcher's cursor on a target, as stored. `acked <= notified <= material`; pending when notified > acked. */
export interface CursorRecord {
  watcherKey: string;
  target: SessionId;
  acked: number;
  notified: number;
  material: number;
  updatedAtMs: number;
  provenance: WatchProvenance;
  /** Ledger-only kinds that are material for this watcher too (explicit cursors only), in `extraMaterialKinds` order. */
  extraKinds: readonly ExtraMaterialKind[];
}

/** What a Watch asks for (SPEC §5.2, §12.2, §12.3). */
export interface WatchRequest {
  provenance: WatchProvenance;
  /** Empty for ambient watches. */
  extraKinds: readonly ExtraMaterialKind[];
}

/** A watcher/target pair whose pending notice opened, changed or closed. */
export interface PairChange {
  watcherKey: string;
  target: SessionId;
  /**
   * Set when the change is only that a consumer group's claim on the pair's pending notice ended (SPEC
   * §6.1): only that group's members are told, to offer the notice to another member.
   */
  group?: string;
}

/**
 * Cursors as one read saw them, and the change number it reflects: every pair change numbered up to
 * `through` is in what it read, and none above (a store numbers the commits that change pairs, in commit
 * order).
 */
export interface CursorsRead {
  cursors: CursorRecord[];
  through: number;
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
  /** A transcript file's resolved path, or a paired node's id. */
  source: LinkSource;
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
  /**
   * The session's run count (`starts`) when the scan began. When set, the commit happens only if no run
   * is active on the session and none started since: a run writes turns of its own.
   */
  runStartsBefore?: number;
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

/** A namespace and what it holds (ListNamespaces). */
export interface NamespaceSummary {
  name: string;
  sessions: number;
  events: number;
  watches: number;
  pendingNotices: number;
  /** When an event was last appended to one of its sessions; 0 when none was. */
  updatedAtMs: number;
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

