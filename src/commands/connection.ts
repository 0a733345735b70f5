import { readFileSync } from "node:fs";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { SessionStateClient, type ClientOptions } from "@sessionstate/client";
import { describeArgsError } from "../command-line.js";
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

/** What a strict parse of a command's arguments gives: its flag values and positionals. */
type ParsedCommandArgs<O extends ParseArgsConfig["options"]> = ReturnType<
  typeof parseArgs<{ args: string[]; options: O; strict: true; allowPositionals: true }>
>;

/** Parses a command's arguments strictly, turning parse failures into UsageError. */
export function parseCommandArgs<O extends ParseArgsConfig["options"]>(args: readonly string[], options: O): ParsedCommandArgs<O> {
  try {
    return parseArgs({ args: [...args], options, strict: true, allowPositionals: true });
  } catch (err) {
    throw new UsageError(describeArgsError(err));
  }
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
  const options: ClientOptions = { address: text("server") ?? env.SESSIONSTATE_SERVER ?? "127.0.0.1:50051" };
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
