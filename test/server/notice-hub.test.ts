import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import { setImmediate as tick } from "node:timers/promises";
import { createLogger } from "../../src/logger.js";
import { NoticeHub, type NoticeSource, type NoticeStreamItem } from "../../src/notices/notice-hub.js";
import type { PairChange } from "../../src/domain/records.js";
import type { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { allPendingCursors, storeAppend, tempDir, openTestStore } from "../support/helpers.js";

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
      while (received.length === 0) await tick();
      assert.deepEqual([...received], [{ synced: { pendingDelivered: 0 } }], "the synced marker fills the transport");

      // 1,000 appends land while the subscriber is stalled; acks keep reopening notices.
      for (let round = 0; round < 100; round++) {
        for (const target of targets) await store.append(humanTurn(target, 2));
        const pending = await allPendingCursors(store, "default", ["agent:main:main"]);
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
      const pending = await allPendingCursors(store, "default", ["agent:main:main"]);
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
      pendingPage: store.pendingPage.bind(store),
      onPairChanges: store.onPairChanges.bind(store),
      changesHeardThrough: store.changesHeardThrough.bind(store),
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

  describe("a feed that is behind the store's reads (as a replica's is behind other replicas' commits)", () => {
    /**
     * The store as the hub sees it, with its feed held back: changes are handed to the hub only when the
     * test releases them, and what the feed has passed (`changesHeardThrough`) follows what was released.
     * `holdPages` holds the answer of each page of pending notices until the test lets it go.
     */
    function laggingSource(store: SqliteStore) {
      const held: { changes: readonly PairChange[]; changeNumber: number }[] = [];
      const listeners = new Set<(changes: readonly PairChange[], changeNumber: number) => void>();
      let heard = store.changesHeardThrough();
      let pageGate: Promise<void> | undefined;
      let pageOut: (() => void) | undefined;
      store.onPairChanges((changes, changeNumber) => held.push({ changes, changeNumber }));
      const source: NoticeSource = {
        pendingPage: async (...args) => {
          const read = await store.pendingPage(...args);
          pageOut?.();
          if (pageGate !== undefined) await pageGate;
          return read;
        },
        getCursors: (pairs) => store.getCursors(pairs),
        onPairChanges: (listener) => {
          listeners.add(listener);
          return () => listeners.delete(listener);
        },
        changesHeardThrough: () => heard,
      };
      return {
        source,
        /** Hands the held changes numbered up to `through` (all by default) to the hub, in order. */
        release(through = Number.POSITIVE_INFINITY): void {
          while (held.length > 0 && held[0]!.changeNumber <= through) {
            const { changes, changeNumber } = held.shift()!;
            for (const listener of listeners) listener(changes, changeNumber);
            heard = changeNumber;
          }
        },
        /** From now on each page is answered only when `open` is called; resolves `out` when one was read. */
        holdPages(): { out: Promise<void>; open: () => void } {
          let open!: () => void;
          pageGate = new Promise((resolve) => (open = resolve));
          const out = new Promise<void>((resolve) => (pageOut = resolve));
          return { out, open: () => ((pageGate = undefined), open()) };
        },
      };
    }

    const watcher = "agent:main:main";
    const targetOf = (i: number) => ({ namespace: "default", agentId: "main", key: `agent:main:t${i}` });

    /** Serves `watcher` from `source`, collecting what is sent; `stop()` ends it. */
    function collect(hub: NoticeHub) {
      const received: string[] = [];
      const abort = new AbortController();
      const done = (async () => {
        for await (const item of hub.serve({ namespace: "default", watcherKeys: [watcher], prefixes: [] }, abort.signal)) {
          received.push("notice" in item ? `${item.notice.target.key}@${item.notice.notifiedVersion}` : "synced");
        }
      })();
      return { received, stop: async () => (abort.abort(), await done) };
    }

    /** Runs `test` with a store, its lagging source and a hub started on it; closes them after. */
    async function withLaggingHub(
      test: (setup: { store: SqliteStore; lagging: ReturnType<typeof laggingSource>; hub: NoticeHub }) => Promise<void>,
    ): Promise<void> {
      const dir = tempDir();
      const store = openTestStore(join(dir.dir, "hub.db"));
      const lagging = laggingSource(store);
      const hub = new NoticeHub(lagging.source, createLogger("silent"));
      hub.start();
      try {
        await test({ store, lagging, hub });
      } finally {
        hub.stop();
        await store.close();
        dir.remove();
      }
    }

    test("a change the backlog's page already held is not sent again when the feed brings it later", () =>
      withLaggingHub(async ({ store, lagging, hub }) => {
        for (const i of [1, 2, 3]) await store.append({ ...humanTurn(targetOf(i).key, 1), notifyWatcherKeys: [watcher] });
        const stream = collect(hub);
        while (!stream.received.includes("synced")) await tick();
        assert.deepEqual(stream.received, ["agent:main:t1@1", "agent:main:t2@2", "agent:main:t3@3", "synced"]);
        assert.equal(hub.rememberedReads, 1, "the page, read ahead of the feed, is remembered");
        lagging.release();
        for (let i = 0; i < 5; i++) await tick();
        assert.deepEqual(stream.received.length, 4, "the feed's late news of the three changes sends nothing");
        assert.equal(hub.queuedPairs, 0);
        await stream.stop();
        assert.equal(hub.rememberedReads, 0);
      }));

    test("a pair read ahead of the feed is sent once at its newest state, however late the feed brings its changes", () =>
      withLaggingHub(async ({ store, lagging, hub }) => {
        const stream = collect(hub);
        while (!stream.received.includes("synced")) await tick();
        const target = targetOf(4);
        const opened = await store.append({ ...humanTurn(target.key, 1), notifyWatcherKeys: [watcher] });
        const openedAt = store.changesHeardThrough();
        await store.append(storeAppend(target.key, 2, "goal_changed"));
        await store.ackNotices([{ watcherKey: watcher, target, notifiedVersion: opened.stateVersion }], 2);
        // The feed brings the opening only: the hub reads the pair, which has reopened since.
        lagging.release(openedAt);
        while (stream.received.length < 2) await tick();
        assert.deepEqual(stream.received, ["synced", "agent:main:t4@2"]);
        assert.equal(hub.rememberedReads, 1, "the pair, read ahead of the feed, is remembered");
        lagging.release();
        for (let i = 0; i < 5; i++) await tick();
        assert.deepEqual(stream.received, ["synced", "agent:main:t4@2"], "the reopening, already sent, is not sent again");
        assert.equal(hub.rememberedReads, 0);
        await stream.stop();
      }));

    test("a change committed while a page of the backlog is being read, after its read, is sent after the page", () =>
      withLaggingHub(async ({ store, lagging, hub }) => {
        for (const i of [1, 2, 3]) await store.append({ ...humanTurn(targetOf(i).key, 1), notifyWatcherKeys: [watcher] });
        lagging.release();
        const page = lagging.holdPages();
        const stream = collect(hub);
        await page.out;
        // The page is read, not yet answered: the second pair's notice is acknowledged and reopens.
        await store.append(storeAppend(targetOf(2).key, 2, "goal_changed"));
        await store.ackNotices([{ watcherKey: watcher, target: targetOf(2), notifiedVersion: 2 }], 2);
        lagging.release();
        page.open();
        while (!stream.received.includes("synced")) await tick();
        assert.deepEqual(stream.received, ["agent:main:t1@1", "agent:main:t2@2", "agent:main:t3@3", "agent:main:t2@4", "synced"]);
        await stream.stop();
      }));
  });
});
