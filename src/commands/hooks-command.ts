/**
 * `sessionstate hooks install|uninstall|status` (API.md "Additions for hooks"): puts the prompt hook into
 * each CLI's own settings file, takes out only what it put there, and says what is installed and when the
 * server last heard from each CLI. A file is changed only when it must be: merged into what is there
 * (commands/hook-settings), written whole through a temporary file, with a backup of the file as it was
 * found the first time; a file that is not valid JSON is left untouched and named with where it fails.
 */
import { existsSync, mkdirSync, readFileSync, realpathSync, renameSync, writeFileSync } from "node:fs";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { describeArgsError } from "../command-line.js";
import { hookClis, isHookCli, promptEvents, type HookCli } from "../domain/hook-clis.js";
import { isValidNamespace } from "../domain/session-key.js";
import { CommandFailure, UsageError } from "./connection.js";
import { table } from "./output.js";
import { entryFor, ourEntries, parseSettings, settingsPath, withOurs, withoutOurs, type HookScope, type OurHook } from "./hook-settings.js";

export const hooksUsage = `usage: sessionstate hooks install --cli claude|codex|gemini [--scope user|project] [--transport http|command] [flags]
       sessionstate hooks uninstall --cli claude|codex|gemini [--scope user|project]
       sessionstate hooks status [--json] [flags]

Puts the prompt hook that shows the server a person's prompt at once (sessionstate hook <cli>, or for
Claude Code an http hook) into the CLI's own settings, takes it out again, or says what is installed.

  --cli NAME          claude (~/.claude/settings.json; project: .claude/settings.local.json),
                      codex ($CODEX_HOME/hooks.json, default ~/.codex/hooks.json; user only),
                      gemini (~/.gemini/settings.json; project: .gemini/settings.json)
  --scope SCOPE       user (default) or project (the current folder)
  --transport KIND    claude only: command (default: prints nothing and never holds the prompt when
                      the server is down) or http (Claude Code posts itself; with the server down it
                      shows "UserPromptSubmit hook failed" under every prompt)
  --server URL        SESSIONSTATE_HTTP_URL     the server's HTTP port, default http://127.0.0.1:50052
  --namespace NAME    SESSIONSTATE_NAMESPACE    written into the hook
  --token-file PATH   install: the hook reads its token there (command); otherwise it takes
                      $SESSIONSTATE_TOKEN from the CLI's environment. status: the token to ask the server with
  --json              status: one JSON object
`;

const options = {
  cli: { type: "string" },
  scope: { type: "string" },
  transport: { type: "string" },
  server: { type: "string" },
  namespace: { type: "string" },
  "token-file": { type: "string" },
  json: { type: "boolean" },
} as const;

