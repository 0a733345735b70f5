/**
 * The feed between replicas on PostgreSQL (SPEC §11 "Notices everywhere", and the notices of "Faults
 * between a replica and its database"): every pair another replica changed is announced, exactly once,
 * however this replica's own commits interleave with them; and a replica that missed changes for good (its
 * feed rows pruned while it was cut off) reads every pending pair of its subscriptions again.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { encodeStateEvent } from "../../src/codec/event-codec.js";
import type { Notice } from "../../src/domain/notice.js";
import type { PairChange } from "../../src/domain/records.js";
import { createLogger } from "../../src/logger.js";
import { StatusError } from "../../src/errors.js";
import { NoticeHub, type NoticeStreamItem } from "../../src/notices/notice-hub.js";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { parsePostgresUrl } from "../../src/store/postgres/postgres-url.js";
import { freshSchema, testCluster } from "../support/backend.js";
import { storeAppend, waitFor } from "../support/helpers.js";
import { connectTestClient, skipWithoutPostgres } from "../support/postgres-cluster.js";
import { FaultProxy } from "../support/fault-proxy.js";

async function openStore(schema: string, url = testCluster().url): Promise<PostgresStore> {
  return PostgresStore.open({
    target: parsePostgresUrl(url),
    schema,
    durability: "normal",
    nodeId: "test-node",
    encodeEvent: encodeStateEvent,
    nowMs: () => Date.now(),
  });
}

/** Every pair a store's feed announces, as "watcher -> target", in order. */
function recordFeed(store: PostgresStore): string[] {
  const seen: string[] = [];
  store.onPairChanges((changes: readonly PairChange[]) => seen.push(...changes.map((c) => `${c.watcherKey} -> ${c.target.key}`)));
  return seen;
}


const watcher = "agent:main:boss";

describe("the feed between replicas on PostgreSQL", { skip: skipWithoutPostgres() }, () => {
  test("commits of this replica that change no pair never hide another replica's change: each of 300 reaches it", async () => {
    const schema = freshSchema();
    const [a, b] = [await openStore(schema), await openStore(schema)];
    const targets = Array.from({ length: 300 }, (_, i) => `agent:main:subagent:t${i}`);
    try {
      for (const target of targets) await a.watch(watcher, { namespace: "default", agentId: "main", key: target }, 1);
      const onB = recordFeed(b);
      // B commits all the while, none of its commits changing a pair (an unwatched session).
      let busy = true;
      const quiet = (async () => {
        while (busy) await b.append(storeAppend("agent:main:unwatched", Date.now()));
      })();
      for (const target of targets) {
        await a.append(storeAppend(target, Date.now(), "human_direct_message"));
        await sleep(1);
      }
      // The feed's timer reads every 2 s: a change still missing after 3 s was skipped for good.
      await waitFor(() => onB.length >= targets.length, 3000);
      busy = false;
      await quiet;
      const missing = targets.filter((t) => !onB.includes(`${watcher} -> ${t}`));
      assert.deepEqual(missing, [], `${missing.length} of ${targets.length} changes never reached the other replica`);
    } finally {
      await a.close();
      await b.close();
    }
  });

  test("a replica's own changes are announced once each, by it, never again by its feed", async () => {
    const schema = freshSchema();
    const store = await openStore(schema);
    const targets = Array.from({ length: 200 }, (_, i) => `agent:main:subagent:t${i}`);
    try {
      for (const target of targets) await store.watch(watcher, { namespace: "default", agentId: "main", key: target }, 1);
      const seen = recordFeed(store);
      await Promise.all(targets.map((target) => store.append(storeAppend(target, Date.now(), "human_direct_message"))));
      await sleep(2500); // the feed's timer has read everything by now
      const counts = new Map<string, number>();
      for (const pair of seen) counts.set(pair, (counts.get(pair) ?? 0) + 1);
      assert.equal(counts.size, targets.length, "every pair announced");
      assert.deepEqual([...counts].filter(([, n]) => n !== 1), [], "each once");
    } finally {
      await store.close();
    }
  });

  test("a replica whose missed changes were pruned while it was cut off ends its subscriptions UNAVAILABLE; a new one gets every pending notice", { timeout: 60_000 }, async () => {
    const schema = freshSchema();
    const cluster = testCluster();
    const a = await openStore(schema);
    const proxy = await FaultProxy.start({ path: parsePostgresUrl(cluster.url).socketPath! });
    const b = await openStore(schema, `postgres://postgres@127.0.0.1:${proxy.port}/postgres`);
    const hub = new NoticeHub(b, createLogger("silent"));
    hub.start();
    const serve = (into: NoticeStreamItem[], signal: AbortSignal): Promise<unknown> =>
      (async () => {
        for await (const item of hub.serve({ namespace: "default", watcherKeys: [watcher], prefixes: [] }, signal)) into.push(item);
      })().then(
        () => "ended",
        (error: unknown) => error,
      );
    const received: NoticeStreamItem[] = [];
    const abort = new AbortController();
    const serving = serve(received, abort.signal);
    const targets = Array.from({ length: 5 }, (_, i) => `agent:main:subagent:t${i}`);
    const database = await connectTestClient(cluster.url, schema);
    try {
      for (const target of targets) await a.watch(watcher, { namespace: "default", agentId: "main", key: target }, 1);
      await waitFor(() => received.length === 1, 2000);
      assert.deepEqual(received, [{ synced: { pendingDelivered: 0 } }]);
      proxy.blackhole();
      for (const target of targets) await a.append(storeAppend(target, Date.now(), "human_direct_message"));
      // What B would have read is gone: pruned, as after a cut lasting longer than the feed keeps rows.
      await database.query("DELETE FROM pair_changes");
      proxy.heal();
      // The stream cannot know which of its notices it missed: it ends, and its client subscribes again.
      const ended = await serving;
      assert.ok(ended instanceof StatusError && ended.code === "UNAVAILABLE", `the stream ended with ${String(ended)}`);
      assert.equal(received.length, 1, "nothing was sent before it ended");
      const again: NoticeStreamItem[] = [];
      const resubscribed = serve(again, abort.signal);
      await waitFor(() => again.length === 1 + targets.length, 10_000);
      assert.deepEqual(
        again.map((item) => ("notice" in item ? (item as { notice: Notice }).notice.target.key : "synced")),
        [...[...targets].sort(), "synced"],
        "every pending notice reaches the new subscriber of the replica that was cut off, then synced",
      );
      abort.abort();
      await resubscribed;
    } finally {
      abort.abort();
      await serving;
      hub.stop();
      await database.end();
      await b.close();
      await a.close();
      await proxy.close();
    }
  });
});
