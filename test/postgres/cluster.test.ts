import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { connectTestClient, skipWithoutPostgres, startPostgresCluster } from "../support/postgres-cluster.js";

describe("the throwaway PostgreSQL cluster of the tests", { skip: skipWithoutPostgres() }, () => {
  test("starts, answers over its unix socket with the driver's int8 as numbers, stops, starts again and goes away", async () => {
    const cluster = startPostgresCluster();
    try {
      let client = await connectTestClient(cluster.url);
      const { rows } = await client.query("SELECT current_setting('server_encoding') AS encoding, current_setting('listen_addresses') AS tcp, 9007199254740000::int8 AS big");
      assert.deepEqual({ ...rows[0] }, { encoding: "UTF8", tcp: "", big: 9_007_199_254_740_000 });
      await client.end();
      cluster.stop();
      cluster.start();
      client = await connectTestClient(cluster.url);
      const { rows: again } = await client.query("SELECT 1 AS one");
      assert.equal(again[0]!.one, 1);
      await client.end();
    } finally {
      cluster.destroy();
    }
  });
});
