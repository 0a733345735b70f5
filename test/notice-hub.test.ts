import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import { setImmediate as tick } from "node:timers/promises";
import { createLogger } from "../src/logger.js";
import { NoticeHub, type NoticeStreamItem } from "../src/notices/notice-hub.js";
import { storeAppend, tempDir, openTestStore } from "./support/helpers.js";

const humanTurn = (key: string, nowMs: number) => storeAppend(key, nowMs, "human_direct_message");

describe("notice hub", () => {
  test("a subscriber that stops reading costs at most one queued entry per pair, and gets one notice per pair when it resumes", async () => {
    const dir = tempDir();
    const store = openTestStore(join(dir.dir, "hub.db"));
    const hub = new NoticeHub(store, createLogger("silent"));
    hub.start();
    const abort = new AbortController();
    try {
      const targets = Array.from({ length: 10 }, (_, i) => `agent:main:t${i}`);
      for (const target of targets) await store.watch("agent:main:main", { namespace: "default", agentId: "main", key: target }, 1);

      const received: NoticeStreamItem[] = [];
      let stalled = true;
      let resume: () => void = () => {};
      // The subscriber reads one item at a time and, while stalled, asks for no more.
      const serving = (async () => {
        for await (const item of hub.serve({ namespace: "default", watcherKeys: ["agent:main:main"], prefixes: [] }, abort.signal)) {
          received.push(item);
          if (stalled) await new Promise<void>((resolve) => (resume = resolve));
        }
      })();
      await tick();
      assert.deepEqual([...received], [{ synced: { pendingDelivered: 0 } }], "the synced marker fills the transport");

      // 1,000 appends land while the subscriber is stalled; acks keep reopening notices.
      for (let round = 0; round < 100; round++) {
        for (const target of targets) await store.append(humanTurn(target, 2));
        const pending = await store.pendingCursors("default", ["agent:main:main"], []);
        await store.ackNotices(
          pending.map((c) => ({ watcherKey: c.watcherKey, target: c.target, notifiedVersion: c.notified })),
          2,
        );
        assert.ok(hub.queuedPairs <= targets.length, `queued ${hub.queuedPairs} > ${targets.length}`);
      }
      for (const target of targets) await store.append(humanTurn(target, 3));
      assert.equal(hub.queuedPairs, targets.length);
      assert.equal(received.length, 1, "nothing more was written while stalled");

      stalled = false;
      resume();
      while (hub.queuedPairs > 0) await tick();
      await tick();
      const notices = received.slice(1).map((item) => ("notice" in item ? item.notice : undefined));
      assert.equal(notices.length, targets.length, "one notice per pair, the newest state");
      const pending = await store.pendingCursors("default", ["agent:main:main"], []);
      assert.deepEqual(
        notices.map((n) => [n?.target.key, n?.notifiedVersion]).sort(),
        pending.map((c) => [c.target.key, c.notified]).sort(),
      );
      abort.abort();
      await serving;
      assert.equal(hub.subscriptions, 0);
    } finally {
      abort.abort();
      hub.stop();
      await store.close();
      dir.remove();
    }
  });

  test("a pair whose notice changes while it is being read is read again: it is sent once, at its newest version", async () => {
    const dir = tempDir();
    const store = openTestStore(join(dir.dir, "hub.db"));
    const target = { namespace: "default", agentId: "main", key: "agent:main:worker" };
    let gate: Promise<void> | undefined;
    let reading: () => void = () => {};
    // The first read of the pair's cursor takes its rows, then waits at the gate before answering.
    const source = {
      pendingCursors: store.pendingCursors.bind(store),
      onPairChanges: store.onPairChanges.bind(store),
      getCursors: async (pairs: Parameters<typeof store.getCursors>[0]) => {
        const rows = await store.getCursors(pairs);
        if (gate !== undefined) {
          const waiting = gate;
          gate = undefined;
          reading();
          await waiting;
        }
        return rows;
      },
    };
    const hub = new NoticeHub(source, createLogger("silent"));
    hub.start();
    const abort = new AbortController();
    try {
      await store.watch("agent:main:main", target, 1);
      const received: NoticeStreamItem[] = [];
      const serving = (async () => {
        for await (const item of hub.serve({ namespace: "default", watcherKeys: ["agent:main:main"], prefixes: [] }, abort.signal)) received.push(item);
      })();
      await tick();
      let open: () => void = () => {};
      gate = new Promise<void>((resolve) => (open = resolve));
      const read = new Promise<void>((resolve) => (reading = resolve));
      await store.append(humanTurn(target.key, 2));
      await read;
      // The read of the first notice is out; before it answers, the notice is acknowledged and reopened.
      await store.ackNotices([{ watcherKey: "agent:main:main", target, notifiedVersion: 1 }], 3);
      const second = await store.append(humanTurn(target.key, 3));
      open();
      while (hub.queuedPairs > 0 || received.length < 2) await tick();
      await tick();
      const notices = received.flatMap((item) => ("notice" in item ? [item.notice.notifiedVersion] : []));
      assert.deepEqual(notices, [second.stateVersion], "one notice, at the second change's version");
      abort.abort();
      await serving;
    } finally {
      abort.abort();
      hub.stop();
      await store.close();
      dir.remove();
    }
  });
});
