import type { Logger } from "../logger.js";
import type { UpstreamMonitor } from "../upstream/upstream-monitor.js";
import { PeriodicJob, type JobSchedule } from "./periodic-job.js";

/** The upstream monitor's timer: its ticks as a periodic job, and a stop that also aborts the scans reading now. */
export class MonitorJob {
  private readonly job: PeriodicJob<unknown>;

  constructor(
    private readonly monitor: UpstreamMonitor,
    /** When the monitor ticks on its own: first after `firstDelayMs`, then `intervalMs` after each tick ends. */
    private readonly schedule: JobSchedule,
    log: Logger,
    /** True while this replica may scan its node's links (one replica at a time). */
    mayRun?: () => Promise<boolean>,
  ) {
    this.job = new PeriodicJob({
      name: "monitor tick",
      run: () => monitor.tick(),
      log,
      ...(mayRun === undefined ? {} : { mayRun }),
    });
  }

  /** Starts the timer (it never keeps the process alive). */
  start(): void {
    void this.job.start(this.schedule);
  }

  /** Ends the timer, aborts the scans reading now (their markers stay) and waits for the tick to end. */
  async stop(): Promise<void> {
    await Promise.all([this.job.stop(), this.monitor.stop()]);
  }
}
