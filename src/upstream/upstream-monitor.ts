import { createHash } from "node:crypto";
import { stat } from "node:fs/promises";
import type { Clock } from "../clock.js";
import { SerialQueue } from "../serial-queue.js";
import { ServiceError } from "../errors.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import { clampEventTime, type EventPayload, type StoredEvent } from "../domain/event.js";
import type { SessionId } from "../domain/session-key.js";
import type { Store } from "../store/store.js";
import type { AppendInput, LinkRecord, ScanCommit } from "../domain/records.js";
import { fileSourcePrefix, isLocalTranscript, nodeSourcePrefix } from "../domain/write-plans.js";
import type { SessionActivity } from "./session-activity.js";
import type { SkimResult } from "./json-skim.js";
import { classifierForCatalog, classifyLine, classifySkimmed, knownCatalogIds, readFirstRow, skimmingSink } from "./transcript-catalogs.js";
import { type LongLineSink, readCompleteLines } from "./transcript-reader.js";
import { isSyntheticText, type NonHumanClass, type RowClassifier, type RowContext, type RowVerdict } from "./transcript-rows.js";

/** The classes of transcript rows the monitor counts. */
type RowClass = "human" | NonHumanClass;

/** Consecutive definite misses after which a link's source counts as gone. */
export const missesBeforeGone = 3;
/** Most items one paired-node report may hold. */
export const maxRemoteItems = 50;

/** How long one link's scan may read before it is abandoned for the tick (SPEC §12.4). */
export const defaultScanTimeoutMs = 45_000;
/** The abort reason of a scan past its deadline (any other abort is a stop). */
const scanTimedOut = Symbol("scan timed out");

/** What one link's scan came to. */
type ScanOutcome = "discarded" | "unclassifiable" | "timed_out" | { recorded: boolean; held: boolean };

/** What reading a local link found, before anything is committed. */
interface LocalRead {
  finding: ScanFinding;
  rows: Record<RowClass, number>;
  held: boolean;
  /** The session's run count when the scan began: the commit checks that no run started since. */
  runStartsBefore: number;
}

/** `work`, or a rejection with the signal's reason as soon as it aborts (what `work` does then is left to it). */
function abortable<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}

/** Monitor settings. */
export interface MonitorSettings {
  maxLineBytes: number;
  syntheticPrefixes: readonly string[];
  /** How long one link's scan may read (default 45 s); past it the link waits for the next tick. */
  scanTimeoutMs?: number;
}

/** What one tick did. */
export interface TickReport {
  linksScanned: number;
  eventsRecorded: number;
  /** Links whose marker waits at a line longer than the limit that has no newline yet. */
  linksHeld: number;
  /** Links whose scan did not finish within its deadline: their markers stay. */
  linksTimedOut: number;
}

/** One item of a paired-node thread, newest first in a report. */
export interface RemoteItem {
  uuid: string;
  kind: "user_message" | "agent_message" | "tool" | "other" | "unspecified";
  text: string;
  occurredAtMs?: number;
}

/** What a check of one link found. */
type ScanFinding =
  | { kind: "read"; marker: string; humanTurns: number; newestHumanAtMs: number }
  | { kind: "gone" }
  | { kind: "inconclusive" };

function dedupeKeyOf(...parts: string[]): string {
  return `upstream:${createHash("sha256").update(parts.join("\u0000"), "utf8").digest("hex")}`;
}

/**
 * Watches the upstream sources of adopted sessions for direct human activity (SPEC §8). Ticks run one at
 * a time, on demand: ScanNow asks for one, and jobs/monitor-job runs them on a timer. Only
 * links of watched sessions are read; sessions with an active run are skipped, and a scan is thrown away
 * if a run started or the link changed while it ran.
 */
export class UpstreamMonitor {
  private readonly ticks = new SerialQueue();
  private stopped = false;
  /** Links already reported as having no classifier (once per process, not once per tick). */
  private readonly warnedUnclassifiable = new Set<string>();
  /** Scans reading now: a stop aborts them. */
  private readonly scansInFlight = new Set<AbortController>();

