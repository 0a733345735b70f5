/**
 * Prints the README's configuration table from the settings table (src/config.ts), or, with `--write`,
 * puts it into README.md in place of the one there. test/server/settings.test.ts fails while they differ.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { settingsTable } from "../src/config.js";

const readmePath = new URL("../README.md", import.meta.url);

/** The README with its configuration table replaced by `table`: the table that starts with `| flag | variable |`. */
export function readmeWithTable(readme: string, table: string): string {
  const start = readme.indexOf("| flag | variable | default | meaning |");
  if (start < 0) throw new Error("README.md has no configuration table (a line starting '| flag | variable | default | meaning |')");
  let end = readme.indexOf("\n\n", start);
  if (end < 0) end = readme.length;
  return `${readme.slice(0, start)}${table}${readme.slice(end)}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  if (process.argv.includes("--write")) {
    writeFileSync(readmePath, readmeWithTable(readFileSync(readmePath, "utf8"), settingsTable()));
  } else {
    process.stdout.write(`${settingsTable()}\n`);
  }
}
