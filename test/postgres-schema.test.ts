import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type pg from "pg";
import { migratePostgres, NewerSchemaError, postgresMigrations } from "../src/store/postgres-schema.js";
import { connectTestClient, skipWithoutPostgres, startPostgresCluster, type PostgresCluster } from "./postgres-cluster.js";

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
      await client.query("INSERT INTO heads (agent_id, session_key, state_version, updated_at_ms) VALUES ('a', $1, $2, 0)", [key, i + 9_007_199_254_740_000]);
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

  test("a schema name that is not a plain identifier is refused before any SQL", async () => {
    await assert.rejects(migratePostgres(await connection("x"), 'x"; DROP SCHEMA public; --'), /invalid schema name/u);
  });
});