  constructor(
    private readonly store: Store,
    private readonly activity: SessionActivity,
    private readonly clock: Clock,
    private readonly settings: MonitorSettings,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
  ) {}

  /** Aborts the scans reading now (their markers stay), refuses further scans and waits for the tick to end. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const scan of this.scansInFlight) scan.abort();
    await this.ticks.idle();
  }

  /**
   * Runs one tick after any tick in progress: over the watched links of every namespace, or of
   * `namespace` only (ScanNow scans the caller's namespace and reports on nothing else).
   */
  tick(namespace?: string): Promise<TickReport> {
    return this.ticks.run(() => this.scanWatchedLinks(namespace));
  }

  private async scanWatchedLinks(namespace: string | undefined): Promise<TickReport> {
    const report: TickReport = { linksScanned: 0, eventsRecorded: 0, linksHeld: 0, linksTimedOut: 0 };
    this.metrics?.monitorTicks.inc();
    const count = (outcome: string): void => this.metrics?.monitorLinks.inc({ outcome });
    for (const link of await this.store.watchedLinks(namespace)) {
      if (this.stopped) break;
      if (!isLocalTranscript(link)) continue;
      try {
        if ((await this.activity.runState(link.session)).active) continue;
        const outcome = await this.scanLocalLink(link);
        if (outcome === "discarded" || outcome === "unclassifiable") {
          count(outcome);
          continue;
        }
        if (outcome === "timed_out") {
          report.linksTimedOut++;
          count(outcome);
          continue;
        }
        report.linksScanned++;
        count("scanned");
        if (outcome.recorded) {
          report.eventsRecorded++;
          count("recorded");
        }
        if (outcome.held) {
          report.linksHeld++;
          count("held");
        }
      } catch (err) {
        count("failed");
        this.log.error({ err, agentId: link.session.agentId }, "upstream scan failed");
      }
    }
    return report;
  }

  private async scanLocalLink(link: LinkRecord): Promise<ScanOutcome> {
    const classifier = this.classifierOf(link);
    if (classifier === undefined) return "unclassifiable";
    const read = await this.readWithinDeadline(link, classifier);
    if (read === "timed_out" || read === "discarded") return read;
    // The store commits only if the link is as it was read (not re-adopted, reset or deleted meanwhile) and
    // no run started since the scan began: a run writes its own turns.
    const commit: ScanCommit = { ...this.commitOf(link, read.finding), runStartsBefore: read.runStartsBefore };
    const committed = await this.store.commitScan(link, commit);
    if (!committed.committed) return "discarded";
    this.countRows(link, read.rows);
    return { recorded: committed.event !== undefined, held: read.held };
  }

  /**
   * The classifier of a local link's catalog. A link adopted before adoption checked catalogs may have
   * none: it is never read with another catalog's rules (warned once per source).
   */
  private classifierOf(link: LinkRecord): RowClassifier | undefined {
    const classifier = classifierForCatalog(link.catalogId);
    if (classifier === undefined && !this.warnedUnclassifiable.has(link.source)) {
      this.warnedUnclassifiable.add(link.source);
      this.log.warn({ agentId: link.session.agentId, catalogId: link.catalogId, known: knownCatalogIds }, "no transcript classifier for this link's catalog: not scanned");
    }
    return classifier;
  }

  /**
   * Reads a local link within the scan deadline: `timed_out` past it (the marker stays for the next tick),
   * `discarded` when a stop aborted it. Committing, once begun, is left to finish.
   */
  private async readWithinDeadline(link: LinkRecord, classifier: RowClassifier): Promise<LocalRead | "timed_out" | "discarded"> {
    const timeoutMs = this.settings.scanTimeoutMs ?? defaultScanTimeoutMs;
    const abort = new AbortController();
    this.scansInFlight.add(abort);
    const timer = setTimeout(() => abort.abort(scanTimedOut), timeoutMs);
    timer.unref();
    try {
      return await abortable(this.readLocalLink(link, classifier, abort.signal), abort.signal);
    } catch (err) {
      if (abort.signal.reason === scanTimedOut) {
        this.log.warn({ agentId: link.session.agentId, catalogId: link.catalogId, timeoutMs }, "upstream scan timed out: its marker stays for the next tick");
        return "timed_out";
      }
      if (abort.signal.aborted) return "discarded"; // stopping
      throw err;
    } finally {
      clearTimeout(timer);
      this.scansInFlight.delete(abort);
    }
  }

