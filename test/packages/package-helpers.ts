/** Packing this repository's packages and installing them where nothing else is, as users do. */
import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

export const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
const run = promisify(execFile);

/** Runs a command; on failure the error carries its output. */
export async function sh(file: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): Promise<{ stdout: string; stderr: string }> {
  // Without NODE_TEST_CONTEXT: what runs here is a program, not a test reporting to this runner.
  const { NODE_TEST_CONTEXT: _runner, ...inherited } = process.env;
  try {
    return await run(file, args, { cwd, env: { ...inherited, ...env }, maxBuffer: 16 * 1024 * 1024, timeout: 600_000 });
  } catch (err) {
    const { stdout = "", stderr = "" } = err as { stdout?: string; stderr?: string };
    throw Object.assign(new Error(`${file} ${args.join(" ")} failed:\n${stdout}${stderr}`), { stdout, stderr });
  }
}

/** `npm pack` of the package in `dir` (its prepack builds it) into `into`; returns the tarball's path. */
export async function pack(dir: string, into: string): Promise<string> {
  const before = new Set(readdirSync(into));
  await sh("npm", ["pack", "--silent", "--pack-destination", into, dir], repoRoot);
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
  return sh("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error", ...specs], dir);
}
