/**
 * The `sessionstate` server package as a user gets it: packed, installed globally into an empty prefix
 * from the tarball, and run from there: compiled code only (no tsx, no sources), `--help` lists the
 * commands, `serve` serves and `status` reaches it. Run by `npm run test:packages` (in .ci/run): it
 * installs from the npm registry and compiles better-sqlite3.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { freePort, runProgram, spawnServer } from "../support/process-helpers.js";
import { tempDir } from "../support/helpers.js";
import { pack, repoRoot } from "./package-helpers.js";

test("npm install -g of the packed server (with the client and MCP packs) gives a sessionstate that lists its commands, serves, runs compiled code only, and serves MCP", async () => {
  const prefix = tempDir();
  const packs = tempDir();
  const data = tempDir();
  try {
    // The server, and beside it the client and the MCP server that `sessionstate mcp` loads.
    const tarballs = [await pack(repoRoot, packs.dir), await pack(join(repoRoot, "clients/typescript"), packs.dir), await pack(join(repoRoot, "clients/mcp"), packs.dir)];
    await runProgram("npm", ["install", "--global", "--prefix", prefix.dir, "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error", ...tarballs], packs.dir);
    const installed = join(prefix.dir, "lib/node_modules/sessionstate");
    const bin = join(prefix.dir, "bin/sessionstate");

    const help = await runProgram(bin, ["--help"], data.dir);
    for (const command of ["serve", "status <key>", "tail", "mcp", "token hash"]) assert.match(help.stdout, new RegExp(`^  ${command} `, "mu"), command);

    // What was installed: the build and the contract, not the sources; no dev dependency.
    assert.equal(existsSync(join(installed, "dist/src/cli.js")), true);
    assert.equal(existsSync(join(installed, "proto/sessionstate/v1/signal_log.proto")), true);
    for (const file of ["index.html", "app.js", "app.css"]) assert.equal(existsSync(join(installed, "dist/console", file)), true, `the console's ${file}`);
    for (const absent of ["src", "test", "node_modules/tsx", "node_modules/typescript", "node_modules/@bufbuild/buf"]) {
      assert.equal(existsSync(join(installed, absent)), false, absent);
    }
    const manifest = JSON.parse(readFileSync(join(installed, "package.json"), "utf8")) as { dependencies: Record<string, string> };
    assert.equal(manifest.dependencies.tsx, undefined, "tsx is a dev dependency");

    const httpPort = await freePort();
    const server = await spawnServer(["--listen", "127.0.0.1:0", "--db", join(data.dir, "state.db"), "--http-listen", `127.0.0.1:${httpPort}`], {}, [], bin);
    try {
      // The installed server serves its console, as built into the pack.
      const page = await fetch(`http://127.0.0.1:${httpPort}/`);
      assert.equal(page.status, 200);
      assert.match(await page.text(), /<title>sessionstate console<\/title>/);
      const script = await fetch(`http://127.0.0.1:${httpPort}/app.js`);
      assert.equal(script.status, 200);
      assert.ok((await script.arrayBuffer()).byteLength > 10_000, "the console's script");
      const status = await runProgram(bin, ["status", "--server", server.address, "agent:main:main"], data.dir);
      assert.equal(status.stdout, "session agent:main:main (agent main)\nstate version 0\n");
      // The installed `sessionstate mcp` answers an MCP client over stdio.
      const mcp = new Client({ name: "package-test", version: "1.0.0" });
      await mcp.connect(new StdioClientTransport({ command: bin, args: ["mcp", "--server", server.address, "--session", "agent:main:main"], stderr: "inherit" }));
      try {
        assert.deepEqual((await mcp.listTools()).tools.map((tool) => tool.name).sort(), ["session_status", "session_unwatch", "session_watch", "sessions_list", "stale_notices"]);
      } finally {
        await mcp.close();
      }
    } finally {
      server.child.kill("SIGTERM");
      assert.equal(await server.exited, 0);
    }
  } finally {
    prefix.remove();
    packs.remove();
    data.remove();
  }
});