  /** Reads a local link from its marker to the last complete line (stops when `signal` aborts). */
  private async readLocalLink(link: LinkRecord, classifier: RowClassifier, signal: AbortSignal): Promise<LocalRead> {
    const runStartsBefore = (await this.activity.runState(link.session)).starts;
    const isOwnEcho = await this.activity.ownEchoTest(link.session);
    const path = link.source.slice(fileSourcePrefix.length);
    const offset = Number(link.marker);
    const rows: Record<RowClass, number> = { human: 0, injected: 0, tool: 0, other: 0 };
    let finding: ScanFinding;
    let held = false;
    try {
      const info = await stat(path);
      if (!info.isFile()) {
        finding = { kind: "inconclusive" };
      } else if (info.size <= offset) {
        finding = { kind: "read", marker: link.marker, humanTurns: 0, newestHumanAtMs: 0 };
      } else {
        let humanTurns = 0;
        let newestHumanAtMs = Number.NEGATIVE_INFINITY;
        const take = (verdict: RowVerdict): void => {
          if (!verdict.human) {
            rows[verdict.rowClass]++;
            return;
          }
          // The gateway's own text coming back is something it injected, not a person acting. A text cut
          // while skimming is longer than any text a gateway records as its own.
          if (!verdict.textCut && isOwnEcho(verdict.text)) {
            rows.injected++;
            return;
          }
          rows.human++;
          humanTurns++;
          newestHumanAtMs = Math.max(newestHumanAtMs, verdict.timestampMs ?? info.mtimeMs);
        };
        const context: RowContext = { syntheticPrefixes: this.settings.syntheticPrefixes };
        if (classifier.readsFirstRow) context.firstRow = await readFirstRow(path, this.settings.maxLineBytes);
        const read = await readCompleteLines(
          path,
          offset,
          this.settings.maxLineBytes,
          {
            line: (bytes) => take(classifyLine(classifier, bytes, context)),
            longLine: () => this.skimLongLine(link, (skimmed) => take(classifySkimmed(classifier, skimmed, context))),
          },
          Number.POSITIVE_INFINITY,
          signal,
        );
        if (read.longLineWaitingAt !== undefined) held = true;
        finding = { kind: "read", marker: String(read.endOffset), humanTurns, newestHumanAtMs };
      }
    } catch (err) {
      if (signal.aborted) throw err;
      if ((err as NodeJS.ErrnoException).code === "ENOENT") {
        finding = { kind: "gone" };
      } else {
        this.log.warn({ err, agentId: link.session.agentId }, "upstream check inconclusive");
        finding = { kind: "inconclusive" };
      }
    }
    return { finding, rows, held, runStartsBefore };
  }

  /** The first row of a local transcript, parsed (`undefined` when unreadable): for adoption's checks. */
  firstRowOf(path: string): Promise<unknown> {
    return readFirstRow(path, this.settings.maxLineBytes);
  }

  /**
   * Streams a line longer than `--max-line-bytes` through the skimmer (bounded memory), then hands what
   * it gave to `done`. Counted and logged: such lines are rare and slow to read.
   */
  private skimLongLine(link: LinkRecord, done: (skimmed: SkimResult) => void): LongLineSink {
    let bytes = 0;
    const inner = skimmingSink((skimmed) => {
      this.metrics?.monitorLongLines.inc({ outcome: "value" in skimmed ? "classified" : skimmed.unreadable });
      this.log.info(
        { agentId: link.session.agentId, bytes, maxLineBytes: this.settings.maxLineBytes, ...("value" in skimmed ? {} : { unreadable: skimmed.unreadable }) },
        "transcript line longer than the limit: classified by streaming",
      );
      done(skimmed);
    });
    return {
      write: (piece) => {
        bytes += piece.length;
        return inner.write(piece);
      },
      end: () => inner.end(),
    };
  }

