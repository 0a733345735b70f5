/**
 * PostgreSQL connection URLs as libpq takes them: `postgres://user:password@host:port/database?…` or
 * `postgresql://…`, where the host may be empty and given as a unix socket directory in `?host=`
 * (`postgres://user@/db?host=/var/run/postgresql`). postgres.js cannot parse an empty host, so the URL
 * is parsed here and handed to the driver as explicit options.
 */

/** Where and how to connect, as the driver takes it. */
export interface PostgresTarget {
  /** A TCP host, or undefined for a unix socket (`socketPath`). */
  host?: string;
  /** The unix socket file, `<dir>/.s.PGSQL.<port>`, when the host is a directory. */
  socketPath?: string;
  port: number;
  database: string;
  username: string;
  password?: string;
  /** libpq's sslmode: disable (default), prefer, require, verify-ca, verify-full. */
  ssl: "disable" | "prefer" | "require" | "verify-ca" | "verify-full";
  applicationName?: string;
  /** libpq's `connect_timeout` in ms (given in seconds; at least 2 s, as libpq has it); absent: the default. */
  connectTimeoutMs?: number;
}

const sslModes = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] as const;

/** True when `db` names PostgreSQL rather than a SQLite file. */
export function isPostgresUrl(db: string): boolean {
  return /^postgres(ql)?:\/\//iu.test(db);
}

/** Parses a libpq URL; throws an Error saying what is wrong (never echoing the password). */
export function parsePostgresUrl(url: string): PostgresTarget {
  const match = /^postgres(?:ql)?:\/\/(?:([^@/?]*)@)?([^/?]*)(?:\/([^?]*))?(?:\?(.*))?$/isu.exec(url);
  if (match === null) throw new Error("not a postgres:// or postgresql:// URL");
  const [, userInfo, hostPort = "", path = "", query = ""] = match;
  const params = new URLSearchParams(query);
  let username: string | undefined;
  let password: string | undefined;
  if (userInfo !== undefined) {
    const colon = userInfo.indexOf(":");
    username = decodeURIComponent(colon < 0 ? userInfo : userInfo.slice(0, colon));
    if (colon >= 0) password = decodeURIComponent(userInfo.slice(colon + 1));
  }
  let host: string | undefined;
  let portText: string | undefined;
  const bracketed = /^\[([^\]]+)\](?::(\d*))?$/u.exec(hostPort);
  if (bracketed !== null) [, host, portText] = bracketed;
  else if (hostPort !== "") {
    if (hostPort.includes(",")) throw new Error("several hosts in one URL are not supported: run replicas against the primary");
    const colon = hostPort.lastIndexOf(":");
    host = decodeURIComponent(colon < 0 ? hostPort : hostPort.slice(0, colon));
    if (colon >= 0) portText = hostPort.slice(colon + 1);
  }
  for (const [name, value] of params) {
    switch (name) {
      case "host":
        host = value;
        break;
      case "port":
        portText = value;
        break;
      case "user":
        username = value;
        break;
      case "password":
        password = value;
        break;
      case "dbname":
        break;
      case "sslmode":
      case "application_name":
      case "connect_timeout":
        break;
      default:
        throw new Error(`unsupported URL parameter ${JSON.stringify(name)}`);
    }
  }
  const port = portText === undefined || portText === "" ? 5432 : Number(portText);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`invalid port ${JSON.stringify(portText)}`);
  const sslParam = params.get("sslmode") ?? "disable";
  if (!(sslModes as readonly string[]).includes(sslParam)) throw new Error(`invalid sslmode ${JSON.stringify(sslParam)}`);
  const ssl = (sslParam === "allow" ? "prefer" : sslParam) as PostgresTarget["ssl"];
  const database = params.get("dbname") ?? (path === "" ? undefined : decodeURIComponent(path));
  const user = username === undefined || username === "" ? (process.env.PGUSER ?? process.env.USER ?? "postgres") : username;
  const target: PostgresTarget = { port, database: database ?? user, username: user, ssl };
  if (password !== undefined) target.password = password;
  const connectTimeout = params.get("connect_timeout");
  if (connectTimeout !== null && connectTimeout !== "") {
    const seconds = Number(connectTimeout);
    if (!Number.isInteger(seconds)) throw new Error(`invalid connect_timeout ${JSON.stringify(connectTimeout)}: whole seconds`);
    // As libpq: zero or less means the default here (libpq would wait for ever), and less than 2 means 2.
    if (seconds > 0) target.connectTimeoutMs = Math.max(2, seconds) * 1000;
  }
  const applicationName = params.get("application_name");
  if (applicationName !== null) target.applicationName = applicationName;
  const effectiveHost = host === undefined || host === "" ? "/var/run/postgresql" : host;
  if (effectiveHost.startsWith("/")) target.socketPath = `${effectiveHost.replace(/\/+$/u, "")}/.s.PGSQL.${port}`;
  else target.host = effectiveHost;
  return target;
}

/** The URL with any password replaced, for logs. */
export function redactPostgresUrl(url: string): string {
  return url.replace(/^(postgres(?:ql)?:\/\/[^:@/?]*):[^@/?]*@/iu, "$1:***@").replace(/([?&]password=)[^&]*/iu, "$1***");
}
