/**
 * Every command of README.md and of the clients' READMEs, run as written: the code blocks are read from
 * the files (never copied here), each line run by a shell in a scratch folder, the snippets saved under
 * the name the README gives and run with the command it gives, against the server `npm start` runs.
 * Every block of the four READMEs is claimed below by the step that runs it, so a block added to a
 * README fails this test until it runs too.
 *
 * The environment is a user's, made hermetic: a free port (SESSIONSTATE_LISTEN for `npm start`,
 * SESSIONSTATE_SERVER for everything that connects, both read as the README says), a scratch database, a
 * scratch global prefix, Debian's python3 first on PATH, and the `@sessionstate` scope pointed at a port
 * where nothing listens: an install that asked a registry for one of our own names would fail.
 * `npm install` and `npm test` of "Run it" are what .ci/run itself runs (as `npm ci` and `npm test`).
 * Run by `npm run test:packages` (in .ci/run): it installs from the npm registry and compiles better-sqlite3.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { cpSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { tempDir } from "../support/helpers.js";
import { freePort } from "../support/process-helpers.js";
import { repoRoot } from "./package-helpers.js";

/** A fenced code block: the file, the heading it is under, its language and its text. */
interface Block {
  file: string;
  heading: string;
  lang: string;
  text: string;
  /** The text between it and the heading or block before it (where a README says what to save it as and how to run it). */
  before: string;
}

function codeBlocks(file: string): Block[] {
  const lines = readFileSync(join(repoRoot, file), "utf8").split("\n");
  const blocks: Block[] = [];
  let heading = "";
  let paragraph: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const fence = /^```(\w*)$/.exec(line);
    if (fence !== null) {
      const end = lines.indexOf("```", i + 1);
      blocks.push({ file, heading, lang: fence[1]!, text: `${lines.slice(i + 1, end).join("\n")}\n`, before: paragraph.join(" ") });
      i = end;
      paragraph = [];
    } else if (/^#+ /.test(line)) {
      heading = line.replace(/^#+ /, "");
      paragraph = [];
    } else if (line.trim() !== "") {
      paragraph.push(line.trim());
    }
  }
  return blocks;
}