  /** Reports what a committed scan read, by class: the metric, and one log line when it read any row. */
  private countRows(link: LinkRecord, rows: Record<RowClass, number>): void {
    for (const [rowClass, count] of Object.entries(rows)) if (count > 0) this.metrics?.monitorRows.inc({ class: rowClass }, count);
    if (rows.human + rows.injected + rows.tool + rows.other > 0) {
      this.log.info({ agentId: link.session.agentId, catalogId: link.catalogId, rows }, "transcript rows read");
    }
  }

  /** Turns a finding into the durable change: an event (if any), the new marker and the miss streak. */
  private commitOf(link: LinkRecord, finding: ScanFinding): ScanCommit {
    const nowMs = this.clock.nowMs();
    switch (finding.kind) {
      case "read": {
        const commit: ScanCommit = { marker: finding.marker, missedChecks: 0, nowMs };
        if (finding.humanTurns > 0) {
          const payload: EventPayload = { catalogId: link.catalogId };
          if (link.hostId !== "") payload.hostId = link.hostId;
          if (finding.humanTurns > 1) payload.turns = finding.humanTurns;
          commit.event = this.eventFor(link, {
            kind: "human_direct_message",
            actorType: "human",
            summary: `human message via ${link.catalogId}`,
            occurredAtMs: clampEventTime(finding.newestHumanAtMs, nowMs),
            payload,
            dedupeKey: dedupeKeyOf(link.session.agentId, link.session.key, link.source, finding.marker),
            nowMs,
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
          event: this.eventFor(link, {
            kind: "upstream_missing",
            actorType: "system",
            summary: `upstream missing via ${link.catalogId}`,
            occurredAtMs: nowMs,
            payload: { catalogId: link.catalogId, ...(link.hostId === "" ? {} : { hostId: link.hostId }) },
            dedupeKey: dedupeKeyOf("missing", link.session.agentId, link.session.key, link.source, String(link.updatedAtMs)),
            nowMs,
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

  private eventFor(
    link: LinkRecord,
    event: Omit<AppendInput, "session" | "notifyWatcherKeys" | "onlyIfWatched">,
  ): AppendInput {
    return { ...event, session: link.session, notifyWatcherKeys: [], onlyIfWatched: false };
  }

  /**
   * Classifies a page of a paired-node thread (newest first): the items newer than the link's marker that
   * are user messages, not synthetic and not the gateway's own echo, are human turns. Records them like a
   * local scan and moves the marker to the newest item. A page whose newest item has no uuid, or a
   * session with an active run, changes nothing. FAILED_PRECONDITION when the session has no paired-node link.
   */
  async reportRemoteItems(session: SessionId, items: readonly RemoteItem[]): Promise<{ humanTurns: number; event?: StoredEvent }> {
    const link = await this.store.getLink(session);
    if (link === undefined || !link.source.startsWith(nodeSourcePrefix)) {
      throw new ServiceError("FAILED_PRECONDITION", "session: has no paired-node upstream link (adopt it with paired_node first)");
    }
    const newest = items[0];
    const run = await this.activity.runState(session);
    if (newest === undefined || newest.uuid === "" || run.active) return { humanTurns: 0 };
    const isOwnEcho = await this.activity.ownEchoTest(session);
    const seen = items.findIndex((item) => item.uuid === link.marker);
    const fresh = seen === -1 ? items : items.slice(0, seen);
    const nowMs = this.clock.nowMs();
    const human = fresh.filter(
      (item) =>
        item.kind === "user_message" &&
        !isSyntheticText(item.text, this.settings.syntheticPrefixes) &&
        !isOwnEcho(item.text),
    );
    const newestHumanAtMs = Math.max(...human.map((item) => item.occurredAtMs ?? nowMs));
    const committed = await this.store.commitScan(link, {
      ...this.commitOf(link, { kind: "read", marker: newest.uuid, humanTurns: human.length, newestHumanAtMs }),
      runStartsBefore: run.starts,
    });
    if (!committed.committed) throw new ServiceError("UNAVAILABLE", "the upstream link changed during the report; retry");
    return committed.event === undefined ? { humanTurns: human.length } : { humanTurns: human.length, event: committed.event };
  }
}
