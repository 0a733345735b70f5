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
/**
 * A flag's value that starts with a dash and a digit (`--retention-days -3`) given as one argument, as
 * `util.parseArgs` takes it (`--retention-days=-3`): it is then checked, and refused, like any other value,
 * in the project's words, not taken for a flag.
 */
export function joinNegativeValues(args: readonly string[], options: Record<string, { type: "string" | "boolean" }>): string[] {
  const joined: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const next = args[i + 1];
    if (arg.startsWith("--") && !arg.includes("=") && options[arg.slice(2)]?.type === "string" && next !== undefined && /^-[\d.]/u.test(next)) {
      joined.push(`${arg}=${next}`);
      i++;
    } else joined.push(arg);
  }
  return joined;
}

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
