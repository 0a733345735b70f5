import { readFileSync, realpathSync, statSync } from "node:fs";
import { hostname } from "node:os";
import { isIP } from "node:net";
import { parseArgs } from "node:util";
import { describeArgsError } from "./command-line.js";
import { logLevels, type LogLevel } from "./logger.js";
import type { Durability } from "./store/store.js";
import { isValidSchemaName } from "./store/postgres/migrations.js";
import { isPostgresUrl, parsePostgresUrl } from "./store/postgres/postgres-url.js";
import { TokenRegistry } from "./rpc/tokens.js";
import { defaultSyntheticPrefixes } from "./upstream/claude-classifier.js";
import { defaultSkimLimits } from "./upstream/json-skim.js";

/** Every setting of `sessionstate serve`. */
export interface Config {
  /** Path of the SQLite database file, or a PostgreSQL URL (`postgres://`, `postgresql://`) for replicas. */
  dbPath: string;
  /** PostgreSQL only: the schema that holds the tables (created if missing). */
  dbSchema: string;
  /** This replica's identity for local transcript links and job leases (default: the host name). */
  nodeId: string;
  /** Address to listen on; port 0 picks a free port. */
  listenHost: string;
  listenPort: number;
  /** SQLite `synchronous`: normal (crash-safe) or full (power-loss-safe). */
  durability: Durability;
  /** Events older than this, and cursors untouched for this long, are pruned. */
  retentionDays: number;
  /** The log keeps at most this many events, the newest. */
  maxEvents: number;
  /** Retention runs at start-up and then this often (on one replica at a time). */
  pruneIntervalMs: number;
  logLevel: LogLevel;
  /** Real path of the folder local transcripts must live in; undefined turns local adoption off. */
  transcriptRoot: string | undefined;
  /** Upstream monitor period; the first tick comes after min(15 s, this). */
  monitorIntervalMs: number;
  /** Longest transcript line classified whole; a longer one holds its link's marker. */
  maxLineBytes: number;
  /** Text prefixes of user rows that no person typed: the built-in ones and any configured in addition. */
  syntheticPrefixes: readonly string[];
  /** Bearer tokens file; undefined turns authentication off (then only loopback may be bound). */
  tokensFile: string | undefined;
  /** TLS key material (PEM); undefined serves plaintext. A client CA turns on mutual TLS. */
  tls: { certPem: Buffer; keyPem: Buffer; clientCaPem?: Buffer } | undefined;
  /** Allows a non-loopback address without TLS and auth. Dangerous; logged loudly. */
  insecureBind: boolean;
  /** Prometheus listener; undefined: off. */
  metricsListen: { host: string; port: number } | undefined;
  /** Largest request message accepted. */
  maxRequestBytes: number;
  /** Bytes of encoded SessionStatus answers kept for repeated questions; 0: none. */
  statusCacheBytes: number;
  /** SQLite only: the database page cache of the serving connection, in bytes (SQLite's `cache_size`). */
  sqliteCacheBytes: number;
  /** Most server streams open at once on one connection, and in total. */
  maxStreamsPerConnection: number;
  maxStreams: number;
}

/** The defaults: a database under ./data, loopback only. */
export const defaultConfig: Readonly<Config> = {
  dbPath: "./data/sessionstate.db",
  dbSchema: "sessionstate",
  nodeId: hostname(),
  listenHost: "127.0.0.1",
  listenPort: 50051,
  durability: "normal",
  retentionDays: 30,
  maxEvents: 50_000,
  pruneIntervalMs: 60 * 60 * 1000,
  logLevel: "info",
  transcriptRoot: undefined,
  monitorIntervalMs: 60_000,
  maxLineBytes: 16 * 1024 * 1024,
  syntheticPrefixes: defaultSyntheticPrefixes,
  tokensFile: undefined,
  tls: undefined,
  insecureBind: false,
  metricsListen: undefined,
  maxRequestBytes: 1024 * 1024,
  statusCacheBytes: 16 * 1024 * 1024,
  sqliteCacheBytes: 32 * 1024 * 1024,
  maxStreamsPerConnection: 100,
  maxStreams: 10_000,
};

/** Thrown when settings are invalid; lists every problem at once. */
export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
  }
}

