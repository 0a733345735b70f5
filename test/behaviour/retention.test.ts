import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { performance } from "node:perf_hooks";
import { createLogger } from "../../src/logger.js";
import { nextStepRows, Retention } from "../../src/jobs/retention.js";
import type { Store } from "../../src/store/store.js";
import { FakeClock, dayMs, goal, startTestServer, storeAppend as input, tempDir, openTestStore, until } from "../support/helpers.js";

describe("retention", () => {
  test("a small row cap keeps exactly the newest rows and raises watermarks", async () => {
    const t = await startTestServer({ maxEvents: 10 });
    try {
      for (let i = 0; i < 15; i++) await t.signalLog.append(goal(i % 3 === 0 ? "agent:main:a" : "agent:main:b"));
      const pruned = await t.signalLog.prune({});
      assert.deepEqual([pruned.eventsRemoved, pruned.cursorsRemoved], [5, 0]);
      const a = await t.reconcile.sessionStatus({ session: { key: "agent:main:a" }, changesSince: 0n });
      const b = await t.reconcile.sessionStatus({ session: { key: "agent:main:b" }, changesSince: 0n });
      const kept = [...a.stateChanges!.events, ...b.stateChanges!.events].map((e) => Number(e.sequence)).sort((x, y) => x - y);
      assert.deepEqual(kept, [6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
      const heads = await t.reconcile.listSessions({});
      // a had 1, 4 pruned (watermark 4); b had 2, 3, 5 pruned (watermark 5).
      assert.deepEqual(heads.sessions.map((s) => [s.session?.key, s.stateVersion, s.prunedThrough]), [
        ["agent:main:a", 13n, 4n],
        ["agent:main:b", 15n, 5n],
      ]);
      const again = await t.signalLog.prune({});
      assert.equal(again.eventsRemoved, 0);
      const next = await t.signalLog.append(goal("agent:main:c"));
      assert.equal(next.event?.sequence, 16n);
    } finally {
      await t.dispose();
    }
  });

  test("the default cap keeps exactly the newest 50,000 rows, in bounded steps", async () => {
    const dir = tempDir();
    const clock = new FakeClock();
    const store = openTestStore(join(dir.dir, "cap.db"));
    try {
      // In batches of 1,000 appends queued at once: each batch is a few group commits, in queue order, so
      // sequence i + 1 is session s(i % 7) as with one append at a time.
      for (let from = 0; from < 50_003; from += 1000) {
        const batch = Array.from({ length: Math.min(1000, 50_003 - from) }, (_, j) => store.append(input(`agent:main:s${(from + j) % 7}`, clock.nowMs())));
        await Promise.all(batch);
      }
      const steps: number[] = [];
      const counting: Pick<Store, "pruneStep" | "catchUpBackground"> = {
        catchUpBackground: (limitMs) => store.catchUpBackground(limitMs),
        pruneStep: async (policy) => {
          const step = await store.pruneStep(policy);
          steps.push(step.eventsRemoved);
          return step;
        },
      };
      const retention = new Retention(counting, clock, { retentionMs: 30 * dayMs, maxEvents: 50_000, stepTargetMs: 5, stepRows: { first: 2, min: 2, max: 2 } }, createLogger("silent"));
      const totals = await retention.runNow();
      assert.deepEqual(totals, { eventsRemoved: 3, cursorsRemoved: 0 });
      assert.deepEqual(steps, [2, 1]);
      // Sequences 1, 2 and 3 went: one each of s0, s1 and s2. s2's next event is 10.
      const oldest = await store.sessionStatus({ namespace: "default", agentId: "main", key: "agent:main:s2" }, 0, 1);
      assert.equal(oldest.changes?.events[0]?.sequence, 10);
      assert.equal(oldest.changes?.historyGap, true);
      const s0 = await store.sessionStatus({ namespace: "default", agentId: "main", key: "agent:main:s0" }, 1, 1);
      assert.equal(s0.changes?.historyGap, false, "s0's watermark is 1");
      const next = await store.append(input("agent:main:x", clock.nowMs()));
      assert.equal(next.recorded && next.event.sequence, 50_004);
      await retention.stop();
    } finally {
      await store.close();
      dir.remove();
    }
  });

  test("steps are sized by their time: halved after a slow one, doubled after a quick one, within bounds", async () => {
    const settings = { stepTargetMs: 5, stepRows: { first: 2000, min: 100, max: 50_000 } };
    assert.equal(nextStepRows(2000, 10, settings), 1000);
    assert.equal(nextStepRows(2000, 6, settings), 1667);
    assert.equal(nextStepRows(2000, 100, settings), 1000, "at most halved at a time");
    assert.equal(nextStepRows(2000, 1, settings), 4000, "at most doubled at a time");
    assert.equal(nextStepRows(2000, 0, settings), 4000);
    assert.equal(nextStepRows(150, 50, settings), 100, "never below the least");
    assert.equal(nextStepRows(40_000, 1, settings), 50_000, "never above the most");

    // A run over a store whose steps are quick: each full step's successor is twice as big, up to the most,
    // and the next run starts where the last one left off.
    const asked: number[] = [];
    let left = 1000;
    const store: Pick<Store, "pruneStep" | "catchUpBackground"> = {
      catchUpBackground: async () => undefined,
      pruneStep: async (policy) => {
        asked.push(policy.maxRowsPerStep);
        const removed = Math.min(left, policy.maxRowsPerStep);
        left -= removed;
        return { eventsRemoved: removed, cursorsRemoved: 0, done: removed < policy.maxRowsPerStep };
      },
    };
    const retention = new Retention(store, new FakeClock(), { retentionMs: dayMs, maxEvents: 10, stepTargetMs: 60_000, stepRows: { first: 10, min: 10, max: 200 } }, createLogger("silent"));
    assert.deepEqual(await retention.runNow(), { eventsRemoved: 1000, cursorsRemoved: 0 });
    assert.deepEqual(asked, [10, 20, 40, 80, 160, 200, 200, 200, 200]);
    left = 50;
    await retention.runNow();
    assert.deepEqual(asked.slice(9), [200]);
  });

  test("a pass waits for the store's background work before each step, and pauses after each as long as it took", async () => {
    const calls: string[] = [];
    let left = 30;
    const stepMs = 20;
    const store: Pick<Store, "pruneStep" | "catchUpBackground"> = {
      catchUpBackground: async (limitMs) => void calls.push(`catch up within ${limitMs}`),
      pruneStep: async (policy) => {
        calls.push(`step at ${Math.round(performance.now())}`);
        await sleep(stepMs);
        const removed = Math.min(left, policy.maxRowsPerStep);
        left -= removed;
        return { eventsRemoved: removed, cursorsRemoved: 0, done: removed < policy.maxRowsPerStep };
      },
    };
    const retention = new Retention(store, new FakeClock(), { retentionMs: dayMs, maxEvents: 10, stepTargetMs: stepMs, stepRows: { first: 10, min: 10, max: 10 } }, createLogger("silent"));
    await retention.runNow();
    assert.deepEqual(
      calls.map((call) => call.replace(/ at \d+/, "")),
      ["catch up within 1000", "step", "catch up within 1000", "step", "catch up within 1000", "step", "catch up within 1000", "step"],
    );
    const startedAt = calls.filter((call) => call.startsWith("step")).map((call) => Number(call.split(" at ")[1]));
    for (let i = 1; i < startedAt.length; i++) {
      assert.ok(startedAt[i]! - startedAt[i - 1]! >= 2 * stepMs - 2, `step ${i} began ${startedAt[i]! - startedAt[i - 1]!} ms after the one before`);
    }
  });

  test("events older than the retention period are pruned in the background after start-up", async () => {
    let t = await startTestServer({ retentionDays: 7 });
    try {
      await t.signalLog.append(goal("agent:main:a"));
      t.clock.advance(6 * dayMs);
      await t.signalLog.append(goal("agent:main:a"));
      t.clock.advance(2 * dayMs);
      t = await t.restart();
      const status = () => t.reconcile.sessionStatus({ session: { key: "agent:main:a" }, changesSince: 0n });
      // Served at once; the pass that follows removes the old event (with its watermark raised first).
      await until(async () => (await status()).stateChanges?.historyGap === true, "the old event is pruned");
      const res = await status();
      assert.equal(res.stateVersion, 2n);
      assert.deepEqual(res.stateChanges?.events.map((e) => e.sequence), [2n]);
    } finally {
      await t.dispose();
    }
  });

  test("a watermark never goes down", async () => {
    const t = await startTestServer({ maxEvents: 1 });
    try {
      await t.signalLog.append(goal("agent:main:a"));
      await t.signalLog.append(goal("agent:main:a"));
      await t.signalLog.append(goal("agent:main:a"));
      await t.signalLog.prune({});
      t.clock.advance(40 * dayMs);
      await t.signalLog.prune({});
      const heads = await t.reconcile.listSessions({});
      assert.equal(heads.sessions[0]?.prunedThrough, 3n);
      assert.equal(heads.sessions[0]?.stateVersion, 3n);
    } finally {
      await t.dispose();
    }
  });
});
