import assert from "node:assert/strict";
import { join } from "node:path";
import { describe, test } from "node:test";
import Database from "better-sqlite3";
import { migrations } from "../../src/store/sqlite/migrations.js";
import { storeAppend, tempDir, openTestStore, allPendingCursors } from "../support/helpers.js";

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
        const a = await store.sessionStatus({ namespace: "default", agentId: "main", key: "agent:main:a" }, 0, 10);
        const b = await store.sessionStatus({ namespace: "default", agentId: "ops", key: "agent:ops:b" }, 0, 10);
        const orphan = await store.sessionStatus({ namespace: "default", agentId: "ops", key: "agent:ops:orphan" }, 0, 10);
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
          ["cursors", "events", "heads", "namespaces", "own_texts", "run_flags", "sqlite_sequence", "upstream_links", "wal_restarts"],
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
        const plan = db
          .prepare<[], { detail: string }>("EXPLAIN QUERY PLAN SELECT sequence FROM events WHERE namespace = 'default' AND dedupe_key = 'k'")
          .all();
        assert.match(plan.map((step) => step.detail).join("; "), /USING (COVERING )?INDEX events_by_dedupe_key/);
      } finally {
        db.close();
      }
    } finally {
      dir.remove();
    }
  });
});

describe("schema migration to namespaces (6)", () => {
  test("every row of every table moves to the default namespace, keeps its values, and a second namespace starts empty", async () => {
    const dir = tempDir();
    const path = join(dir.dir, "v5.db");
    try {
      const db = new Database(path);
      for (const migration of migrations.slice(0, 5)) db.exec(migration.sql);
      db.exec(`
        INSERT INTO heads (agent_id, session_key, state_version, pruned_through, updated_at_ms) VALUES ('main', 'agent:main:t', 7, 3, 1);
        INSERT INTO events (sequence, session_id, kind, actor_type, summary, occurred_at_ms, dedupe_key, wire)
          VALUES (5, 1, 'human_direct_message', 'human', 'v5', 2, 'dk', x'0805'), (7, 1, 'goal_changed', 'agent', 'v5', 3, NULL, x'0807');
        INSERT INTO cursors VALUES ('agent:main:w', 'main', 'agent:main:t', 3, 5, 7, 4);
        INSERT INTO upstream_links VALUES ('main', 'agent:main:t', 'claude', 'h', '', 'node:n1', 'u1', 1, NULL, 5);
        INSERT INTO run_flags VALUES ('main', 'agent:main:t', 1, 2, 6);
        INSERT INTO own_texts VALUES ('main', 'agent:main:t', 1, 'digest-1');
      `);
      db.pragma("user_version = 5");
      db.close();

      const store = openTestStore(path);
      try {
        const t = { namespace: "default", agentId: "main", key: "agent:main:t" };
        const elsewhere = { ...t, namespace: "team-b" };
        const status = await store.sessionStatus(t, 0, 10);
        assert.deepEqual([status.stateVersion, status.changes!.events.map((e) => e.sequence), status.changes!.historyGap], [7, [5, 7], true]);
        assert.deepEqual(await allPendingCursors(store, "default", ["agent:main:w"]), [
          { watcherKey: "agent:main:w", target: t, acked: 3, notified: 5, material: 7, updatedAtMs: 4, provenance: "explicit", extraKinds: [] },
        ]);
        assert.equal((await store.getLink(t))?.marker, "u1");
        assert.deepEqual(await store.runFlag(t), { active: true, starts: 2, refreshedAtMs: 6 });
        assert.deepEqual(await store.ownTextDigests(t), ["digest-1"]);
        const again = await store.append({ ...storeAppend("agent:main:t", 8), dedupeKey: "dk" });
        assert.ok(again.recorded && again.deduplicated && again.event.sequence === 5, "the dedupe key is kept, in default");

        assert.equal((await store.sessionStatus(elsewhere, 0, 10)).stateVersion, 0);
        assert.deepEqual(await allPendingCursors(store, "team-b", ["agent:main:w"]), []);
        assert.equal(await store.countPendingNotices(), 1, "the migration counted the pending notice");
        assert.equal(await store.getLink(elsewhere), undefined);
        const fresh = await store.append({ ...storeAppend("agent:main:t", 9), session: elsewhere, dedupeKey: "dk" });
        assert.ok(fresh.recorded && !fresh.deduplicated && fresh.event.sequence === 8, "the same key and dedupe key in team-b: a new session");
      } finally {
        await store.close();
      }
      const after = new Database(path, { readonly: true });
      try {
        assert.equal(after.pragma("user_version", { simple: true }), migrations.length);
        assert.deepEqual(after.pragma("foreign_key_check"), []);
        assert.deepEqual(after.pragma("integrity_check"), [{ integrity_check: "ok" }]);
      } finally {
        after.close();
      }
    } finally {
      dir.remove();
    }
  });
});
