import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { PeriodicJob } from "../../src/jobs/periodic-job.js";
import type { Logger } from "../../src/logger.js";
import { until } from "../support/helpers.js";

/** A logger that keeps what was logged at error level. */
function recordingLogger(): { log: Logger; errors: string[] } {
  const errors: string[] = [];
  const log = { error: (_fields: unknown, message: string) => errors.push(message) } as unknown as Logger;
  return { log, errors };
}


describe("periodic jobs", () => {
  test("runs never overlap, whether asked for by the timer or on demand, and answer in order", async () => {
    let running = 0;
    let mostAtOnce = 0;
    let runs = 0;
    const job = new PeriodicJob({
      name: "overlap",
      run: async () => {
        running++;
        mostAtOnce = Math.max(mostAtOnce, running);
        await sleep(5);
        running--;
        return ++runs;
      },
      log: recordingLogger().log,
    });
    await job.start({ firstDelayMs: 0, intervalMs: 1 });
    const answers = await Promise.all([job.runNow(), job.runNow(), job.runNow()]);
    await job.stop();
    assert.equal(mostAtOnce, 1);
    assert.ok(answers[0]! < answers[1]! && answers[1]! < answers[2]!, `answers in order: ${answers.join(", ")}`);
  });

  test("start resolves after the first run; a failed run is logged by name and the schedule goes on", async () => {
    const { log, errors } = recordingLogger();
    let runs = 0;
    const job = new PeriodicJob({
      name: "flaky",
      run: async () => {
        runs++;
        if (runs === 1) throw new Error("first run fails");
        return runs;
      },
      log,
    });
    await job.start({ firstDelayMs: 0, intervalMs: 1 });
    assert.equal(runs, 1);
    assert.deepEqual(errors, ["flaky run failed"]);
    await until(() => runs >= 3, "three runs");
    await job.stop();
    const stoppedAt = runs;
    await sleep(30);
    assert.equal(runs, stoppedAt, "no run after stop");
    assert.deepEqual(errors, ["flaky run failed"]);
  });

  test("timer-driven runs wait for mayRun; runNow does not ask", async () => {
    let may = false;
    let asked = 0;
    let runs = 0;
    const job = new PeriodicJob({
      name: "leased",
      run: async () => ++runs,
      mayRun: async () => {
        asked++;
        return may;
      },
      log: recordingLogger().log,
    });
    await job.start({ firstDelayMs: 0, intervalMs: 1 });
    await until(() => asked >= 3, "asked three times");
    assert.equal(runs, 0);
    assert.equal(await job.runNow(), 1);
    may = true;
    await until(() => runs >= 3, "three runs");
    await job.stop();
  });

  test("stop waits for the run in progress, and a job never started stops at once", async () => {
    let finished = false;
    const job = new PeriodicJob({
      name: "slow",
      run: async () => {
        await sleep(50);
        finished = true;
      },
      log: recordingLogger().log,
    });
    void job.start({ firstDelayMs: 0, intervalMs: 60_000 });
    await sleep(10);
    await job.stop();
    assert.equal(finished, true);
    const idle = new PeriodicJob({ name: "idle", run: async () => 0, log: recordingLogger().log });
    await idle.stop();
  });
});
