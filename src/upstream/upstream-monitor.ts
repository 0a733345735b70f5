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
}

/** What one link's check came to, for the tick's report and the metrics. */
type LinkOutcome = "discarded" | "unclassifiable" | "timed_out" | { recorded: boolean; held: boolean };

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

  constructor(
    private readonly store: Store,
    private readonly activity: SessionActivity,
    private readonly clock: Clock,
    settings: MonitorSettings,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
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
    return this.ticks.run(() => this.checkWatchedLinks(namespace));
  }

  private async checkWatchedLinks(namespace: string | undefined): Promise<TickReport> {
    const report: TickReport = { linksScanned: 0, eventsRecorded: 0, linksHeld: 0, linksTimedOut: 0 };
    this.metrics?.monitorTicks.inc();
    const count = (outcome: string): void => this.metrics?.monitorLinks.inc({ outcome });
    for (const link of await this.store.watchedLinks(namespace)) {
      if (this.stopped) break;
      if (!isLocalTranscript(link)) continue;
      try {
        if ((await this.activity.runState(link.session)).active) continue;
        const outcome = await this.checkLocalLink(link);
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
    return { recorded: committed.event !== undefined, held: read.held };
  }

  /** Reports what a committed scan read, by class: the metric, and one log line when it read any row. */
  private countRows(link: LinkRecord, rows: Record<RowClass, number>): void {
    for (const [rowClass, count] of Object.entries(rows)) if (count > 0) this.metrics?.monitorRows.inc({ class: rowClass }, count);
    if (rows.human + rows.injected + rows.tool + rows.other > 0) {
      this.log.info({ agentId: link.session.agentId, catalogId: link.catalogId, rows }, "transcript rows read");
    }
  }
}
