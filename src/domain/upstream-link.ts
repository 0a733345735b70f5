/**
 * Adopted sessions' upstream links (SPEC §8, §12.4): where a link points, what an adoption leaves, and
 * when a scan's result may be committed and what it commits. Pure.
 */
import { createHash } from "node:crypto";
import type { AdoptInput, AppendOutcome, AppendInput, LinkRecord, ScanCommit } from "./records.js";
import { clampEventTime, type EventPayload, type StoredEvent } from "./event.js";
import { isRunActive, type RunFlag } from "./run-flags.js";

/**
 * Where an adopted session lives (SPEC §8): a transcript file on the host that adopted it (only that host,
 * on replicas that node id, can read it), or a thread of a paired node, which the gateway reports.
 */
export type LinkSource = { kind: "transcript"; path: string } | { kind: "paired-node"; nodeId: string };

const transcriptPrefix = "file:";
const pairedNodePrefix = "node:";

/** The text a source is stored, shown and keyed as: `file:<path>` or `node:<node id>`. */
export function linkSourceToText(source: LinkSource): string {
  switch (source.kind) {
    case "transcript":
      return `${transcriptPrefix}${source.path}`;
    case "paired-node":
      return `${pairedNodePrefix}${source.nodeId}`;
    default: {
      const never: never = source;
      throw new Error(`unknown link source ${String(never)}`);
    }
  }
}

/** The source a text of `linkSourceToText` stands for; throws on any other text (only that function writes them). */
export function linkSourceFromText(text: string): LinkSource {
  if (text.startsWith(transcriptPrefix)) return { kind: "transcript", path: text.slice(transcriptPrefix.length) };
  if (text.startsWith(pairedNodePrefix)) return { kind: "paired-node", nodeId: text.slice(pairedNodePrefix.length) };
  throw new Error("a stored link source is neither file: nor node:");
}

/** True when two sources are the same place. */
export function isSameSource(a: LinkSource, b: LinkSource): boolean {
  return linkSourceToText(a) === linkSourceToText(b);
}

/** True when a link's source is a transcript file on the host that adopted it. */
export function isLocalTranscript(link: Pick<LinkRecord, "source">): boolean {
  return link.source.kind === "transcript";
}

/**
 * The link an adoption leaves (SPEC §8): the same source (and thread) keeps its marker, miss streak and
 * last scan time; a different source starts afresh from the new source's current end.
 */
export function linkFromAdoption(existing: LinkRecord | undefined, wanted: NonNullable<AdoptInput["link"]>): LinkRecord {
  const sameSource = existing !== undefined && isSameSource(existing.source, wanted.source) && existing.threadId === wanted.threadId;
  if (!sameSource) return { ...wanted, missedChecks: 0 };
  const link: LinkRecord = { ...wanted, marker: existing.marker, missedChecks: existing.missedChecks };
  if (existing.lastScannedAtMs !== undefined) link.lastScannedAtMs = existing.lastScannedAtMs;
  return link;
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
  return input.link === undefined ? { event: appended.event } : { event: appended.event, link: linkFromAdoption(existing, input.link) };
}

/**
 * True when a scan's result may be committed (SPEC §8, §12.4): the link is as the scan read it, and, when
 * the commit says how many runs had started, no run is active on the session and none started since.
 * Otherwise the session was re-adopted, reset or deleted, another scan won, or a run wrote turns of its own.
 */
export function isScanCommittable(current: LinkRecord | undefined, scanned: LinkRecord, commit: ScanCommit, runFlag: RunFlag | undefined): boolean {
  if (!isScanCurrent(current, scanned)) return false;
  if (commit.runStartsBefore === undefined) return true;
  return !isRunActive(runFlag, commit.nowMs) && (runFlag?.starts ?? 0) === commit.runStartsBefore;
}

/**
 * The update time a link gets when its session is reset (SPEC §12.4): later than any it had, so a scan
 * that read it before the reset no longer matches it and is discarded.
 */
