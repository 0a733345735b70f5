import { performance } from "node:perf_hooks";
import { signalAfterStop } from "./stop-signals.js";
import { CommandFailure, connectionOptions, UsageError } from "./commands/connection.js";
import { operatorCommands } from "./commands/registry.js";
import { ConfigError, isLoopbackHost, loadConfig, settingsUsage } from "./config.js";
import { asksForHelp, asksForVersion, packageVersion } from "./command-line.js";
import { createLogger } from "./logger.js";
import { startServer } from "./server.js";
import { AddressInUseError } from "./ports.js";
import { DatabaseInUseError, DatabaseOpenError } from "./store/sqlite/open-database.js";
import { DatabaseSetupError } from "./store/backends/open-store.js";

const serveUsage = `usage: sessionstate serve [flags]

Runs the service. Every flag is also an environment variable; flags win over variables, variables over
the defaults. Every value is checked at start-up, and every bad one is reported at once (exit code 2).

flags:
${settingsUsage()}
`;

const commandList = [
  ["serve", "run the service"],
  ...Object.values(operatorCommands).map((command) => [command.synopsis, command.summary]),
  ["help [command]", "this text, or a command's usage (as <command> --help prints)"],
];
const synopsisWidth = Math.max(...commandList.map(([synopsis]) => synopsis!.length));

const usage = `usage: sessionstate <command> [flags]

commands:
${commandList.map(([synopsis, summary]) => `  ${synopsis!.padEnd(synopsisWidth)}  ${summary}`).join("\n")}

flags of every command: --help, -h (its usage), --version (also sessionstate -v)
`;

const usages: Record<string, string> = {
  serve: serveUsage,
  ...Object.fromEntries(Object.entries(operatorCommands).map(([name, command]) => [name, command.usage])),
};

/** Where a usage error points. */
const seeHelp = (name: string): string => `see 'sessionstate ${name} --help'\n`;

/**
 * Runs an operator command until it ends or a signal (Ctrl-C, SIGTERM) stops it: usage errors exit 2, a
 * failed call prints its plain message and exits 1.
 */
