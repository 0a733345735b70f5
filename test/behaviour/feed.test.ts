import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import type { AppendInput, LinkRecord, PairChange } from "../../src/domain/records.js";
import type { SessionId } from "../../src/domain/session-key.js";
import { createLogger } from "../../src/logger.js";
import { NoticeHub, type NoticeStreamItem } from "../../src/notices/notice-hub.js";
import type { Store } from "../../src/store/store.js";
import { onBackend, openBehaviourStore, skipBackend } from "../support/backend.js";
import { storeAppend, tempDir, until, allPendingCursors } from "../support/helpers.js";

const worker: SessionId = { namespace: "default", agentId: "ops", key: "agent:ops:worker" };
const boss = "agent:main:boss";
const other = "agent:main:other";

const humanTurn = (nowMs = 1): AppendInput => storeAppend(worker.key, nowMs, "human_direct_message");

/** The feed of a store, collected: every announcement, as "watcher -> target" strings. */
function recordFeed(store: Store): { take(): string[] } {
  let seen: PairChange[] = [];
  store.onPairChanges((changes) => seen.push(...changes));
  return {
    take: () => {
      const out = seen.map((c) => `${c.watcherKey} -> ${c.target.key}`);
      seen = [];
      return out;
    },
  };
}


describe(onBackend("the store's feed names every pair whose pending notice opened, changed or closed"), { skip: skipBackend }, () => {
  let dir: ReturnType<typeof tempDir>;
  let store: Store;
  let feed: ReturnType<typeof recordFeed>;

  beforeEach(async () => {
    dir = tempDir();
    store = (await openBehaviourStore(dir.dir)).store;
    feed = recordFeed(store);
    await store.watch(boss, worker, 1);
    await store.watch(other, worker, 1);
  });
  afterEach(async () => {
    await store.close();
    dir.remove();
  });

  /** Opens a notice for both watchers of the worker; the feed is emptied. */
  async function openNotices(): Promise<void> {
    await store.append(humanTurn());
    feed.take();
  }

  test("an append that opens notices announces them; one while they are pending changes nothing and says nothing", async () => {
    await store.append(humanTurn());
    assert.deepEqual(feed.take(), [`${boss} -> ${worker.key}`, `${other} -> ${worker.key}`]);
    await store.append(humanTurn());
    assert.deepEqual(feed.take(), []);
  });

  test("a ledger-only append and a watch say nothing", async () => {
    await store.append(storeAppend(worker.key, 1, "run_completed"));
    await store.watch("agent:main:third", worker, 1);
    await store.watch(boss, worker, 2);
    assert.deepEqual(feed.take(), []);
  });

  test("a spawn that seeds a parent with a pending notice closes it", async () => {
    await openNotices();
    await store.append({ ...storeAppend(worker.key, 1, "child_spawned"), actorId: boss, notifyWatcherKeys: [boss] });
    assert.deepEqual(feed.take(), [`${boss} -> ${worker.key}`]);
  });

  test("an ack closes or reopens its pair; a stale ack says nothing", async () => {
    await openNotices();
    const [first] = await allPendingCursors(store, "default", [boss]);
    await store.append(humanTurn());
    await store.ackNotices([{ watcherKey: boss, target: worker, notifiedVersion: first!.notified }], 2);
    assert.deepEqual(feed.take(), [`${boss} -> ${worker.key}`], "reopened");
    await store.ackNotices([{ watcherKey: boss, target: worker, notifiedVersion: first!.notified }], 2);
    assert.deepEqual(feed.take(), [], "stale");
  });

  test("unwatch of a pending pair closes it; of an idle pair says nothing", async () => {
    await store.unwatch(other, worker);
    assert.deepEqual(feed.take(), []);
    await openNotices();
    await store.unwatch(boss, worker);
    assert.deepEqual(feed.take(), [`${boss} -> ${worker.key}`]);
  });

  test("a watcher reset closes each of its pending pairs", async () => {
    const second: SessionId = { namespace: "default", agentId: "ops", key: "agent:ops:second" };
    await store.watch(boss, second, 1);
    await openNotices();
    await store.append(storeAppend(second.key, 1, "goal_changed"));
    feed.take();
    assert.equal(await store.resetWatcher("default", boss, 1), 2);
    assert.deepEqual(feed.take().sort(), [`${boss} -> ${second.key}`, `${boss} -> ${worker.key}`]);
  });

  test("deleting a session closes the pending pairs it is the target of, and those it watches", async () => {
    await openNotices();
    await store.watch(worker.key, { namespace: "default", agentId: "main", key: boss }, 1);
    await store.append(storeAppend(boss, 1, "goal_changed"));
    feed.take();
    const removed = await store.deleteSession(worker);
    assert.equal(removed.cursorsRemoved, 3);
    assert.deepEqual(feed.take().sort(), [`${boss} -> ${worker.key}`, `${other} -> ${worker.key}`, `${worker.key} -> ${boss}`]);
  });

  test("retention that removes untouched cursors closes the pending ones among them", async () => {
    await openNotices();
    await store.ackNotices([{ watcherKey: other, target: worker, notifiedVersion: (await store.getCursors([{ watcherKey: other, target: worker }])).cursors[0]!.notified }], 1);
    feed.take();
    const step = await store.pruneStep({ cutoffMs: 100, maxEvents: 50_000, maxRowsPerStep: 100 });
    assert.equal(step.cursorsRemoved, 2);
    assert.deepEqual(feed.take(), [`${boss} -> ${worker.key}`], "only boss's notice was pending");
  });

  test("a scan commit that records a human turn opens notices; adoption (ledger only) says nothing", async () => {
    const adopted = await store.adopt({
      adoptedEvent: { ...storeAppend(worker.key, 1, "adopted"), actorType: "human", dedupeKey: "adopted:ops:agent:ops:worker" },
      link: { session: worker, catalogId: "claude", hostId: "", threadId: "", source: { kind: "transcript", path: "/t.jsonl" }, marker: "0", updatedAtMs: 1 },
    });
    assert.deepEqual(feed.take(), []);
    const link = adopted.link as LinkRecord;
    const committed = await store.commitScan(link, { marker: "100", missedChecks: 0, nowMs: 2, event: humanTurn(2) });
    assert.equal(committed.committed, true);
    assert.deepEqual(feed.take(), [`${boss} -> ${worker.key}`, `${other} -> ${worker.key}`]);
  });
});