const settings = {
  db: { env: "SESSIONSTATE_DB" },
  "db-schema": { env: "SESSIONSTATE_DB_SCHEMA" },
  "node-id": { env: "SESSIONSTATE_NODE_ID" },
  listen: { env: "SESSIONSTATE_LISTEN" },
  durability: { env: "SESSIONSTATE_DURABILITY" },
  "retention-days": { env: "SESSIONSTATE_RETENTION_DAYS" },
  "max-events": { env: "SESSIONSTATE_MAX_EVENTS" },
  "prune-interval-ms": { env: "SESSIONSTATE_PRUNE_INTERVAL_MS" },
  "log-level": { env: "SESSIONSTATE_LOG_LEVEL" },
  "transcript-root": { env: "SESSIONSTATE_TRANSCRIPT_ROOT" },
  "monitor-interval-ms": { env: "SESSIONSTATE_MONITOR_INTERVAL_MS" },
  "max-line-bytes": { env: "SESSIONSTATE_MAX_LINE_BYTES" },
  "synthetic-prefixes": { env: "SESSIONSTATE_SYNTHETIC_PREFIXES" },
  "tokens-file": { env: "SESSIONSTATE_TOKENS_FILE" },
  "tls-cert": { env: "SESSIONSTATE_TLS_CERT" },
  "tls-key": { env: "SESSIONSTATE_TLS_KEY" },
  "tls-client-ca": { env: "SESSIONSTATE_TLS_CLIENT_CA" },
  "metrics-listen": { env: "SESSIONSTATE_METRICS_LISTEN" },
  "max-request-bytes": { env: "SESSIONSTATE_MAX_REQUEST_BYTES" },
  "status-cache-bytes": { env: "SESSIONSTATE_STATUS_CACHE_BYTES" },
  "sqlite-cache-bytes": { env: "SESSIONSTATE_SQLITE_CACHE_BYTES" },
  "max-streams-per-connection": { env: "SESSIONSTATE_MAX_STREAMS_PER_CONNECTION" },
  "max-streams": { env: "SESSIONSTATE_MAX_STREAMS" },
} as const;
type SettingName = keyof typeof settings;

const insecureBindEnv = "SESSIONSTATE_INSECURE_BIND";

/** The flags and environment variables `serve` understands, for usage text. */
export const settingNames = [
  ...Object.entries(settings).map(([flag, { env }]) => `--${flag} (${env})`),
  `--insecure-bind (${insecureBindEnv}=1)`,
];

/** True for addresses that only this machine can reach. */
export function isLoopbackHost(host: string): boolean {
  if (host === "localhost") return true;
  if (isIP(host) === 4) return host.startsWith("127.");
  return host === "::1";
}

/**
 * Builds the configuration from `serve` flags and SESSIONSTATE_* environment variables (flags win over
 * variables, variables over defaults). Throws one ConfigError listing every bad value.
 */
