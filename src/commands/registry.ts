import { ackCommand, ackUsage, appendCommand, appendUsage, pruneCommand, pruneUsage, unwatchCommand, unwatchUsage, watchCommand, watchUsage } from "./change-commands.js";
import { eventsCommand, eventsUsage, namespacesCommand, namespacesUsage, pendingUsage, sessionsCommand, sessionsUsage, watchesCommand, watchesUsage } from "./list-commands.js";
import { mcpCommand, mcpUsage } from "./mcp-command.js";
import { statusCommand, statusUsage } from "./status-command.js";
import { tailCommand, tailUsage } from "./tail-command.js";
import { tokenCommand, tokenUsage } from "./token-command.js";
import { hookCommand, hookUsage } from "./hook-command.js";
import { hooksCommand, hooksUsage } from "./hooks-command.js";
import { adoptCommand, adoptUsage, linksCommand, linksUsage, scanCommand, scanUsage } from "./upstream-commands.js";

/** Where a command reads and writes, and what ends it (Ctrl-C, SIGTERM). */
export interface CommandIo {
  env: NodeJS.ProcessEnv;
  stdin: NodeJS.ReadableStream;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  signal: AbortSignal;
}

/** A command of the CLI other than `serve`: how `sessionstate --help` lists it, its usage, and what it does. */
export interface OperatorCommand {
  /** As the command list shows it: the name and its positional arguments. */
  synopsis: string;
  summary: string;
  usage: string;
  run(args: readonly string[], io: CommandIo): Promise<number>;
}

/** Every operator command, in the order `sessionstate --help` lists them: look first, then change. */
export const operatorCommands: Readonly<Record<string, OperatorCommand>> = {
  namespaces: {
    synopsis: "namespaces",
    summary: "list namespaces: sessions, events, watches, pending notices",
    usage: namespacesUsage,
    run: (args, io) => namespacesCommand(args, io.env, io.stdout),
  },
  sessions: { synopsis: "sessions", summary: "list a namespace's sessions", usage: sessionsUsage, run: (args, io) => sessionsCommand(args, io.env, io.stdout) },
  status: { synopsis: "status <key>", summary: "print a session's version and changes", usage: statusUsage, run: (args, io) => statusCommand(args, io.env, io.stdout) },
  events: { synopsis: "events <key>", summary: "print a session's log", usage: eventsUsage, run: (args, io) => eventsCommand(args, io.env, io.stdout) },
  watches: { synopsis: "watches", summary: "list watches and their marks (L, N, M)", usage: watchesUsage, run: (args, io) => watchesCommand(args, io.env, io.stdout) },
  pending: {
    synopsis: "pending",
    summary: "list pending stale notices and their text",
    usage: pendingUsage,
    run: (args, io) => watchesCommand(args, io.env, io.stdout, { pendingOnly: true }),
  },
  tail: { synopsis: "tail", summary: "follow stale notices as they come", usage: tailUsage, run: (args, io) => tailCommand(args, io.env, io.stdout, io.stderr, io.signal) },
  append: { synopsis: "append <key>", summary: "record an event in a session's log", usage: appendUsage, run: (args, io) => appendCommand(args, io.env, io.stdout) },
  watch: { synopsis: "watch <watcher> <target>", summary: "watch a session", usage: watchUsage, run: (args, io) => watchCommand(args, io.env, io.stdout) },
  unwatch: { synopsis: "unwatch <watcher> <target>", summary: "stop watching a session", usage: unwatchUsage, run: (args, io) => unwatchCommand(args, io.env, io.stdout) },
  ack: { synopsis: "ack <watcher> <target>", summary: "acknowledge a stale notice", usage: ackUsage, run: (args, io) => ackCommand(args, io.env, io.stdout) },
  links: { synopsis: "links", summary: "list adopted sessions' upstream links and their last scan", usage: linksUsage, run: (args, io) => linksCommand(args, io.env, io.stdout) },
  adopt: { synopsis: "adopt <key>", summary: "adopt a CLI's transcript as a session's upstream", usage: adoptUsage, run: (args, io) => adoptCommand(args, io.env, io.stdout) },
  scan: { synopsis: "scan", summary: "scan the adopted transcripts now (one monitor tick)", usage: scanUsage, run: (args, io) => scanCommand(args, io.env, io.stdout) },
  prune: { synopsis: "prune", summary: "run retention now", usage: pruneUsage, run: (args, io) => pruneCommand(args, io.env, io.stdout) },
  mcp: { synopsis: "mcp", summary: "serve MCP tools for an agent on stdio (needs @sessionstate/mcp)", usage: mcpUsage, run: (args, io) => mcpCommand(args, io.env) },
  hook: {
    synopsis: "hook <cli>",
    summary: "forward a CLI's prompt hook to the server (prints nothing, exits 0)",
    usage: hookUsage,
    run: (args, io) => hookCommand(args, io.env, io.stdin, io.stdout, io.stderr),
  },
  hooks: {
    synopsis: "hooks install|uninstall|status",
    summary: "put the prompt hook into Claude Code's, Codex's or Gemini CLI's settings; say what is installed",
    usage: hooksUsage,
    run: (args, io) => hooksCommand(args, io.env, io.stdout),
  },
  token: { synopsis: "token hash", summary: "hash a token for the tokens file", usage: tokenUsage, run: (args, io) => tokenCommand(args, io.stdin, io.stdout) },
};
