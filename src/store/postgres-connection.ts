import postgres, { type Sql } from "postgres";
import type { Durability } from "./open-database.js";
import type { PostgresTarget } from "./postgres-url.js";

/** How long a statement may wait for a lock, and a transaction may sit idle, before PostgreSQL ends it. */
const lockTimeoutMs = 5000;
const idleInTransactionTimeoutMs = 10_000;

/**
 * A postgres.js pool for `target`, tables looked up in `schema`. int8 columns come back as numbers (the
 * driver's default is a string): sequences and times stay far below 2^53. `--durability` maps to
 * `synchronous_commit`: normal is `off` (a sessionstate crash loses nothing; a PostgreSQL crash may lose
 * the last few hundred milliseconds), full is `on`. A stuck transaction cannot hold the clock row for ever.
 */
export function connectPostgres(target: PostgresTarget, schema: string, durability: Durability, max = 10): Sql {
  const options: postgres.Options<Record<string, postgres.PostgresType>> = {
    port: target.port,
    database: target.database,
    username: target.username,
    max,
    onnotice: () => {},
    // Between failed connection attempts the driver holds queries back. Its default waits up to 20 s,
    // which would hold every write of the replica for that long after the database returns; at most
    // 1 s here (with jitter), in seconds as the driver takes it.
    backoff: (attempt: number) => Math.min(0.05 * 2 ** attempt, 1) * (0.5 + Math.random() / 2),
    types: {
      int8: { to: 20, from: [20], serialize: (value: number) => String(value), parse: (value: string) => Number(value) },
    },
    connection: {
      application_name: target.applicationName ?? "sessionstate",
      search_path: `"${schema}"`,
      synchronous_commit: durability === "full" ? "on" : "off",
      lock_timeout: lockTimeoutMs,
      idle_in_transaction_session_timeout: idleInTransactionTimeoutMs,
    },
  };
  if (target.socketPath !== undefined) options.path = target.socketPath;
  if (target.host !== undefined) options.host = target.host;
  if (target.password !== undefined) options.pass = target.password;
  if (target.ssl !== "disable") options.ssl = target.ssl === "prefer" ? "prefer" : target.ssl === "require" ? "require" : "verify-full";
  return postgres(options);
}