async function runCommand(name: string, args: readonly string[]): Promise<number> {
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    const io = { env: process.env, stdin: process.stdin, stdout: process.stdout, stderr: process.stderr, signal: stop.signal };
    return await operatorCommands[name]!.run(args, io);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`sessionstate ${name}: ${err.message}\n${seeHelp(name)}`);
      return 2;
    }
    if (err instanceof CommandFailure) {
      process.stderr.write(`sessionstate ${name}: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}

/** Exit codes: 0 ok, 1 failed to start or run, 2 bad usage or configuration. */
/**
 * The command and its arguments. Connection flags may come before the command too (`sessionstate
 * --namespace team-b append …`, as in other CLIs): they are handed to it after its own.
 */
function commandLine(argv: readonly string[]): { command: string | undefined; args: string[] } {
  const leading: string[] = [];
  let i = 0;
  while (i < argv.length && argv[i]!.startsWith("--")) {
    const [name, value] = argv[i]!.slice(2).split(/=(.*)/su);
    if (!Object.hasOwn(connectionOptions, name!)) break;
    leading.push(argv[i]!);
    if (value === undefined && i + 1 < argv.length) leading.push(argv[++i]!);
    i++;
  }
  return { command: argv[i], args: [...argv.slice(i + 1), ...leading] };
}

async function main(argv: readonly string[]): Promise<number> {
  const { command, args } = commandLine(argv);
  // Every command takes --help (and -h) and --version, whatever else its arguments hold.
  if (command !== undefined && Object.hasOwn(usages, command)) {
    if (asksForHelp(args)) {
      process.stdout.write(usages[command]!);
      return 0;
    }
    if (asksForVersion(args)) return printVersion();
  }
  switch (command) {
    case "serve":
      return serve(args);
    case "help":
    case "--help":
    case "-h": {
      const topic = args[0];
      if (topic !== undefined && !Object.hasOwn(usages, topic)) {
        process.stderr.write(`sessionstate help: unknown command "${topic}"\nsee 'sessionstate --help'\n`);
        return 2;
      }
      process.stdout.write(topic === undefined ? usage : usages[topic]!);
      return 0;
    }
    case "--version":
    case "-v":
    case "version":
      return printVersion();
    default:
      if (command !== undefined && Object.hasOwn(operatorCommands, command)) return runCommand(command, args);
      process.stderr.write(command === undefined ? usage : `sessionstate: unknown command "${command}"\nsee 'sessionstate --help'\n`);
      return 2;
  }
}

function printVersion(): number {
  process.stdout.write(`sessionstate ${packageVersion()}\n`);
  return 0;
}

async function serve(args: readonly string[]): Promise<number> {
  let config;
  try {
    config = loadConfig(args, process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`sessionstate: ${err.message}\n${seeHelp("serve")}`);
      return 2;
    }
    throw err;
  }
  const logger = createLogger(config.logLevel);
  // Signals are taken before the server starts, not once it listens: a stop asked for meanwhile is kept and
  // done as soon as it has started (between `listening on` and a handler installed after it, a SIGTERM
  // ended the process without a clean stop). A second signal exits at once.
  let stopAsked: NodeJS.Signals | undefined;
  let stop: ((signal: NodeJS.Signals) => void) | undefined;
  // The first signal starts the stop; the same one again within a second is that stop delivered twice (by
  // the process group and by npm); any other exits at once.
  let firstSignal: { signal: NodeJS.Signals; atMs: number } | undefined;
  const onSignal = (signal: NodeJS.Signals): void => {
    const atMs = performance.now();
    if (firstSignal !== undefined) {
      if (signalAfterStop(firstSignal, signal, atMs) === "same stop") {
        logger.debug({ signal }, "the same signal again: the stop under way goes on");
        return;
      }
      logger.warn({ signal }, "second signal: exiting now");
      process.exit(1);
    }
    firstSignal = { signal, atMs };
    if (stop !== undefined) return stop(signal);
    stopAsked = signal;
    logger.info({ signal }, "stopping once started");
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  let server: Awaited<ReturnType<typeof startServer>>;
  let failed: ((err: unknown) => void) | undefined;
  const fatal = new Promise<unknown>((resolve) => (failed = resolve));
  try {
    server = await startServer(config, { logger, onFatal: (err) => failed?.(err), onWaiting: (line) => process.stderr.write(`sessionstate: ${line}\n`) });
  } catch (err) {
    // Errors that say what to do are printed as they are; a database set up wrongly is a usage error (exit 2).
    if (err instanceof DatabaseSetupError || err instanceof DatabaseInUseError || err instanceof DatabaseOpenError || err instanceof AddressInUseError) {
      process.stderr.write(`sessionstate: ${err.message}\n`);
      if (err instanceof DatabaseSetupError) return 2;
    } else {
      logger.fatal({ err }, "failed to start");
      process.stderr.write(`sessionstate: failed to start: ${(err as Error).message}\n`);
    }
    return 1;
  }
  process.stdout.write(`listening on ${server.address}\n`);
  if (server.httpAddress !== undefined) {
    process.stdout.write(`console on ${config.tls === undefined ? "http" : "https"}://${server.httpAddress}/\n`);
    // Off loopback, a name clients use (a DNS name, a proxy's) must be configured, or they get 421.
    const httpHost = server.httpAddress.replace(/:\d+$/u, "").replace(/^\[(.*)\]$/u, "$1");
    if (!isLoopbackHost(httpHost) && config.httpAllowedHosts.length === 0) {
      process.stdout.write(`the HTTP port answers only to ${server.httpHostNames.join(", ")}; name others with --http-allowed-hosts\n`);
    }
  }

  return new Promise<number>((resolve) => {
    let stopping = false;
    stop = (signal: NodeJS.Signals): void => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, "shutting down");
      server.close().then(
        () => resolve(0),
        (err: unknown) => {
          logger.error({ err }, "shutdown failed");
          resolve(1);
        },
      );
    };
    if (stopAsked !== undefined) stop(stopAsked);
    // A replica that could open its database only later, and then found it unusable (a newer schema).
    void fatal.then((err) => {
      if (stopping) return;
      stopping = true;
      // A mistake in the configuration (exit 2), or a database this program cannot serve (exit 1).
      const setup = err instanceof DatabaseSetupError;
      process.stderr.write(`sessionstate: ${setup ? "" : "failed to start: "}${(err as Error).message}\n`);
      void server.close().finally(() => resolve(setup ? 2 : 1));
    });
    process.on("SIGHUP", () => {
      try {
        logger.info({ tokens: server.reloadTokens() }, "tokens file reloaded");
      } catch (err) {
        logger.error({ err }, "tokens file reload failed; keeping the previous tokens");
      }
    });
  });
}

main(process.argv.slice(2)).then(
  (code) => {
    // Exit now rather than when the event loop drains: a database connection that a stop gave up on (its
    // peer unreachable) must not keep a stopped server alive. Everything is closed and logged by now
    // (standard output and error are synchronous here).
    process.exit(code);
  },
  (err: unknown) => {
    process.stderr.write(`sessionstate: ${(err as Error).stack ?? String(err)}\n`);
    process.exitCode = 1;
  },
);
