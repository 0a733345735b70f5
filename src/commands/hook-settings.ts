/**
 * The CLIs' own hook settings (API.md "Additions for hooks"), read and changed as `sessionstate hooks`
 * does: where each CLI keeps them, which entry is ours, and the merge that adds ours or takes it out while
 * leaving every other entry as it was. Pure, but for the path helpers reading the environment they are given.
 */
import { homedir } from "node:os";
import { join } from "node:path";

import { promptEvents, type HookCli } from "../domain/hook-clis.js";

export type HookScope = "user" | "project";
export type HookTransport = "http" | "command";

/** Where a CLI reads its hooks in a scope; undefined where it reads none (Codex has no project file). */
export function settingsPath(cli: HookCli, scope: HookScope, env: NodeJS.ProcessEnv, cwd: string): string | undefined {
  const home = env.HOME ?? homedir();
  switch (cli) {
    case "claude":
      return scope === "user" ? join(home, ".claude", "settings.json") : join(cwd, ".claude", "settings.local.json");
    case "codex":
      return scope === "user" ? join(env.CODEX_HOME ?? join(home, ".codex"), "hooks.json") : undefined;
    case "gemini":
      return scope === "user" ? join(home, ".gemini", "settings.json") : join(cwd, ".gemini", "settings.json");
    default: {
      const never: never = cli;
      throw new Error(`unknown CLI ${String(never)}`);
    }
  }
}

/** A hook entry of a CLI's settings: `{ "type": "command", "command": … }` or `{ "type": "http", "url": … }`, and more. */
export type HookEntry = Record<string, unknown>;

/** True for an entry that `sessionstate hooks install` wrote for `cli`: a `sessionstate … hook <cli>` command, or an http hook to `/hooks/<cli>`. */
export function isOurEntry(entry: unknown, cli: HookCli): boolean {
  if (typeof entry !== "object" || entry === null) return false;
  const { type, command, url } = entry as Record<string, unknown>;
  if (type === "command" && typeof command === "string") return new RegExp(`sessionstate(\\.js)?["']?\\s+hook\\s+${cli}(\\s|$)`, "u").test(command);
  if (type === "http" && typeof url === "string") return new RegExp(`/hooks/${cli}$`, "u").test(url);
  return false;
}

/** What we put into a CLI's settings. */
export interface OurHook {
  transport: HookTransport;
  /** The command line (command transport) or the URL (http). */
  target: string;
  /** Headers of an http hook (`$VAR` expanded by Claude Code for the variables in `allowedEnvVars`). */
  headers?: Record<string, string>;
  allowedEnvVars?: string[];
}

/** Our entry as each CLI takes it. */
export function entryFor(cli: HookCli, hook: OurHook): HookEntry {
  if (hook.transport === "http") {
    return {
      type: "http",
      url: hook.target,
      timeout: 5,
      ...(hook.headers === undefined ? {} : { headers: hook.headers }),
      ...(hook.allowedEnvVars === undefined ? {} : { allowedEnvVars: hook.allowedEnvVars }),
    };
  }
  switch (cli) {
    case "claude":
      // async: Claude Code runs it beside the prompt instead of holding the prompt for it.
      return { type: "command", command: hook.target, async: true, timeout: 5 };
    case "codex":
      return { type: "command", command: hook.target, timeout: 5 };
    case "gemini":
      // Gemini CLI's timeout is in milliseconds; name shows in its hook list.
      return { name: "sessionstate", type: "command", command: hook.target, timeout: 5000 };
    default: {
      const never: never = cli;
      throw new Error(`unknown CLI ${String(never)}`);
    }
  }
}

/** Settings as a JSON object, or the reason they are not one. */
export function parseSettings(text: string): { settings: Record<string, unknown> } | { problem: string } {
  if (text.trim() === "") return { settings: {} };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    const position = /position (\d+)/u.exec((err as Error).message);
    if (position === null) return { problem: "is not valid JSON" };
    const before = text.slice(0, Number(position[1]));
    const line = before.split("\n").length;
    const column = before.length - before.lastIndexOf("\n");
    return { problem: `is not valid JSON (line ${line}, column ${column})` };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return { problem: "is not a JSON object" };
  return { settings: value as Record<string, unknown> };
}

/** The groups of one event's hooks, or the problem with their shape. */
function eventGroups(settings: Record<string, unknown>, event: string): { groups: unknown[] } | { problem: string } {
  const hooks = settings.hooks;
  if (hooks === undefined) return { groups: [] };
  if (typeof hooks !== "object" || hooks === null || Array.isArray(hooks)) return { problem: `"hooks" is not an object` };
  const groups = (hooks as Record<string, unknown>)[event];
  if (groups === undefined) return { groups: [] };
  if (!Array.isArray(groups)) return { problem: `"hooks"."${event}" is not a list` };
  return { groups };
}

/** Our entries in a CLI's settings. */
export function ourEntries(settings: Record<string, unknown>, cli: HookCli): HookEntry[] {
  const found = eventGroups(settings, promptEvents[cli]);
  if ("problem" in found) return [];
  return found.groups.flatMap((group) => {
    const entries = typeof group === "object" && group !== null ? (group as Record<string, unknown>).hooks : undefined;
    return Array.isArray(entries) ? (entries.filter((entry) => isOurEntry(entry, cli)) as HookEntry[]) : [];
  });
}

/** Settings with our entries taken out of every group (a group left empty goes, and so do an emptied event and `hooks`). */
export function withoutOurs(settings: Record<string, unknown>, cli: HookCli): { settings: Record<string, unknown>; removed: number } | { problem: string } {
  const event = promptEvents[cli];
  const found = eventGroups(settings, event);
  if ("problem" in found) return found;
  let removed = 0;
  const groups = found.groups.flatMap((group) => {
    if (typeof group !== "object" || group === null) return [group];
    const entries = (group as Record<string, unknown>).hooks;
    if (!Array.isArray(entries)) return [group];
    const kept = entries.filter((entry) => !isOurEntry(entry, cli));
    removed += entries.length - kept.length;
    if (kept.length === entries.length) return [group];
    return kept.length === 0 ? [] : [{ ...(group as Record<string, unknown>), hooks: kept }];
  });
  if (removed === 0) return { settings, removed };
  const hooks = { ...(settings.hooks as Record<string, unknown>) };
  if (groups.length === 0) delete hooks[event];
  else hooks[event] = groups;
  const next: Record<string, unknown> = { ...settings, hooks };
  if (Object.keys(hooks).length === 0) delete next.hooks;
  return { settings: next, removed };
}

/**
 * Settings with our entry in them: unchanged when it is there already as it should be; an earlier entry of
 * ours (another transport, server or command) is replaced; every other entry stays as it was.
 */
export function withOurs(settings: Record<string, unknown>, cli: HookCli, entry: HookEntry): { settings: Record<string, unknown>; changed: boolean } | { problem: string } {
  const present = ourEntries(settings, cli);
  if (present.length === 1 && JSON.stringify(present[0]) === JSON.stringify(entry)) return { settings, changed: false };
  const cleared = withoutOurs(settings, cli);
  if ("problem" in cleared) return cleared;
  const event = promptEvents[cli];
  const hooks = { ...((cleared.settings.hooks as Record<string, unknown> | undefined) ?? {}) };
  const groups = Array.isArray(hooks[event]) ? [...(hooks[event] as unknown[])] : [];
  groups.push({ hooks: [entry] });
  hooks[event] = groups;
  return { settings: { ...cleared.settings, hooks }, changed: true };
}
