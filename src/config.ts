import { readFileSync, realpathSync, statSync } from "node:fs";
import { hostname } from "node:os";
import { isIP } from "node:net";
import { parseArgs } from "node:util";
import { describeArgsError, joinNegativeValues } from "./command-line.js";
import { logLevels, type LogLevel } from "./logger.js";
import type { Durability } from "./store/store.js";
import { isValidSchemaName } from "./store/postgres/migrations.js";
import { isPostgresUrl, parsePostgresUrl } from "./store/postgres/postgres-url.js";
import { TokenRegistry } from "./rpc/tokens.js";
import { allowedHostProblem } from "./rpc/allowed-hosts.js";
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
  /**
   * The HTTP port (Connect, gRPC-Web, JSON, the console): an address, `off`, or undefined for the gRPC
   * address's host and the next port (a free port when the gRPC port is 0). See `httpAddress`.
   */
  httpListen: { host: string; port: number } | "off" | undefined;
  /** Names the HTTP port answers to besides its own address's (SPEC §13.1; rpc/allowed-hosts). */
  httpAllowedHosts: readonly string[];
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
  httpListen: undefined,
  httpAllowedHosts: [],
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

/** The files the TLS settings name, read while the settings are, checked together after. */
interface TlsFiles {
  cert?: Buffer;
  key?: Buffer;
  clientCa?: Buffer;
}

/**
 * One setting of `serve`: its flag and environment variable, its default as a person reads it, what it
 * means (Markdown: the README's configuration table, and `serve --help` without the marks), and how its
 * text becomes configuration. `read` sets what it reads on `config` and answers what is wrong with the
 * text, if anything (the caller names the flag or variable it came from).
 */
export interface Setting {
  /** The flag without its dashes. */
  readonly flag: string;
  /** What the flag takes, as usage shows it (`PATH`, `N`); absent for a switch (`--insecure-bind`). */
  readonly value?: string;
  readonly env: string;
  /** The default, as shown; `literal` ones are values (shown as code), others words ("none"). */
  readonly shownDefault: { text: string; literal: boolean };
  readonly meaning: string;
  read(text: string, config: Config, tls: TlsFiles): string | undefined;
}

/** A whole number from `min` to `max`. */
function wholeNumber(text: string, min: number, max: number): { value: number } | { problem: string } {
  const value = Number(text);
  if (!/^\d+$/u.test(text.trim()) || !Number.isSafeInteger(value) || value < min || value > max) {
    return { problem: `must be a whole number from ${min} to ${max} (got "${text}")` };
  }
  return { value };
}

/** A setting that is a whole number from `min` to `max`, stored as `key`. */
function integerSetting(
  flag: string,
  key: { [K in keyof Config]: Config[K] extends number ? K : never }[keyof Config],
  min: number,
  max: number,
  meaning: string,
): Setting {
  return {
    flag,
    value: "N",
    env: envName(flag),
    shownDefault: { text: String(defaultConfig[key]), literal: true },
    meaning,
    read(text, config) {
      const parsed = wholeNumber(text, min, max);
      if ("problem" in parsed) return parsed.problem;
      config[key] = parsed.value;
      return undefined;
    },
  };
}

/** One of `allowed`. */
function choiceOf<T extends string>(text: string, allowed: readonly T[]): { value: T } | { problem: string } {
  return (allowed as readonly string[]).includes(text) ? { value: text as T } : { problem: `must be one of ${allowed.join(", ")} (got "${text}")` };
}

/** The bytes of the file `path` names. */
function readFile(path: string): { value: Buffer } | { problem: string } {
  try {
    return { value: readFileSync(path) };
  } catch {
    return { problem: `cannot read "${path}"` };
  }
}

/** A HOST:PORT setting. */
function addressOf(text: string): { value: { host: string; port: number } } | { problem: string } {
  const address = parseHostPort(text);
  return address === undefined ? { problem: `must be HOST:PORT with a port from 0 to 65535 (got "${text}")` } : { value: address };
}

/** A switch's variable: 1 or true, 0 or false. */
function switchOf(text: string): { value: boolean } | { problem: string } {
  const lower = text.trim().toLowerCase();
  if (lower === "1" || lower === "true") return { value: true };
  if (lower === "0" || lower === "false") return { value: false };
  return { problem: `must be 1, true, 0 or false (got "${text}")` };
}

function envName(flag: string): string {
  return `SESSIONSTATE_${flag.toUpperCase().replaceAll("-", "_")}`;
}

