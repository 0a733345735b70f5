/** The settings of `serve` from one table (src/config.ts): how each source is read, and what is refused. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ConfigError, defaultConfig, loadConfig, settings } from "../../src/config.js";

/** The problems loadConfig reports, or [] when it accepts. */
function problemsOf(args: string[], env: NodeJS.ProcessEnv = {}): readonly string[] {
  try {
    loadConfig(args, env);
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
}

describe("settings", () => {
  test("each has one flag and the variable named after it; the defaults are the loader's", () => {
    const flags = settings.map((s) => s.flag);
    assert.equal(new Set(flags).size, flags.length);
    for (const setting of settings) assert.equal(setting.env, `SESSIONSTATE_${setting.flag.toUpperCase().replaceAll("-", "_")}`);
    assert.deepEqual(loadConfig([], {}), defaultConfig);
  });

  test("a URL that is not PostgreSQL's is refused for --db, never taken as a file name", () => {
    assert.deepEqual(problemsOf(["--db", "mysql://x/y"]), ["--db: must be a SQLite file path or a postgres:// or postgresql:// URL (got a mysql: URL)"]);
    assert.deepEqual(problemsOf([], { SESSIONSTATE_DB: "sqlite:///tmp/a.db" }), [
      "SESSIONSTATE_DB: must be a SQLite file path or a postgres:// or postgresql:// URL (got a sqlite: URL)",
    ]);
    assert.equal(loadConfig(["--db", "postgresql://db.example/app"], {}).dbPath, "postgresql://db.example/app");
    assert.equal(loadConfig(["--db", "./data/x:y.db"], {}).dbPath, "./data/x:y.db");
  });

  test("a switch's variable takes 1, true, 0 or false, and nothing else", () => {
    for (const [text, value] of [["1", true], ["true", true], ["TRUE", true], ["0", false], ["false", false]] as const) {
      assert.equal(loadConfig([], { SESSIONSTATE_INSECURE_BIND: text }).insecureBind, value, text);
    }
    assert.deepEqual(problemsOf([], { SESSIONSTATE_INSECURE_BIND: "yes" }), ['SESSIONSTATE_INSECURE_BIND: must be 1, true, 0 or false (got "yes")']);
    assert.equal(loadConfig(["--insecure-bind"], { SESSIONSTATE_INSECURE_BIND: "0" }).insecureBind, true, "the flag wins");
  });

  test("flags win over variables, and every bad value is reported at once, named by where it came from", () => {
    const config = loadConfig(["--max-events", "7"], { SESSIONSTATE_MAX_EVENTS: "9", SESSIONSTATE_RETENTION_DAYS: "3" });
    assert.deepEqual([config.maxEvents, config.retentionDays], [7, 3]);
    assert.deepEqual(problemsOf(["--listen", "nowhere", "--tls-key", "/no/such/key"], { SESSIONSTATE_MAX_STREAMS: "0" }), [
      '--listen: must be HOST:PORT with a port from 0 to 65535 (got "nowhere")',
      '--tls-key: cannot read "/no/such/key"',
      'SESSIONSTATE_MAX_STREAMS: must be a whole number from 1 to 1000000 (got "0")',
      "--tls-cert and --tls-key: give both or neither",
    ]);
  });
});
