import type { Clock } from "../clock.js";
import { SerialQueue } from "../serial-queue.js";
import { setNewest } from "../newest-first-map.js";
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

/** A link's place in the maps of outcomes and of checks in progress. */
export function outcomeKey(link: Pick<LinkRecord, "session">): string {
  const { namespace, agentId, key } = link.session;
  return `${namespace} ${agentId} ${key}`;
}

/** What reading and committing one link came to. */
type LinkOutcome =
  | "discarded"
  | "unclassifiable"
  | "timed_out"
  | { recorded: boolean; held: boolean; noticesOpened: number; prompts: number; promptIds: string[] };

/** What a check of a link found, over all its passes (see UpstreamMonitor.checkNow). */
export interface LinkCheck {
  /** The last pass's outcome. */
  outcome: ScanOutcomeName;
  /** A pass read and committed the link. */
  scanned: boolean;
  /** A pass recorded a human_direct_message. */
  recorded: boolean;
  /** The last pass found a run active on the session (nothing was read). */
  runActive: boolean;
  /** Prompt rows committed passes read (human turns and the gateway's echo), and the prompt ids they name. */
  prompts: number;
  promptIds: string[];
}

const noCheck: LinkCheck = { outcome: "scanned", scanned: false, recorded: false, runActive: false, prompts: 0, promptIds: [] };

/** What two passes over one link found together: the later one's outcome, the sum of what each read. */
function mergeChecks(before: LinkCheck, after: LinkCheck): LinkCheck {
  return {
    outcome: after.outcome,
    scanned: before.scanned || after.scanned,
    recorded: before.recorded || after.recorded,
    runActive: after.runActive,
    prompts: before.prompts + after.prompts,
    promptIds: [...before.promptIds, ...after.promptIds],
  };
}

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
  /** Links being checked now, by link: `again` asks for one more pass when the one under way ends. */
  private readonly checking = new Map<string, { again: boolean; done: Promise<LinkCheck> }>();
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
    await Promise.all([this.ticks.idle(), ...[...this.checking.values()].map((entry) => entry.done)]);
  }

  /** True once `stop()` was called: no more checks. */
  get isStopped(): boolean {
    return this.stopped;
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
    setNewest(this.outcomes, outcomeKey(link), outcome, maxRememberedOutcomes);
  }

  private async checkWatchedLinks(namespace: string | undefined): Promise<TickReport> {
    const report: TickReport = { linksScanned: 0, eventsRecorded: 0, linksHeld: 0, linksTimedOut: 0, linksFailed: 0 };
    this.metrics?.monitorTicks.inc();
    for (const link of await this.store.watchedLinks(namespace)) {
      if (this.stopped) break;
      if (!isLocalTranscript(link)) continue;
      const check = await this.checkNow(link);
      if (check.outcome === "failed") report.linksFailed++;
      else if (check.outcome === "timed_out") report.linksTimedOut++;
      else if (check.scanned) report.linksScanned++;
      if (check.recorded) report.eventsRecorded++;
      if (check.outcome === "held") report.linksHeld++;
    }
    return report;
  }

  /**
   * Checks one local link now, by the monitor's rules: the one path of ticks and of the CLIs' hooks (SPEC
   * §8.2). A link being checked already is not checked twice at once: the check in progress makes one more
   * pass when it is done (however many asked meanwhile), and every caller gets what the passes found.
   */
  checkNow(link: LinkRecord): Promise<LinkCheck> {
    if (this.stopped) return Promise.resolve({ ...noCheck, outcome: "discarded" });
    const key = outcomeKey(link);
    const running = this.checking.get(key);
    if (running !== undefined) {
      running.again = true;
      return running.done;
    }
    const entry: { again: boolean; done: Promise<LinkCheck> } = { again: false, done: Promise.resolve(noCheck) };
    entry.done = (async () => {
      let found = noCheck;
      let current: LinkRecord | undefined = link;
      try {
        do {
          entry.again = false;
          found = mergeChecks(found, await this.checkLink(current));
          // Another pass reads the link as it is now: the pass before may have moved its marker. A read that
          // fails ends the passes (logged): the next tick or call checks again.
          if (entry.again && !this.stopped) {
            current = await this.store.getLink(link.session).catch((err: unknown) => {
              this.log.error({ err, agentId: link.session.agentId }, "upstream link read failed");
              return undefined;
            });
          }
        } while (entry.again && !this.stopped && current !== undefined && isLocalTranscript(current));
      } finally {
        this.checking.delete(key);
      }
      return found;
    })();
    this.checking.set(key, entry);
    return entry.done;
  }

  /** One pass over a link: skipped while a run is active, read, committed, remembered and counted. Never throws. */
  private async checkLink(link: LinkRecord): Promise<LinkCheck> {
    const count = (outcome: string): void => this.metrics?.monitorLinks.inc({ outcome });
    const done = (outcome: ScanOutcomeName, found: Partial<LinkCheck> = {}): LinkCheck => {
      this.remember(link, outcome);
      return { ...noCheck, outcome, ...found };
    };
    try {
      if ((await this.activity.runState(link.session)).active) return done("run_active", { runActive: true });
      const outcome = await this.checkLocalLink(link);
      if (typeof outcome === "string") {
        count(outcome);
        return done(outcome);
      }
      count("scanned");
      if (outcome.recorded) {
        count("recorded");
        this.recorded?.(link.session.namespace, outcome.noticesOpened);
      }
      if (outcome.held) count("held");
      const found = { scanned: true, recorded: outcome.recorded, prompts: outcome.prompts, promptIds: outcome.promptIds };
      return done(outcome.recorded ? "recorded" : outcome.held ? "held" : "scanned", found);
    } catch (err) {
      count("failed");
      this.log.error({ err, agentId: link.session.agentId }, "upstream scan failed");
      return done("failed");
    }
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
    return { recorded: committed.event !== undefined, held: read.held, noticesOpened: committed.noticesOpened ?? 0, prompts: read.prompts, promptIds: read.promptIds };
  }

  /** Reports what a committed scan read, by class: the metric, and one log line when it read any row. */
  private countRows(link: LinkRecord, rows: Record<RowClass, number>): void {
    for (const [rowClass, count] of Object.entries(rows)) if (count > 0) this.metrics?.monitorRows.inc({ class: rowClass }, count);
    if (rows.human + rows.injected + rows.tool + rows.other > 0) {
      this.log.info({ agentId: link.session.agentId, catalogId: link.catalogId, rows }, "transcript rows read");
    }
  }
}