/** A block's command lines, without comments. */
function commandLines(block: Block): string[] {
  return block.text
    .split("\n")
    .map((line) => line.replace(/\s+#\s.*$/, "").trim())
    .filter((line) => line !== "");
}

/** What the README says to save a snippet as and to run it with: "save it as `F` … run `C`". */
function saveAndRun(block: Block): { file: string; command: string } {
  const match = /[Ss]ave it as `([^`]+)`.*?run `([^`]+)`/.exec(block.before);
  assert.ok(match !== null, `${block.file} (${block.heading}): the text before the snippet says what to save it as and how to run it`);
  return { file: match[1]!, command: match[2]! };
}

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs one line through a shell, as a user types it. */
async function sh(line: string, cwd: string, env: NodeJS.ProcessEnv, timeoutMs = 600_000): Promise<Ran> {
  const child = spawn("/bin/sh", ["-c", line], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  const [code] = (await once(child, "exit")) as [number | null];
  clearTimeout(timer);
  return { code, stdout, stderr };
}

async function mustRun(line: string, cwd: string, env: NodeJS.ProcessEnv, timeoutMs?: number): Promise<Ran> {
  const ran = await sh(line, cwd, env, timeoutMs);
  assert.equal(ran.code, 0, `\`${line}\` in ${cwd} exited ${ran.code}:\n${ran.stdout}${ran.stderr}`);
  return ran;
}

/** Starts a long-running line; resolves once its standard output or error holds `ready`. */
async function startLine(line: string, cwd: string, env: NodeJS.ProcessEnv, ready: RegExp, stream: "stdout" | "stderr"): Promise<{ child: ChildProcess; output: () => string }> {
  const child = spawn("/bin/sh", ["-c", `exec ${line}`], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
  let text = { stdout: "", stderr: "" };
  child.stdout.on("data", (chunk: Buffer) => (text = { ...text, stdout: text.stdout + chunk.toString() }));
  child.stderr.on("data", (chunk: Buffer) => (text = { ...text, stderr: text.stderr + chunk.toString() }));
  const deadline = Date.now() + 60_000;
  while (!ready.test(text[stream])) {
    assert.ok(child.exitCode === null, `\`${line}\` exited ${child.exitCode}:\n${text.stdout}${text.stderr}`);
    assert.ok(Date.now() < deadline, `\`${line}\` never printed ${ready}:\n${text.stdout}${text.stderr}`);
    await sleep(50);
  }
  return { child, output: () => text.stdout + text.stderr };
}

/**
 * Runs a line that does not end by itself in a process group of its own, until its standard output holds
 * `first`; then ends the whole group and resolves with that output (read as bytes, one character each).
 */
async function untilFirstMessage(line: string, cwd: string, env: NodeJS.ProcessEnv, first: RegExp): Promise<string> {
  const child = spawn("/bin/sh", ["-c", line], { cwd, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
  const exited = once(child, "exit");
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("latin1")));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const deadline = Date.now() + 60_000;
  while (!first.test(stdout) && Date.now() < deadline && child.exitCode === null) await sleep(50);
  try {
    process.kill(-child.pid!, "SIGTERM");
  } catch {
    // the group is gone already
  }
  await exited;
  assert.match(stdout, first, `\`${line}\` printed no ${first}:\n${stdout}${stderr}`);
  return stdout;
}

async function stop(child: ChildProcess, signal: NodeJS.Signals = "SIGTERM"): Promise<number | null> {
  if (child.exitCode !== null) return child.exitCode;
  child.kill(signal);
  const [code] = (await once(child, "exit")) as [number | null];
  return code;
}

test("every command of README.md and the clients' READMEs works as written, against a real server", { timeout: 1_500_000 }, async () => {
  const files = ["README.md", "clients/typescript/README.md", "clients/mcp/README.md", "clients/python/README.md"];
  const blocks = files.flatMap(codeBlocks);
  const block = (file: string, heading: string, lang: string): Block => {
    const found = blocks.filter((b) => b.file === file && b.heading === heading && b.lang === lang);
    assert.equal(found.length, 1, `one ${lang} block under "${heading}" in ${file}`);
    return found[0]!;
  };
  // Every block, claimed by the step below that runs it.
  const claimed = [
    block("README.md", "Run it", "sh"),
    block("README.md", "A client", "js"),
    block("README.md", "Several processes, one turn per change", "js"),
    block("README.md", "Install", "sh"),
    block("README.md", "Operator commands", "sh"),
    block("README.md", "The console", "sh"),
    block("README.md", "See a person at once", "sh"),
    ...blocks.filter((b) => b.file === "clients/typescript/README.md"),
    block("clients/mcp/README.md", "@sessionstate/mcp", "sh"),
    ...blocks.filter((b) => b.file === "clients/python/README.md"),
  ];
  assert.deepEqual(
    blocks.filter((b) => !claimed.includes(b)).map((b) => `${b.file}: ${b.lang} block under "${b.heading}"`),
    [],
    "a block no step of this test runs",
  );
  const [clientInstall, clientSnippet, ...moreClientBlocks] = blocks.filter((b) => b.file === "clients/typescript/README.md");
  assert.deepEqual([clientInstall?.lang, clientSnippet?.lang, moreClientBlocks.length], ["sh", "ts", 0], "the client's README: its install, then its snippet");
  const [pythonInstall, pythonSnippet, ...morePythonBlocks] = blocks.filter((b) => b.file === "clients/python/README.md");
  assert.deepEqual([pythonInstall?.lang, pythonSnippet?.lang, morePythonBlocks.length], ["sh", "python", 0], "the Python README: its install, then its snippet");

  const scratch = tempDir();
  const port = await freePort();
  const address = `127.0.0.1:${port}`;
  // The HTTP port on a free port too; the documents' lines name the default, 127.0.0.1:50052, and run with this one instead.
  const httpAddress = `127.0.0.1:${await freePort()}`;
  const onHttpPort = (line: string): string => line.replaceAll("127.0.0.1:50052", httpAddress);
  const { NODE_TEST_CONTEXT: _runner, ...inherited } = process.env;
  const env: NodeJS.ProcessEnv = {
    ...inherited,
    PATH: `${join(scratch.dir, "global/bin")}:/usr/bin:${process.env.PATH}`,
    SESSIONSTATE_SERVER: address,
    // Where `npm install -g` puts packages (set for every line: it changes nothing else).
    npm_config_prefix: join(scratch.dir, "global"),
    "npm_config_@sessionstate:registry": "http://127.0.0.1:9/",
    npm_config_prefer_offline: "true",
    npm_config_fund: "false",
    npm_config_audit: "false",
  };
  const folder = (name: string): string => {
    const dir = join(scratch.dir, name);
    mkdirSync(dir, { recursive: true });
    return dir;
  };
  let server: ChildProcess | undefined;
  try {
    // README.md, Install: the packs are made in the repository, as the block says; the rest runs beside them.
    const install = commandLines(block("README.md", "Install", "sh"));
    assert.match(install[0]!, /^npm pack /);
    const before = new Set(readdirTarballs(repoRoot));
    await mustRun(install[0]!, repoRoot, env);
    const packs = folder("packs");
    const made = readdirTarballs(repoRoot).filter((name) => !before.has(name));
    assert.deepEqual(made.sort(), ["sessionstate-0.1.0.tgz", "sessionstate-client-0.1.0.tgz", "sessionstate-mcp-0.1.0.tgz"]);
    for (const name of made) renameSync(join(repoRoot, name), join(packs, name));
    const gateway = folder("gateway");
    await mustRun("npm init -y", gateway, env); // npm's default project: CommonJS
    cpSync(join(packs, "sessionstate-client-0.1.0.tgz"), join(gateway, "sessionstate-client-0.1.0.tgz"));
    for (const line of install.slice(1)) await mustRun(line, line.includes(" -g ") ? packs : gateway, env);

    // README.md, Run it: the server, as `npm start` runs it (its address and database from the environment).
    const runIt = commandLines(block("README.md", "Run it", "sh"));
    assert.deepEqual(runIt, ["npm install", "npm start", "npm test"]);
    const ci = readFileSync(join(repoRoot, ".ci/run"), "utf8");
    assert.match(ci, /^npm ci /m, ".ci/run installs as `npm install` does, stricter");
    assert.match(ci, /^npm test$/m, ".ci/run runs `npm test`");
    const started = await startLine(
      runIt[1]!,
      repoRoot,
      { ...env, SESSIONSTATE_LISTEN: address, SESSIONSTATE_HTTP_LISTEN: httpAddress, SESSIONSTATE_DB: join(scratch.dir, "data/sessionstate.db") },
      /^console on /m,
      "stdout",
    );
    server = started.child;
    assert.match(started.output(), new RegExp(`^listening on ${address}\nconsole on http://${httpAddress}/$`, "m"));

    // README.md, Operator commands: in order, on the new server; each exits 0 (tail until Ctrl-C).
    const operator = folder("operator");
    writeFileSync(join(operator, "token.txt"), "a-token-for-the-tokens-file\n");
    const outputs = new Map<string, string>();
    for (const line of commandLines(block("README.md", "Operator commands", "sh"))) {
      if (/^sessionstate tail /.test(line)) {
        const tail = await startLine(line, operator, env, /^synced: /m, "stderr");
        assert.equal(await stop(tail.child, "SIGINT"), 0, `${line}: Ctrl-C ends it cleanly`);
        assert.equal(tail.output(), `connected to ${address}\nsynced: 0 pending notices delivered; waiting for more\n`);
        continue;
      }
      const ran = await mustRun(line, operator, env, 60_000);
      assert.equal(ran.stderr, "", line);
      outputs.set(line.split(" ").slice(0, 2).join(" "), ran.stdout);
    }
    assert.match(outputs.get("sessionstate pending")!, /^agent:main:main -> agent:main:subagent:child \(agent main\) {2}L 1 {2}N 2 {2}M 2\n/);
    assert.match(outputs.get("sessionstate ack")!, /^acknowledged: agent:main:main on agent:main:subagent:child is caught up to version 2\n$/);
    assert.match(outputs.get("sessionstate token")!, /^[0-9a-f]{64}\n$/);

    // README.md, The console: its curl lines against the HTTP port; then docs/api.md's HTTP examples, a
    // unary call and a stream (buf curl, from the repository where it is installed, until the stream's synced).
    const [readyz, namespaces, ...moreCurl] = commandLines(block("README.md", "The console", "sh")).map(onHttpPort);
    assert.equal(moreCurl.length, 0);
    assert.equal((await mustRun(readyz!, operator, env)).stdout, "serving\n");
    assert.match((await mustRun(namespaces!, operator, env)).stdout, /^\{"namespaces":\[\{"name":"default","sessions":"1","events":"2","updatedAt":"[0-9TZ:.-]+"\}\]\}$/);
    const apiBlocks = codeBlocks("docs/api.md").filter((b) => b.heading === "Over HTTP: curl, Connect and gRPC-Web");
    assert.deepEqual(apiBlocks.map((b) => b.lang), ["sh", "sh", "sh"], "docs/api.md: a unary call, then a stream with buf curl and with curl");
    const joined = (b: Block): string => onHttpPort(b.text.replace(/\\\n\s*/g, "").trim());
    assert.equal((await mustRun(joined(apiBlocks[0]!), operator, env)).stdout, '{"session":{"key":"agent:main:main","agentId":"main"},"stateChanges":{}}');
    // The streams do not end by themselves: each runs in a process group of its own (`npx` and a pipeline
    // are several processes), ended as a whole once its first message came.
    const bufStream = await untilFirstMessage(joined(apiBlocks[1]!), repoRoot, env, /"synced"/);
    assert.match(bufStream, /^\{\s*"synced": \{\}\s*\}/);
    assert.equal(await untilFirstMessage(onHttpPort(apiBlocks[2]!.text), operator, env, /\{"synced":\{\}\}/), '\0\0\0\0\r{"synced":{}}');
    // docs/api.md, the CLIs' hooks: a hook call by hand, answered 204 (nothing is adopted here: the same answer).
    const hookBlocks = codeBlocks("docs/api.md").filter((b) => b.heading === "The CLIs' hooks");
    assert.deepEqual(hookBlocks.map((b) => b.lang), ["sh"]);
    assert.equal((await mustRun(joined(hookBlocks[0]!), operator, env)).stdout, "204\n");

    // README.md, See a person at once: a second server as `npm start` runs it, reading transcripts under a
    // home of its own (`~`), the hook installed into that home's Claude Code settings, a transcript adopted.
    const [serveLine, installLine, adoptLine, ...moreHookLines] = commandLines(block("README.md", "See a person at once", "sh"));
    assert.equal(moreHookLines.length, 0);
    const home = folder("home");
    const session = "0b5c7e2a-1d3f-4c5e-9a8b-7c6d5e4f3a2b";
    mkdirSync(join(home, ".claude/projects/-home-me-app"), { recursive: true });
    writeFileSync(join(home, ".claude/projects/-home-me-app", `${session}.jsonl`), `${JSON.stringify({ type: "assistant", message: { role: "assistant", content: "ok" } })}\n`);
    const hookAddress = `127.0.0.1:${await freePort()}`;
    const hookHttp = `127.0.0.1:${await freePort()}`;
    const hookEnv = { ...env, HOME: home, SESSION: session, SESSIONSTATE_SERVER: hookAddress, SESSIONSTATE_HTTP_URL: `http://${hookHttp}` };
    const hookServer = await startLine(
      serveLine!,
      repoRoot,
      { ...hookEnv, SESSIONSTATE_LISTEN: hookAddress, SESSIONSTATE_HTTP_LISTEN: hookHttp, SESSIONSTATE_DB: join(scratch.dir, "hooks/sessionstate.db") },
      /^console on /m,
      "stdout",
    );
    try {
      const installed = await mustRun(installLine!, operator, hookEnv);
      assert.equal(
        installed.stdout,
        `claude (user): wrote ${home}/.claude/settings.json: UserPromptSubmit → sessionstate hook claude --server http://${hookHttp}\n` +
          "Claude Code reads it when a session starts: sessions already running keep their old hooks.\n",
      );
      const adopted = await mustRun(adoptLine!, operator, hookEnv);
      assert.match(adopted.stdout, new RegExp(`^adopted agent:main:worker from claude: file:${home}/\\.claude/projects/-home-me-app/${session}\\.jsonl from byte 67 \\(event 1\\)\n$`));
    } finally {
      assert.equal(await stop(hookServer.child), 0, "the second npm start stops cleanly");
    }

    // README.md, A client: saved as it says, in the CommonJS project the client was installed in, run as it says.
    const snippet = block("README.md", "A client", "js");
    const jsRun = saveAndRun(snippet);
    writeFileSync(join(gateway, jsRun.file), snippet.text);
    const js = await mustRun(jsRun.command, gateway, env, 60_000);
    assert.equal(
      js.stdout,
      'Session "agent:main:subagent:child" changed (other actor). Reconcile before acting: session_status sessionKey "agent:main:subagent:child" changesSince 2.\nreconciled 1 change(s); acknowledged: true\n',
    );

    // The client's README: its install in a new CommonJS project, then its TypeScript snippet as it says.
    const tsProject = folder("gateway-ts");
    await mustRun("npm init -y", tsProject, env);
    cpSync(join(packs, "sessionstate-client-0.1.0.tgz"), join(tsProject, "sessionstate-client-0.1.0.tgz"));
    for (const line of commandLines(clientInstall!)) await mustRun(line, tsProject, env);
    const tsRun = saveAndRun(clientSnippet!);
    writeFileSync(join(tsProject, tsRun.file), clientSnippet!.text);
    const ts = await mustRun(tsRun.command, tsProject, env, 60_000);
    assert.equal(ts.stdout, "agent:main:subagent:child: 1 change(s) reconciled\n");

    // The Python README: Debian's packages (installed by .ci/run, as its first line says), then the rest
    // from a folder laid out as the repository (./clients/python), and its snippet as it says.
    const [apt, ...pythonLines] = commandLines(pythonInstall!);
    const aptPackages = apt!.replace(/^sudo apt-get install /, "").split(/\s+/);
    for (const name of aptPackages) await mustRun(`dpkg -s ${name} >/dev/null`, scratch.dir, env);
    const python = folder("python");
    cpSync(join(repoRoot, "clients/python"), join(python, "clients/python"), { recursive: true, filter: (source) => !/\/(build|__pycache__|[^/]+\.egg-info)$/.test(source) });
    for (const line of pythonLines) await mustRun(line, python, env);
    const pyRun = saveAndRun(pythonSnippet!);
    writeFileSync(join(python, pyRun.file), pythonSnippet!.text);
    const py = await mustRun(pyRun.command, python, env, 60_000);
    assert.equal(py.stdout, "agent:main:subagent:child: 1 change(s) reconciled\n");

    // The MCP README: its install (the same prefix), then each `sessionstate mcp` line as an MCP host starts
    // it, answering session_status for the session the snippets changed, in its namespace.
    const [mcpInstall, ...mcpLines] = commandLines(block("clients/mcp/README.md", "@sessionstate/mcp", "sh"));
    await mustRun(mcpInstall!, packs, env);
    assert.equal(mcpLines.length, 2);
    for (const [line, version] of [[mcpLines[0]!, 3], [mcpLines[1]!, 6]] as const) {
      const mcp = new Client({ name: "readme-test", version: "1.0.0" });
      await mcp.connect(new StdioClientTransport({ command: "/bin/sh", args: ["-c", line], env: env as Record<string, string>, cwd: scratch.dir, stderr: "inherit" }));
      try {
        const answer = await mcp.callTool({ name: "session_status", arguments: { sessionKey: "agent:main:subagent:child" } });
        const content = answer.content as { type: string; text: string }[];
        assert.equal((JSON.parse(content[0]!.text) as { stateVersion: number }).stateVersion, version, line);
      } finally {
        await mcp.close();
      }
    }
    // README.md, Several processes (last: its appends move the global sequence the steps above assert on):
    // saved as it says beside gateway.mjs, run as two processes of one gateway; three notices for the
    // manager go one to each, never to both.
    const groupSnippet = block("README.md", "Several processes, one turn per change", "js");
    const groupRun = saveAndRun(groupSnippet);
    writeFileSync(join(gateway, groupRun.file), groupSnippet.text);
    const members = await Promise.all([0, 1].map(() => startLine(groupRun.command, gateway, env, /^ready$/m, "stdout")));
    try {
      for (let i = 1; i <= 3; i++) {
        await mustRun(`sessionstate watch agent:main:main agent:main:subagent:turn-${i}`, operator, env);
        await mustRun(`sessionstate append agent:main:subagent:turn-${i} --kind human-direct-message --actor human --summary "asked to stop"`, operator, env);
      }
      const taken = (): string[] => members.flatMap((m) => m.output().split("\n").filter((line) => / takes /.test(line)));
      const deadline = Date.now() + 30_000;
      while (taken().length < 3 && Date.now() < deadline) await sleep(50);
      const targets = taken().map((line) => /takes (\S+) \(delivery 1\)$/.exec(line)?.[1]);
      assert.deepEqual([...targets].sort(), [1, 2, 3].map((i) => `agent:main:subagent:turn-${i}`), `each notice once, to one process:\n${taken().join("\n")}`);
    } finally {
      for (const member of members) await stop(member.child);
    }
  } finally {
    if (server !== undefined) assert.equal(await stop(server), 0, "npm start stops cleanly on SIGTERM");
    scratch.remove();
  }
});

function readdirTarballs(dir: string): string[] {
  return readdirSync(dir).filter((name) => name.endsWith(".tgz"));
}