/** Sets `config[key]` to what `parse` makes of the text, or answers its problem. */
function parsed<T>(result: { value: T } | { problem: string }, set: (value: T) => void): string | undefined {
  if ("problem" in result) return result.problem;
  set(result.value);
  return undefined;
}

/**
 * Every setting of `serve`, in the order usage and the README list them: the one place each is defined.
 * `serve --help`, the README's configuration table (test/server/settings.test.ts holds it to this) and
 * `loadConfig` all come from it.
 */
export const settings: readonly Setting[] = [
  {
    flag: "db",
    value: "PATH|URL",
    env: "SESSIONSTATE_DB",
    shownDefault: { text: defaultConfig.dbPath, literal: true },
    meaning:
      "the SQLite database (created, with its folder, if missing), or a PostgreSQL URL (`postgres://…` or `postgresql://…`, as libpq takes it) for replicas: see [Replicas on PostgreSQL](docs/replicas.md); any other URL is refused",
    read(text, config) {
      if (text.trim() === "") return "must not be empty";
      if (looksLikeUrl(text) && !isPostgresUrl(text)) {
        return `must be a SQLite file path or a postgres:// or postgresql:// URL (got a ${text.slice(0, text.indexOf(":"))}: URL)`;
      }
      if (isPostgresUrl(text)) {
        try {
          parsePostgresUrl(text);
        } catch (err) {
          return (err as Error).message;
        }
      }
      config.dbPath = text;
      return undefined;
    },
  },
  {
    flag: "db-schema",
    value: "NAME",
    env: "SESSIONSTATE_DB_SCHEMA",
    shownDefault: { text: defaultConfig.dbSchema, literal: true },
    meaning: "PostgreSQL only: the schema that holds the tables, created (and migrated) if missing",
    read(text, config) {
      if (!isValidSchemaName(text)) return `must be a lower-case SQL identifier of at most 63 characters (got "${text}")`;
      config.dbSchema = text;
      return undefined;
    },
  },
  {
    flag: "node-id",
    value: "ID",
    env: "SESSIONSTATE_NODE_ID",
    shownDefault: { text: "the host name", literal: false },
    meaning:
      "this replica's identity: local transcript links belong to the node id that adopted them, and the upstream monitor's lease is per node id",
    read(text, config) {
      const nodeId = text.trim();
      // eslint-disable-next-line no-control-regex -- control characters are what this rejects
      if (nodeId === "" || nodeId.length > 255 || /[\u0000-\u001f\u007f]/u.test(nodeId)) return "must be 1 to 255 characters without control characters";
      config.nodeId = nodeId;
      return undefined;
    },
  },
  {
    flag: "listen",
    value: "HOST:PORT",
    env: "SESSIONSTATE_LISTEN",
    shownDefault: { text: formatHostPort(defaultConfig.listenHost, defaultConfig.listenPort), literal: true },
    meaning: "address; port 0 picks a free port, and the `listening on` line shows it",
    read: (text, config) => parsed(addressOf(text), ({ host, port }) => ([config.listenHost, config.listenPort] = [host, port])),
  },
  {
    flag: "durability",
    value: "normal|full",
    env: "SESSIONSTATE_DURABILITY",
    shownDefault: { text: defaultConfig.durability, literal: true },
    meaning:
      "SQLite `synchronous`: `normal` survives a process crash, `full` also a power loss; on PostgreSQL `synchronous_commit` `off` or `on`",
    read: (text, config) => parsed(choiceOf<Durability>(text, ["normal", "full"]), (value) => (config.durability = value)),
  },
  integerSetting("retention-days", "retentionDays", 1, 36_500, "events older than this (by `occurred_at`), and cursors untouched this long, are pruned"),
  integerSetting(
    "max-events",
    "maxEvents",
    1,
    1_000_000_000,
    "each namespace's log keeps at most this many events, its newest (one busy gateway never prunes another's history)",
  ),
  integerSetting(
    "prune-interval-ms",
    "pruneIntervalMs",
    1000,
    7 * 86_400_000,
    "retention runs at start-up and then this often (on one replica at a time)",
  ),
  {
    flag: "log-level",
    value: "LEVEL",
    env: "SESSIONSTATE_LOG_LEVEL",
    shownDefault: { text: defaultConfig.logLevel, literal: true },
    meaning: "`fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`",
    read: (text, config) => parsed(choiceOf<LogLevel>(text, logLevels), (value) => (config.logLevel = value)),
  },
  {
    flag: "transcript-root",
    value: "DIR",
    env: "SESSIONSTATE_TRANSCRIPT_ROOT",
    shownDefault: { text: "none", literal: false },
    meaning: "folder that local transcripts must live in; without it local adoption is refused (`FAILED_PRECONDITION`)",
    read(text, config) {
      try {
        const real = realpathSync(text);
        if (!statSync(real).isDirectory()) return `must be a directory (got "${text}")`;
        config.transcriptRoot = real;
        return undefined;
      } catch {
        return `must be an existing directory (got "${text}")`;
      }
    },
  },
  integerSetting(
    "monitor-interval-ms",
    "monitorIntervalMs",
    100,
    86_400_000,
    "upstream monitor period; the first tick comes after 15 s (or the period, if shorter)",
  ),
  integerSetting(
    "max-line-bytes",
    "maxLineBytes",
    1024,
    1024 * 1024 * 1024,
    "longest transcript line parsed whole; a longer one is classified by streaming over it, in bounded memory",
  ),
  {
    flag: "synthetic-prefixes",
    value: "JSON",
    env: "SESSIONSTATE_SYNTHETIC_PREFIXES",
    shownDefault: { text: "none", literal: false },
    meaning: `JSON array of text prefixes (each at most ${defaultSkimLimits.headChars.toLocaleString("en-US")} characters) of user rows no person typed, in addition to the built-in ones (docs/monitor.md lists them)`,
    read(text, config) {
      // The built-in prefixes are the floor (SPEC §8.1). A prefix fits in the head a long line's strings
      // keep when streamed, so the verdict is the same as a whole parse's.
      let prefixes: unknown;
      try {
        prefixes = JSON.parse(text);
      } catch {
        prefixes = undefined;
      }
      const maxChars = defaultSkimLimits.headChars;
      if (!Array.isArray(prefixes) || !prefixes.every((p) => typeof p === "string" && p !== "" && p.length <= maxChars)) {
        return `must be a JSON array of non-empty strings of at most ${maxChars} characters`;
      }
      config.syntheticPrefixes = [...defaultSyntheticPrefixes, ...(prefixes as string[])];
      return undefined;
    },
  },
  {
    flag: "tokens-file",
    value: "PATH",
    env: "SESSIONSTATE_TOKENS_FILE",
    shownDefault: { text: "none (auth off)", literal: false },
    meaning: "bearer tokens, as SHA-256 hashes (see Security)",
    read(text, config) {
      try {
        new TokenRegistry(text);
      } catch (err) {
        return (err as Error).message;
      }
      config.tokensFile = text;
      return undefined;
    },
  },
  {
    flag: "tls-cert",
    value: "PATH",
    env: "SESSIONSTATE_TLS_CERT",
    shownDefault: { text: "none (plaintext)", literal: false },
    meaning: "serve TLS with this PEM certificate chain (with `--tls-key`)",
    read: (text, _config, tls) => parsed(readFile(text), (bytes) => (tls.cert = bytes)),
  },
  {
    flag: "tls-key",
    value: "PATH",
    env: "SESSIONSTATE_TLS_KEY",
    shownDefault: { text: "none", literal: false },
    meaning: "the PEM private key of `--tls-cert`",
    read: (text, _config, tls) => parsed(readFile(text), (bytes) => (tls.key = bytes)),
  },
  {
    flag: "tls-client-ca",
    value: "PATH",
    env: "SESSIONSTATE_TLS_CLIENT_CA",
    shownDefault: { text: "none", literal: false },
    meaning: "require client certificates signed by this CA (mutual TLS)",
    read: (text, _config, tls) => parsed(readFile(text), (bytes) => (tls.clientCa = bytes)),
  },
  {
    flag: "insecure-bind",
    env: "SESSIONSTATE_INSECURE_BIND",
    shownDefault: { text: "off", literal: false },
    meaning: "allow a non-loopback address without TLS and auth (logged as INSECURE); the variable takes `1`, `true`, `0` or `false`",
    read: (text, config) => parsed(switchOf(text), (value) => (config.insecureBind = value)),
  },
  {
    flag: "metrics-listen",
    value: "HOST:PORT",
    env: "SESSIONSTATE_METRICS_LISTEN",
    shownDefault: { text: "off", literal: false },
    meaning: "Prometheus text at `http://HOST:PORT/metrics`",
    read: (text, config) => parsed(addressOf(text), (address) => (config.metricsListen = address)),
  },
  {
    flag: "http-listen",
    value: "HOST:PORT|off",
    env: "SESSIONSTATE_HTTP_LISTEN",
    shownDefault: { text: "the `--listen` host and the next port (`127.0.0.1:50052`); a free port when `--listen`'s is 0", literal: false },
    meaning:
      "the API over HTTP (Connect, JSON or binary, and gRPC-Web), `/healthz`, `/readyz` and the console at `/`; `serve` prints `console on http://HOST:PORT/`; `off` turns it off",
    read: (text, config) =>
      text.trim().toLowerCase() === "off" ? ((config.httpListen = "off"), undefined) : parsed(addressOf(text), (address) => (config.httpListen = address)),
  },
  {
    flag: "http-allowed-hosts",
    value: "NAME[,NAME]",
    env: "SESSIONSTATE_HTTP_ALLOWED_HOSTS",
    shownDefault: { text: "none", literal: false },
    meaning:
      "names the HTTP port answers to besides its own address (and, on loopback, `localhost`, `127.0.0.1` and `[::1]`), each `host` (any port) or `host:PORT`; a request addressed to any other name is `421`, and one from a page of another origin `403` (protection against DNS rebinding)",
    read: (text, config) => {
      const names = text.split(",").map((name) => name.trim().toLowerCase()).filter((name) => name !== "");
      const problems = names.map(allowedHostProblem).filter((problem) => problem !== undefined);
      if (problems.length > 0) return problems.join("; ");
      config.httpAllowedHosts = names;
      return undefined;
    },
  },
  integerSetting("max-request-bytes", "maxRequestBytes", 1024, 64 * 1024 * 1024, "larger requests are `RESOURCE_EXHAUSTED`"),
  integerSetting(
    "status-cache-bytes",
    "statusCacheBytes",
    0,
    4 * 1024 * 1024 * 1024,
    "encoded SessionStatus answers kept for the same question asked again while nothing it reads has changed (watchers reconciling one target after a notice); `0` turns it off. Always exact: any write to the session, and any pruning, makes its remembered answers miss; on replicas, writes through other replicas too (a remembered answer is served only after the replica has read its feed of changes up to the moment of the question)",
  ),
  integerSetting(
    "sqlite-cache-bytes",
    "sqliteCacheBytes",
    64 * 1024,
    64 * 1024 * 1024 * 1024,
    "SQLite only: the serving connection's page cache (SQLite `cache_size`); the rest of the file is read through the operating system's cache, so the server's memory does not grow with the database (see [memory](docs/operations.md#memory))",
  ),
  integerSetting("max-streams-per-connection", "maxStreamsPerConnection", 1, 100_000, "open server streams per connection"),
  integerSetting("max-streams", "maxStreams", 1, 1_000_000, "open server streams in total"),
];

