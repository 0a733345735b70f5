import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import Database from "better-sqlite3";
import { migrations } from "../src/store/migrations.js";
import { storeAppend, tempDir, openTestStore } from "./helpers.js";

/** A schema-3 database as the previous release left it: events with text session keys and wire bytes. */
function createVersion3(path: string): Map<number, Buffer> {
  const db = new Database(path);
  for (const migration of migrations.slice(0, 2)) db.exec(migration.sql);
  const insert = db.prepare(
    `INSERT INTO events (agent_id, session_key, kind, actor_type, summary, occurred_at_ms, dedupe_key)
     VALUES (?, ?, 'goal_changed', 'agent', 'from v3', ?, ?)`,
  );
  const head = db.prepare(
    "INSERT INTO heads (agent_id, session_key, state_version, pruned_through, updated_at_ms) VALUES (?, ?, ?, ?, 1)",
  );
  insert.run("main", "agent:main:a", 1_000, null); // 1, pruned below
  insert.run("main", "agent:main:a", 2_000, "dedupe-a"); // 2
  insert.run("ops", "agent:ops:b", 3_000, null); // 3
  insert.run("main", "agent:main:a", 4_000, null); // 4
  insert.run("ops", "agent:ops:orphan", 5_000, null); // 5: no head row (never written so; must survive anyway)
  insert.run("ops", "agent:ops:b", 6_000, null); // 6, pruned below: the highest sequence ever issued
  head.run("main", "agent:main:a", 4, 1);
  head.run("ops", "agent:ops:b", 6, 0);
  db.prepare("DELETE FROM events WHERE sequence IN (1, 6)").run();
  db.exec(migrations[2]!.sql);
  migrations[2]!.fill!(db);
  db.pragma("user_version = 3");
  const wire = new Map(db.prepare<[], { sequence: number; wire: Buffer }>("SELECT sequence, wire FROM events").all().map((r) => [r.sequence, r.wire]));
  db.close();
  return wire;
}

describe("schema migration to integer session ids (4)", () => {
  test("keeps every event, head, prune watermark, dedupe key and the sequence counter", async () => {
    const dir = tempDir();
    const path = join(dir.dir, "v3.db");
    try {
      const wireBefore = createVersion3(path);
      const store = openTestStore(path);
      try {
        const a = await store.sessionStatus({ agentId: "main", key: "agent:main:a" }, 0, 10);
        const b = await store.sessionStatus({ agentId: "ops", key: "agent:ops:b" }, 0, 10);
        const orphan = await store.sessionStatus({ agentId: "ops", key: "agent:ops:orphan" }, 0, 10);
        assert.deepEqual(
          a.changes!.events.map((e) => e.sequence),
          [2, 4],
        );
        assert.deepEqual([a.stateVersion, a.changes!.historyGap, a.changes!.earliestAvailableSequence], [4, true, 2]);
        assert.deepEqual([b.stateVersion, b.changes!.events.map((e) => e.sequence), b.changes!.historyGap], [6, [3], false]);
        assert.deepEqual([orphan.stateVersion, orphan.changes!.events.map((e) => e.sequence)], [5, [5]]);
        for (const e of [...a.changes!.events, ...b.changes!.events, ...orphan.changes!.events]) {
          assert.deepEqual(Buffer.from(e.wire), wireBefore.get(e.sequence), `wire bytes of event ${e.sequence}`);
        }

        const again = await store.append({ ...storeAppend("agent:main:a", 7_000), dedupeKey: "dedupe-a" });
        assert.ok(again.recorded && again.deduplicated);
        assert.deepEqual([again.event.sequence, again.event.sessionKey, again.event.agentId, again.stateVersion], [2, "agent:main:a", "main", 4]);

        const next = await store.append(storeAppend("agent:ops:b", 8_000));
        assert.ok(next.recorded);
        assert.equal(next.event.sequence, 7, "sequence 6 was issued before the migration and is never reused");
        const fresh = await store.append(storeAppend("agent:ops:new", 9_000));
        assert.deepEqual([fresh.recorded && fresh.event.sequence, fresh.stateVersion], [8, 8]);
      } finally {
        await store.close();
      }
      const db = new Database(path, { readonly: true });
      try {
        assert.equal(db.pragma("user_version", { simple: true }), migrations.length);
        assert.deepEqual(db.pragma("foreign_key_check"), []);
        assert.deepEqual(db.pragma("integrity_check"), [{ integrity_check: "ok" }]);
        const tables = db.prepare<[], { name: string }>("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").all();
        assert.deepEqual(
          tables.map((t) => t.name),
          ["cursors", "events", "heads", "own_texts", "run_flags", "sqlite_sequence", "upstream_links"],
        );
      } finally {
        db.close();
      }
    } finally {
      dir.remove();
    }
  });

  test("dedupe keys stay unique through a partial index that holds only events with a key", async () => {
    const dir = tempDir();
    const path = join(dir.dir, "new.db");
    try {
      const store = openTestStore(path);
      try {
        for (let i = 0; i < 5; i++) await store.append(storeAppend("agent:main:a", 1_000 + i));
        const first = await store.append({ ...storeAppend("agent:main:a", 2_000), dedupeKey: "k" });
        const second = await store.append({ ...storeAppend("agent:ops:b", 3_000), dedupeKey: "k" });
        assert.ok(first.recorded && second.recorded && second.deduplicated);
        assert.equal(second.event.sequence, first.event.sequence);
      } finally {
        await store.close();
      }
      const db = new Database(path, { readonly: true });
      try {
        const indexes = db.pragma("index_list(events)") as { name: string; unique: number; partial: number }[];
        const dedupe = indexes.find((index) => index.name === "events_by_dedupe_key");
        assert.deepEqual([dedupe?.unique, dedupe?.partial], [1, 1]);
        const plan = db.prepare<[], { detail: string }>("EXPLAIN QUERY PLAN SELECT sequence FROM events WHERE dedupe_key = 'k'").all();
        assert.match(plan.map((step) => step.detail).join("; "), /USING (COVERING )?INDEX events_by_dedupe_key/);
      } finally {
        db.close();
      }
    } finally {
      dir.remove();
    }
  });
});