export function loadConfig(args: readonly string[], env: NodeJS.ProcessEnv): Config {
  const read = new SettingReader(args, env);
  const { integer, choice } = read;
  const config: Config = {
    dbPath: read.raw("db")?.value ?? defaultConfig.dbPath,
    dbSchema: read.raw("db-schema")?.value ?? defaultConfig.dbSchema,
    nodeId: read.raw("node-id")?.value.trim() ?? defaultConfig.nodeId,
    listenHost: defaultConfig.listenHost,
    listenPort: defaultConfig.listenPort,
    durability: choice<Durability>("durability", defaultConfig.durability, ["normal", "full"]),
    retentionDays: integer("retention-days", defaultConfig.retentionDays, 1, 36_500),
    maxEvents: integer("max-events", defaultConfig.maxEvents, 1, 1_000_000_000),
    pruneIntervalMs: integer("prune-interval-ms", defaultConfig.pruneIntervalMs, 1000, 7 * 86_400_000),
    logLevel: choice<LogLevel>("log-level", defaultConfig.logLevel, logLevels),
    transcriptRoot: readTranscriptRoot(read),
    monitorIntervalMs: integer("monitor-interval-ms", defaultConfig.monitorIntervalMs, 100, 86_400_000),
    maxLineBytes: integer("max-line-bytes", defaultConfig.maxLineBytes, 1024, 1024 * 1024 * 1024),
    syntheticPrefixes: readSyntheticPrefixes(read),
    tokensFile: readTokensFile(read),
    tls: readTls(read),
    insecureBind: read.insecureBind || ["1", "true"].includes(env[insecureBindEnv] ?? ""),
    metricsListen: read.address("metrics-listen"),
    maxRequestBytes: integer("max-request-bytes", defaultConfig.maxRequestBytes, 1024, 64 * 1024 * 1024),
    statusCacheBytes: integer("status-cache-bytes", defaultConfig.statusCacheBytes, 0, 4 * 1024 * 1024 * 1024),
    sqliteCacheBytes: integer("sqlite-cache-bytes", defaultConfig.sqliteCacheBytes, 64 * 1024, 64 * 1024 * 1024 * 1024),
    maxStreamsPerConnection: integer("max-streams-per-connection", defaultConfig.maxStreamsPerConnection, 1, 100_000),
    maxStreams: integer("max-streams", defaultConfig.maxStreams, 1, 1_000_000),
  };
  const listen = read.address("listen");
  if (listen !== undefined) [config.listenHost, config.listenPort] = [listen.host, listen.port];
  const problems = [...read.problems, ...databaseProblems(config), ...exposureProblems(config)];
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

/**
 * Reads settings from flags, then environment variables (flags win), and collects every problem instead
 * of stopping at the first: each reader returns the fallback after noting what was wrong.
 */
class SettingReader {
  readonly problems: string[] = [];
  private readonly flags: Partial<Record<SettingName, string>> & { "insecure-bind"?: boolean } = {};

  constructor(
    args: readonly string[],
    private readonly env: NodeJS.ProcessEnv,
  ) {
    try {
      const options = {
        ...Object.fromEntries(Object.keys(settings).map((name) => [name, { type: "string" as const }])),
        "insecure-bind": { type: "boolean" as const },
      };
      this.flags = parseArgs({ args: [...args], options, strict: true, allowPositionals: false }).values as typeof this.flags;
    } catch (err) {
      this.problems.push(describeArgsError(err));
    }
  }

  get insecureBind(): boolean {
    return this.flags["insecure-bind"] === true;
  }

  /** A setting's text and where it came from (`--flag` or the variable), if it was given. */
  raw(name: SettingName): { value: string; source: string } | undefined {
    const flag = this.flags[name];
    if (flag !== undefined) return { value: flag, source: `--${name}` };
    const fromEnv = this.env[settings[name].env];
    if (fromEnv !== undefined && fromEnv !== "") return { value: fromEnv, source: settings[name].env };
    return undefined;
  }

  readonly integer = (name: SettingName, fallback: number, min: number, max: number): number => {
    const setting = this.raw(name);
    if (setting === undefined) return fallback;
    const value = Number(setting.value);
    if (!/^\d+$/.test(setting.value.trim()) || !Number.isSafeInteger(value) || value < min || value > max) {
      this.problems.push(`${setting.source}: must be a whole number from ${min} to ${max} (got "${setting.value}")`);
      return fallback;
    }
    return value;
  };

  readonly choice = <T extends string>(name: SettingName, fallback: T, allowed: readonly T[]): T => {
    const setting = this.raw(name);
    if (setting === undefined) return fallback;
    if (!(allowed as readonly string[]).includes(setting.value)) {
      this.problems.push(`${setting.source}: must be one of ${allowed.join(", ")} (got "${setting.value}")`);
      return fallback;
    }
    return setting.value as T;
  };

  /** A HOST:PORT setting. */
  address(name: "listen" | "metrics-listen"): { host: string; port: number } | undefined {
    const setting = this.raw(name);
    if (setting === undefined) return undefined;
    const address = parseHostPort(setting.value);
    if (address === undefined) this.problems.push(`${setting.source}: must be HOST:PORT with a port from 0 to 65535 (got "${setting.value}")`);
    return address;
  }

  /** The bytes of the file a setting names. */
  file(name: SettingName): Buffer | undefined {
    const setting = this.raw(name);
    if (setting === undefined) return undefined;
    try {
      return readFileSync(setting.value);
    } catch {
      this.problems.push(`${setting.source}: cannot read "${setting.value}"`);
      return undefined;
    }
  }
}

/** The TLS files: a certificate and a key together, and a client CA only with them. */
function readTls(read: SettingReader): Config["tls"] {
  const certPem = read.file("tls-cert");
  const keyPem = read.file("tls-key");
  const clientCaPem = read.file("tls-client-ca");
  if ((read.raw("tls-cert") === undefined) !== (read.raw("tls-key") === undefined)) {
    read.problems.push("--tls-cert and --tls-key: give both or neither");
  } else if (read.raw("tls-client-ca") !== undefined && read.raw("tls-cert") === undefined) {
    read.problems.push("--tls-client-ca: needs --tls-cert and --tls-key");
  }
  if (certPem === undefined || keyPem === undefined) return undefined;
  return clientCaPem === undefined ? { certPem, keyPem } : { certPem, keyPem, clientCaPem };
}

/** The tokens file's path, once the file has been read and found valid. */
function readTokensFile(read: SettingReader): string | undefined {
  const tokensFile = read.raw("tokens-file");
  if (tokensFile === undefined) return undefined;
  try {
    new TokenRegistry(tokensFile.value);
  } catch (err) {
    read.problems.push(`${tokensFile.source}: ${(err as Error).message}`);
  }
  return tokensFile.value;
}

/** The transcript root, resolved through symlinks: it must be an existing directory. */
function readTranscriptRoot(read: SettingReader): string | undefined {
  const root = read.raw("transcript-root");
  if (root === undefined) return undefined;
  try {
    const real = realpathSync(root.value);
    if (statSync(real).isDirectory()) return real;
    read.problems.push(`${root.source}: must be a directory (got "${root.value}")`);
  } catch {
    read.problems.push(`${root.source}: must be an existing directory (got "${root.value}")`);
  }
  return undefined;
}

/**
 * The synthetic prefixes: the built-in ones are the floor, and configured ones add to them (SPEC §8.1). A
 * prefix fits in the head a long line's strings keep when streamed, so the verdict is the same as a whole
 * parse's.
 */
function readSyntheticPrefixes(read: SettingReader): readonly string[] {
  const prefixes = read.raw("synthetic-prefixes");
  if (prefixes === undefined) return defaultConfig.syntheticPrefixes;
  let parsed: unknown;
  try {
    parsed = JSON.parse(prefixes.value);
  } catch {
    parsed = undefined;
  }
  const maxChars = defaultSkimLimits.headChars;
  if (Array.isArray(parsed) && parsed.every((p) => typeof p === "string" && p !== "" && p.length <= maxChars)) {
    return [...defaultSyntheticPrefixes, ...(parsed as string[])];
  }
  read.problems.push(`${prefixes.source}: must be a JSON array of non-empty strings of at most ${maxChars} characters`);
  return defaultConfig.syntheticPrefixes;
}

/** What is wrong with the database settings: the path or URL, the schema, the node id. */
function databaseProblems(config: Config): string[] {
  const problems: string[] = [];
  if (config.dbPath.trim() === "") problems.push("--db: must not be empty");
  if (isPostgresUrl(config.dbPath)) {
    try {
      parsePostgresUrl(config.dbPath);
    } catch (err) {
      problems.push(`--db: ${(err as Error).message}`);
    }
  }
  if (!isValidSchemaName(config.dbSchema)) {
    problems.push(`--db-schema: must be a lower-case SQL identifier of at most 63 characters (got "${config.dbSchema}")`);
  }
  // eslint-disable-next-line no-control-regex -- control characters are what this rejects
  if (config.nodeId === "" || config.nodeId.length > 255 || /[\u0000-\u001f\u007f]/u.test(config.nodeId)) {
    problems.push("--node-id: must be 1 to 255 characters without control characters");
  }
  return problems;
}

/** Loopback by default: any other address needs TLS and tokens, unless `--insecure-bind` says otherwise. */
function exposureProblems(config: Config): string[] {
  if (isLoopbackHost(config.listenHost) || config.insecureBind || (config.tls !== undefined && config.tokensFile !== undefined)) return [];
  return [
    `--listen: ${config.listenHost} is not a loopback address, so it needs TLS (--tls-cert, --tls-key) and authentication (--tokens-file); --insecure-bind overrides this`,
  ];
}

/** Splits `host:port` or `[v6]:port`; `undefined` when malformed. */
export function parseHostPort(text: string): { host: string; port: number } | undefined {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s]+)):(\d{1,5})$/.exec(text.trim());
  if (match === null) return undefined;
  const port = Number(match[3]);
  if (port > 65_535) return undefined;
  return { host: match[1] ?? match[2]!, port };
}

/** Formats an address for grpc-js and for people: IPv6 hosts in brackets. */
export function formatHostPort(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}
