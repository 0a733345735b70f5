import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import type { Clock } from "../clock.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { Store } from "../store/store.js";
import { PeriodicJob } from "./periodic-job.js";

/** Retention settings: how long events and untouched cursors live, and how many rows the log keeps. */
export interface RetentionSettings {
  retentionMs: number;
  maxEvents: number;
  /** Rows removed per transaction; the event loop runs between steps. */
  maxRowsPerStep: number;
}

/** What one retention run removed. */
export interface PruneTotals {
  eventsRemoved: number;
  cursorsRemoved: number;
}

/**
 * Runs retention: at start-up, on an interval, and on demand. A run is a series of bounded steps with the
 * event loop free between them; runs never overlap (a request during a run starts after it).
 */
export class Retention {
  private stopped = false;
  private readonly job: PeriodicJob<PruneTotals>;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly settings: RetentionSettings,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
    /** For timer-driven runs: true while this replica may run retention (one replica at a time). */
    mayRun?: () => Promise<boolean>,
  ) {
    this.job = new PeriodicJob({
      name: "retention",
      run: () => this.runToCompletion(),
      log,
      ...(mayRun === undefined ? {} : { mayRun }),
    });
  }

  /**
   * Runs once now and then every `intervalMs`, each time only if `mayRun` says so; resolves when the
   * first run is over (a failure is logged, not thrown). The timer does not keep the process alive.
   */
  start(intervalMs: number): Promise<void> {
    return this.job.start({ firstDelayMs: 0, intervalMs });
  }

  /** Runs retention to completion (after any run in progress) and reports what it removed. */
  runNow(): Promise<PruneTotals> {
    return this.job.runNow();
  }

  /** Stops the timer and waits for a run in progress to finish its current step. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.job.stop();
  }

  private async runToCompletion(): Promise<PruneTotals> {
    const totals: PruneTotals = { eventsRemoved: 0, cursorsRemoved: 0 };
    const cutoffMs = this.clock.nowMs() - this.settings.retentionMs;
    for (;;) {
      if (this.stopped) break;
      const step = await this.store.pruneStep({
        cutoffMs,
        maxEvents: this.settings.maxEvents,
        maxRowsPerStep: this.settings.maxRowsPerStep,
      });
      totals.eventsRemoved += step.eventsRemoved;
      totals.cursorsRemoved += step.cursorsRemoved;
      if (step.done) break;
      await yieldToEventLoop();
    }
    this.metrics?.pruneRuns.inc();
    this.metrics?.prunedRows.inc({ table: "events" }, totals.eventsRemoved);
    this.metrics?.prunedRows.inc({ table: "cursors" }, totals.cursorsRemoved);
    if (totals.eventsRemoved > 0 || totals.cursorsRemoved > 0) this.log.info(totals, "retention removed rows");
    return totals;
  }
}
