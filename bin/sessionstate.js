#!/usr/bin/env node
// Runs the compiled build (dist/). An installed package holds only the build. In a checkout (src/ is
// there), `npm install` builds it too, and when any TypeScript source is newer than the build the
// sources run directly through tsx (a dev dependency), so an edit is never served stale.
import { existsSync, readdirSync, statSync } from "node:fs";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const built = `${root}dist/src/cli.js`;

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