export function linkUpdatedAtAfterReset(link: LinkRecord, nowMs: number): number {
  return Math.max(link.updatedAtMs + 1, nowMs);
}

/**
 * True when a scan's result may be applied: the link still has the source, thread, marker, miss streak
 * and update time it had when the scan began. Otherwise someone re-adopted or another scan won.
 */
export function isScanCurrent(current: LinkRecord | undefined, scanned: LinkRecord): boolean {
  return (
    current !== undefined &&
    isSameSource(current.source, scanned.source) &&
    current.threadId === scanned.threadId &&
    current.marker === scanned.marker &&
    current.missedChecks === scanned.missedChecks &&
    current.updatedAtMs === scanned.updatedAtMs
  );
}

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
export function scanCommitOutcome(appended: AppendOutcome | undefined): { committed: true; event?: StoredEvent; noticesOpened?: number } {
  return appended?.recorded === true ? { committed: true, event: appended.event, noticesOpened: appended.noticesOpened } : { committed: true };
}

/** Consecutive definite misses after which a link's source counts as gone (SPEC §8). */
export const missesBeforeGone = 3;

/** What one check of a link found: how far it read and the human turns in it, the source gone, or nothing certain. */
export type ScanFinding =
  | { kind: "read"; marker: string; humanTurns: number; newestHumanAtMs: number }
  | { kind: "gone" }
  | { kind: "inconclusive" };

/** A dedupe key derived from a link and what a check of it found: a scan committed twice records one event. */
function scanDedupeKey(...parts: string[]): string {
  return `upstream:${createHash("sha256").update(parts.join("\u0000"), "utf8").digest("hex")}`;
}

/**
 * The durable change a finding makes (SPEC §8): after a read, the new marker, with a `human_direct_message`
 * when it found human turns; after a definite miss, the miss streak, and at the third in a row an
 * `upstream_missing` and the link's removal; after anything else, the streak reset.
 */
export function scanCommitFromFinding(link: LinkRecord, finding: ScanFinding, nowMs: number): ScanCommit {
  const source = linkSourceToText(link.source);
  const eventOnLink = (event: Omit<AppendInput, "session" | "notifyWatcherKeys" | "onlyIfWatched" | "nowMs">): AppendInput => ({
    ...event,
    session: link.session,
    notifyWatcherKeys: [],
    onlyIfWatched: false,
    nowMs,
  });
  switch (finding.kind) {
    case "read": {
      const commit: ScanCommit = { marker: finding.marker, missedChecks: 0, nowMs };
      if (finding.humanTurns > 0) {
        const payload: EventPayload = { catalogId: link.catalogId };
        if (link.hostId !== "") payload.hostId = link.hostId;
        if (finding.humanTurns > 1) payload.turns = finding.humanTurns;
        commit.event = eventOnLink({
          kind: "human_direct_message",
          actorType: "human",
          summary: `human message via ${link.catalogId}`,
          occurredAtMs: clampEventTime(finding.newestHumanAtMs, nowMs),
          payload,
          dedupeKey: scanDedupeKey(link.session.agentId, link.session.key, source, finding.marker),
        });
      }
      return commit;
    }
    case "gone": {
      const missedChecks = link.missedChecks + 1;
      if (missedChecks < missesBeforeGone) return { marker: link.marker, missedChecks, nowMs };
      return {
        marker: link.marker,
        missedChecks,
        removeLink: true,
        nowMs,
        event: eventOnLink({
          kind: "upstream_missing",
          actorType: "system",
          summary: `upstream missing via ${link.catalogId}`,
          occurredAtMs: nowMs,
          payload: { catalogId: link.catalogId, ...(link.hostId === "" ? {} : { hostId: link.hostId }) },
          dedupeKey: scanDedupeKey("missing", link.session.agentId, link.session.key, source, String(link.updatedAtMs)),
        }),
      };
    }
    case "inconclusive":
      return { marker: link.marker, missedChecks: 0, nowMs };
    default: {
      const never: never = finding;
      throw new Error(`unknown finding ${String(never)}`);
    }
  }
}
