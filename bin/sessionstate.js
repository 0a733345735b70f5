#!/usr/bin/env node
// Runs the compiled build (dist/, made by `npm run build`, which `npm install` runs) when it is at least
// as new as every TypeScript source; otherwise runs the sources directly through tsx, so an edit is
// never served stale. The build starts about 0.4 s faster and needs no loader thread.
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

const current = existsSync(built) && statSync(built).mtimeMs >= Math.max(newestUnder(`${root}src`), newestUnder(`${root}gen`));
if (current) {
  await import(built);
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import("../src/cli.ts");
}
