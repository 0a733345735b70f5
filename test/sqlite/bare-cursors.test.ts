/**
 * Cursors on bare-key targets left by versions before SPEC §2 kept bare keys out of watching: they stay
 * inert. Such a row is written here straight into the SQLite file, as an earlier version left it; the
 * rules that make it inert are the domain's, which the PostgreSQL backend calls alike.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import Database from "better-sqlite3";
import { human, startTestServer, subscribe, tempDir } from "../support/helpers.js";

const W = "agent:main:main";
const bare = { key: "global", agentId: "ops" };

describe("cursors on bare targets from earlier versions", () => {
  test("deliver no notice, are not moved by appends, and an ack changes nothing", async () => {
    const dir = tempDir();
    const dbPath = join(dir.dir, "old.db");
    let t = await startTestServer({ dbPath }, undefined);
    await t.stop();
    const db = new Database(dbPath);
    db.prepare(
      `INSERT INTO cursors (namespace, watcher_key, target_agent_id, target_key, acked, notified, material, updated_at_ms, provenance, extra_kinds)
       VALUES ('default', ?, 'ops', 'global', 0, 1, 1, ?, 'explicit', '')`,
    ).run(W, t.clock.nowMs());
    db.close();
    t = await startTestServer({ dbPath }, { clock: t.clock, dir });
    try {
      const stream = subscribe(t, [W]);
      assert.deepEqual(await stream.untilSynced(), { notices: [], pendingDelivered: 0 });
      const appended = await t.signalLog.append(human("global", { session: bare, notifySessionKeys: [W] }));
      assert.equal(appended.recorded, true);
      assert.deepEqual(await stream.noticesBeforeBarrier(), []);
      const marks = async () =>
        (await t.watch.listWatches({ target: bare })).cursors.map((c) => [c.watcherSessionKey, c.ackedVersion, c.notifiedVersion, c.materialVersion]);
      assert.deepEqual(await marks(), [[W, 0n, 1n, 1n]]);
      const ack = await t.watch.ackNotices({ acks: [{ watcherSessionKey: W, target: bare, notifiedVersion: 1n }] });
      assert.equal(ack.results[0]?.acknowledged, false);
      assert.deepEqual(await marks(), [[W, 0n, 1n, 1n]]);
      stream.call.cancel();
    } finally {
      await t.dispose();
    }
  });
});
