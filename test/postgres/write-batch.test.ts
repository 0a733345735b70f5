/**
 * The PostgreSQL write batch's read-your-writes cache, driven directly inside one real transaction: what a
 * batch read up front or wrote is what its later writes see, a removal through the batch makes it forget
 * the rows removed, and held-back rows reach the database only when the batch is told to flush.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { encodeStateEvent } from "../../src/codec/event-codec.js";
import { eventFromAppend } from "../../src/domain/append-plan.js";
import type { StoredEvent } from "../../src/domain/event.js";
import type { CursorRecord } from "../../src/domain/records.js";
import type { SessionId } from "../../src/domain/session-key.js";
import { ClockTables } from "../../src/store/postgres/clock-tables.js";
import { PostgresDatabase, type PgTransaction } from "../../src/store/postgres/connection.js";
import { CursorTables } from "../../src/store/postgres/cursor-tables.js";
import { dedupeIdFromKey, EventTables } from "../../src/store/postgres/event-tables.js";
import { sql } from "../../src/store/postgres/pg-sql.js";
import { PostgresStore } from "../../src/store/postgres/postgres-store.js";
import { parsePostgresUrl } from "../../src/store/postgres/postgres-url.js";
import { WriteBatch, type WriteHints } from "../../src/store/postgres/write-batch.js";
import { freshSchema, testCluster } from "../support/backend.js";
import { skipWithoutPostgres } from "../support/postgres-cluster.js";
import { storeAppend } from "../support/helpers.js";

const target: SessionId = { namespace: "default", agentId: "worker", key: "agent:worker:main" };
const watcherKey = "agent:main:main";

function cursor(notified: number): CursorRecord {
  return { watcherKey, target, acked: 0, notified, material: notified, updatedAtMs: 1, provenance: "explicit", extraKinds: [] };
}

function event(sequence: number): StoredEvent {
  const fields = eventFromAppend(storeAppend(target.key, 1), sequence);
  return { ...fields, wire: encodeStateEvent(fields) };
}

/** Runs `work` on a batch of one transaction of a fresh schema (rolled back at the end), with its tables. */
async function inBatch(hints: WriteHints, work: (batch: WriteBatch, tables: { cursors: CursorTables; events: EventTables }) => Promise<void>): Promise<void> {
  const schema = freshSchema();
  const target = parsePostgresUrl(testCluster().url);
  // Opening a store once creates the schema.
  await (await PostgresStore.open({ target, schema, durability: "normal", nodeId: "n", encodeEvent: encodeStateEvent, nowMs: () => 1 })).close();
  const db = new PostgresDatabase({ target, schema, durability: "normal" });
  const tables = { events: new EventTables(db), cursors: new CursorTables(db), clock: new ClockTables(`sessionstate_${schema}`) };
  const rollback = new Error("rolled back on purpose");
  try {
    await db.transaction(async (tx: PgTransaction) => {
      const batch = await WriteBatch.open(tx, tables, tables.clock.lock(tx), [hints]);
      await work(batch, tables);
      throw rollback;
    });
  } catch (error) {
    if (error !== rollback) throw error;
  } finally {
    await db.close();
  }
}

async function cursorRows(batch: WriteBatch): Promise<number> {
  const [row] = await batch.query<{ n: number }>(sql`SELECT count(*)::int8 AS n FROM cursors`);
  return row!.n;
}

describe("the PostgreSQL write batch", { skip: skipWithoutPostgres() }, () => {
  test("a cursor written is read back before it is flushed, and reaches the database only on flush", async () => {
    await inBatch({ targets: [target] }, async (batch) => {
      assert.deepEqual(await batch.cursorsOn(target), []);
      batch.putCursors([cursor(3)]);
      batch.putCursors([cursor(4)]);
      assert.deepEqual(await batch.cursorsOn(target), [cursor(4)]);
      assert.deepEqual(await batch.cursorsOf([{ watcherKey, target }]), [cursor(4)]);
      assert.equal(await cursorRows(batch), 0, "held back until flush");
      batch.flush();
      assert.equal(await cursorRows(batch), 1);
    });
  });

  test("a cursor removed through the batch is not read back from what it held", async () => {
    await inBatch({ targets: [target] }, async (batch, tables) => {
      batch.putCursors([cursor(2)]);
      const removed = await batch.removeCursors(tables.cursors.remove(watcherKey, target));
      assert.deepEqual(removed, [cursor(2)]);
      assert.deepEqual(await batch.cursorsOn(target), []);
      assert.deepEqual(await batch.cursorsOf([{ watcherKey, target }]), []);
      // A write after the removal writes the pair afresh.
      batch.putCursors([cursor(5)]);
      assert.deepEqual(await batch.cursorsOn(target), [cursor(5)]);
    });
  });

  test("an event appended is found by its dedupe key with the version the batch leaves, and forgotten once removed", async () => {
    await inBatch({ dedupeKeys: [dedupeIdFromKey("default", "k1")] }, async (batch, tables) => {
      assert.equal(await batch.dedupedEvent("default", "k1"), undefined);
      const first = event(batch.nextSequence());
      batch.appendEvent(first, "k1", 1);
      const second = event(batch.nextSequence());
      batch.appendEvent(second, undefined, 1);
      assert.deepEqual(await batch.dedupedEvent("default", "k1"), { event: first, stateVersion: second.sequence });
      assert.equal(await batch.versionOf(target), second.sequence);
      assert.equal(await batch.removeEvents(tables.events.deleteSession(target).events), 2);
      assert.equal(await batch.dedupedEvent("default", "k1"), undefined);
    });
  });
});
