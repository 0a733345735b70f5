#!/usr/bin/env node
// Runs the compiled build (dist/). An installed package holds only the build. In a checkout (src/ is
// there), `npm install` builds it too, and when any TypeScript source is newer than the build the
// sources run directly through tsx (a dev dependency), so an edit is never served stale.
import { existsSync, readdirSync, statSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const built = `${root}dist/src/cli.js`;

// `sessionstate hook <cli>` runs as a CLI's prompt hook: the prompt waits on it, so it loads its one module
// and nothing else (no staleness walk of the tree, no server, no client), and exits as soon as it is done.
if (process.argv[2] === "hook") {
  const builtHook = `${root}dist/src/commands/hook-command.js`;
  const sourceHook = `${root}src/commands/hook-command.ts`;
  const fresh = existsSync(builtHook) && (!existsSync(sourceHook) || statSync(builtHook).mtimeMs >= statSync(sourceHook).mtimeMs);
  if (!fresh) (await import("tsx/esm/api")).register();
  const { hookCommand } = await import(fresh ? builtHook : sourceHook);
  process.exit(await hookCommand(process.argv.slice(3), process.env, process.stdin, process.stdout, process.stderr));
}

/** Newest modification time of the files under `dir`, in ms. */
function newestUnder(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) newest = Math.max(newest, statSync(`${entry.parentPath ?? entry.path}/${entry.name}`).mtimeMs);
  }
  return newest;
}

const checkout = existsSync(`${root}src`);
const sources = ["src", "gen", "clients/typescript/src", "clients/mcp/src"].map((dir) => `${root}${dir}`).filter((dir) => existsSync(dir));
const current = existsSync(built) && (!checkout || statSync(built).mtimeMs >= Math.max(...sources.map(newestUnder)));
if (current) {
  await import(built);
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import("../src/cli.ts");
}
