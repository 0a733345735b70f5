/**
 * `sessionstate hook <cli>`: the command form of a CLI's prompt hook (SPEC §8.2). It forwards the JSON the
 * CLI writes on its standard input to the server's `/hooks/<cli>`, prints nothing (a CLI feeds a hook's
 * output to the model), and exits 0 within 2 s whatever happens: a server that is down, slow or refusing
 * never holds a person's prompt. A CLI's prompt waits on this process, so it loads nothing but Node's own
 * modules and the list of CLIs (never the server's, never the client's): bin/sessionstate.js imports this file alone.
 */
import { readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { isHookCli } from "../domain/hook-clis.js";

export const hookUsage = `usage: sessionstate hook claude|codex|gemini [flags]

The command form of a CLI's prompt hook: reads the hook's JSON on standard input and POSTs it to the
server's /hooks/<cli>, which scans the adopted session's transcript at once. Prints nothing and exits 0
within 2 s, whatever happens (sessionstate hooks install puts it into a CLI's settings).

flags (or environment variables):
  --server URL        SESSIONSTATE_HTTP_URL     the server's HTTP port, default http://127.0.0.1:50052
  --namespace NAME    SESSIONSTATE_NAMESPACE    default: the server's "default"
  --token-file PATH   SESSIONSTATE_TOKEN        (the variable holds the token itself)
  --tls-ca PATH       SESSIONSTATE_TLS_CA       trust this CA for an https:// server
  --verbose                                     say on standard error what happened (for trying it by hand)
`;

/** Everything is over by then: the process exits 0 whatever is still under way. */
const budgetMs = 1800;
/** Largest body forwarded (the server takes 1 MiB). */
const maxBodyBytes = 1024 * 1024;

/** The flags, read by hand: node:util's parser is fast too, but this command takes so few. */
function readFlags(args: readonly string[]): { cli: string | undefined; flags: Map<string, string>; verbose: boolean; help: boolean } {
  const flags = new Map<string, string>();
  let cli: string | undefined;
  let verbose = false;
  let help = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "--verbose") verbose = true;
    else if (arg === "--help" || arg === "-h") help = true;
    else if (arg.startsWith("--")) {
      const eq = arg.indexOf("=");
      if (eq > 0) flags.set(arg.slice(2, eq), arg.slice(eq + 1));
      else flags.set(arg.slice(2), args[++i] ?? "");
    } else cli ??= arg;
  }
  return { cli, flags, verbose, help };
}

/** Standard input, up to `limit` bytes (more is cut: the server refuses it anyway). */
function readStdin(stdin: NodeJS.ReadableStream, limit: number): Promise<Buffer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    stdin.on("data", (chunk: Buffer) => {
      if (size <= limit) chunks.push(chunk);
      size += chunk.length;
    });
    stdin.on("end", () => resolve(Buffer.concat(chunks)));
    stdin.on("error", () => resolve(Buffer.concat(chunks)));
  });
}

/** POSTs `body` to `url`; resolves with the status, or the reason it could not. */
function post(url: URL, body: Buffer, headers: Record<string, string>, ca: Buffer | undefined, timeoutMs: number): Promise<string> {
  return new Promise((resolve) => {
    const request = url.protocol === "https:" ? httpsRequest : httpRequest;
    const req = request(
      url,
      { method: "POST", headers: { ...headers, "content-type": "application/json", "content-length": String(body.length) }, timeout: timeoutMs, ...(ca === undefined ? {} : { ca }) },
      (res) => {
        res.resume();
        resolve(`HTTP ${res.statusCode ?? 0}`);
      },
    );
    req.on("timeout", () => {
      req.destroy();
      resolve("no answer in time");
    });
    req.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    req.end(body);
  });
}

/**
 * Runs the command: 0 always (but for `--help`, which prints its usage). What happened is said on
 * `stderr` only with `--verbose`.
 */
export async function hookCommand(args: readonly string[], env: NodeJS.ProcessEnv, stdin: NodeJS.ReadableStream, stdout: NodeJS.WritableStream, stderr: NodeJS.WritableStream): Promise<number> {
  const { cli, flags, verbose, help } = readFlags(args);
  if (help) {
    stdout.write(hookUsage);
    return 0;
  }
  const say = (text: string): void => {
    if (verbose) stderr.write(`sessionstate hook: ${text}\n`);
  };
  if (cli === undefined || !isHookCli(cli)) {
    say(`give the CLI: claude, codex or gemini${cli === undefined ? "" : ` (not "${cli}")`}`);
    return 0;
  }
  const started = performance.now();
  const left = (): number => Math.max(1, budgetMs - (performance.now() - started));
  try {
    const base = flags.get("server") ?? env.SESSIONSTATE_HTTP_URL ?? "http://127.0.0.1:50052";
    const url = new URL(`/hooks/${cli}`, base.endsWith("/") ? base : `${base}/`);
    const tokenFile = flags.get("token-file");
    const token = tokenFile === undefined ? env.SESSIONSTATE_TOKEN : readFileSync(tokenFile, "utf8").trim();
    const namespace = flags.get("namespace") ?? env.SESSIONSTATE_NAMESPACE;
    const caFile = flags.get("tls-ca") ?? env.SESSIONSTATE_TLS_CA;
    const headers: Record<string, string> = {};
    if (token !== undefined && token !== "") headers.authorization = `Bearer ${token}`;
    if (namespace !== undefined && namespace !== "") headers["sessionstate-namespace"] = namespace;
    const body = await Promise.race([readStdin(stdin, maxBodyBytes), new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), left()).unref())]);
    if (body === undefined) {
      say("standard input did not end in time");
      return 0;
    }
    say(`${url.href}: ${await post(url, body, headers, caFile === undefined ? undefined : readFileSync(caFile), left())}`);
  } catch (err) {
    say((err as Error).message);
  }
  return 0;
}
