import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Sql } from "postgres";
import { connectPostgres } from "../src/store/postgres-connection.js";
import { migratePostgres, NewerSchemaError, postgresMigrations } from "../src/store/postgres-schema.js";
import { parsePostgresUrl } from "../src/store/postgres-url.js";
import { skipWithoutPostgres, startPostgresCluster, type PostgresCluster } from "./postgres-cluster.js";

describe("the PostgreSQL schema", { skip: skipWithoutPostgres() }, () => {
  let cluster: PostgresCluster;
  const pools: Sql[] = [];
  const pool = (schema: string): Sql => {
    const sql = connectPostgres(parsePostgresUrl(cluster.url), schema, "normal", 2);
    pools.push(sql);
    return sql;
  };
  before(() => {
    cluster = startPostgresCluster();
  });
  after(async () => {
    await Promise.all(pools.map((sql) => sql.end()));
    cluster.destroy();
  });

  test("replicas migrating an empty schema at the same moment both come up: one migrates, the others find it done", async () => {
    const results = await Promise.all([pool("racing"), pool("racing"), pool("racing")].map((sql) => migratePostgres(sql, "racing")));
    const known = postgresMigrations.length;
    assert.deepEqual(
      results.map((r) => r.from).sort(),
      [0, known, known],
    );
    assert.ok(results.every((r) => r.to === known));
    const sql = pool("racing");
    const [clock] = await sql`SELECT event_seq, change_seq FROM clock`;
    assert.deepEqual({ ...clock }, { event_seq: 0, change_seq: 0 });
  });

  test("keys sort in byte order (COLLATE \"C\"), as in SQLite, and int8 comes back as a number", async () => {
    const sql = pool("collation");
    await migratePostgres(sql, "collation");
    for (const [i, key] of ["agent:a:b", "agent:a:B", "agent:a:_", "agent:a:é"].entries()) {
      await sql`INSERT INTO heads (agent_id, session_key, state_version, updated_at_ms) VALUES ('a', ${key}, ${i + 9_007_199_254_740_000}, 0)`;
    }
    const rows = await sql`SELECT session_key, state_version FROM heads ORDER BY agent_id, session_key`;
    assert.deepEqual(
      rows.map((row) => row.session_key),
      ["agent:a:B", "agent:a:_", "agent:a:b", "agent:a:é"],
    );
    assert.equal(rows[0]!.state_version, 9_007_199_254_740_001);
  });

  test("a schema newer than this program is refused, naming both versions, and left as it is", async () => {
    const sql = pool("newer");
    await migratePostgres(sql, "newer");
    const future = postgresMigrations.length + 3;
    await sql`UPDATE schema_version SET version = ${future}`;
    await assert.rejects(migratePostgres(sql, "newer"), (err: unknown) => {
      assert.ok(err instanceof NewerSchemaError);
      assert.equal(
        err.message,
        `database schema "newer" is at version ${future}, newer than this program knows (${postgresMigrations.length}): upgrade sessionstate`,
      );
      return true;
    });
    const [row] = await sql`SELECT version FROM schema_version`;
    assert.equal(row!.version, future);
  });

  test("a schema name that is not a plain identifier is refused before any SQL", async () => {
    await assert.rejects(migratePostgres(pool("x"), 'x"; DROP SCHEMA public; --'), /invalid schema name/u);
  });
});
