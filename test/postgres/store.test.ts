/**
 * What only the PostgreSQL backend has: group commit without savepoints under the clock lock, and
 * COMMIT pipelined behind the writes. The behaviour it shares with SQLite is the behaviour suite's.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { encodeStateEvent } from "../../src/codec/event-codec.js";
import { storeFaultFromError } from "../../src/store/store-errors.js";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { eventPruneChoices, sessionsPageQuery } from "../../src/store/postgres/event-tables.js";
import { untouchedCursors } from "../../src/store/postgres/cursor-tables.js";
import { oldFeedRows } from "../../src/store/postgres/clock-tables.js";
import { hookLinksBySource, hookLinksByThread } from "../../src/store/postgres/link-tables.js";
import { parsePostgresUrl } from "../../src/store/postgres/postgres-url.js";
import { freshSchema, testCluster } from "../support/backend.js";
import { connectTestClient, skipWithoutPostgres } from "../support/postgres-cluster.js";
import { storeAppend } from "../support/helpers.js";

async function openStore(schema = freshSchema()): Promise<PostgresStore> {
  return PostgresStore.open({
    target: parsePostgresUrl(testCluster().url),
    schema,
    durability: "normal",
    nodeId: "test-node",
    encodeEvent: encodeStateEvent,
    nowMs: () => Date.now(),
  });
}

describe("the PostgreSQL store", { skip: skipWithoutPostgres() }, () => {
  test("a write that PostgreSQL refuses fails alone: the rest of its batch commits, in order, and it leaves no row", async () => {
    const store = await openStore();
    try {
      const key = "agent:main:worker";
      // A NUL byte cannot be stored in a text column: PostgreSQL fails the statement (the service's own
      // validation refuses such a summary earlier; here it stands for any fault inside the database).
      const outcomes = await Promise.allSettled([
        store.append(storeAppend(key, 1)),
        store.append({ ...storeAppend(key, 1), summary: "bad \u0000 byte" }),
        store.append(storeAppend(key, 1)),
      ]);
      assert.deepEqual(
        outcomes.map((o) => o.status),
        ["fulfilled", "rejected", "fulfilled"],
      );
      const sequences = outcomes.flatMap((o) => (o.status === "fulfilled" && o.value.recorded ? [o.value.event.sequence] : []));
      const status = await store.sessionStatus({ namespace: "default", agentId: "main", key }, 0, 10);
      assert.deepEqual(
        status.changes!.events.map((e) => e.sequence),
        sequences,
      );
      assert.equal(status.stateVersion, sequences[1]);
      assert.ok(sequences[0]! < sequences[1]!);
      // The next write goes on from the clock as it was committed.
      const next = await store.append(storeAppend(key, 1));
      assert.ok(next.recorded && next.event.sequence > sequences[1]!);
    } finally {
      await store.close();
    }
  });

  test("a batch that fails alone is reported failed, never as stored: its COMMIT comes back as a rollback", async () => {
    const store = await openStore();
    try {
      await assert.rejects(store.append({ ...storeAppend("agent:main:alone", 1), summary: "\u0000" }));
      const status = await store.sessionStatus({ namespace: "default", agentId: "main", key: "agent:main:alone" }, 0, 10);
      assert.equal(status.stateVersion, 0);
    } finally {
      await store.close();
    }
  });

  // Without lock_timeout the append would wait for ever (the holder lets go only after it fails): the
  // timeout turns that into a failure.
  test("a transaction holding the clock cannot stall writes for ever: a batch waits lock_timeout, fails as busy, and writes once the clock is free", { timeout: 30_000 }, async () => {
    const schema = freshSchema();
    const store = await openStore(schema);
    // Another program's transaction, with no deadline of ours: it holds the clock until told to let go.
    const holder = await connectTestClient(testCluster().url, schema);
    try {
      await holder.query("BEGIN");
      await holder.query("SELECT event_seq FROM clock WHERE id = 1 FOR UPDATE");
      // A dedupe key and a notifying kind: the batch's up-front reads are in flight when the lock fails.
      const waiting = store.append({ ...storeAppend("agent:main:w", 1, "human_direct_message"), dedupeKey: "k-busy" });
      await assert.rejects(waiting, (err: unknown) => {
        assert.equal(storeFaultFromError(err), "busy");
        return true;
      });
      await holder.query("COMMIT");
      const after = await store.append({ ...storeAppend("agent:main:w", 1, "human_direct_message"), dedupeKey: "k-busy" });
      assert.ok(after.recorded && !after.deduplicated && after.event.sequence === 1);
    } finally {
      await holder.end();
      await store.close();
    }
  });

  test("appends through two stores on one schema (two replicas) take unique, increasing sequences and see each other's dedupe keys", async () => {
    const schema = freshSchema();
    const [a, b] = [await openStore(schema), await openStore(schema)];
    try {
      const both = await Promise.all(
        Array.from({ length: 200 }, (_, i) => (i % 2 === 0 ? a : b).append({ ...storeAppend(`agent:main:s${i % 7}`, 1), dedupeKey: `k${i % 150}` })),
      );
      const recorded = both.filter((o) => o.recorded && !o.deduplicated);
      assert.equal(recorded.length, 150, "one event per dedupe key");
      const sequences = recorded.map((o) => (o.recorded ? o.event.sequence : 0));
      assert.equal(new Set(sequences).size, 150);
      for (const outcome of both) {
        if (outcome.recorded && outcome.deduplicated) {
          const original = recorded.find((o) => o.recorded && o.event.sequence === outcome.event.sequence);
          assert.ok(original !== undefined, "a deduplicated append answers with the stored event");
        }
      }
    } finally {
      await a.close();
      await b.close();
    }
  });

  test("a retention step's statements walk indexes and stop at their LIMIT, whatever the statistics say (no table is scanned whole)", async () => {
    const schema = freshSchema();
    const store = await openStore(schema);
    const client = await connectTestClient(testCluster().url, schema);
    try {
      // 20,000 events and 2,000 cursors written at once, with no statistics gathered since: the planner
      // would scan whole tables for these LIMITs if it could.
      // (50 in flight at a time: on a busy machine, 1,000 queued at once, and once 250, outwaited their answer budget.)
      for (let i = 0; i < 20_000; i += 50) {
        await Promise.all(Array.from({ length: 50 }, (_, k) => store.append(storeAppend(`agent:main:s${(i + k) % 1000}`, Date.now(), "run_completed"))));
      }
      for (let i = 0; i < 2000; i += 50) {
        await Promise.all(Array.from({ length: 50 }, (_, k) => store.watch(`agent:main:w${(i + k) % 20}`, { namespace: "default", agentId: "main", key: `agent:main:s${i + k}` }, Date.now())));
      }
      // 1,000 adopted links, each with its own transcript and thread id.
      for (let i = 0; i < 1000; i += 50) {
        await Promise.all(
          Array.from({ length: 50 }, (_, k) => {
            const session = { namespace: "default", agentId: "main", key: `agent:main:linked${i + k}` };
            return store.adopt({
              adoptedEvent: { ...storeAppend(session.key, Date.now(), "adopted"), actorType: "human", dedupeKey: `adopted:${session.key}` },
              link: { session, catalogId: "claude", hostId: "", threadId: `thread-${i + k}`, source: { kind: "transcript", path: `/t/${i + k}.jsonl` }, marker: "0", updatedAtMs: Date.now() },
            });
          }),
        );
      }
      const plan = async (query: { compile(): { text: string; values: unknown[] } }): Promise<string> => {
        const { text, values } = query.compile();
        const { rows } = await client.query<{ "QUERY PLAN": string }>(`EXPLAIN ${text}`, values);
        return rows.map((row) => row["QUERY PLAN"]).join("\n");
      };
      await client.query("BEGIN");
      await client.query("SET LOCAL enable_seqscan = off");
      await client.query("SET LOCAL enable_bitmapscan = off");
      const plans = [
        await plan(eventPruneChoices.olderThan(Date.now() - 86_400_000, 1000)),
        await plan(eventPruneChoices.oldestOf("default", 1000)),
        await plan(untouchedCursors(Date.now() - 86_400_000, 1000)),
        await plan(oldFeedRows(Date.now() - 3_600_000, 1000)),
      ];
      // Every page of sessions: by agent, by key prefix, most recent first; of the namespace and of one agent.
      const sessionPages: string[] = [];
      for (const agentId of [undefined, "main"]) {
        for (const order of [{ by: "agent" }, { by: "key", prefix: "agent:main:s1" }, { by: "recent" }] as const) {
          sessionPages.push(await plan(sessionsPageQuery("default", agentId, order, 100)));
        }
      }
      // A hook's links: a seek in its index, whatever else is stored.
      const hookPlans = [await plan(hookLinksBySource("default", "/t/x.jsonl", "node-1", 16)), await plan(hookLinksByThread("default", "thread", "node-1", 16))];
      await client.query("ROLLBACK");
      for (const [i, text] of hookPlans.entries()) {
        assert.match(text, new RegExp(`Index Scan using upstream_links_by_${i === 0 ? "source" : "thread"} on upstream_links`), `hook lookup ${i}:\n${text}`);
        assert.doesNotMatch(text, /Seq Scan|Bitmap|Sort/, `hook lookup ${i}:\n${text}`);
      }
      for (const [i, text] of plans.entries()) {
        assert.doesNotMatch(text, /Seq Scan|Bitmap|Sort/, `statement ${i}:\n${text}`);
        assert.match(text, /Limit/, `statement ${i} stops at its LIMIT:\n${text}`);
      }
      // A page of sessions reads its index in order from its start, and only the rows it returns.
      const indexes = ["heads_session", "heads_by_key", "heads_by_time", "heads_session", "heads_by_key", "heads_of_agent_by_time"];
      for (const [i, text] of sessionPages.entries()) {
        assert.match(text, new RegExp(`^Limit.*\\n\\s+->  Index Scan (Backward )?using ${indexes[i]} on heads`), `page ${i}:\n${text}`);
        assert.doesNotMatch(text, /Seq Scan|Bitmap|Sort|Filter/, `page ${i}:\n${text}`);
      }
    } finally {
      await client.end();
      await store.close();
    }
  });
});
