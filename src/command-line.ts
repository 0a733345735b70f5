import { readFileSync } from "node:fs";

/** True when the arguments ask for help (`--help` or `-h` before any `--`). */
export function asksForHelp(args: readonly string[]): boolean {
  return flagBeforeEnd(args, ["--help", "-h"]);
}

/** True when the arguments ask for the version (`--version` before any `--`). */
export function asksForVersion(args: readonly string[]): boolean {
  return flagBeforeEnd(args, ["--version"]);
}

function flagBeforeEnd(args: readonly string[], flags: readonly string[]): boolean {
  const end = args.indexOf("--");
  return (end === -1 ? args : args.slice(0, end)).some((arg) => flags.includes(arg));
}

/**
 * What a failed `util.parseArgs` says, for a person: an unknown flag is named as such (Node's own text
 * goes on about positionals), anything else as Node puts it.
 */
export function describeArgsError(err: unknown): string {
  const message = (err as Error).message;
  const unknown = /^Unknown option '([^']+)'/.exec(message);
  if (unknown !== null) return `unknown flag ${unknown[1]}`;
  return message.replace(/\. To specify a positional argument.*$/s, "");
}

/** The version of the sessionstate package this runs from (its package.json, found upwards from here). */
export function packageVersion(): string {
  for (const up of ["../package.json", "../../package.json"]) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), "utf8")) as { name?: string; version?: string };
      if (pkg.name === "sessionstate" && pkg.version !== undefined) return pkg.version;
    } catch {
      // not here; look one folder further up
    }
  }
  return "unknown";
}
