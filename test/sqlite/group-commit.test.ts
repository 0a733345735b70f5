import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import type { AppendInput } from "../../src/domain/records.js";
import { storeAppend, tempDir, openTestStore } from "../support/helpers.js";

describe("group commit", () => {
  test("appends committed together stay isolated: a failing one rolls back alone, in order", async () => {
    const dir = tempDir();
    const store = openTestStore(join(dir.dir, "group.db"));
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
      assert.equal((await store.sessionStatus({ namespace: "default", agentId: "main", key: "agent:main:b" }, 0, 10)).stateVersion, 0);
      assert.deepEqual(await store.getStateVersions([
        { namespace: "default", agentId: "main", key: "agent:main:a" },
        { namespace: "default", agentId: "main", key: "agent:main:c" },
      ]), [1, 2]);
    } finally {
      await store.close();
      dir.remove();
    }
  });

  test("acks share the group commit with appends, in the order they were made", async () => {
    const dir = tempDir();
    const store = openTestStore(join(dir.dir, "acks.db"));
    try {
      const target = { namespace: "default", agentId: "main", key: "agent:main:t" };
      const watcherKey = "agent:main:w";
      await store.watch(watcherKey, target, 1);
      const opened = await store.append({ ...storeAppend("agent:main:t", 1, "human_direct_message") });
      assert.equal(opened.recorded && opened.noticesOpened, 1);
      const announced: number[] = [];
      store.onPairChanges((changes) => announced.push(changes.length));
      // In one turn: ack the notice at 1, append again (reopens it at 3), and ack a pair that has no cursor.
      const broken = { ...storeAppend("agent:main:b", 1), summary: null } as unknown as AppendInput;
      const [ack, failed, again, unknown] = await Promise.allSettled([
        store.ackNotices([{ watcherKey, target, notifiedVersion: 1 }], 2),
        store.append(broken),
        store.append({ ...storeAppend("agent:main:t", 2, "human_direct_message") }),
        store.ackNotices([{ watcherKey: "agent:main:nobody", target, notifiedVersion: 1 }], 2),
      ]);
      assert.equal(failed.status, "rejected");
      assert.deepEqual(ack.status === "fulfilled" && ack.value.map((o) => [o.acknowledged, o.cursor?.acked, o.cursor?.notified]), [[true, 1, 1]]);
      assert.equal(again.status === "fulfilled" && again.value.recorded && again.value.noticesOpened, 1);
      assert.deepEqual(unknown.status === "fulfilled" && unknown.value, [{ acknowledged: false, reopened: false }]);
      assert.deepEqual(announced, [2], "one announcement after the one commit: the ack and the reopened notice");
      const [cursor] = (await store.getCursors([{ watcherKey, target }])).cursors;
      assert.deepEqual([cursor?.acked, cursor?.notified, cursor?.material], [1, 2, 2]);
    } finally {
      await store.close();
      dir.remove();
    }
  });

  test("closing the store commits appends still queued", async () => {
    const dir = tempDir();
    const path = join(dir.dir, "queued.db");
    const store = openTestStore(path);
    const pending = store.append(storeAppend("agent:main:q", 1));
    await store.close();
    const outcome = await pending;
    assert.equal(outcome.recorded, true);
    const reopened = openTestStore(path);
    try {
      assert.deepEqual(await reopened.getStateVersions([{ namespace: "default", agentId: "main", key: "agent:main:q" }]), [1]);
    } finally {
      await reopened.close();
      dir.remove();
    }
  });
});

describe("group commit on a full database", () => {
  test("every append of a batch is either stored and resolved, or not stored and rejected", async () => {
    const dir = tempDir();
    const store = openTestStore(join(dir.dir, "full.db"));
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
