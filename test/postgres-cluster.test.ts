import assert from "node:assert/strict";
import { describe, test } from "node:test";
import postgres from "postgres";
import { parsePostgresUrl } from "../src/store/postgres-url.js";
import { skipWithoutPostgres, startPostgresCluster } from "./postgres-cluster.js";

describe("the throwaway PostgreSQL cluster of the tests", { skip: skipWithoutPostgres() }, () => {
  test("starts, answers over its unix socket with the driver's int8 as numbers, stops, starts again and goes away", async () => {
    const cluster = startPostgresCluster();
    try {
      const target = parsePostgresUrl(cluster.url);
      const connect = () =>
        postgres({
          path: target.socketPath!,
          port: target.port,
          database: target.database,
          username: target.username,
          onnotice: () => {},
          max: 1,
        });
      let sql = connect();
      const [row] = await sql`SELECT current_setting('server_encoding') AS encoding, current_setting('listen_addresses') AS tcp`;
      assert.deepEqual({ ...row }, { encoding: "UTF8", tcp: "" });
      await sql.end();
      cluster.stop();
      cluster.start();
      sql = connect();
      const [again] = await sql`SELECT 1 AS one`;
      assert.equal(again!.one, 1);
      await sql.end();
    } finally {
      cluster.destroy();
    }
  });
});
