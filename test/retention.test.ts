import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import { createLogger } from "../src/logger.js";
import { Retention } from "../src/jobs/retention.js";
import { SqliteStore } from "../src/store/sqlite/sqlite-store.js";
import { FakeClock, dayMs, goal, startTestServer, storeAppend as input, tempDir, openTestStore } from "./support/helpers.js";

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
      const counting = {
        ...store,
        pruneStep: async (policy: Parameters<typeof store.pruneStep>[0]) => {
          const step = await store.pruneStep(policy);
          steps.push(step.eventsRemoved);
          return step;
        },
      } as unknown as SqliteStore;
      const retention = new Retention(counting, clock, { retentionMs: 30 * dayMs, maxEvents: 50_000, maxRowsPerStep: 2 }, createLogger("silent"));
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

  test("events older than the retention period are pruned at start-up", async () => {
    let t = await startTestServer({ retentionDays: 7 });
    try {
      await t.signalLog.append(goal("agent:main:a"));
      t.clock.advance(6 * dayMs);
      await t.signalLog.append(goal("agent:main:a"));
      t.clock.advance(2 * dayMs);
      t = await t.restart();
      const res = await t.reconcile.sessionStatus({ session: { key: "agent:main:a" }, changesSince: 0n });
      assert.equal(res.stateVersion, 2n);
      assert.deepEqual(res.stateChanges?.events.map((e) => e.sequence), [2n]);
      assert.equal(res.stateChanges?.historyGap, true);
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
