import type { Logger } from "../logger.js";
import { SerialQueue } from "../serial-queue.js";

/** What a periodic job runs, and whether this process may run it now. */
export interface PeriodicJobOptions<T> {
  /** Named in the log line of a failed run. */
  name: string;
  /** One run. Runs never overlap: a run asked for during another starts after it. */
  run: () => Promise<T>;
  /**
   * For timer-driven runs only: true while this process may run the job (one replica at a time takes
   * the database-wide ones). Runs asked for with `runNow` always run.
   */
  mayRun?: () => Promise<boolean>;
  log: Logger;
}

/** When a job runs on its own: first after `firstDelayMs` (0: at once), then `intervalMs` after each run ends. */
export interface JobSchedule {
  firstDelayMs: number;
  intervalMs: number;
}

/**
 * A job run on a timer and on demand, one run at a time. A failed timer-driven run is logged and the
 * schedule goes on; the timer never keeps the process alive. `stop` ends the schedule and waits for the
 * run in progress (the job itself decides how soon it gives up; see its own `stop`).
 */
export class PeriodicJob<T> {
  private readonly runs = new SerialQueue();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private intervalMs = 0;
  private firstRun: Promise<void> | undefined;
  private resolveFirstRun: (() => void) | undefined;

  constructor(private readonly options: PeriodicJobOptions<T>) {}

  /**
   * Starts the schedule; resolves when the first timer-driven run has ended (or been skipped because
   * `mayRun` said no), whatever its outcome.
   */
  start(schedule: JobSchedule): Promise<void> {
    if (this.firstRun !== undefined) return this.firstRun;
    this.intervalMs = schedule.intervalMs;
    this.firstRun = new Promise((resolve) => {
      this.resolveFirstRun = resolve;
    });
    // A first run due now starts now: an unref'd timer alone would let a process with nothing else to do exit first.
    if (schedule.firstDelayMs <= 0) void this.timedRun();
    else this.schedule(schedule.firstDelayMs);
    return this.firstRun;
  }

  /** Runs the job now, after any run in progress, and answers with its result (or its error). */
  runNow(): Promise<T> {
    return this.runs.run(this.options.run);
  }

  /** Ends the schedule and waits for every run asked for so far to settle. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.resolveFirstRun?.();
    await this.runs.idle();
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.timedRun(), delayMs);
    this.timer.unref();
  }

  private async timedRun(): Promise<void> {
    try {
      const may = this.options.mayRun === undefined || (await this.options.mayRun());
      if (may && !this.stopped) await this.runNow();
    } catch (err) {
      this.options.log.error({ err }, `${this.options.name} run failed`);
    } finally {
      this.resolveFirstRun?.();
      this.resolveFirstRun = undefined;
      this.schedule(this.intervalMs);
    }
  }
}
