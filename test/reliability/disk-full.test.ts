import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import type { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { freshSchema, testCluster } from "../support/backend.js";
import { assertStatus, connect, goal, human, metricValue, scrapeMetrics, startTestServer, status } from "../support/helpers.js";
import { connectTestClient, skipWithoutPostgres } from "../support/postgres-cluster.js";
import { freePort, spawnServer } from "../support/process-helpers.js";

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

describe("disk full on PostgreSQL", { skip: skipWithoutPostgres() }, () => {
  test("a full tablespace: appends answered RESOURCE_EXHAUSTED, storage_full 1 and refusals counted, reads go on; space again: writes resume and storage_full 0", { timeout: 120_000 }, async () => {
    const cluster = testCluster();
    const schema = freshSchema();
    // A tablespace on a 2 MiB tmpfs that the events table is moved to: PostgreSQL then refuses inserts
    // for lack of space (SQLSTATE 53100) exactly as on a full disk or quota. Where this machine may not
    // mount, a trigger raises that same error once the table holds 2,000 rows.
    const space = mkdtempSync(join(tmpdir(), "sessionstate-pg-space-"));
    let mounted = true;
    try {
      execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", space], { stdio: "ignore" });
      execFileSync("chown", ["postgres:postgres", space]);
    } catch {
      mounted = false;
      console.log("# no tmpfs mount here: the full tablespace is played by a trigger raising disk_full (53100)");
    }
    const metricsPort = await freePort();
    const server = await spawnServer(["--db", cluster.url, "--db-schema", schema, "--listen", "127.0.0.1:0", "--log-level", "info", "--metrics-listen", `127.0.0.1:${metricsPort}`]);
    const clients = connect(server.address, { ownConnection: true });
    const database = await connectTestClient(cluster.url, schema);
    const metric = async (name: string): Promise<number> => metricValue(await scrapeMetrics(metricsPort), name);
    try {
      await clients.watch.watch({ watcherSessionKey: W, target: { key: C } });
      for (let i = 0; i < 20; i++) await clients.signalLog.append(human(C, { summary: `before ${i}` }));
      const before = await clients.reconcile.sessionStatus({ session: { key: C }, changesSince: 0n });
      if (mounted) {
        await database.query(`CREATE TABLESPACE small_${schema} LOCATION '${space}'`);
        await database.query(`ALTER TABLE events SET TABLESPACE small_${schema}`);
      } else {
        await database.query(`
          CREATE TABLE space_left (free boolean NOT NULL);
          INSERT INTO space_left VALUES (false);
          CREATE FUNCTION full_disk() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN
            IF (SELECT count(*) FROM events) >= 2000 AND NOT (SELECT free FROM space_left) THEN
              RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full';
            END IF;
            RETURN NEW;
          END $$;
          CREATE TRIGGER full_disk BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION full_disk()`);
      }
      let refusals = 0;
      let lastError: { code: number; details: string } | undefined;
      for (let i = 0; i < 20_000 && refusals < 20; i++) {
        try {
          await clients.signalLog.append(goal(`agent:main:filler-${i % 50}`, { summary: "x".repeat(190), runId: "r".repeat(250) }));
        } catch (err) {
          lastError = err as { code: number; details: string };
          refusals++;
        }
      }
      assert.equal(refusals, 20, "appends are refused once the tablespace is full");
      assert.equal(lastError?.code, status.RESOURCE_EXHAUSTED);
      assert.equal(lastError?.details, "storage is full; the write was not recorded");
      assert.equal(await metric("sessionstate_storage_full"), 1);
      assert.equal(await metric("sessionstate_storage_full_refusals_total"), 20);
      assert.deepEqual(await clients.reconcile.sessionStatus({ session: { key: C }, changesSince: 0n }), before, "reads go on, unchanged");

      if (mounted) execFileSync("mount", ["-o", "remount,size=64m", space]);
      else await database.query("UPDATE space_left SET free = true");
      const after = await clients.signalLog.append(human(C, { summary: "after" }));
      assert.equal(after.recorded, true);
      assert.equal(await metric("sessionstate_storage_full"), 0);
      const logged = server
        .stderr()
        .split("\n")
        .filter((line) => /storage is (full|writable)/u.test(line))
        .map((line) => (JSON.parse(line) as { msg: string }).msg);
      // Said once on each change, not per refusal. At the edge of a full tablespace an insert may still fit
      // a page's last space after one was refused (seen in CI: full, writable, full, writable), so the
      // log may flip more than once before the 20 refusals; it always alternates and ends writable.
      const full = "storage is full: writes are refused until space is freed";
      const writable = "storage is writable again";
      assert.ok(logged.length >= 2 && logged.length % 2 === 0, `said once each way, or once per flip: ${JSON.stringify(logged)}`);
      assert.deepEqual(logged, logged.map((_, i) => (i % 2 === 0 ? full : writable)), "full and writable alternate, ending writable");
    } finally {
      clients.close();
      server.child.kill("SIGKILL");
      await server.exited;
      await database.query(`ALTER TABLE events SET TABLESPACE pg_default`).catch(() => undefined);
      await database.query(`DROP TABLESPACE IF EXISTS small_${schema}`).catch(() => undefined);
      await database.end();
      if (mounted) execFileSync("umount", [space]);
      rmSync(space, { recursive: true, force: true });
    }
  });
});
