import { performance } from "node:perf_hooks";
import { setTimeout as pause } from "node:timers/promises";
import type { Clock } from "../clock.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { Store } from "../store/store.js";
import { PeriodicJob } from "./periodic-job.js";

/**
 * Retention settings: how long events and untouched cursors live, how many rows the log keeps, and how
 * big a step is. Each step is one transaction (it holds the store's writes: SQLite's serving thread, or
 * PostgreSQL's clock row) with the event loop free between steps; steps are sized by their time, not by a
 * fixed count of rows.
 */
export interface RetentionSettings {
  retentionMs: number;
  maxEvents: number;
  /** How long one step should take, in ms, from the call to its answer. */
  stepTargetMs: number;
  /** Rows a step may remove: the first step of the first run takes `first`; later ones stay within [min, max]. */
  stepRows: { first: number; min: number; max: number };
}

/**
 * The rows of the next step after a full one (it removed all its rows could) that took `elapsedMs`: scaled
 * towards the target time, by at most half or double at a time (one slow step, a collection or a busy
 * disk, does not swing it), within the bounds.
 */
export function nextStepRows(rows: number, elapsedMs: number, settings: Pick<RetentionSettings, "stepTargetMs" | "stepRows">): number {
  const factor = Math.min(2, Math.max(0.5, settings.stepTargetMs / Math.max(elapsedMs, 0.01)));
  return Math.min(settings.stepRows.max, Math.max(settings.stepRows.min, Math.round(rows * factor)));
}

/** The longest a step waits for the store's background work to catch up. */
const catchUpLimitMs = 1000;

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
  /** The rows of the next full step, as learnt from the last ones (kept from run to run). */
  private stepRows: number;
  /** The last pass this process ran to its end (GetServerInfo): when it ended and what it removed. */
  lastPass: (PruneTotals & { endedAtMs: number }) | undefined;

  constructor(
    /** What retention asks of the store: its steps, and that its background work keeps up between them. */
    private readonly store: Pick<Store, "pruneStep" | "catchUpBackground">,
    private readonly clock: Clock,
    private readonly settings: RetentionSettings,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
    /** For timer-driven runs: true while this replica may run retention (one replica at a time). */
    mayRun?: () => Promise<boolean>,
  ) {
    this.stepRows = settings.stepRows.first;
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
      // The store's background work (SQLite's checkpoints) keeps up with the pass, however long it is.
      await this.store.catchUpBackground(catchUpLimitMs);
      if (this.stopped) break;
      const startedMs = performance.now();
      const step = await this.store.pruneStep({ cutoffMs, maxEvents: this.settings.maxEvents, maxRowsPerStep: this.stepRows });
      const elapsedMs = performance.now() - startedMs;
      this.metrics?.pruneStep.observe(elapsedMs / 1000);
      totals.eventsRemoved += step.eventsRemoved;
      totals.cursorsRemoved += step.cursorsRemoved;
      if (step.done) break;
      this.stepRows = nextStepRows(this.stepRows, elapsedMs, this.settings);
      // As long a pause as the step took (a timer, so the event loop first takes the calls that arrived
      // during the step): a call waits for one step at most, and has the time its few turns of the event
      // loop need before the next one. A pass uses at most half of the serving thread (or of the clock row).
      await pause(elapsedMs);
    }
    this.metrics?.pruneRuns.inc();
    this.metrics?.prunedRows.inc({ table: "events" }, totals.eventsRemoved);
    this.metrics?.prunedRows.inc({ table: "cursors" }, totals.cursorsRemoved);
    if (totals.eventsRemoved > 0 || totals.cursorsRemoved > 0) this.log.info(totals, "retention removed rows");
    if (!this.stopped) this.lastPass = { ...totals, endedAtMs: this.clock.nowMs() };
    return totals;
  }
}