describe(onBackend("the notice hub and closed pairs"), { skip: skipBackend }, () => {
  test("the hub remembers no sent notice once its feed has passed the read it came from", async () => {
    const dir = tempDir();
    const { store } = await openBehaviourStore(dir.dir);
    const hub = new NoticeHub(store, createLogger("silent"));
    hub.start();
    const abort = new AbortController();
    const received: NoticeStreamItem[] = [];
    try {
      const serving = (async () => {
        for await (const item of hub.serve({ namespace: "default", watcherKeys: [], prefixes: ["agent:main:"] }, abort.signal)) received.push(item);
      })();
      const targets = ["agent:ops:a", "agent:ops:b", "agent:ops:c"].map((key) => ({ namespace: "default", agentId: "ops", key }));
      for (const target of targets) await store.watch(boss, target, 1);
      for (const target of targets) await store.append(storeAppend(target.key, 1, "human_direct_message"));
      await until(() => received.filter((item) => "notice" in item).length === 3, "three notices reach the subscriber");
      await until(() => hub.rememberedReads === 0, "nothing is remembered once the feed has passed the reads");

      await store.deleteSession(targets[0]!);
      await store.unwatch(boss, targets[1]!);
      await store.resetWatcher("default", boss, 1);
      await until(() => hub.queuedPairs === 0 && hub.rememberedReads === 0, "closed pairs leave nothing behind");
      assert.equal(received.filter((item) => "notice" in item).length, 3, "closing a pair sends nothing");
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
