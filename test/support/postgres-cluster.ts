/**
 * A throwaway PostgreSQL cluster for tests: initdb into a temporary directory, a server listening only
 * on a unix socket in that directory, stopped and removed at the end. `initdb` refuses to run as root,
 * so when the tests run as root the cluster's programs run as the `postgres` user (Debian's package
 * creates it).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync, chmodSync } from "node:fs";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { parsePostgresUrl } from "../../src/store/postgres/postgres-url.js";

/** The newest installed PostgreSQL's bin directory (Debian: /usr/lib/postgresql/<major>/bin), if any. */
export function postgresBinDir(): string | undefined {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return undefined;
  const majors = readdirSync(root)
    .filter((name) => /^\d+$/u.test(name) && existsSync(join(root, name, "bin", "initdb")))
    .sort((a, b) => Number(a) - Number(b));
  const newest = majors.at(-1);
  return newest === undefined ? undefined : join(root, newest, "bin");
}

/** Set by `.ci/run`: a missing PostgreSQL then fails the run instead of skipping its tests. */
export const postgresRequired = process.env.SESSIONSTATE_REQUIRE_POSTGRES === "1";

/** The one line `npm test` prints when it skips the PostgreSQL tests. */
export const noPostgresMessage =
  "PostgreSQL tests skipped: no PostgreSQL under /usr/lib/postgresql (apt-get install postgresql to run them)";

export interface PostgresCluster {
  /** A libpq URL for database `postgres` over the cluster's unix socket. */
  readonly url: string;
  /** The socket directory. */
  readonly socketDir: string;
  /** The server's port (part of the socket's name). */
  readonly port: number;
  /** Stops the server (fast shutdown) without removing the data: `start()` brings it back. */
  stop(): void;
  /** Starts a stopped server again on the same socket. */
  start(): void;
  /** Stops the server and removes everything. */
  destroy(): void;
}

function runAs(asPostgres: boolean, program: string, args: string[]): void {
  const [command, fullArgs] = asPostgres ? ["runuser", ["-u", "postgres", "--", program, ...args]] : [program, args];
  const result = spawnSync(command, fullArgs, { encoding: "utf8" });
  if (result.status !== 0) {
    throw new Error(`${program} ${args[0] ?? ""} failed (${result.status}): ${result.stderr || result.stdout}`);
  }
}

/** Starts a fresh cluster; throws when PostgreSQL is not installed. About a second to the first query. */
export function startPostgresCluster(): PostgresCluster {
  const bin = postgresBinDir();
  if (bin === undefined) throw new Error(noPostgresMessage);
  const asPostgres = userInfo().uid === 0;
  const dir = mkdtempSync(join(tmpdir(), "sessionstate-pg-"));
  chmodSync(dir, 0o755);
  if (asPostgres) {
    const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
    chownSync(dir, uid, gid);
  }
  const data = join(dir, "data");
  // A port only names the socket file: nothing listens on TCP. Pick one per cluster to keep them apart.
  const port = 20000 + Math.floor(Math.random() * 40000);
  runAs(asPostgres, join(bin, "initdb"), ["-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"]);
  const options = `-c listen_addresses='' -k ${dir} -p ${port} -c fsync=off -c max_connections=200`;
  const start = (): void => runAs(asPostgres, join(bin, "pg_ctl"), ["-D", data, "-l", join(dir, "log"), "-w", "-o", options, "start"]);
  const stop = (): void => runAs(asPostgres, join(bin, "pg_ctl"), ["-D", data, "-m", "fast", "-w", "stop"]);
  start();
  let running = true;
  return {
    url: `postgres://postgres@/postgres?host=${encodeURIComponent(dir)}&port=${port}`,
    socketDir: dir,
    port,
    stop: () => {
      if (running) stop();
      running = false;
    },
    start: () => {
      if (!running) start();
      running = true;
    },
    destroy: () => {
      try {
        if (running) stop();
      } finally {
        running = false;
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/**
 * For a PostgreSQL test's `skip` option: false when PostgreSQL is installed; else the skip message,
 * printed once per file, or a thrown error when `SESSIONSTATE_REQUIRE_POSTGRES=1` (CI never skips).
 */
export function skipWithoutPostgres(): false | string {
  if (postgresBinDir() !== undefined) return false;
  if (postgresRequired) throw new Error(`${noPostgresMessage}, but SESSIONSTATE_REQUIRE_POSTGRES=1 requires them`);
  console.log(noPostgresMessage);
  return noPostgresMessage;
}

/**
 * A plain node-postgres connection to a test cluster (no deadlines, no pool), for tests that look at or
 * hold rows directly; `schema` sets the search path. The caller ends it.
 */
export async function connectTestClient(url: string, schema?: string): Promise<pg.Client> {
  const target = parsePostgresUrl(url);
  const client = new pg.Client({
    host: target.socketPath!.replace(/\/\.s\.PGSQL\.\d+$/u, ""),
    port: target.port,
    database: target.database,
    user: target.username,
    ...(schema === undefined ? {} : { options: `-c search_path=${schema}` }),
    types: { getTypeParser: (oid: number, format?: string) => (oid === 20 ? Number : pg.types.getTypeParser(oid, format as "text")) },
  });
  client.on("error", () => undefined);
  await client.connect();
  return client;
}
