import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { goal, human, startTestServer } from "../support/helpers.js";
import { binPath, runCli } from "../support/process-helpers.js";

const W = "agent:main:main";
const C = "agent:main:subagent:child";

describe("operator commands", () => {
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