/** A setting's flag as usage shows it: `--db PATH|URL`, `--insecure-bind`. */
function flagText(setting: Setting): string {
  return setting.value === undefined ? `--${setting.flag}` : `--${setting.flag} ${setting.value}`;
}

/** Markdown as plain text: links become their words, code marks go (a code span of several words is quoted). */
function plainText(markdown: string): string {
  return markdown.replace(/\[([^\]]+)\]\([^)]+\)/gu, "$1").replace(/`([^`]+)`/gu, (_, code: string) => (code.includes(" ") ? `"${code}"` : code));
}

/** Splits `text` into lines of at most `width` characters, at spaces. */
function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line !== "" && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line === "" ? word : `${line} ${word}`;
    }
  }
  if (line !== "") lines.push(line);
  return lines;
}

/** The settings as `serve --help` lists them: flag, variable and default on one line, the meaning below. */
export function settingsUsage(): string {
  return settings
    .map((setting) => {
      const head = `  ${flagText(setting).padEnd(34)} ${setting.env}${setting.value === undefined ? "=1" : ""}  (default: ${plainText(setting.shownDefault.text)})`;
      return [head, ...wrap(plainText(setting.meaning), 94).map((line) => `      ${line}`)].join("\n");
    })
    .join("\n");
}

/** The settings as the README's configuration table (Markdown). */
export function settingsTable(): string {
  const cell = (text: string): string => text.replaceAll("|", "\\|");
  const rows = settings.map((setting) => {
    const shown = setting.shownDefault.literal ? `\`${cell(setting.shownDefault.text)}\`` : setting.shownDefault.text;
    const env = setting.value === undefined ? `${setting.env}=1` : setting.env;
    return `| \`${cell(flagText(setting))}\` | \`${env}\` | ${shown} | ${cell(setting.meaning)} |`;
  });
  return ["| flag | variable | default | meaning |", "| --- | --- | --- | --- |", ...rows].join("\n");
}

