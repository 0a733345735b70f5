/**
 * The settings table (src/config.ts) is the one source of `serve --help`, of the README's configuration
 * table and of the loader: the README is held to it here, and the help is read from the real command.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { settings, settingsTable } from "../../src/config.js";
import { readmeWithTable } from "../../scripts/settings-table.js";
import { tempDir } from "../support/helpers.js";
import { runCli } from "../support/process-helpers.js";

describe("the settings table", () => {
  test("the README's configuration table is the table's (node --import tsx scripts/settings-table.ts --write remakes it)", () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
    assert.equal(readme, readmeWithTable(readme, settingsTable()));
    assert.ok(readme.includes(settingsTable()));
  });

  test("serve --help shows every setting with its variable and default", async () => {
    const help = await runCli(["serve", "--help"]);
    assert.equal(help.code, 0);
    for (const setting of settings) {
      const line = help.stdout.split("\n").find((l) => l.startsWith(`  --${setting.flag} `) || l === `  --${setting.flag}`);
      assert.ok(line !== undefined, `--${setting.flag} in serve --help`);
      assert.ok(line.includes(setting.env), `${setting.env} beside --${setting.flag}`);
      // The default as plain text: the README's Markdown backticks are not shown in a terminal.
      assert.ok(line.endsWith(`(default: ${setting.shownDefault.text.replaceAll("`", "")})`), line);
    }
  });

  test("a --db that is another kind of URL is refused with exit code 2, and nothing is created", async () => {
    const dir = tempDir();
    try {
      const result = await runCli(["serve", "--db", "mysql://x/y", "--listen", "127.0.0.1:0"], {}, dir.dir);
      assert.equal(result.code, 2);
      assert.equal(
        result.stderr,
        "sessionstate: invalid configuration:\n  - --db: must be a SQLite file path or a postgres:// or postgresql:// URL (got a mysql: URL)\nsee 'sessionstate serve --help'\n",
      );
      assert.deepEqual(readdirSync(dir.dir), []);
      const yes = await runCli(["serve", "--listen", "127.0.0.1:0"], { SESSIONSTATE_INSECURE_BIND: "yes" }, dir.dir);
      assert.equal(yes.code, 2);
      assert.match(yes.stderr, /SESSIONSTATE_INSECURE_BIND: must be 1, true, 0 or false \(got "yes"\)/u);
      assert.deepEqual(readdirSync(dir.dir), []);
    } finally {
      dir.remove();
    }
  });
});
