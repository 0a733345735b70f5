import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { isPostgresUrl, parsePostgresUrl, redactPostgresUrl } from "../../src/store/postgres/postgres-url.js";

describe("PostgreSQL URLs, as libpq takes them", () => {
  test("a SQLite path is not a PostgreSQL URL; both schemes are, in any case", () => {
    assert.equal(isPostgresUrl("./data/sessionstate.db"), false);
    assert.equal(isPostgresUrl("postgres://db/x"), true);
    assert.equal(isPostgresUrl("POSTGRESQL://db/x"), true);
  });

  test("TCP host, port, user, password and database", () => {
    assert.deepEqual(parsePostgresUrl("postgres://app:s%40cret@db.internal:6543/state"), {
      host: "db.internal",
      port: 6543,
      database: "state",
      username: "app",
      password: "s@cret",
      ssl: "disable",
    });
  });

  test("a bracketed IPv6 host", () => {
    const target = parsePostgresUrl("postgresql://app@[::1]:5433/state?sslmode=require");
    assert.equal(target.host, "::1");
    assert.equal(target.port, 5433);
    assert.equal(target.ssl, "require");
  });

  test("an empty host with a unix socket directory in ?host= (libpq's form, which postgres.js cannot parse)", () => {
    assert.deepEqual(parsePostgresUrl("postgres://postgres@/postgres?host=%2Ftmp%2Fpg&port=25679"), {
      socketPath: "/tmp/pg/.s.PGSQL.25679",
      port: 25679,
      database: "postgres",
      username: "postgres",
      ssl: "disable",
    });
  });

  test("bad URLs are refused with a reason and never echo the password", () => {
    assert.throws(() => parsePostgresUrl("postgres://a:hunter2@h:99999/x"), (err: Error) => {
      assert.equal(err.message, 'invalid port "99999"');
      return true;
    });
    assert.throws(() => parsePostgresUrl("postgres://h1,h2/x"), /several hosts/u);
    assert.throws(() => parsePostgresUrl("postgres://h/x?target_session_attrs=any"), /unsupported URL parameter "target_session_attrs"/u);
    assert.throws(() => parsePostgresUrl("postgres://h/x?sslmode=sometimes"), /invalid sslmode "sometimes"/u);
  });

  test("redaction for logs hides the password wherever it is given", () => {
    assert.equal(redactPostgresUrl("postgres://app:hunter2@db/state"), "postgres://app:***@db/state");
    assert.equal(redactPostgresUrl("postgres://db/state?user=a&password=hunter2"), "postgres://db/state?user=a&password=***");
  });
});
