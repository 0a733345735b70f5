import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { SqliteStore } from "../../src/store/sqlite-store.js";
import { assertStatus, goal, human, startTestServer, status } from "../helpers.js";

const W = "agent:main:main";
const C = "agent:main:subagent:child";

describe("disk full", () => {
  test("appends fail with RESOURCE_EXHAUSTED, reads go on, nothing is damaged, and writes resume without a restart", async () => {
    let store: SqliteStore | undefined;
    const t = await startTestServer({}, undefined, (opened) => (store = opened as SqliteStore));
    try {
      await t.watch.watch({ watcherSessionKey: W, target: { key: C } });
      for (let i = 0; i < 50; i++) await t.signalLog.append(human(C, { summary: `before ${i}` }));
      const before = await t.reconcile.sessionStatus({ session: { key: C }, changesSince: 0n });
      const cursorBefore = (await t.watch.listWatches({})).cursors;

      store!.limitPages(1); // never below the current size: the file may not grow any more
      let refusals = 0;
      let lastError: { code: number; details: string } | undefined;
      for (let i = 0; i < 5000 && refusals < 20; i++) {
        try {
          await t.signalLog.append(goal(`agent:main:filler-${i}`, { summary: "x".repeat(190), runId: "r".repeat(250) }));
        } catch (err) {
          lastError = err as { code: number; details: string };
          refusals++;
        }
      }
      assert.equal(refusals, 20, "appends are refused once the database cannot grow");
      assert.equal(lastError?.code, status.RESOURCE_EXHAUSTED);
      assert.equal(lastError?.details, "storage is full; the write was not recorded");
      await assertStatus(t.signalLog.append(goal("agent:main:one-more", { summary: "y".repeat(190), runId: "r".repeat(250) })), status.RESOURCE_EXHAUSTED);

      const during = await t.reconcile.sessionStatus({ session: { key: C }, changesSince: 0n });
      assert.deepEqual(during, before, "reads keep working and stored events are unchanged");
      assert.deepEqual((await t.watch.listWatches({})).cursors, cursorBefore);
      assert.equal(store!.integrityCheck(), "ok");

      store!.limitPages(undefined);
      const after = await t.signalLog.append(human(C, { summary: "after" }));
      assert.equal(after.recorded, true);
      assert.equal(store!.integrityCheck(), "ok");
      const status2 = await t.reconcile.sessionStatus({ session: { key: C }, changesSince: 0n });
      assert.deepEqual(status2.stateChanges?.events.slice(0, 50), before.stateChanges?.events);
      assert.equal(status2.stateVersion, after.event?.sequence);
    } finally {
      await t.dispose();
    }
  });
});
