/**
 * The console's files (SPEC §13.2), served by the HTTP port at `/`: built by `npm run build` into
 * `dist/console/` (see console/README.md), read once at start-up and served from memory. Only the files built
 * are served, by exact path, so no request can name anything else; every answer carries a content security
 * policy that allows the console's own files and calls to this origin, and nothing from anywhere else.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** One file as it is served. */
export interface ConsoleFile {
  body: Buffer;
  contentType: string;
  etag: string;
}

/** The files the console build makes, by the path they are served at, and their content types. */
const servedFiles: ReadonlyArray<readonly [path: string, file: string, contentType: string]> = [
  ["/", "index.html", "text/html; charset=utf-8"],
  ["/app.js", "app.js", "text/javascript; charset=utf-8"],
  ["/app.css", "app.css", "text/css; charset=utf-8"],
  ["/favicon.svg", "favicon.svg", "image/svg+xml"],
];

/**
 * The console's headers: its own files only (no inline script or style, nothing fetched from elsewhere),
 * never framed, no referrer, and types taken as sent.
 */
export const consoleSecurityHeaders: Readonly<Record<string, string>> = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
};

/**
 * Where the build put the console: `dist/console/` beside the compiled server, or, when the server runs
 * from its TypeScript sources, under the checkout's `dist/`. `undefined` when it was not built.
 */
export function findConsoleDir(): string | undefined {
  for (const candidate of ["../../console/", "../../dist/console/"]) {
    const dir = fileURLToPath(new URL(candidate, import.meta.url));
    if (existsSync(`${dir}index.html`) && existsSync(`${dir}app.js`)) return dir;
  }
  return undefined;
}

/** Reads the console's files into memory, by path; empty when it was not built. */
export function loadConsoleFiles(dir: string | undefined = findConsoleDir()): ReadonlyMap<string, ConsoleFile> {
  const files = new Map<string, ConsoleFile>();
  if (dir === undefined) return files;
  for (const [path, file, contentType] of servedFiles) {
    if (!existsSync(`${dir}${file}`)) continue;
    const body = readFileSync(`${dir}${file}`);
    files.set(path, { body, contentType, etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"` });
  }
  if (files.has("/index.html") === false && files.has("/")) files.set("/index.html", files.get("/")!);
  return files;
}
