/**
 * The fields of node-postgres that store/postgres/driver-internals reads, checked on a real client: a driver
 * upgrade that moves or renames them fails here instead of silently disabling the round-trip deadlines.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { destroyClient, driverInternalsOf, isQueryable } from "../../src/store/postgres/driver-internals.js";
import { testCluster } from "../support/backend.js";
import { connectTestClient, skipWithoutPostgres } from "../support/postgres-cluster.js";

describe("node-postgres internals", { skip: skipWithoutPostgres() }, () => {
  test("a connected client is queryable, with a socket that can be destroyed", async () => {
    const client = await connectTestClient(testCluster().url);
    try {
      assert.deepEqual(driverInternalsOf(client), { queryable: true, ending: false, hasSocket: true });
      assert.equal(isQueryable(client), true);
    } finally {
      await client.end();
    }
  });

  test("destroying its socket ends the client at once: it is no longer queryable and a query fails", async () => {
    const client = await connectTestClient(testCluster().url);
    const ended = new Promise((resolve) => client.once("end", resolve));
    destroyClient(client);
    await ended;
    assert.equal(driverInternalsOf(client).queryable, false);
    assert.equal(isQueryable(client), false);
    await assert.rejects(client.query("SELECT 1"));
  });

  test("a client being ended is not queryable", async () => {
    const client = await connectTestClient(testCluster().url);
    const ending = client.end();
    assert.equal(driverInternalsOf(client).ending, true);
    assert.equal(isQueryable(client), false);
    await ending;
  });
});