/** This package's bin, as the hook command should name it: `sessionstate` when PATH finds this very file, else node and its path. */
function hookCommandLine(cli: HookCli, env: NodeJS.ProcessEnv, extra: readonly string[]): string {
  const bin = binPath();
  const quote = (text: string): string => (/^[\w@%+=:,./-]+$/u.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`);
  const onPath = (env.PATH ?? "").split(delimiter).some((dir) => {
    const candidate = join(dir, "sessionstate");
    try {
      return existsSync(candidate) && realpathSync(candidate) === bin;
    } catch {
      return false;
    }
  });
  const program = onPath ? ["sessionstate"] : [process.execPath, bin];
  return [...program, "hook", cli, ...extra].map(quote).join(" ");
}

/** Where this package's bin is: two folders up from this file in a checkout (src/commands), three in the build (dist/src/commands). */
function binPath(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const up of ["../..", "../../.."]) {
    const candidate = join(here, up, "bin", "sessionstate.js");
    if (existsSync(candidate)) return realpathSync(candidate);
  }
  throw new CommandFailure("cannot find this package's bin/sessionstate.js");
}

/** Reads a settings file: its object (empty when the file does not exist), or a CommandFailure naming it. */
function readSettings(path: string): { settings: Record<string, unknown>; existed: boolean } {
  if (!existsSync(path)) return { settings: {}, existed: false };
  const parsed = parseSettings(readFileSync(path, "utf8"));
  if ("problem" in parsed) throw new CommandFailure(`${path} ${parsed.problem}: nothing was changed; mend it and run this again`);
  return { settings: parsed.settings, existed: true };
}

/** Writes settings whole (a temporary file renamed over it), after a backup of the file as first found. */
function writeSettings(path: string, settings: Record<string, unknown>, existed: boolean): string | undefined {
  mkdirSync(dirname(path), { recursive: true });
  let backup: string | undefined;
  if (existed) {
    backup = `${path}.sessionstate-backup`;
    if (!existsSync(backup)) writeFileSync(backup, readFileSync(path));
  }
  const temporary = `${path}.sessionstate-${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(settings, null, 2)}\n`);
  renameSync(temporary, path);
  return backup;
}

/** The CLI and scope flags, checked. */
function cliAndScope(values: Record<string, unknown>): { cli: HookCli; scope: HookScope } {
  const cli = values.cli;
  if (typeof cli !== "string" || !isHookCli(cli)) throw new UsageError(`--cli: give ${hookClis.join(", ")}${typeof cli === "string" ? ` (not "${cli}")` : ""}`);
  const scope = values.scope ?? "user";
  if (scope !== "user" && scope !== "project") throw new UsageError(`--scope: give user or project (not "${String(scope)}")`);
  if (cli === "codex" && scope === "project") throw new UsageError("--scope: Codex reads hooks from $CODEX_HOME/hooks.json only: give user");
  return { cli, scope };
}

/** The HTTP port's base URL from --server, SESSIONSTATE_HTTP_URL or the default. */
function httpBase(values: Record<string, unknown>, env: NodeJS.ProcessEnv): URL {
  const text = (typeof values.server === "string" ? values.server : undefined) ?? env.SESSIONSTATE_HTTP_URL ?? "http://127.0.0.1:50052";
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`--server: "${text}" is not a URL (the HTTP port, like http://127.0.0.1:50052)`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new UsageError(`--server: "${text}" is not an http:// or https:// URL`);
  return url;
}

/** What we install for a CLI, from the flags. */
function ourHook(cli: HookCli, values: Record<string, unknown>, env: NodeJS.ProcessEnv): OurHook {
  const transport = (values.transport ?? "command") as string;
  if (transport !== "command" && transport !== "http") throw new UsageError(`--transport: give command or http (not "${transport}")`);
  if (transport === "http" && cli !== "claude") throw new UsageError(`--transport: ${cli} runs command hooks only`);
  const base = httpBase(values, env);
  const namespace = typeof values.namespace === "string" ? values.namespace : undefined;
  if (namespace !== undefined && !isValidNamespace(namespace)) throw new UsageError(`--namespace: "${namespace}" is not a namespace ([a-z0-9][a-z0-9-]{0,62})`);
  const tokenFile = typeof values["token-file"] === "string" ? values["token-file"] : undefined;
  if (transport === "http") {
    if (tokenFile !== undefined) throw new UsageError("--token-file: an http hook cannot read a file; it sends $SESSIONSTATE_TOKEN from Claude Code's environment");
    return {
      transport,
      target: new URL(`hooks/${cli}`, base.href.endsWith("/") ? base : `${base.href}/`).href,
      headers: { Authorization: "Bearer $SESSIONSTATE_TOKEN", ...(namespace === undefined ? {} : { "sessionstate-namespace": namespace }) },
      allowedEnvVars: ["SESSIONSTATE_TOKEN"],
    };
  }
  const extra: string[] = [];
  const defaultBase = "http://127.0.0.1:50052/";
  if (base.href !== defaultBase) extra.push("--server", base.href.replace(/\/$/u, ""));
  if (namespace !== undefined) extra.push("--namespace", namespace);
  if (tokenFile !== undefined) extra.push("--token-file", realpathSync(tokenFile));
  return { transport, target: hookCommandLine(cli, env, extra) };
}

/** What each CLI needs beyond its settings, said after an install. */
const afterInstall: Readonly<Record<HookCli, string>> = {
  claude: "Claude Code reads it when a session starts: sessions already running keep their old hooks.",
  codex: "Codex runs a new or changed hook only after a person has reviewed it: open codex once and accept it when it asks.",
  gemini: "Gemini CLI reads it when it starts; its hooks must be enabled in its settings (see its hooks documentation).",
};

async function install(values: Record<string, unknown>, env: NodeJS.ProcessEnv, cwd: string, stdout: NodeJS.WritableStream): Promise<number> {
  const { cli, scope } = cliAndScope(values);
  const path = settingsPath(cli, scope, env, cwd)!;
  const hook = ourHook(cli, values, env);
  const { settings, existed } = readSettings(path);
  const merged = withOurs(settings, cli, entryFor(cli, hook));
  if ("problem" in merged) throw new CommandFailure(`${path}: ${merged.problem}: nothing was changed`);
  const what = `${promptEvents[cli]} → ${hook.transport === "http" ? `http ${hook.target}` : hook.target}`;
  if (!merged.changed) {
    stdout.write(`${cli} (${scope}): already installed in ${path}: ${what}\n`);
    return 0;
  }
  const backup = writeSettings(path, merged.settings, existed);
  stdout.write(`${cli} (${scope}): ${existed ? "added to" : "wrote"} ${path}${backup === undefined ? "" : ` (as it was: ${backup})`}: ${what}\n${afterInstall[cli]}\n`);
  return 0;
}

async function uninstall(values: Record<string, unknown>, env: NodeJS.ProcessEnv, cwd: string, stdout: NodeJS.WritableStream): Promise<number> {
  const { cli, scope } = cliAndScope(values);
  const path = settingsPath(cli, scope, env, cwd)!;
  const { settings, existed } = readSettings(path);
  const cleared = withoutOurs(settings, cli);
  if ("problem" in cleared) throw new CommandFailure(`${path}: ${cleared.problem}: nothing was changed`);
  if (!existed || cleared.removed === 0) {
    stdout.write(`${cli} (${scope}): nothing of sessionstate's in ${path}\n`);
    return 0;
  }
  writeSettings(path, cleared.settings, existed);
  stdout.write(`${cli} (${scope}): removed ${cleared.removed} hook${cleared.removed === 1 ? "" : "s"} from ${path}; every other entry is as it was\n`);
  return 0;
}

/** One CLI's hook calls as the server reports them (GetServerInfo.hooks, proto3 JSON). */
interface ServerHooks {
  cli: string;
  matched?: string;
  unmatched?: string;
  refused?: string;
  lastCallAt?: string;
}

/** Asks the server's HTTP port for its hook activity; a plain sentence when it cannot. */
async function serverHooks(values: Record<string, unknown>, env: NodeJS.ProcessEnv): Promise<ServerHooks[] | string> {
  const base = httpBase(values, env);
  const headers: Record<string, string> = { "content-type": "application/json" };
  const tokenFile = typeof values["token-file"] === "string" ? values["token-file"] : undefined;
  let token = env.SESSIONSTATE_TOKEN;
  if (tokenFile !== undefined) {
    try {
      token = readFileSync(tokenFile, "utf8").trim();
    } catch {
      throw new UsageError(`--token-file: cannot read ${tokenFile}`);
    }
  }
  if (token !== undefined && token !== "") headers.authorization = `Bearer ${token}`;
  const namespace = typeof values.namespace === "string" ? values.namespace : env.SESSIONSTATE_NAMESPACE;
  if (namespace !== undefined && namespace !== "") headers["sessionstate-namespace"] = namespace;
  try {
    const response = await fetch(new URL("sessionstate.v1.Reconcile/GetServerInfo", base.href.endsWith("/") ? base : `${base.href}/`), {
      method: "POST",
      headers,
      body: "{}",
      signal: AbortSignal.timeout(3000),
    });
    const body = (await response.json()) as { hooks?: ServerHooks[]; message?: string };
    if (!response.ok) return `the server at ${base.origin} answered ${response.status}${body.message === undefined ? "" : `: ${body.message}`}`;
    return body.hooks ?? [];
  } catch {
    return `cannot reach the server's HTTP port at ${base.origin} (--server, SESSIONSTATE_HTTP_URL)`;
  }
}

async function status(values: Record<string, unknown>, env: NodeJS.ProcessEnv, cwd: string, stdout: NodeJS.WritableStream): Promise<number> {
  const installed: Array<{ cli: HookCli; scope: HookScope; path: string; hooks: string[]; problem?: string }> = [];
  for (const cli of hookClis) {
    for (const scope of ["user", "project"] as const) {
      const path = settingsPath(cli, scope, env, cwd);
      if (path === undefined) continue;
      const entry: (typeof installed)[number] = { cli, scope, path, hooks: [] };
      if (existsSync(path)) {
        const parsed = parseSettings(readFileSync(path, "utf8"));
        if ("problem" in parsed) entry.problem = parsed.problem;
        else entry.hooks = ourEntries(parsed.settings, cli).map((hook) => (hook.type === "http" ? `http ${String(hook.url)}` : String(hook.command)));
      }
      installed.push(entry);
    }
  }
  const server = await serverHooks(values, env);
  if (values.json === true) {
    stdout.write(`${JSON.stringify({ installed, server: typeof server === "string" ? { unreachable: server } : { hooks: server } })}\n`);
    return 0;
  }
  stdout.write(
    table(
      ["cli", "scope", "hook", "file"],
      installed.map((entry) => [entry.cli, entry.scope, entry.problem ?? (entry.hooks.length === 0 ? "-" : entry.hooks.join("; ")), entry.path]),
    ),
  );
  if (typeof server === "string") {
    stdout.write(`\nserver: ${server}\n`);
    return 0;
  }
  stdout.write("\nthe server heard (since it started):\n");
  stdout.write(
    table(
      ["cli", "last call", "matched", "unmatched", "refused"],
      server.map((hooks) => [hooks.cli, hooks.lastCallAt ?? "never", hooks.matched ?? "0", hooks.unmatched ?? "0", hooks.refused ?? "0"]),
    ),
  );
  return 0;
}

/** Runs `sessionstate hooks <install|uninstall|status>`. */
export async function hooksCommand(args: readonly string[], env: NodeJS.ProcessEnv, stdout: NodeJS.WritableStream, cwd = process.cwd()): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: [...args], options, strict: true, allowPositionals: true });
  } catch (err) {
    throw new UsageError(describeArgsError(err));
  }
  const [action, ...rest] = parsed.positionals;
  if (rest.length > 0) throw new UsageError(`unexpected argument "${rest[0]}"`);
  switch (action) {
    case "install":
      return install(parsed.values, env, cwd, stdout);
    case "uninstall":
      return uninstall(parsed.values, env, cwd, stdout);
    case "status":
      return status(parsed.values, env, cwd, stdout);
    default:
      throw new UsageError(action === undefined ? "give install, uninstall or status" : `unknown action "${action}": give install, uninstall or status`);
  }
}
