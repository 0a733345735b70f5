/**
 * One plan per write (SPEC §3, §8, §10): what a backend writes, decided from what it has read. Each
 * backend method is read → plan → write; the plans compose the rules of write-rules and hold the few
 * decisions that are not about cursors (the prune order, own-text trimming, which replica scans a link,
 * where a page starts). Pure: no I/O, no clock.
 */
import type { EventEncoder, StoredEvent } from "./event.js";
import type { AdoptInput, AppendInput, AppendOutcome, CursorRecord, LinkRecord, PairChange, PruneStep, RetentionPolicy, ScanCommit } from "./records.js";
import type { RunFlag } from "./session-activity.js";
import type { SessionId } from "./session-key.js";
import { cursorEffectsOfEvent, eventOfAppend, isAppendGated, isScanCommittable, linkOfAdoption } from "./write-rules.js";

// ---- append ----

/** What an append's plan needs read: the retained event holding its dedupe key, and its target's cursors. */
export interface AppendReads {
  /** The event already holding the append's dedupe key, with its session's version now; absent when none. */
  duplicate?: { event: StoredEvent; stateVersion: number } | undefined;
  /** Every cursor on the append's session (empty when `appendNeedsTargetCursors` is false). */
  cursorsOnTarget: readonly CursorRecord[];
}

/**
 * An append's plan: answer with the event already recorded under its dedupe key, answer that the gate
 * held (the backend adds the session's version), or record `event` and write `cursorWrites`.
 */
export type AppendPlan =
  | { action: "deduplicated"; outcome: AppendOutcome & { recorded: true } }
  | { action: "gated" }
  | { action: "record"; event: StoredEvent; cursorWrites: CursorRecord[]; outcome: AppendOutcome & { recorded: true }; changes: PairChange[] };

/**
 * Plans an append (SPEC §3, §5): a dedupe hit answers with the recorded event; the `only_if_watched` gate
 * may stop it; otherwise the event takes the next sequence (`takeSequence` is called only then, so a gated
 * or deduplicated append never consumes one) and its cursor effects follow.
 */
export function planAppend(input: AppendInput, reads: AppendReads, takeSequence: () => number, encode: EventEncoder): AppendPlan {
  if (reads.duplicate !== undefined) {
    const { event, stateVersion } = reads.duplicate;
    return { action: "deduplicated", outcome: { recorded: true, deduplicated: true, event, stateVersion, noticesOpened: 0 } };
  }
  if (isAppendGated(input, reads.cursorsOnTarget)) return { action: "gated" };
  const fields = eventOfAppend(input, takeSequence());
  const event: StoredEvent = { ...fields, wire: encode(fields) };
  const effects = cursorEffectsOfEvent(event, input, reads.cursorsOnTarget);
  return {
    action: "record",
    event,
    cursorWrites: effects.cursorWrites,
    outcome: { recorded: true, deduplicated: false, event, stateVersion: event.sequence, noticesOpened: effects.noticesOpened },
    changes: effects.pairChanges,
  };
}

// ---- adopt ----

/** The link sources (SPEC §8): a transcript file on the adopting host, or a paired node's thread. */
export const fileSourcePrefix = "file:";
export const nodeSourcePrefix = "node:";

/**
 * True when a link's source is a file on the host that adopted it: only that host (on replicas, that
 * node id) can scan it.
 */
export function isLocalTranscript(link: Pick<LinkRecord, "source">): boolean {
  return link.source.startsWith(fileSourcePrefix);
}

/**
 * What an adoption (SPEC §8) answers and which link it writes, once its `adopted` event is appended: the
 * event, and the link unless the adoption declined one. An adopted event names no gate, so it is always
 * recorded; anything else is a programming error.
 */
export function planAdoption(
  appended: AppendOutcome,
  existing: LinkRecord | undefined,
  input: AdoptInput,
): { event: StoredEvent; link?: LinkRecord } {
  if (!appended.recorded) throw new Error("an adopted event is never gated");
  return input.link === undefined ? { event: appended.event } : { event: appended.event, link: linkOfAdoption(existing, input.link) };
}

// ---- scan commit ----

/** A scan commit's plan: discard it, or append its event (if any) and remove the link or record the scan. */
export type ScanCommitPlan =
  | { action: "discard" }
  | { action: "commit"; append?: AppendInput; link: "remove" | { marker: string; missedChecks: number; scannedAtMs: number } };

