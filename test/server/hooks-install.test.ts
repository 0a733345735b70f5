/**
 * `sessionstate hooks install|uninstall|status` (API.md "Additions for hooks", issue 40) on temporary
 * homes: merged into each CLI's own settings, idempotent, a backup of the file as first found, only its
 * own entries removed, a malformed file left untouched and named with where it fails.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import { after, afterEach, before, beforeEach, describe, test } from "node:test";
import { hooksCommand } from "../../src/commands/hooks-command.js";
import { UsageError } from "../../src/commands/connection.js";
import { startTestServer, tempDir, type TestServer } from "../support/helpers.js";
import { rawHttp } from "../support/raw-http.js";

const bin = new URL("../../bin/sessionstate.js", import.meta.url).pathname;

/** Runs `hooks` in-process with HOME (and CODEX_HOME) in `home`; returns what it printed. */
async function hooks(args: string[], home: string, cwd: string, env: Record<string, string> = {}): Promise<string> {
  let out = "";
  const stdout = new Writable({ write: (chunk: Buffer, _encoding, done) => ((out += chunk.toString()), done()) });
  assert.equal(await hooksCommand(args, { HOME: home, PATH: "/usr/bin:/bin", ...env }, stdout, cwd), 0);
  return out;
}

describe("sessionstate hooks", () => {
  let home: { dir: string; remove: () => void };
  let project: { dir: string; remove: () => void };
  beforeEach(() => {
    home = tempDir();
    project = tempDir();
  });
  afterEach(() => {
    home.remove();
    project.remove();
  });

  const claudeUser = () => join(home.dir, ".claude", "settings.json");
  const command = (cli: string) => `${process.execPath} ${bin.replace(/\/bin\/sessionstate\.js$/u, "/bin/sessionstate.js")} hook ${cli}`;

  test("install into a fresh home writes each CLI's file with the command hook; a second run changes nothing", async () => {
    for (const cli of ["claude", "codex", "gemini"]) {
      const said = await hooks(["install", "--cli", cli], home.dir, project.dir);
      assert.match(said, new RegExp(`^${cli} \\(user\\): wrote `));
    }
    assert.deepEqual(JSON.parse(readFileSync(claudeUser(), "utf8")), {
      hooks: { UserPromptSubmit: [{ hooks: [{ type: "command", command: command("claude"), async: true, timeout: 5 }] }] },
    });
    assert.deepEqual(JSON.parse(readFileSync(join(home.dir, ".codex", "hooks.json"), "utf8")), {
      hooks: { UserPromptSubmit: [{ hooks: [{ type: "command", command: command("codex"), timeout: 5 }] }] },
    });
    assert.deepEqual(JSON.parse(readFileSync(join(home.dir, ".gemini", "settings.json"), "utf8")), {
      hooks: { BeforeAgent: [{ hooks: [{ name: "sessionstate", type: "command", command: command("gemini"), timeout: 5000 }] }] },
    });
    const before = readFileSync(claudeUser());
    const again = await hooks(["install", "--cli", "claude"], home.dir, project.dir);
    assert.match(again, /^claude \(user\): already installed in /);
    assert.deepEqual(readFileSync(claudeUser()), before, "byte for byte");
    assert.equal(existsSync(`${claudeUser()}.sessionstate-backup`), false, "a file that did not exist has no backup");
  });

  test("install merges into settings that are there, keeps a backup of them as first found, and uninstall takes out only its own entry", async () => {
    mkdirSync(join(home.dir, ".claude"));
    const original = `{\n    "model": "opus",\n    "hooks": {\n        "UserPromptSubmit": [{ "hooks": [{ "type": "command", "command": "echo mine" }] }],\n        "Stop": [{ "hooks": [{ "type": "command", "command": "notify-send done" }] }]\n    }\n}\n`;
    writeFileSync(claudeUser(), original);
    await hooks(["install", "--cli", "claude"], home.dir, project.dir);
    // Another transport replaces our entry; the backup stays the file as first found.
    await hooks(["install", "--cli", "claude", "--transport", "http", "--namespace", "team-a"], home.dir, project.dir);
    assert.equal(readFileSync(`${claudeUser()}.sessionstate-backup`, "utf8"), original);
    const settings = JSON.parse(readFileSync(claudeUser(), "utf8"));
    assert.equal(settings.model, "opus");
    assert.deepEqual(settings.hooks.Stop, [{ hooks: [{ type: "command", command: "notify-send done" }] }]);
    assert.deepEqual(settings.hooks.UserPromptSubmit, [
      { hooks: [{ type: "command", command: "echo mine" }] },
      {
        hooks: [
          {
            type: "http",
            url: "http://127.0.0.1:50052/hooks/claude",
            timeout: 5,
            headers: { Authorization: "Bearer $SESSIONSTATE_TOKEN", "sessionstate-namespace": "team-a" },
            allowedEnvVars: ["SESSIONSTATE_TOKEN"],
          },
        ],
      },
    ]);
    const removed = await hooks(["uninstall", "--cli", "claude"], home.dir, project.dir);
    assert.match(removed, /removed 1 hook from .*; every other entry is as it was/);
    assert.deepEqual(JSON.parse(readFileSync(claudeUser(), "utf8")), JSON.parse(original));
    assert.match(await hooks(["uninstall", "--cli", "claude"], home.dir, project.dir), /nothing of sessionstate's in /);
  });

  test("a settings file that is not valid JSON is left untouched, and the error says where it fails (exit 1)", () => {
    mkdirSync(join(home.dir, ".claude"));
    const broken = '{\n  "model": "opus",\n  "hooks": {,\n}\n';
    writeFileSync(claudeUser(), broken);
    const run = spawnSync(process.execPath, [bin, "hooks", "install", "--cli", "claude"], { env: { PATH: process.env.PATH ?? "", HOME: home.dir }, encoding: "utf8" });
    assert.equal(run.status, 1);
    assert.equal(run.stderr, `sessionstate hooks: ${claudeUser()} is not valid JSON (line 3, column 13): nothing was changed; mend it and run this again\n`);
    assert.equal(readFileSync(claudeUser(), "utf8"), broken);
    assert.equal(existsSync(`${claudeUser()}.sessionstate-backup`), false);
  });

  test("the project scope, a server, a namespace and a token file go where they should; bad flags are usage errors", async () => {
    const tokenFile = join(home.dir, "token");
    writeFileSync(tokenFile, "secret\n");
    await hooks(["install", "--cli", "claude", "--scope", "project", "--server", "http://127.0.0.1:60052", "--namespace", "team-a", "--token-file", tokenFile], home.dir, project.dir);
    const settings = JSON.parse(readFileSync(join(project.dir, ".claude", "settings.local.json"), "utf8"));
    assert.equal(settings.hooks.UserPromptSubmit[0].hooks[0].command, `${command("claude")} --server http://127.0.0.1:60052 --namespace team-a --token-file ${tokenFile}`);
    await hooks(["install", "--cli", "codex"], home.dir, project.dir, { CODEX_HOME: join(home.dir, "codex-home") });
    assert.ok(existsSync(join(home.dir, "codex-home", "hooks.json")), "$CODEX_HOME/hooks.json");
    for (const [args, message] of [
      [["install"], "--cli: give claude, codex, gemini"],
      [["install", "--cli", "cursor"], '--cli: give claude, codex, gemini (not "cursor")'],
      [["install", "--cli", "codex", "--scope", "project"], "--scope: Codex reads hooks from $CODEX_HOME/hooks.json only: give user"],
      [["install", "--cli", "codex", "--transport", "http"], "--transport: codex runs command hooks only"],
      [["install", "--cli", "claude", "--server", "127.0.0.1:50052"], '--server: "127.0.0.1:50052" is not a URL (the HTTP port, like http://127.0.0.1:50052)'],
      [["install", "--cli", "claude", "--server", "grpc://127.0.0.1:50052"], '--server: "grpc://127.0.0.1:50052" is not an http:// or https:// URL'],
      [["reinstall"], 'unknown action "reinstall": give install, uninstall or status'],
    ] as const) {
      await assert.rejects(hooks([...args], home.dir, project.dir), (err: Error) => err instanceof UsageError && err.message === message, message);
    }
    await assert.rejects(
      hooks(["install", "--cli", "claude", "--transport", "http", "--token-file", tokenFile], home.dir, project.dir),
      (err: Error) => err instanceof UsageError && /an http hook cannot read a file/.test(err.message),
    );
  });
});

describe("sessionstate hooks status", () => {
  let t: TestServer;
  let home: { dir: string; remove: () => void };
  before(async () => {
    home = tempDir();
    t = await startTestServer({ httpListen: { host: "127.0.0.1", port: 0 } });
  });
  after(async () => {
    await t.dispose();
    home.remove();
  });

  test("says what is installed where, and when the server last heard from each CLI", async () => {
    const server = `http://${t.server.httpAddress}`;
    await hooks(["install", "--cli", "claude", "--server", server], home.dir, home.dir);
    const http = t.server.httpAddress!;
    await rawHttp(http, { method: "POST", path: "/hooks/claude", headers: { host: http, "content-type": "application/json" }, body: '{"session_id":"s"}' });
    const status = JSON.parse(await hooks(["status", "--json", "--server", server], home.dir, home.dir)) as {
      installed: Array<{ cli: string; scope: string; hooks: string[] }>;
      server: { hooks: Array<{ cli: string; unmatched?: string; lastCallAt?: string }> };
    };
    assert.deepEqual(status.installed.filter((entry) => entry.hooks.length > 0).map((entry) => [entry.cli, entry.scope, entry.hooks]), [
      ["claude", "user", [`${process.execPath} ${bin} hook claude --server ${server}`]],
    ]);
    const claude = status.server.hooks.find((hooks) => hooks.cli === "claude")!;
    assert.equal(claude.unmatched, "1");
    assert.ok(claude.lastCallAt !== undefined);
    const text = await hooks(["status", "--server", server], home.dir, home.dir);
    assert.match(text, /^cli {5}scope {4}hook/);
    assert.match(text, /\nthe server heard \(since it started\):\ncli +last call +matched +unmatched +refused\nclaude +\d{4}-\d\d-\d\dT[\d:.]+Z +0 +1 +0\ncodex +never +0 +0 +0\n/);
    assert.match(await hooks(["status", "--server", "http://127.0.0.1:1"], home.dir, home.dir), /\nserver: cannot reach the server's HTTP port at http:\/\/127\.0\.0\.1:1 \(--server, SESSIONSTATE_HTTP_URL\)\n$/);
  });
});
