import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { connect as connectTcp, createServer as createNetServer } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";
import { Health, HealthCheckResponse_ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { createServiceClient } from "../../clients/typescript/src/service-client.js";
import { connect, goal, startTestServer, status, tempDir } from "../support/helpers.js";
import { runCli, spawnServer } from "../support/process-helpers.js";

describe("sessionstate serve", () => {
  test("prints its real address, serves, and stops cleanly on SIGTERM with the WAL checkpointed", async () => {
    const dir = tempDir();
    const dbPath = join(dir.dir, "nested", "state.db");
    const server = await spawnServer(["--db", dbPath, "--listen", "127.0.0.1:0"]);
    try {
      assert.match(server.address, /^127\.0\.0\.1:\d+$/);
      assert.notEqual(server.address, "127.0.0.1:0");
      const clients = connect(server.address);
      const appended = await clients.signalLog.append(goal("agent:main:main"));
      assert.equal(appended.event?.sequence, 1n);
      const health = createServiceClient(clients.channel, Health);
      assert.equal((await health.check({})).status, HealthCheckResponse_ServingStatus.SERVING);
      // An open stream must not hold up shutdown: it is told NOT_SERVING (so that a client's balancer sends
      // nothing more here), then ended with UNAVAILABLE.
      const watch = health.watch({});
      const iterator = watch[Symbol.asyncIterator]();
      assert.equal((await iterator.next()).value?.status, HealthCheckResponse_ServingStatus.SERVING);
      server.child.kill("SIGTERM");
      const seen: HealthCheckResponse_ServingStatus[] = [];
      const ended = await (async () => {
        try {
          for (;;) {
            const next = await iterator.next();
            if (next.done) return "ended without status";
            seen.push(next.value.status);
          }
        } catch (err) {
          return (err as { code: number }).code;
        }
      })();
      assert.deepEqual(seen, [HealthCheckResponse_ServingStatus.NOT_SERVING], "NOT_SERVING before the stream ends");
      assert.equal(ended, status.UNAVAILABLE);
      assert.equal(await server.exited, 0);
      clients.close();
      assert.ok(existsSync(dbPath));
      const wal = `${dbPath}-wal`;
      assert.ok(!existsSync(wal) || statSync(wal).size === 0, "the WAL is checkpointed on close");
    } finally {
      server.child.kill("SIGKILL");
      dir.remove();
    }
  });

  test("a second server on the same database refuses to start with a clear message", async () => {
    const dir = tempDir();
    const dbPath = join(dir.dir, "state.db");
    const first = await spawnServer(["--db", dbPath, "--listen", "127.0.0.1:0"]);
    try {
      const second = await runCli(["serve", "--db", dbPath, "--listen", "127.0.0.1:0"]);
      assert.equal(second.code, 1);
      assert.match(second.stderr, /database .*state\.db is in use by another process/);
      assert.doesNotMatch(second.stdout, /listening on/);
      // The first server is unharmed.
      const clients = connect(first.address);
      assert.equal((await clients.signalLog.append(goal("agent:main:main"))).recorded, true);
      clients.close();
    } finally {
      first.child.kill("SIGTERM");
      await first.exited;
      dir.remove();
    }
  });

  test("bad settings are all reported at once, with exit code 2", async () => {
    const result = await runCli(["serve", "--listen", "nowhere", "--durability", "maybe", "--retention-days", "0"], {
      SESSIONSTATE_MAX_EVENTS: "-5",
      SESSIONSTATE_TRANSCRIPT_ROOT: "/no/such/folder",
      SESSIONSTATE_SYNTHETIC_PREFIXES: "[1, 2]",
    });
    assert.equal(result.code, 2);
    assert.match(result.stderr, /--listen: must be HOST:PORT/);
    assert.match(result.stderr, /--durability: must be one of normal, full/);
    assert.match(result.stderr, /--retention-days: must be a whole number from 1/);
    assert.match(result.stderr, /SESSIONSTATE_MAX_EVENTS: must be a whole number/);
    assert.match(result.stderr, /SESSIONSTATE_TRANSCRIPT_ROOT: must be an existing directory/);
    assert.match(result.stderr, /SESSIONSTATE_SYNTHETIC_PREFIXES: must be a JSON array of non-empty strings/);
    // A negative number given as the flag's next argument is a value, checked like any other.
    const negative = await runCli(["serve", "--retention-days", "-3", "--max-events", "x"]);
    assert.deepEqual(
      { code: negative.code, stderr: negative.stderr },
      {
        code: 2,
        stderr:
          "sessionstate: invalid configuration:\n" +
          '  - --retention-days: must be a whole number from 1 to 36500 (got "-3")\n' +
          '  - --max-events: must be a whole number from 1 to 1000000000 (got "x")\n' +
          "see 'sessionstate serve --help'\n",
      },
    );
  });

  test("an unknown flag or command is a usage error that names it and points at --help", async () => {
    const flag = await runCli(["serve", "--colour", "blue"]);
    assert.equal(flag.code, 2);
    assert.equal(flag.stderr, "sessionstate: invalid configuration:\n  - unknown flag --colour\nsee 'sessionstate serve --help'\n");
    const statusFlag = await runCli(["status", "agent:main:main", "--colour"]);
    assert.deepEqual([statusFlag.code, statusFlag.stderr], [2, "sessionstate status: unknown flag --colour\nsee 'sessionstate status --help'\n"]);
    const command = await runCli(["dance"]);
    assert.deepEqual([command.code, command.stderr], [2, `sessionstate: unknown command "dance"\nsee 'sessionstate --help'\n`]);
    const topic = await runCli(["help", "dance"]);
    assert.deepEqual([topic.code, topic.stderr], [2, `sessionstate help: unknown command "dance"\nsee 'sessionstate --help'\n`]);
  });

  test("--help and -h print each command's usage and exit 0; --version prints the version", async () => {
    const { version } = JSON.parse(readFileSync(fileURLToPath(new URL("../../package.json", import.meta.url)), "utf8")) as { version: string };
    const firstLines: Record<string, string> = {
      serve: "usage: sessionstate serve [flags]",
      status: "usage: sessionstate status <key> [--agent A] [--since V] [--limit N] [--json]",
      tail: "usage: sessionstate tail (--watcher KEY | --prefix PREFIX)... [--group G [--max-in-flight N]] [--ack] [--json]",
      namespaces: "usage: sessionstate namespaces [--json]",
      sessions: "usage: sessionstate sessions [--agent A] [--prefix P | --recent] [--limit N] [--page-token T] [--json]",
      events: "usage: sessionstate events <key> [--agent A] [--since V] [--limit N] [--json]",
      watches: "usage: sessionstate watches [--watcher KEY] [--target KEY [--agent A]] [--provenance P] [--pending] [--json]",
      pending: "usage: sessionstate pending [--watcher KEY] [--target KEY [--agent A]] [--json]",
      append: "usage: sessionstate append <key> --kind KIND [--summary TEXT] [--agent A] [--actor TYPE] [--actor-id ID]",
      watch: "usage: sessionstate watch <watcher> <target> [--agent A] [--ambient] [--extra-kind KIND]... [--json]",
      unwatch: "usage: sessionstate unwatch <watcher> <target> [--agent A] [--json]",
      ack: "usage: sessionstate ack <watcher> <target> --notified-version N [--reconciled-through V] [--agent A] [--json]",
      prune: "usage: sessionstate prune [--json]",
      mcp: "usage: sessionstate mcp --session KEY [--group G [--max-in-flight N]]",
      token: "usage: sessionstate token hash < token.txt",
      hook: "usage: sessionstate hook claude|codex|gemini [flags]",
      hooks: "usage: sessionstate hooks install --cli claude|codex|gemini [--scope user|project] [--transport http|command] [flags]",
      adopt: "usage: sessionstate adopt <key> --catalog claude|codex|pi --transcript PATH [--thread ID] [--host ID] [--json]",
      links: "usage: sessionstate links [--agent ID] [--json]",
      scan: "usage: sessionstate scan [--json]",
    };
    const runs = await Promise.all(
      Object.keys(firstLines).flatMap((command) => [
        // Help wins over anything else on the line, even arguments that would be a usage error.
        ["--help", "-h"].map(async (flag) => [command, flag, await runCli([command, flag, "--colour"])] as const),
        [["help", command]].map(async (argv) => [command, argv.join(" "), await runCli(argv)] as const),
      ]).flat(),
    );
    for (const [command, how, result] of runs) {
      assert.equal(result.code, 0, `${command} ${how}: ${result.stderr}`);
      assert.equal(result.stdout.split("\n")[0], firstLines[command], `${command} ${how}`);
      assert.equal(result.stderr, "", `${command} ${how}`);
      // Plain text, as a terminal shows it: no Markdown, no pointers to where this text is not.
      assert.doesNotMatch(result.stdout, /`|\]\(|see below/u, `${command} ${how}`);
    }
    const top = await Promise.all([["--help"], ["-h"], ["help"]].map((argv) => runCli(argv)));
    for (const result of top) {
      assert.equal(result.code, 0);
      assert.match(result.stdout, /^usage: sessionstate <command> \[flags\]\n/);
      assert.match(result.stdout, /--help, -h \(its usage\), --version/);
    }
    const versions = await Promise.all([["--version"], ["-v"], ["version"], ["serve", "--version"], ["status", "--version"]].map((argv) => runCli(argv)));
    for (const result of versions) assert.deepEqual([result.code, result.stdout, result.stderr], [0, `sessionstate ${version}\n`, ""]);
  });

  test("settings come from SESSIONSTATE_* variables, and flags win over them", async () => {
    const dir = tempDir();
    const server = await spawnServer(["--listen", "127.0.0.1:0"], {
      SESSIONSTATE_DB: join(dir.dir, "from-env.db"),
      SESSIONSTATE_LISTEN: "127.0.0.1:1",
    });
    try {
      assert.notEqual(server.address, "127.0.0.1:1");
      assert.ok(existsSync(join(dir.dir, "from-env.db")));
      const clients = connect(server.address);
      assert.equal((await clients.reconcile.sessionStatus({ session: { key: "global" } })).stateVersion, 0n);
      clients.close();
    } finally {
      server.child.kill("SIGTERM");
      assert.equal(await server.exited, 0);
      dir.remove();
    }
  });
});

describe("bin/sessionstate.js", () => {
  test("runs dist/ while it is newer than every source, the TypeScript sources through tsx otherwise", () => {
    const root = fileURLToPath(new URL("../..", import.meta.url));
    const dir = tempDir();
    try {
      // A stand-in project: the real launcher, a "build" and "sources" that say which one ran.
      for (const sub of ["bin", "dist/src", "src", "gen"]) mkdirSync(join(dir.dir, sub), { recursive: true });
      copyFileSync(join(root, "bin/sessionstate.js"), join(dir.dir, "bin/sessionstate.js"));
      symlinkSync(join(root, "node_modules"), join(dir.dir, "node_modules"));
      writeFileSync(join(dir.dir, "package.json"), '{ "type": "module" }\n');
      writeFileSync(join(dir.dir, "src/cli.ts"), 'const from: string = "sources";\nconsole.log(from);\n');
      writeFileSync(join(dir.dir, "gen/x_pb.ts"), "export {};\n");
      writeFileSync(join(dir.dir, "dist/src/cli.js"), 'console.log("build");\n');
      const run = () => execFileSync(process.execPath, [join(dir.dir, "bin/sessionstate.js")], { encoding: "utf8" }).trim();
      const at = (path: string, seconds: number) => utimesSync(join(dir.dir, path), seconds, seconds);
      at("src/cli.ts", 1_000);
      at("gen/x_pb.ts", 1_000);
      at("dist/src/cli.js", 2_000);
      assert.equal(run(), "build");
      at("gen/x_pb.ts", 3_000);
      assert.equal(run(), "sources", "a regenerated file makes the build stale");
      at("dist/src/cli.js", 4_000);
      at("src/cli.ts", 5_000);
      assert.equal(run(), "sources", "an edited source makes the build stale");
    } finally {
      dir.remove();
    }
  });
});

describe("signals and ports", () => {
  test("a port already taken is one line and exit code 1, and nothing is created", async () => {
    const dir = tempDir();
    const holder = createNetServer();
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    const taken = (holder.address() as { port: number }).port;
    try {
      for (const args of [["--listen", `127.0.0.1:${taken}`], ["--listen", "127.0.0.1:0", "--metrics-listen", `127.0.0.1:${taken}`]]) {
        const result = await runCli(["serve", "--db", join(dir.dir, "data", "s.db"), ...args], {}, dir.dir);
        const flag = args.at(-2)!;
        assert.deepEqual(
          [result.code, result.stdout, result.stderr],
          [1, "", `sessionstate: ${flag} 127.0.0.1:${taken}: the address is already in use (by another sessionstate server, or another program)\n`],
        );
        assert.deepEqual(readdirSync(dir.dir), [], "no database or folder created");
      }
    } finally {
      holder.close();
      dir.remove();
    }
  });
});

describe("npm start", () => {
  test("stops the server on SIGTERM to npm, as it does the server itself", async () => {
    const dir = tempDir();
    const root = fileURLToPath(new URL("../..", import.meta.url));
    const npm = spawn("npm", ["start", "--", "--listen", "127.0.0.1:0", "--db", join(dir.dir, "s.db")], { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
    try {
      let stdout = "";
      let stderr = "";
      npm.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      const address = await new Promise<string>((resolve, reject) => {
        npm.stdout.on("data", (chunk: Buffer) => {
          stdout += chunk.toString();
          const match = /^listening on (\S+)$/mu.exec(stdout);
          if (match !== null) resolve(match[1]!);
        });
        npm.once("exit", (code) => reject(new Error(`npm start exited (${code}) before listening: ${stdout}`)));
      });
      const [host, port] = [address.slice(0, address.lastIndexOf(":")), Number(address.slice(address.lastIndexOf(":") + 1))];
      npm.kill("SIGTERM");
      const [code, signal] = (await once(npm, "exit")) as [number | null, NodeJS.Signals | null];
      assert.deepEqual({ code, signal }, { code: 0, signal: null }, `the server stopped cleanly, and npm with it: ${stdout}${stderr}`);
      // Nothing listens there any more: the server did not outlive npm.
      const refused = await new Promise<boolean>((resolve) => {
        const socket = connectTcp({ host, port }, () => {
          socket.destroy();
          resolve(false);
        });
        socket.once("error", () => resolve(true));
      });
      assert.ok(refused, `${address} still accepts connections after npm exited`);
    } finally {
      npm.kill("SIGKILL");
      dir.remove();
    }
  });
});

describe("the address the commands are given", () => {
  test("the HTTP port named as --server, and an address with a scheme, each say what is wrong", async () => {
    const t = await startTestServer({ httpListen: { host: "127.0.0.1", port: 0 } });
    try {
      const http = await runCli(["sessions", "--server", t.server.httpAddress!]);
      assert.equal(http.code, 1);
      assert.equal(
        http.stderr,
        `sessionstate sessions: the server at ${t.server.httpAddress} does not answer gRPC: is that the HTTP port (the console's, "console on …")? The commands use the gRPC port, the one "listening on …" names (default 127.0.0.1:50051)\n`,
      );
      const scheme = await runCli(["sessions", "--server", `http://${t.server.address}/`]);
      assert.equal(scheme.code, 2);
      assert.equal(
        scheme.stderr,
        `sessionstate sessions: --server (or SESSIONSTATE_SERVER) takes host:port, without a scheme (got "http://${t.server.address}/"): use ${t.server.address}\nsee 'sessionstate sessions --help'\n`,
      );
      const works = await runCli(["sessions", "--server", t.server.address]);
      assert.equal(works.code, 0, works.stderr);
      // Connection flags before the command, as other CLIs take them.
      const teamB = connect(t.server.address, { namespace: "team-b" });
      await teamB.signalLog.append(goal("agent:main:main"));
      teamB.close();
      const before = await runCli(["--namespace", "team-b", `--server=${t.server.address}`, "sessions"]);
      assert.equal(before.code, 0, before.stderr);
      assert.match(before.stdout, /agent:main:main/u);
      assert.doesNotMatch(works.stdout, /agent:main:main/u);
    } finally {
      await t.dispose();
    }
  });
});

describe("a SQLite database that cannot be opened", () => {
  test("names the path and the cause, changes nothing, leaves no lock file, and never spins", { timeout: 60_000 }, async () => {
    const dir = tempDir();
    try {
      mkdirSync(join(dir.dir, "data"));
      writeFileSync(join(dir.dir, "notes.md"), "# not a database\n");
      writeFileSync(join(dir.dir, "file"), "");
      const cases: [string, string][] = [
        [join(dir.dir, "data"), `it is a folder: name a file in it (for example --db ${join(dir.dir, "data", "sessionstate.db")})`],
        [join(dir.dir, "notes.md"), "it is not a SQLite database (nothing was changed): name a new file, or a sessionstate database"],
        ["/proc/nope/x.db", "the folder /proc/nope cannot be created (ENOENT)"],
        [join(dir.dir, "file", "x.db"), `${join(dir.dir, "file")} is a file, not a folder`],
      ];
      for (const [db, why] of cases) {
        const result = await runCli(["serve", "--db", db, "--listen", "127.0.0.1:0", "--http-listen", "off"]);
        assert.deepEqual({ code: result.code, stderr: result.stderr }, { code: 1, stderr: `sessionstate: cannot open the database ${db}: ${why}\n` }, db);
      }
      assert.deepEqual(readdirSync(dir.dir).sort(), ["data", "file", "notes.md"], "no lock file, nothing created");
      assert.deepEqual(readdirSync(join(dir.dir, "data")), []);
      assert.equal(readFileSync(join(dir.dir, "notes.md"), "utf8"), "# not a database\n");
    } finally {
      dir.remove();
    }
  });
});
