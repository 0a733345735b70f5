import type { Clock } from "../clock.js";
import { SerialQueue } from "../serial-queue.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { Store } from "../store/store.js";
import type { LinkRecord } from "../domain/records.js";
import { isLocalTranscript, scanCommitFromFinding } from "../domain/upstream-link.js";
import type { SessionActivity } from "./session-activity.js";
import { LocalScanner, type LocalScanSettings, type RowClass } from "./local-scan.js";

/** Monitor settings: those of its local scans. */
export type MonitorSettings = LocalScanSettings;

/** What one tick did. */
export interface TickReport {
  linksScanned: number;
  eventsRecorded: number;
  /** Links whose marker waits at a line longer than the limit that has no newline yet. */
  linksHeld: number;
  /** Links whose scan did not finish within its deadline: their markers stay. */
  linksTimedOut: number;
  /** Links whose check failed (logged). */
  linksFailed: number;
}

/** A link's place in the map of outcomes. */
function outcomeKey(link: Pick<LinkRecord, "session">): string {
  const { namespace, agentId, key } = link.session;
  return `${namespace} ${agentId} ${key}`;
}

/** What one link's check came to, for the tick's report and the metrics. */
type LinkOutcome = "discarded" | "unclassifiable" | "timed_out" | { recorded: boolean; held: boolean; noticesOpened: number };

/** What the last check of a link came to, as ListUpstreamLinks reports it (UpstreamLink.last_scan_outcome). */
export type ScanOutcomeName = "scanned" | "recorded" | "held" | "timed_out" | "discarded" | "unclassifiable" | "failed" | "run_active";

/** Most links whose last outcome is remembered; the one checked longest ago is forgotten first. */
const maxRememberedOutcomes = 100_000;

/**
 * Watches the upstream sources of adopted sessions for direct human activity (SPEC §8). Ticks run one at
 * a time, on demand: ScanNow asks for one, and jobs/monitor-job runs them on a timer. Only local links of
 * watched sessions are read (upstream/local-scan); sessions with an active run are skipped, and a scan is
 * thrown away if a run started or the link changed while it ran (the store checks, as it commits).
 */
export class UpstreamMonitor {
  private readonly ticks = new SerialQueue();
  private readonly scanner: LocalScanner;
  private stopped = false;
  /** The last outcome of each link checked, by link (namespace, agent id, key), oldest check first. */
  private readonly outcomes = new Map<string, ScanOutcomeName>();
  /** The last tick this process ran (GetServerInfo): when it ended and what it did. */
  lastTick: (TickReport & { endedAtMs: number }) | undefined;

  constructor(
    private readonly store: Store,
    private readonly activity: SessionActivity,
    private readonly clock: Clock,
    settings: MonitorSettings,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
    /** Told of the events scans record and the notices they open (GetServerInfo's activity by minute). */
    private readonly recorded?: (namespace: string, noticesOpened: number) => void,
  ) {
    this.scanner = new LocalScanner(activity, settings, log, metrics);
  }

  /** Aborts the scans reading now (their markers stay), refuses further scans and waits for the tick to end. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.scanner.stop();
    await this.ticks.idle();
  }

  /**
   * Runs one tick after any tick in progress: over the watched links of every namespace, or of
   * `namespace` only (ScanNow scans the caller's namespace and reports on nothing else).
   */
  tick(namespace?: string): Promise<TickReport> {
    return this.ticks.run(async () => {
      const report = await this.checkWatchedLinks(namespace);
      this.lastTick = { ...report, endedAtMs: this.clock.nowMs() };
      return report;
    });
  }

  /** What this process's last check of a link came to; `undefined` when it has not checked it. */
  lastOutcome(link: Pick<LinkRecord, "session">): ScanOutcomeName | undefined {
    return this.outcomes.get(outcomeKey(link));
  }

  private remember(link: LinkRecord, outcome: ScanOutcomeName): void {
    const key = outcomeKey(link);
    this.outcomes.delete(key);
    if (this.outcomes.size >= maxRememberedOutcomes) this.outcomes.delete(this.outcomes.keys().next().value!);
    this.outcomes.set(key, outcome);
  }

  private async checkWatchedLinks(namespace: string | undefined): Promise<TickReport> {
    const report: TickReport = { linksScanned: 0, eventsRecorded: 0, linksHeld: 0, linksTimedOut: 0, linksFailed: 0 };
    this.metrics?.monitorTicks.inc();
    const count = (outcome: string): void => this.metrics?.monitorLinks.inc({ outcome });
    for (const link of await this.store.watchedLinks(namespace)) {
      if (this.stopped) break;
      if (!isLocalTranscript(link)) continue;
      try {
        if ((await this.activity.runState(link.session)).active) {
          this.remember(link, "run_active");
          continue;
        }
        const outcome = await this.checkLocalLink(link);
        if (typeof outcome === "string") this.remember(link, outcome);
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
        this.remember(link, outcome.recorded ? "recorded" : outcome.held ? "held" : "scanned");
        if (outcome.recorded) {
          report.eventsRecorded++;
          count("recorded");
          this.recorded?.(link.session.namespace, outcome.noticesOpened);
        }
        if (outcome.held) {
          report.linksHeld++;
          count("held");
        }
      } catch (err) {
        report.linksFailed++;
        this.remember(link, "failed");
        count("failed");
        this.log.error({ err, agentId: link.session.agentId }, "upstream scan failed");
      }
    }
    return report;
  }

  /** Reads a local link and commits what it found. */
  private async checkLocalLink(link: LinkRecord): Promise<LinkOutcome> {
    const read = await this.scanner.scan(link);
    if (typeof read === "string") return read;
    // The store commits only if the link is as it was read (not re-adopted, reset or deleted meanwhile) and
    // no run started since the scan began: a run writes its own turns.
    const commit = { ...scanCommitFromFinding(link, read.finding, this.clock.nowMs()), runStartsBefore: read.runStartsBefore };
    const committed = await this.store.commitScan(link, commit);
    if (!committed.committed) return "discarded";
    this.countRows(link, read.rows);
    return { recorded: committed.event !== undefined, held: read.held, noticesOpened: committed.noticesOpened ?? 0 };
  }

  /** Reports what a committed scan read, by class: the metric, and one log line when it read any row. */
  private countRows(link: LinkRecord, rows: Record<RowClass, number>): void {
    for (const [rowClass, count] of Object.entries(rows)) if (count > 0) this.metrics?.monitorRows.inc({ class: rowClass }, count);
    if (rows.human + rows.injected + rows.tool + rows.other > 0) {
      this.log.info({ agentId: link.session.agentId, catalogId: link.catalogId, rows }, "transcript rows read");
    }
  }
}
