/**
 * What a storage fault means for a caller, whichever backend raised it: the one place that reads
 * SQLite's result codes and PostgreSQL's SQLSTATEs and the driver's connection errors.
 */
export type StoreFault =
  /** Another writer holds what is needed; retrying soon is fine. */
  | "busy"
  /** No space left: the write was not recorded. */
  | "full"
  /** The database failed to do I/O; retry later, perhaps elsewhere. */
  | "unavailable"
  /** The database server cannot be reached (connection refused or lost); health reports it once. */
  | "unreachable";

/**
 * Errors meaning the database did not answer: the store's own (store/postgres/connection: a deadline passed,
 * a connection failed, a COMMIT went unanswered) and the system's, should one reach a caller unwrapped.
 */
const driverConnectionCodes = new Set([
  "DATABASE_UNREACHABLE",
  "ECONNREFUSED",
  "ECONNRESET",
  "ENOENT",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
]);

/** The fault a thrown storage error stands for; `undefined` for anything else (a defect). */
export function storeFaultFromError(error: unknown): StoreFault | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return undefined;
  // SQLite's locks; PostgreSQL's pool with no connection free in time, or an answer that could not come in time.
  if (code === "SQLITE_BUSY" || code === "SQLITE_LOCKED" || code === "POOL_BUSY" || code === "DATABASE_SLOW") return "busy";
  if (code === "SQLITE_FULL") return "full";
  if (code.startsWith("SQLITE_IOERR")) return "unavailable";
  if (driverConnectionCodes.has(code)) return "unreachable";
  if (/^[0-9A-Z]{5}$/u.test(code)) {
    // SQLSTATE classes: 08 connection, 57P admin shutdown and crash recovery, 53 insufficient resources.
    if (code === "53100") return "full";
    if (code.startsWith("08") || code.startsWith("57P")) return "unreachable";
    if (code.startsWith("53")) return "unavailable";
    // Lock or statement timeouts, serialization failures and deadlocks: the write can be retried.
    if (code === "55P03" || code === "57014" || code === "40001" || code === "40P01") return "busy";
  }
  return undefined;
}

/**
 * Why a PostgreSQL replica could not start on its database, if no retry can mend it (SPEC §11: a database
 * that is down, busy or restarting is waited for; a mistake in the URL or the grants is not): the reason in
 * a person's words, or undefined when it is worth waiting for.
 */
export function startupMistake(error: unknown): string | undefined {
  // The driver's own failure may come wrapped (a connection that failed while checked out): look at each cause.
  for (let cause = error, depth = 0; cause !== undefined && cause !== null && depth < 4; cause = (cause as { cause?: unknown }).cause, depth++) {
    const mistake = mistakeOf(cause);
    if (mistake !== undefined) return mistake;
  }
  return undefined;
}

function mistakeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : String(error);
  // The driver's own, before the server is asked: a password the server wants and the URL does not give.
  if (/password must be a (non-empty )?string/iu.test(message) && typeof code !== "string") {
    return `the server asks for a password and the URL gives none (${message})`;
  }
  if (typeof code !== "string") return undefined;
  if (code.startsWith("28")) return `the server refused the login: ${message}`;
  if (code === "3D000") return `${message}: create it, or name another in the URL`;
  if (code === "42501") return `${message}: grant this role what the schema needs (CREATE on the database, USAGE and CREATE on the schema)`;
  return undefined;
}
