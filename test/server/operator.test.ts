import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { appendFileSync, realpathSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { goal, human, startTestServer, tempDir } from "../support/helpers.js";
import { binPath, freePort, runCli } from "../support/process-helpers.js";

const W = "agent:main:main";
const C = "agent:main:subagent:child";

describe("operator commands", () => {
  test("adopt, links and scan drive the Upstream service, each with exact output and as JSON", async () => {
    const root = tempDir();
    const rootPath = realpathSync(root.dir);
    const file = join(rootPath, "session.jsonl");
    writeFileSync(file, `${JSON.stringify({ type: "assistant", message: { role: "assistant", content: "hi" } })}\n`);
    const t = await startTestServer({ transcriptRoot: rootPath, monitorIntervalMs: 86_400_000 });
    const cli = async (...args: string[]): Promise<[number | null, string, string]> => {
      const { code, stdout, stderr } = await runCli([...args, "--server", t.server.address], {}, rootPath);
      return [code, stdout.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z/g, "TIME"), stderr];
    };
    try {
      const size = statSync(file).size;
      assert.deepEqual(await cli("links"), [0, "no adopted links: sessionstate adopt links one\n", ""]);
      assert.deepEqual(await cli("adopt", "agent:main:cc", "--catalog", "claude", "--transcript", "session.jsonl", "--thread", "t-1"), [
        0,
        `adopted agent:main:cc from claude: file:${file} from byte ${size} (event 1)\n`,
        "",
      ]);
      assert.deepEqual(await cli("adopt", "agent:main:gone", "--catalog", "claude", "--transcript", join(rootPath, "nope.jsonl")), [
        0,
        "adopted agent:main:gone from claude, but not linked: the transcript file does not exist\n",
        "",
      ]);
      assert.deepEqual(await cli("adopt", "agent:main:x", "--transcript", file), [2, "", "sessionstate adopt: --catalog: give the CLI that writes the transcript (claude, codex or pi)\nsee 'sessionstate adopt --help'\n"]);
      await t.watch.watch({ watcherSessionKey: W, target: { key: "agent:main:cc" } });
      appendFileSync(file, `${JSON.stringify({ type: "user", message: { role: "user", content: "a person typed" } })}\n`);
      assert.deepEqual(await cli("scan"), [0, "scanned 1 link: 1 event recorded\n", ""]);
      const after = statSync(file).size;
      // Columns are padded to their widest cell: compared with each run of spaces as two.
      const [code, links] = await cli("links");
      assert.deepEqual([code, links.replace(/ {2,}/g, "  ")], [
        0,
        `KEY  CATALOG  SOURCE  MARKER  LAST SCAN  OUTCOME\nagent:main:cc  claude  file:${file}  ${after}  TIME  recorded\n`,
      ]);
      const json = JSON.parse((await cli("links", "--json"))[1]) as { links: Array<{ marker: string; threadId: string; lastScanOutcome: string }> };
      assert.deepEqual(json.links.map((l) => [l.marker, l.threadId, l.lastScanOutcome]), [[String(after), "t-1", "recorded"]]);
      const scan = JSON.parse((await cli("scan", "--json"))[1]) as Record<string, number>;
      assert.deepEqual(scan, { linksScanned: 1, eventsRecorded: 0, linksHeld: 0, linksTimedOut: 0, linksFailed: 0 });
    } finally {
      await t.dispose();
      root.remove();
    }
  });

  test("status prints the version and changes, for people and as JSON", async () => {
    const t = await startTestServer();
    try {
      await t.signalLog.append(goal(C, { actorId: W }));
      await t.signalLog.append(human(C, { summary: "human message via slack" }));
      const plain = await runCli(["status", C, "--since", "1", "--server", t.server.address]);
      assert.equal(plain.code, 0, plain.stderr);
      const lines = plain.stdout.trim().split("\n");
      assert.deepEqual(lines.slice(0, 3), [`session ${C} (agent main)`, "state version 2", "changes since 1: 1 event"]);
      assert.match(lines[3]!, /^ {2}2 {2}\d{4}-\d\d-\d\dT[\d:.]+Z {2}human_direct_message {2}human {2}human message via slack$/);
      const json = await runCli(["status", C, "--since", "0", "--json", "--server", t.server.address]);
      const body = JSON.parse(json.stdout) as { stateVersion: string; stateChanges: { events: unknown[] } };
      assert.equal(body.stateVersion, "2");
      assert.equal(body.stateChanges.events.length, 2);
      const bad = await runCli(["status", C, "--since", "-1", "--server", t.server.address]);
      assert.equal(bad.code, 2);
      const ahead = await runCli(["status", C, "--since", "9", "--server", t.server.address]);
      assert.equal(ahead.code, 1);
      assert.match(ahead.stderr, /changes_since 9 is above the session's state version 2/);
    } finally {
      await t.dispose();
    }
  });

  test("the commands cover the API: append, watch, pending, watches, ack, events, sessions, namespaces, unwatch, prune, each with exact output", async () => {
    const t = await startTestServer();
    const cli = async (...args: string[]): Promise<[number | null, string, string]> => {
      const { code, stdout, stderr } = await runCli([...args, "--server", t.server.address]);
      return [code, stdout.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g, "YYYY-MM-DDThh:mm:ss.sssZ"), stderr];
    };
    try {
      assert.deepEqual(await cli("namespaces"), [0, "no namespaces yet: nothing has been appended or watched\n", ""]);
      assert.deepEqual(await cli("append", C, "--kind", "goal-changed", "--summary", "goal set", "--actor", "agent", "--actor-id", W), [
        0,
        "recorded: event 1 (goal_changed), state version 1\n",
        "",
      ]);
      assert.deepEqual(await cli("watch", W, C), [0, `${W} watches ${C} (agent main) from version 1: L 1  N 1  M 1\n`, ""]);
      assert.deepEqual(await cli("watch", W, "global"), [
        1,
        "not watched: target is a bare key: only agent-qualified sessions (agent:<agentId>:<rest>) are watched\n",
        "",
      ]);
      assert.deepEqual(await cli("append", C, "--kind", "HUMAN_DIRECT_MESSAGE", "--summary", "over slack", "--actor", "human"), [
        0,
        "recorded: event 2 (human_direct_message), state version 2\n",
        "",
      ]);
      const text = `Session "${C}" changed (other actor). Reconcile before acting: session_status sessionKey "${C}" changesSince 1.`;
      assert.deepEqual(await cli("pending"), [0, `${W} -> ${C} (agent main)  L 1  N 2  M 2\n  ${text}\n`, ""]);
      const [, pendingJson] = await cli("pending", "--watcher", W, "--json");
      assert.deepEqual(JSON.parse(pendingJson), {
        watcherSessionKey: W,
        target: { key: C, agentId: "main" },
        changesSince: "1",
        notifiedVersion: "2",
        text,
        wake: true,
        contextKey: `session-state:${Buffer.from(C).toString("hex")}`,
        queueOnly: false,
        claimId: "",
        deliveryCount: 0,
      });
      assert.deepEqual(await cli("watches"), [
        0,
        `WATCHER          TARGET                     AGENT  L  N  M  PENDING  PROVENANCE  UPDATED\n${W}  ${C}  main   1  2  2  yes      explicit    YYYY-MM-DDThh:mm:ss.sssZ\n`,
        "",
      ]);
      assert.deepEqual(await cli("ack", W, C, "--notified-version", "1"), [
        1,
        `not acknowledged: the pending notice of ${W} on ${C} is version N = 2, not 1: --notified-version 2 acknowledges it\n`,
        "",
      ]);
      assert.deepEqual(await cli("ack", W, C, "--notified-version", "2"), [0, `acknowledged: ${W} on ${C} is caught up to version 2\n`, ""]);
      assert.deepEqual(await cli("ack", W, C, "--notified-version", "2"), [
        1,
        `not acknowledged: nothing of ${C} is pending for ${W} (acknowledged through version 2); a repeated ack changes nothing\n`,
        "",
      ]);
      assert.deepEqual(await cli("ack", W, "agent:main:subagent:nobody", "--notified-version", "2"), [
        1,
        `not acknowledged: ${W} does not watch agent:main:subagent:nobody\n`,
        "",
      ]);
      assert.deepEqual(await cli("pending"), [0, "no pending notices\n", ""]);
      assert.deepEqual(await cli("events", C), [
        0,
        [
          `session ${C} (agent main), state version 2`,
          "2 events",
          `  1  YYYY-MM-DDThh:mm:ss.sssZ  goal_changed  agent ${W}  goal set`,
          "  2  YYYY-MM-DDThh:mm:ss.sssZ  human_direct_message  human  over slack",
          "",
        ].join("\n"),
        "",
      ]);
      assert.deepEqual(await cli("sessions"), [
        0,
        `SESSION                    AGENT  VERSION  UPDATED                   PRUNED THROUGH  UPSTREAM\n${C}  main   2        YYYY-MM-DDThh:mm:ss.sssZ  0               no\n`,
        "",
      ]);
      assert.deepEqual(await cli("namespaces"), [
        0,
        "NAMESPACE  SESSIONS  EVENTS  WATCHES  PENDING  LAST APPEND\ndefault    1         2       1        0        YYYY-MM-DDThh:mm:ss.sssZ\n",
        "",
      ]);
      assert.deepEqual((await cli("sessions", "--prefix", "AGENT:MAIN:SUB"))[1].split("\n").slice(1), [`${C}  main   2        YYYY-MM-DDThh:mm:ss.sssZ  0               no`, ""]);
      assert.deepEqual(await cli("sessions", "--prefix", "agent:ops:"), [0, "no sessions\n", ""]);
      assert.deepEqual((await cli("sessions", "--recent"))[1].split("\n")[1]?.split(" ")[0], C);
      assert.deepEqual(await cli("sessions", "--recent", "--prefix", "a"), [2, "", "sessionstate sessions: --prefix and --recent cannot be combined\nsee 'sessionstate sessions --help'\n"]);
      // Another namespace holds nothing of this one; the list of namespaces ignores --namespace.
      assert.deepEqual(await cli("sessions", "--namespace", "team-b"), [0, "no sessions\n", ""]);
      assert.equal((await cli("namespaces", "--namespace", "team-b"))[1].split("\n").length, 3);
      assert.deepEqual(await cli("append", "notes", "--agent", "main", "--kind", "goal-changed", "--summary", "goal set"), [
        0,
        "recorded: event 3 (goal_changed), state version 3\nnote: notes is a bare key: it is logged and versioned, but no watcher is ever told of it (watches are of agent:<agentId>:<rest> keys)\n",
        "",
      ]);
      assert.deepEqual(await cli("unwatch", W, C), [0, `removed the watch of ${W} on ${C}\n`, ""]);
      assert.deepEqual(await cli("unwatch", W, C), [0, `${W} did not watch ${C}: nothing removed\n`, ""]);
      assert.deepEqual(await cli("prune"), [0, "removed 0 events and 0 expired watches\n", ""]);
      // Bad input: the CLI's own checks exit 2; the server's refusals exit 1 with its message, naming the field.
      assert.deepEqual(await cli("append", C, "--kind", "shouted"), [
        2,
        "",
        'sessionstate append: --kind: "shouted" is not one of human-direct-message, goal-changed, upstream-missing, child-spawned, run-completed, run-failed, compacted, adopted, created, imported\nsee \'sessionstate append --help\'\n',
      ]);
      assert.deepEqual(await cli("ack", W, C), [2, "", "sessionstate ack: give --notified-version: the version N of the notice, as 'sessionstate pending' shows it\nsee 'sessionstate ack --help'\n"]);
      assert.deepEqual(await cli("watch", W), [2, "", "sessionstate watch: give <watcher> <target>\nsee 'sessionstate watch --help'\n"]);
      const [code, , stderr] = await cli("append", C, "--kind", "goal-changed", "--summary", "");
      assert.deepEqual([code, stderr], [1, "sessionstate append: summary: is required (one line, 1-200 characters) (INVALID_ARGUMENT)\n"]);
    } finally {
      await t.dispose();
    }
  });

  test("--json prints each answer as the API's JSON with its zero values", async () => {
    const t = await startTestServer();
    const json = async (...args: string[]): Promise<unknown> => JSON.parse((await runCli([...args, "--json", "--server", t.server.address])).stdout);
    try {
      assert.deepEqual(await json("status", C), { session: { key: C, agentId: "main" }, stateVersion: "0" });
      assert.deepEqual(await json("status", C, "--since", "0"), {
        session: { key: C, agentId: "main" },
        stateVersion: "0",
        stateChanges: { events: [], historyGap: false, truncated: false, earliestAvailableSequence: "0" },
      });
      assert.deepEqual(await json("ack", W, C, "--notified-version", "0"), { results: [{ acknowledged: false, reopened: false }] });
      assert.deepEqual(await json("prune"), { eventsRemoved: 0, cursorsRemoved: 0 });
      assert.deepEqual(await json("unwatch", W, C), { removed: false });
    } finally {
      await t.dispose();
    }
  });

  test("a server that is not there is one plain line, exit 1", async () => {
    const address = `127.0.0.1:${await freePort()}`;
    for (const command of [["status", C], ["namespaces"], ["append", C, "--kind", "goal-changed", "--summary", "x"]]) {
      const result = await runCli([...command, "--server", address]);
      assert.deepEqual(
        [result.code, result.stdout, result.stderr],
        [1, "", `sessionstate ${command[0]}: cannot reach a server at ${address} (connection refused): is it running? (the address comes from --server or SESSIONSTATE_SERVER)\n`],
      );
    }
  });

  test("tail prints a notice within a second of the append that opened it, and --ack acknowledges it", async () => {
    const t = await startTestServer();
    const tail = spawn(process.execPath, [binPath, "tail", "--watcher", W, "--ack", "--server", t.server.address], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    try {
      await t.watch.watch({ watcherSessionKey: W, target: { key: C } });
      let stdout = "";
      tail.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
      const deadline = Date.now() + 20_000;
      while (t.server.openStreams() === 0) {
        assert.ok(Date.now() < deadline, "tail never subscribed");
        await sleep(10);
      }
      const appendedAt = Date.now();
      const appended = await t.signalLog.append(human(C));
      while (!stdout.includes("\n")) {
        assert.ok(Date.now() - appendedAt < 1000, "no notice printed within a second");
        await sleep(5);
      }
      assert.equal(
        stdout,
        `${W} (wake): Session "${C}" changed (other actor). Reconcile before acting: session_status sessionKey "${C}" changesSince 0.\n`,
      );
      const seq = appended.event!.sequence;
      for (;;) {
        const cursor = (await t.watch.listWatches({ watcherSessionKey: W })).cursors[0]!;
        if (cursor.ackedVersion === seq) break;
        assert.ok(Date.now() < deadline, "tail --ack never acknowledged");
        await sleep(10);
      }
    } finally {
      tail.kill("SIGINT");
      await new Promise((resolve) => tail.once("exit", resolve));
      await t.dispose();
    }
  });

  test("tail says on standard error why it is reconnecting (once), then connected and synced", async () => {
    const port = await freePort();
    const address = `127.0.0.1:${port}`;
    const tail = spawn(process.execPath, [binPath, "tail", "--watcher", W, "--server", address], { stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    tail.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const waitFor = async (text: string): Promise<void> => {
      const deadline = Date.now() + 20_000;
      while (!stderr.includes(text)) {
        assert.ok(Date.now() < deadline, `tail never said "${text}": ${stderr}`);
        await sleep(20);
      }
    };
    let t: Awaited<ReturnType<typeof startTestServer>> | undefined;
    try {
      const unreachable = `reconnecting: cannot reach a server at ${address} (connection refused): is it running? (the address comes from --server or SESSIONSTATE_SERVER)\n`;
      await waitFor(unreachable);
      await sleep(2500); // several attempts, each with the same reason
      t = await startTestServer({ listenPort: port });
      await waitFor("synced");
      assert.equal(stderr, `${unreachable}connected to ${address}\nsynced: 0 pending notices delivered; waiting for more\n`);
    } finally {
      tail.kill("SIGINT");
      await new Promise((resolve) => tail.once("exit", resolve));
      await t?.dispose();
    }
  });

  test("token hash prints the SHA-256 of standard input; usage errors exit 2", async () => {
    const child = spawn(process.execPath, [binPath, "token", "hash"], { stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stdin.end("s3cret\n");
    const code = await new Promise<number | null>((resolve) => child.once("exit", (exitCode) => resolve(exitCode)));
    assert.equal(code, 0);
    assert.equal(stdout, "1ec1c26b50d5d3c58d9583181af8076655fe00756bf7285940ba3670f99fcba0\n");
    const tail = await runCli(["tail"]);
    assert.equal(tail.code, 2);
    assert.match(tail.stderr, /give at least one --watcher or --prefix/);
  });
});