/** True for text that looks like a URL (`scheme://`), so that it is never taken as a file name. */
function looksLikeUrl(text: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//iu.test(text.trim());
}

/** True for addresses that only this machine can reach. */
export function isLoopbackHost(host: string): boolean {
  if (host === "localhost") return true;
  if (isIP(host) === 4) return host.startsWith("127.");
  return host === "::1";
}

/**
 * Builds the configuration from `serve` flags and SESSIONSTATE_* environment variables (flags win over
 * variables, variables over defaults), reading each setting as the table says. Throws one ConfigError
 * listing every bad value.
 */
export function loadConfig(args: readonly string[], env: NodeJS.ProcessEnv): Config {
  const problems: string[] = [];
  let flags: Record<string, string | boolean | undefined> = {};
  try {
    const options = Object.fromEntries(settings.map((s) => [s.flag, { type: s.value === undefined ? ("boolean" as const) : ("string" as const) }]));
    flags = parseArgs({ args: joinNegativeValues(args, options), options, strict: true, allowPositionals: false }).values;
  } catch (err) {
    problems.push(describeArgsError(err));
  }
  const config: Config = { ...defaultConfig };
  const tls: TlsFiles = {};
  const given = new Set<string>();
  for (const setting of settings) {
    const flag = flags[setting.flag];
    const fromEnv = env[setting.env];
    const source = flag !== undefined ? `--${setting.flag}` : fromEnv !== undefined && fromEnv !== "" ? setting.env : undefined;
    if (source === undefined) continue;
    given.add(setting.flag);
    const text = flag === undefined ? fromEnv! : flag === true ? "true" : String(flag);
    const problem = setting.read(text, config, tls);
    if (problem !== undefined) problems.push(`${source}: ${problem}`);
  }
  config.tls = tlsFrom(given, tls, problems);
  problems.push(...exposureProblems(config));
  if (config.httpListen === undefined && config.listenPort === 65_535) {
    problems.push("--http-listen: give an address or off (the port after --listen's 65535 does not exist)");
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

/** The TLS files: a certificate and a key together, and a client CA only with them. */
function tlsFrom(given: ReadonlySet<string>, tls: TlsFiles, problems: string[]): Config["tls"] {
  if (given.has("tls-cert") !== given.has("tls-key")) {
    problems.push("--tls-cert and --tls-key: give both or neither");
  } else if (given.has("tls-client-ca") && !given.has("tls-cert")) {
    problems.push("--tls-client-ca: needs --tls-cert and --tls-key");
  }
  if (tls.cert === undefined || tls.key === undefined) return undefined;
  return tls.clientCa === undefined ? { certPem: tls.cert, keyPem: tls.key } : { certPem: tls.cert, keyPem: tls.key, clientCaPem: tls.clientCa };
}

/** Loopback by default: any other address needs TLS and tokens, unless `--insecure-bind` says otherwise; the HTTP port too. */
function exposureProblems(config: Config): string[] {
  if (config.insecureBind || (config.tls !== undefined && config.tokensFile !== undefined)) return [];
  const exposed = [["--listen", config.listenHost]];
  const http = httpAddress(config);
  if (http !== undefined && config.httpListen !== undefined) exposed.push(["--http-listen", http.host]);
  return exposed
    .filter(([, host]) => !isLoopbackHost(host!))
    .map(
      ([flag, host]) =>
        `${flag}: ${host} is not a loopback address, so it needs TLS (--tls-cert, --tls-key) and authentication (--tokens-file); --insecure-bind overrides this`,
    );
}

/**
 * Where the HTTP port listens: `--http-listen`, or by default the gRPC address's host and the next port (a
 * free port when the gRPC port is 0, so that servers started on port 0 never collide); undefined when off.
 */
export function httpAddress(config: Pick<Config, "httpListen" | "listenHost" | "listenPort">): { host: string; port: number } | undefined {
  if (config.httpListen === "off") return undefined;
  return config.httpListen ?? { host: config.listenHost, port: config.listenPort === 0 ? 0 : config.listenPort + 1 };
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
