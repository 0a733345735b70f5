/**
 * `npm test`'s second pass: the behaviour suite (every file in test/behaviour/, found, not listed) again,
 * on PostgreSQL: `SESSIONSTATE_TEST_BACKEND=postgres` makes test/support/backend.ts hand each file
 * PostgreSQL stores and servers (one throwaway cluster per file, a schema per store or server). Without
 * PostgreSQL it says so in one line and runs nothing, unless `SESSIONSTATE_REQUIRE_POSTGRES=1` (CI),
 * which makes that a failure.
 */
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { noPostgresMessage, postgresBinDir, postgresRequired } from "./support/postgres-cluster.js";

const behaviourFiles = readdirSync(new URL("./behaviour/", import.meta.url))
  .filter((name) => name.endsWith(".test.ts"))
  .sort()
  .map((name) => `test/behaviour/${name}`);
if (behaviourFiles.length === 0) {
  console.error("no behaviour test files in test/behaviour/");
  process.exit(1);
}

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
