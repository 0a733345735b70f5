/**
 * Builds the console (console/) into dist/console/: its TypeScript bundled by esbuild into one minified
 * module, with the page, the stylesheet and the icon beside it. Nothing is fetched at run time: the
 * server serves these files (src/rpc/console-files.ts). Prints the size of what it made.
 *
 *   node --import tsx scripts/build-console.ts
 */
import { copyFileSync, mkdirSync, statSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { readFileSync } from "node:fs";
import { build } from "esbuild";

const root = fileURLToPath(new URL("..", import.meta.url));
const out = `${root}dist/console/`;
mkdirSync(out, { recursive: true });
await build({
  entryPoints: [`${root}console/src/main.ts`],
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2022",
  platform: "browser",
  outfile: `${out}app.js`,
  legalComments: "linked",
  logLevel: "warning",
});
for (const file of ["index.html", "app.css", "favicon.svg"]) copyFileSync(`${root}console/${file}`, `${out}${file}`);
const sizes = ["index.html", "app.js", "app.css", "favicon.svg"].map((file) => {
  const bytes = statSync(`${out}${file}`).size;
  return { file, bytes, gzip: gzipSync(readFileSync(`${out}${file}`)).length };
});
const total = sizes.reduce((sum, file) => sum + file.bytes, 0);
const gzip = sizes.reduce((sum, file) => sum + file.gzip, 0);
process.stdout.write(`console: ${sizes.map((f) => `${f.file} ${(f.bytes / 1024).toFixed(1)} KiB`).join(", ")}; ${(total / 1024).toFixed(1)} KiB in all, ${(gzip / 1024).toFixed(1)} KiB gzipped\n`);
