import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import { SqliteStore } from "../src/store/sqlite-store.js";
import type { AppendInput } from "../src/store/store.js";
import { storeAppend, tempDir } from "./helpers.js";

describe("group commit", () => {
  test("appends committed together stay isolated: a failing one rolls back alone, in order", async () => {
    const dir = tempDir();
    const store = SqliteStore.open(join(dir.dir, "group.db"), "normal");
    try {
      const broken = { ...storeAppend("agent:main:b", 1), summary: null } as unknown as AppendInput;
      const results = await Promise.allSettled([
        store.append(storeAppend("agent:main:a", 1)),
        store.append(broken),
        store.append(storeAppend("agent:main:c", 1)),
        store.append({ ...storeAppend("agent:main:d", 1), dedupeKey: "same" }),
        store.append({ ...storeAppend("agent:main:d", 1), dedupeKey: "same" }),
      ]);
      assert.deepEqual(
        results.map((r) => r.status),
        ["fulfilled", "rejected", "fulfilled", "fulfilled", "fulfilled"],
      );
      const outcome = (i: number) => (results[i] as PromiseFulfilledResult<Awaited<ReturnType<SqliteStore["append"]>>>).value;
      const sequenceOf = (i: number) => {
        const value = outcome(i);
        return value.recorded ? value.event.sequence : -1;
      };
      assert.deepEqual([sequenceOf(0), sequenceOf(2), sequenceOf(3), sequenceOf(4)], [1, 2, 3, 3]);
      const duplicate = outcome(4);
      assert.equal(duplicate.recorded && duplicate.deduplicated, true, "a duplicate in the same batch sees the first");
      assert.equal((await store.sessionStatus({ agentId: "main", key: "agent:main:b" }, 0, 10)).stateVersion, 0);
      assert.deepEqual(await store.getStateVersions([
        { agentId: "main", key: "agent:main:a" },
        { agentId: "main", key: "agent:main:c" },
      ]), [1, 2]);
    } finally {
      await store.close();
      dir.remove();
    }
  });

  test("closing the store commits appends still queued", async () => {
    const dir = tempDir();
    const path = join(dir.dir, "queued.db");
    const store = SqliteStore.open(path, "normal");
    const pending = store.append(storeAppend("agent:main:q", 1));
    await store.close();
    const outcome = await pending;
    assert.equal(outcome.recorded, true);
    const reopened = SqliteStore.open(path, "normal");
    try {
      assert.deepEqual(await reopened.getStateVersions([{ agentId: "main", key: "agent:main:q" }]), [1]);
    } finally {
      await reopened.close();
      dir.remove();
    }
  });
});

describe("group commit on a full database", () => {
  test("every append of a batch is either stored and resolved, or not stored and rejected", async () => {
    const dir = tempDir();
    const store = SqliteStore.open(join(dir.dir, "full.db"), "normal");
    try {
      for (let i = 0; i < 20; i++) await store.append(storeAppend(`agent:main:seed${i}`, 1));
      store.limitPages(1);
      const inputs = Array.from({ length: 300 }, (_, i) => ({
        ...storeAppend(`agent:main:big${i}`, 1),
        runId: "r".repeat(2000),
        summary: "s".repeat(200),
      }));
      const results = await Promise.allSettled(inputs.map((input) => store.append(input)));
      const rejected = results.filter((r) => r.status === "rejected");
      assert.ok(rejected.length > 0, "the database filled up");
      for (const r of rejected) assert.equal((r as PromiseRejectedResult).reason.code, "SQLITE_FULL");
      store.limitPages(undefined);
      const versions = await store.getStateVersions(inputs.map((input) => input.session));
      results.forEach((result, i) => {
        if (result.status === "fulfilled") assert.ok(versions[i] !== undefined, `resolved append ${i} is stored`);
        else assert.equal(versions[i], undefined, `rejected append ${i} is not stored`);
      });
      assert.equal(store.integrityCheck(), "ok");
      assert.equal((await store.append(storeAppend("agent:main:after", 1))).recorded, true);
    } finally {
      await store.close();
      dir.remove();
    }
  });
});
