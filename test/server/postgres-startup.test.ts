/**
 * A replica's start on PostgreSQL (issue 42, SPEC §11): a mistake no retry can mend (a role or a database
 * that does not exist, a password missing or wrong) stops the start with one plain line and exit 2; a database that is busy (too many
 * connections) is waited for: the server listens, not serving, says on standard error what it waits for,
 * and serves once the database lets it in.
 */
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { HealthCheckResponse_ServingStatus as ServingStatus, Health } from "../../gen/grpc/health/v1/health_pb.js";
import { createServiceClient } from "../../clients/typescript/src/service-client.js";
import { redactPostgresUrl } from "../../src/store/postgres/postgres-url.js";
import { connect, until } from "../support/helpers.js";
import { freshSchema, testCluster } from "../support/backend.js";
import { connectTestClient, skipWithoutPostgres } from "../support/postgres-cluster.js";
import { runCli, spawnServer } from "../support/process-helpers.js";

describe("a replica starting on PostgreSQL", { skip: skipWithoutPostgres() }, () => {
  let url: string;
  const as = (user: string, database = "postgres"): string => url.replace("postgres://postgres@/postgres", `postgres://${user}@/${database}`);
  before(() => {
    url = testCluster().url;
  });
  after(async () => {
    const admin = await connectTestClient(url);
    await admin.query("DROP ROLE IF EXISTS limited_role").catch(() => undefined);
    await admin.query("DROP ROLE IF EXISTS password_role").catch(() => undefined);
    await admin.end();
  });

  test("a database or a role that does not exist stops the start: one plain line, exit 2", async () => {
    const schema = freshSchema();
    for (const [dbUrl, why] of [
      [as("postgres", "no_such_db"), 'database "no_such_db" does not exist: create it, or name another in the URL'],
      [as("no_such_role"), 'the server refused the login: role "no_such_role" does not exist'],
    ] as const) {
      const result = await runCli(["serve", "--db", dbUrl, "--db-schema", schema, "--listen", "127.0.0.1:0", "--http-listen", "off"]);
      assert.deepEqual(
        { code: result.code, stderr: result.stderr, stdout: result.stdout },
        { code: 2, stderr: `sessionstate: cannot use the database ${redactPostgresUrl(dbUrl)} schema ${schema}: ${why}\n`, stdout: "" },
      );
    }
  });

  test("a URL without the password the server asks for, or with a wrong one, stops the start: one plain line, exit 2", { timeout: 60_000 }, async () => {
    const admin = await connectTestClient(url);
    await admin.query("CREATE ROLE password_role LOGIN PASSWORD 'right-password'");
    await admin.query("GRANT CREATE ON DATABASE postgres TO password_role");
    // The test cluster trusts local logins (its only way in: it listens on no TCP port); this role alone must
    // give a password (the first matching line wins).
    const hbaFile = (await admin.query<{ hba_file: string }>("SHOW hba_file")).rows[0]!.hba_file;
    const hba = readFileSync(hbaFile, "utf8");
    writeFileSync(hbaFile, `local all password_role scram-sha-256\n${hba}`);
    await admin.query("SELECT pg_reload_conf()");
    const schema = freshSchema();
    try {
      const withPassword = (password: string): string => url.replace("postgres://postgres@/postgres", `postgres://password_role:${password}@/postgres`);
      for (const [dbUrl, why] of [
        [as("password_role"), "the server asks for a password and the URL gives none (SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be a string)"],
        [withPassword("wrong-password"), 'the server refused the login: password authentication failed for user "password_role"'],
      ] as const) {
        const result = await runCli(["serve", "--db", dbUrl, "--db-schema", schema, "--listen", "127.0.0.1:0", "--http-listen", "off"]);
        assert.deepEqual(
          { code: result.code, stderr: result.stderr, stdout: result.stdout },
          { code: 2, stderr: `sessionstate: cannot use the database ${redactPostgresUrl(dbUrl)} schema ${schema}: ${why}\n`, stdout: "" },
        );
        assert.doesNotMatch(result.stderr, /wrong-password/);
      }
      // The right password is let in: the rule above is what refused the others.
      const server = await spawnServer(["--db", withPassword("right-password"), "--db-schema", schema, "--listen", "127.0.0.1:0", "--log-level", "silent"]);
      const clients = connect(server.address, { ownConnection: true });
      try {
        const health = createServiceClient(clients.channel, Health, { timeoutMs: 2000 });
        await until(async () => (await health.check({ service: "" }).catch(() => undefined))?.status === ServingStatus.SERVING, "serving with the right password", 10_000);
        assert.equal(server.stderr(), "");
        // The console's server view shows where the data is, the password never (authentication is off here).
        const info = await clients.reconcile.getServerInfo({});
        assert.equal(info.database, `${withPassword("***")} schema ${schema}`);
      } finally {
        clients.close();
        server.child.kill("SIGKILL");
        await server.exited;
      }
    } finally {
      writeFileSync(hbaFile, hba);
      await admin.query("SELECT pg_reload_conf()");
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.query("REVOKE CREATE ON DATABASE postgres FROM password_role");
      await admin.end();
    }
  });

  test("a database that lets no more connections in is waited for: listening, NOT_SERVING, a plain line, then serving", async () => {
    const admin = await connectTestClient(url);
    await admin.query("CREATE ROLE limited_role LOGIN CONNECTION LIMIT 0");
    await admin.query("GRANT CREATE ON DATABASE postgres TO limited_role");
    const schema = freshSchema();
    const dbUrl = as("limited_role");
    const server = await spawnServer(["--db", dbUrl, "--db-schema", schema, "--listen", "127.0.0.1:0", "--log-level", "silent"]);
    const clients = connect(server.address, { ownConnection: true });
    try {
      assert.equal(
        server.stderr(),
        `sessionstate: waiting for the database ${redactPostgresUrl(dbUrl)} schema ${schema} (too many connections for role "limited_role"): listening, not serving until it answers\n`,
      );
      const health = createServiceClient(clients.channel, Health, { timeoutMs: 2000 });
      assert.equal((await health.check({ service: "" })).status, ServingStatus.NOT_SERVING);
      const letInAt = performance.now();
      await admin.query("ALTER ROLE limited_role CONNECTION LIMIT -1");
      await until(async () => (await health.check({ service: "" }).catch(() => undefined))?.status === ServingStatus.SERVING, "serving once it is let in", 10_000);
      console.log(`# serving ${Math.round(performance.now() - letInAt)} ms after the database let it in`);
    } finally {
      clients.close();
      server.child.kill("SIGKILL");
      await server.exited;
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.query("REVOKE CREATE ON DATABASE postgres FROM limited_role");
      await admin.end();
    }
  });
});
