/**
 * `npm test`'s second pass: the behaviour suite of SPEC §2–§9 again, on PostgreSQL (one throwaway
 * cluster per test file). Without PostgreSQL it says so in one line and runs nothing, unless
 * `SESSIONSTATE_REQUIRE_POSTGRES=1` (CI), which makes that a failure.
 */
import { spawnSync } from "node:child_process";
import { noPostgresMessage, postgresBinDir, postgresRequired } from "./support/postgres-cluster.js";

/** The files that hold the behaviour suite; each runs unchanged on either backend. */
const behaviourFiles = [
  "test/signal-log.test.ts",
  "test/reconcile.test.ts",
  "test/watch.test.ts",
  "test/watch-load.test.ts",
  "test/feed.test.ts",
  "test/upstream.test.ts",
  "test/retention.test.ts",
  "test/client.test.ts",
  "test/limits-metrics.test.ts",
  "test/namespaces.test.ts",
  "test/ambient-watches.test.ts",
  "test/monitor-scans.test.ts",
  "test/backlog.test.ts",
];

if (postgresBinDir() === undefined) {
  if (postgresRequired) {
    console.error(`${noPostgresMessage}, but SESSIONSTATE_REQUIRE_POSTGRES=1 requires them`);
    process.exit(1);
  }
  console.log(noPostgresMessage);
  process.exit(0);
}
const run = spawnSync(process.execPath, ["--import", "tsx", "--import", "./test/support/leak-check.ts", "--test", "--test-concurrency=2", ...process.argv.slice(2), ...behaviourFiles], {
  stdio: "inherit",
  env: { ...process.env, SESSIONSTATE_TEST_BACKEND: "postgres" },
});
process.exit(run.status ?? 1);
