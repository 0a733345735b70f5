import { readFileSync } from "node:fs";
import { parseArgs, type ParseArgsConfig } from "node:util";
// The client is compiled into this package (dist/clients/typescript/src): the server needs no other package of ours.
import { SessionStateClient, StatusCode, type CallError, type ClientOptions } from "../../clients/typescript/src/index.js";
import { describeArgsError, joinNegativeValues } from "../command-line.js";
import { isValidNamespace } from "../domain/session-key.js";

/** Flags every operator command takes to reach the server. */
export const connectionOptions = {
  server: { type: "string" },
  namespace: { type: "string" },
  "token-file": { type: "string" },
  "tls-ca": { type: "string" },
  "tls-client-cert": { type: "string" },
  "tls-client-key": { type: "string" },
} as const satisfies ParseArgsConfig["options"];

export const connectionUsage = `connection (flags, or environment variables):
  --server HOST:PORT         SESSIONSTATE_SERVER       default 127.0.0.1:50051
  --namespace NAME           SESSIONSTATE_NAMESPACE    default: the server's "default"
  --token-file PATH          SESSIONSTATE_TOKEN        (the variable holds the token itself)
  --tls-ca PATH              SESSIONSTATE_TLS_CA       use TLS, trusting this CA
  --tls-client-cert PATH --tls-client-key PATH         for mutual TLS`;

/** Thrown for bad command lines; the CLI prints the message and exits with 2. */
export class UsageError extends Error {}

/** What a strict parse of a command's arguments gives: its flag values (connection flags included) and positionals. */
type ParsedCommandArgs<O extends ParseArgsConfig["options"]> = ReturnType<
  typeof parseArgs<{ args: string[]; options: O & typeof connectionOptions; strict: true; allowPositionals: true }>
>;

/**
 * Parses a command's arguments strictly: its own flags, the connection flags, and exactly the positional
 * arguments named (`["<key>"]`, `["<watcher>", "<target>"]`). Every failure is a UsageError.
 */
export function parseCommandArgs<O extends ParseArgsConfig["options"]>(
  args: readonly string[],
  options: O,
  positionalNames: readonly string[] = [],
): ParsedCommandArgs<O> {
  let parsed: ParsedCommandArgs<O>;
  try {
    const all = { ...connectionOptions, ...options };
    parsed = parseArgs({ args: joinNegativeValues(args, all as Record<string, { type: "string" | "boolean" }>), options: all, strict: true, allowPositionals: true }) as ParsedCommandArgs<O>;
  } catch (err) {
    throw new UsageError(describeArgsError(err));
  }
  const given = parsed.positionals;
  if (given.length > positionalNames.length) throw new UsageError(`unexpected argument "${given[positionalNames.length]}"`);
  if (given.length < positionalNames.length) throw new UsageError(`give ${positionalNames.join(" ")}`);
  return parsed;
}

/** A command that reached the server (or tried to) and failed: the CLI prints the message and exits 1. */
export class CommandFailure extends Error {}

/**
 * Runs `use` with a client built from the flags, and closes it. A failed call becomes a CommandFailure
 * with a plain message: grpc-js's own texts (subchannels, pickers, resolution notes) never reach a person.
 */
export async function withClient<T>(values: Record<string, unknown>, env: NodeJS.ProcessEnv, use: (client: SessionStateClient) => Promise<T>): Promise<T> {
  const client = clientFromFlags(values, env);
  try {
    return await use(client);
  } catch (err) {
    if (err instanceof UsageError || err instanceof CommandFailure) throw err;
    throw new CommandFailure(describeCallFailure(err, serverAddress(values, env)));
  } finally {
    client.close();
  }
}

/** Where the commands look for the server: --server, SESSIONSTATE_SERVER, or the default. */
export function serverAddress(values: Record<string, unknown>, env: NodeJS.ProcessEnv): string {
  return (typeof values.server === "string" ? values.server : undefined) ?? env.SESSIONSTATE_SERVER ?? "127.0.0.1:50051";
}

/**
 * A failed call as a person reads it. The client's channel reports a server that is down, and one that is
 * up but not serving (its health check says NOT_SERVING: its database is unreachable, or it is stopping),
 * in grpc-js's words; those two get plain sentences. A refusal by the server keeps the server's own
 * message (already written for people, naming the field) with its status name.
 */
