/** Packing this repository's packages and installing them where nothing else is, as users do. */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { runProgram } from "../support/process-helpers.js";

export const repoRoot = fileURLToPath(new URL("../../", import.meta.url));

/** `npm pack` of the package in `dir` (its prepack builds it) into `into`; returns the tarball's path. */
export async function pack(dir: string, into: string): Promise<string> {
  const before = new Set(readdirSync(into));
  await runProgram("npm", ["pack", "--silent", "--pack-destination", into, dir], repoRoot);
  const tarball = readdirSync(into).find((name) => name.endsWith(".tgz") && !before.has(name));
  if (tarball === undefined) throw new Error(`npm pack ${dir} made no tarball`);
  return join(into, tarball);
}

/** A fresh folder with an empty ESM project: `{ dir, remove }`. */
export function emptyProject(): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "sessionstate-consumer-"));
  writeFileSync(join(dir, "package.json"), `${JSON.stringify({ name: "consumer", private: true, type: "module" }, null, 2)}\n`);
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** `npm install` into a project, quietly. */
export function npmInstall(dir: string, specs: string[]): Promise<{ stdout: string; stderr: string }> {
  return runProgram("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error", ...specs], dir);
}
