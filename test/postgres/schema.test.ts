import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type pg from "pg";
import { migratePostgres, NewerSchemaError, postgresMigrations } from "../../src/store/postgres/migrations.js";
import { connectTestClient, skipWithoutPostgres, startPostgresCluster, type PostgresCluster } from "../support/postgres-cluster.js";

describe("the PostgreSQL schema", { skip: skipWithoutPostgres() }, () => {
  let cluster: PostgresCluster;
  const clients: pg.Client[] = [];
  const connection = async (schema: string): Promise<pg.Client> => {
    const client = await connectTestClient(cluster.url, schema);
    clients.push(client);
    return client;
  };
  before(() => {
    cluster = startPostgresCluster();
  });
  after(async () => {
    await Promise.all(clients.map((client) => client.end()));
    cluster.destroy();
  });

  test("replicas migrating an empty schema at the same moment both come up: one migrates, the others find it done", async () => {
    const racers = await Promise.all([connection("racing"), connection("racing"), connection("racing")]);
    const results = await Promise.all(racers.map((client) => migratePostgres(client, "racing")));
    const known = postgresMigrations.length;
    assert.deepEqual(
      results.map((r) => r.from).sort(),
      [0, known, known],
    );
    assert.ok(results.every((r) => r.to === known));
    const { rows: [clock] } = await racers[0]!.query("SELECT event_seq, change_seq FROM clock");
    assert.deepEqual({ ...clock }, { event_seq: 0, change_seq: 0 });
  });

  test("keys sort in byte order (COLLATE \"C\"), as in SQLite, and int8 comes back as a number", async () => {
    const client = await connection("collation");
    await migratePostgres(client, "collation");
    for (const [i, key] of ["agent:a:b", "agent:a:B", "agent:a:_", "agent:a:é"].entries()) {
      await client.query("INSERT INTO heads (namespace, agent_id, session_key, state_version, updated_at_ms) VALUES ('default', 'a', $1, $2, 0)", [key, i + 9_007_199_254_740_000]);
    }
    const { rows } = await client.query("SELECT session_key, state_version FROM heads ORDER BY agent_id, session_key");
    assert.deepEqual(
      rows.map((row) => row.session_key),
      ["agent:a:B", "agent:a:_", "agent:a:b", "agent:a:é"],
    );
    assert.equal(rows[0]!.state_version, 9_007_199_254_740_001);
  });

  test("a schema newer than this program is refused, naming both versions, and left as it is", async () => {
    const client = await connection("newer");
    await migratePostgres(client, "newer");
    const future = postgresMigrations.length + 3;
    await client.query("UPDATE schema_version SET version = $1", [future]);
    await assert.rejects(migratePostgres(client, "newer"), (err: unknown) => {
      assert.ok(err instanceof NewerSchemaError);
      assert.equal(
        err.message,
        `database schema "newer" is at version ${future}, newer than this program knows (${postgresMigrations.length}): upgrade sessionstate`,
      );
      return true;
    });
    const { rows: [row] } = await client.query("SELECT version FROM schema_version");
    assert.equal(row!.version, future);
  });

  test("migrating a version-1 schema moves every row to the default namespace; the same keys can then live in another", async () => {
    const client = await connection("ns_upgrade");
    await client.query("CREATE SCHEMA ns_upgrade");
    await client.query("SET search_path TO ns_upgrade");
    await client.query(postgresMigrations[0]!);
    await client.query("CREATE TABLE schema_version (id int4 PRIMARY KEY CHECK (id = 1), version int4 NOT NULL); INSERT INTO schema_version VALUES (1, 1)");
    await client.query(`
      INSERT INTO heads (agent_id, session_key, state_version, updated_at_ms) VALUES ('main', 'agent:main:t', 5, 1);
      INSERT INTO events (sequence, session_id, kind, actor_type, summary, occurred_at_ms, dedupe_key, wire)
        SELECT 5, session_id, 'goal_changed', 'agent', 'v1', 1, 'dk', '\\x0805' FROM heads;
      INSERT INTO cursors VALUES ('agent:main:w', 'main', 'agent:main:t', 0, 5, 5, 1);
      INSERT INTO pair_changes VALUES (1, 'agent:main:w', 'main', 'agent:main:t', 1);
      INSERT INTO upstream_links VALUES ('main', 'agent:main:t', 'claude', 'h', '', 'node:n1', 'u1', 0, NULL, 1, NULL);
      INSERT INTO own_texts VALUES ('main', 'agent:main:t', 1, 'digest');
      INSERT INTO run_flags VALUES ('main', 'agent:main:t', true, 1, 1)`);
    assert.deepEqual(await migratePostgres(client, "ns_upgrade"), { from: 1, to: postgresMigrations.length });
    for (const table of ["heads", "events", "cursors", "pair_changes", "upstream_links", "own_texts", "run_flags"]) {
      const { rows } = await client.query<{ namespace: string }>(`SELECT namespace FROM ${table}`);
      assert.deepEqual(rows.map((row) => row.namespace), ["default"], table);
    }
    // The keys are (namespace, ...) now: the same session, cursor, link and dedupe key fit in team-b.
    await client.query(`
      INSERT INTO heads (namespace, agent_id, session_key, state_version, updated_at_ms) VALUES ('team-b', 'main', 'agent:main:t', 6, 1);
      INSERT INTO events (sequence, session_id, namespace, kind, actor_type, summary, occurred_at_ms, dedupe_key, wire)
        SELECT 6, session_id, 'team-b', 'goal_changed', 'agent', 'b', 1, 'dk', '\\x0806' FROM heads WHERE namespace = 'team-b';
      INSERT INTO cursors (namespace, watcher_key, target_agent_id, target_key, acked, notified, material, updated_at_ms)
        VALUES ('team-b', 'agent:main:w', 'main', 'agent:main:t', 0, 6, 6, 1);
      INSERT INTO upstream_links (namespace, agent_id, session_key, catalog_id, host_id, thread_id, source, marker, updated_at_ms)
        VALUES ('team-b', 'main', 'agent:main:t', 'claude', 'h', '', 'node:n1', 'u1', 1)`);
    // And a write that names no namespace is refused: no column keeps a default.
    await assert.rejects(client.query("INSERT INTO cursors (watcher_key, target_agent_id, target_key, acked, notified, material, updated_at_ms) VALUES ('x', 'main', 'y', 0, 0, 0, 1)"), /null value in column "namespace"/u);
  });

  test("a schema name that is not a plain identifier is refused before any SQL", async () => {
    await assert.rejects(migratePostgres(await connection("x"), 'x"; DROP SCHEMA public; --'), /invalid schema name/u);
  });
});