export function describeCallFailure(err: unknown, address: string): string {
  const { code, details, message } = err as Partial<CallError>;
  const text = details ?? message ?? String(err);
  if (code === StatusCode.UNAVAILABLE && /unhealthy|NOT_SERVING/i.test(text)) {
    return `the server at ${address} is not serving: it cannot reach its database, or it is stopping (its log says which); try again shortly`;
  }
  const reason = lastConnectionError(text);
  if (code === StatusCode.UNAVAILABLE && reason !== undefined && /certificate|altnames|SSL|TLS|wrong version number|ServerName/iu.test(reason)) {
    return `TLS with the server at ${address} failed: ${reason} (check --tls-ca, and the names in the server's certificate)`;
  }
  if (code === StatusCode.UNAVAILABLE && /Protocol error/.test(text)) {
    return `the server at ${address} does not answer gRPC: is that the HTTP port (the console's, "console on …")? The commands use the gRPC port, the one "listening on …" names (default 127.0.0.1:50051)`;
  }
  if (code === StatusCode.UNAVAILABLE && /No connection established|ECONNREFUSED|ENOTFOUND|EAI_AGAIN|Failed to connect|Name resolution failed|connect/i.test(text)) {
    const cause = /ECONNREFUSED/.test(text) ? "connection refused" : /ENOTFOUND|EAI_AGAIN|Name resolution failed/.test(text) ? "the name does not resolve" : "no connection";
    return `cannot reach a server at ${address} (${cause}): is it running? (the address comes from --server or SESSIONSTATE_SERVER)`;
  }
  if (code === StatusCode.DEADLINE_EXCEEDED) return `the server at ${address} did not answer in time`;
  const name = Object.entries(StatusCode).find(([, value]) => value === code)?.[0];
  return name === undefined ? text : `${text} (${name})`;
}

/** The channel's last connection error in a failure's text, without grpc-js's wrapping ("Last error: TypeError [CODE]: …"). */
function lastConnectionError(text: string): string | undefined {
  const at = text.lastIndexOf("Last error: ");
  if (at < 0) return undefined;
  return text
    .slice(at + "Last error: ".length)
    .replace(/\.? Resolution note:.*$/su, "")
    .replace(/^\w*Error(?: \[\w+\])?: /u, "")
    // Node 26's hint for system CAs: the commands' own is --tls-ca (said after the cause).
    .replace(/; if the root CA is installed locally, try running Node\.js with --use-system-ca/u, "")
    .replace(/[:.\s]+$/u, "")
    .trim();
}

/** Builds a client from the connection flags and SESSIONSTATE_* variables. */
export function clientFromFlags(values: Record<string, unknown>, env: NodeJS.ProcessEnv): SessionStateClient {
  const text = (name: string): string | undefined => (typeof values[name] === "string" ? (values[name] as string) : undefined);
  const read = (path: string): Buffer => {
    try {
      return readFileSync(path);
    } catch {
      throw new UsageError(`cannot read ${path}`);
    }
  };
  const address = serverAddress(values, env);
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//iu.exec(address);
  if (scheme !== null) {
    const hostPort = address.slice(scheme[0].length).replace(/\/.*$/su, "");
    throw new UsageError(`--server (or SESSIONSTATE_SERVER) takes host:port, without a scheme (got "${address}"): use ${hostPort}`);
  }
  const options: ClientOptions = { address };
  const namespace = text("namespace") ?? env.SESSIONSTATE_NAMESPACE;
  if (namespace !== undefined && namespace !== "") {
    if (!isValidNamespace(namespace)) throw new UsageError(`--namespace: "${namespace}" is not a namespace ([a-z0-9][a-z0-9-]{0,62})`);
    options.namespace = namespace;
  }
  const tokenFile = text("token-file");
  const token = tokenFile === undefined ? env.SESSIONSTATE_TOKEN : read(tokenFile).toString("utf8").trim();
  if (token !== undefined && token !== "") options.token = token;
  const ca = text("tls-ca") ?? env.SESSIONSTATE_TLS_CA;
  const cert = text("tls-client-cert");
  const key = text("tls-client-key");
  if (ca !== undefined || cert !== undefined) {
    options.tls = {
      ...(ca === undefined ? {} : { caPem: read(ca) }),
      ...(cert === undefined ? {} : { certPem: read(cert) }),
      ...(key === undefined ? {} : { keyPem: read(key) }),
    };
  }
  return new SessionStateClient(options);
}