/** Plans a scan's commit (SPEC §8, §12.4) from the link and run flag as they are now. */
export function planScanCommit(current: LinkRecord | undefined, scanned: LinkRecord, commit: ScanCommit, runFlag: RunFlag | undefined): ScanCommitPlan {
  if (!isScanCommittable(current, scanned, commit, runFlag)) return { action: "discard" };
  const link = commit.removeLink === true ? "remove" : { marker: commit.marker, missedChecks: commit.missedChecks, scannedAtMs: commit.nowMs };
  return commit.event === undefined ? { action: "commit", link } : { action: "commit", append: commit.event, link };
}

/** What a committed scan answers: its event when the append recorded one. */
export function scanCommitOutcome(appended: AppendOutcome | undefined): { committed: true; event?: StoredEvent } {
  return appended?.recorded === true ? { committed: true, event: appended.event } : { committed: true };
}

// ---- retention ----

/** A namespace's retained event count. */
export interface NamespaceCount {
  namespace: string;
  n: number;
}

/**
 * The second stage of a prune step (SPEC §10, §12.1): after `removedSoFar` events older than the cutoff,
 * how many of each namespace's oldest events go so that no namespace keeps more than `maxEvents`, within
 * what is left of the step's rows. Namespaces are taken in the order given; none is taken once the step
 * is full. Each namespace's log is bounded on its own, so one busy gateway never prunes another's.
 */
export function planNamespaceTrim(counts: readonly NamespaceCount[], policy: RetentionPolicy, removedSoFar: number): { namespace: string; count: number }[] {
  const plan: { namespace: string; count: number }[] = [];
  let budget = policy.maxRowsPerStep - removedSoFar;
  for (const { namespace, n } of counts) {
    const count = Math.min(n - policy.maxEvents, budget);
    if (count <= 0) continue;
    plan.push({ namespace, count });
    budget -= count;
  }
  return plan;
}

/** True when a prune step must read the namespaces' counts: the age stage left room in the step. */
export function pruneNeedsCounts(policy: RetentionPolicy, eventsRemoved: number): boolean {
  return eventsRemoved < policy.maxRowsPerStep;
}

/** How many untouched cursors the step may remove after its events (the third stage). */
export function pruneCursorBudget(policy: RetentionPolicy, eventsRemoved: number): number {
  return Math.max(0, policy.maxRowsPerStep - eventsRemoved);
}

/** What a prune step answers: it is done when it removed fewer rows than it could. */
export function pruneStepOutcome(policy: RetentionPolicy, eventsRemoved: number, cursorsRemoved: number): PruneStep {
  return { eventsRemoved, cursorsRemoved, done: eventsRemoved + cursorsRemoved < policy.maxRowsPerStep };
}

/**
 * The prune watermarks to raise before events go (SPEC §10: `history_gap` is exact): for each session that
 * loses events, the highest sequence it loses.
 */
export function pruneWatermarks<S>(removed: readonly { sessionId: S; sequence: number }[]): Map<S, number> {
  const marks = new Map<S, number>();
  for (const row of removed) marks.set(row.sessionId, Math.max(marks.get(row.sessionId) ?? 0, row.sequence));
  return marks;
}

// ---- own texts ----

/**
 * Where a new own-text digest goes and what is trimmed: it takes the position after the newest, and only
 * the newest `keep` are kept (positions at or below `trimThrough` go).
 */
export function planOwnText(newestPosition: number, keep: number): { position: number; trimThrough: number } {
  const position = newestPosition + 1;
  return { position, trimThrough: position - keep };
}

// ---- paging ----

/**
 * Where a page of sessions (or links) ordered by (agent id, key) starts, strictly after: a page of every
 * agent continues after the last (agent id, key); a page of one agent continues after the last key only
 * when that key was this agent's, and starts from the agent's first key otherwise.
 */
export function sessionPageStart(agentId: string | undefined, after: SessionId | undefined): { agentId: string; key: string } {
  if (agentId === undefined) return { agentId: after?.agentId ?? "", key: after?.key ?? "" };
  return { agentId, key: after !== undefined && after.agentId === agentId ? after.key : "" };
}
