/**
 * WAL checkpoints run on a worker thread, not the serving one (issue 25): the log is copied into the
 * database while the server writes, and the serving connection never checkpoints on its own below its bound.
 */
import assert from "node:assert/strict";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type Database from "better-sqlite3";
import { openTestStore, storeAppend, tempDir } from "./support/helpers.js";

describe("the WAL checkpointer", () => {
  test("keeps the log from growing while appends land (the writer reuses it once the worker has copied it), and the log is gone once the store closes", async () => {
    const dir = tempDir();
    const path = join(dir.dir, "wal.db");
    const store = openTestStore(path);
    const walBytes = (): number => statSync(`${path}-wal`).size;
    const batch = (from: number) =>
      Promise.all(Array.from({ length: 500 }, (_, i) => store.append(storeAppend(`agent:main:s${(from + i) % 50}`, Date.now()))));
    try {
      await batch(0);
      const afterOne = walBytes();
      // Ten batches in all, each after the worker has had time to run: without it (and below the serving
      // connection's bound) the log would hold all ten.
      for (let from = 500; from < 5000; from += 500) {
        await sleep(250);
        await batch(from);
      }
      assert.ok(walBytes() < 3 * afterOne, `the log grew to ${walBytes()} bytes, from ${afterOne} after one batch`);
    } finally {
      await store.close();
    }
    assert.equal(existsSync(`${path}-wal`), false, "closing checkpoints and removes the log");
    dir.remove();
  });

  test("the serving connection's own automatic checkpoint is only a bound, far above what the worker leaves", async () => {
    const dir = tempDir();
    const store = openTestStore(join(dir.dir, "bound.db"));
    try {
      const db = (store as unknown as { db: Database.Database }).db;
      assert.equal(db.pragma("wal_autocheckpoint", { simple: true }), 65_536);
    } finally {
      await store.close();
      dir.remove();
    }
  });
});
