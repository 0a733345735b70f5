import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, test } from "node:test";
import { EventKind } from "../gen/sessionstate/v1/types_pb.js";
import { SessionStateClient } from "../src/client/index.js";
import { goal, human, startTestServer } from "./helpers.js";

const W = "agent:main:main";
const C = "agent:main:subagent:child";

async function unusedAddress(): Promise<string> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return `127.0.0.1:${port}`;
}

describe("client library", () => {
  test("appendBestEffort against a stopped server returns undefined within its deadline and logs", async () => {
    const warnings: object[] = [];
    const client = new SessionStateClient({ address: await unusedAddress(), logger: { warn: (details) => warnings.push(details) } });
    try {
      const started = Date.now();
      const result = await client.appendBestEffort(goal(W, { summary: "private summary text" }), { timeoutMs: 500 });
      assert.equal(result, undefined);
      assert.ok(Date.now() - started < 2000, "returns within the deadline");
      assert.equal(warnings.length, 1);
      assert.equal((warnings[0] as { code: string }).code, "UNAVAILABLE");
      assert.doesNotMatch(JSON.stringify(warnings), /private summary text/, "summaries are never logged");
    } finally {
      client.close();
    }
  });

  test("appendBestEffort returns the response when the server answers, and undefined on refusal", async () => {
    const t = await startTestServer();
    const client = new SessionStateClient({ address: t.server.address, logger: { warn: () => {} } });
    try {
      assert.equal((await client.appendBestEffort(goal(W)))?.event?.sequence, 1n);
      assert.equal(await client.appendBestEffort(goal(W, { summary: "" })), undefined);
    } finally {
      client.close();
      await t.dispose();
    }
  });

  test("append coalesces the appends of one turn into one AppendBatch call, each answered on its own", async () => {
    const t = await startTestServer({ metricsListen: { host: "127.0.0.1", port: 0 } });
    const client = new SessionStateClient({ address: t.server.address, logger: { warn: () => {} } });
    try {
      const outcomes = await Promise.allSettled(
        Array.from({ length: 50 }, (_, i) => client.append(goal(`agent:main:s${i}`, i === 7 ? { summary: "" } : {}))),
      );
      assert.deepEqual(outcomes.map((o) => o.status).filter((s) => s === "rejected").length, 1);
      const rejected = outcomes[7] as PromiseRejectedResult;
      assert.deepEqual([rejected.reason.code, rejected.reason.details], [3, "appends[7]: summary: is required (one line, 1-200 characters)"]);
      const sequences = outcomes.flatMap((o) => (o.status === "fulfilled" ? [o.value.event?.sequence] : []));
      assert.deepEqual(sequences, Array.from({ length: 49 }, (_, i) => BigInt(i + 1)));
      const metrics = await (await fetch(`http://127.0.0.1:${t.server.metricsPort}/metrics`)).text();
      assert.match(metrics, /sessionstate_rpc_duration_seconds_count\{method="\/sessionstate.v1.SignalLog\/AppendBatch",code="OK"\} 1\n/);
      assert.doesNotMatch(metrics, /method="\/sessionstate.v1.SignalLog\/Append"/);
      // A lone append later goes out by itself and still answers as Append would.
      assert.equal((await client.append(goal(W))).stateVersion, 50n);
    } finally {
      client.close();
      await t.dispose();
    }
  });

  test("subscribe survives a server restart and receives the pending notice again", async () => {
    let t = await startTestServer();
    const client = new SessionStateClient({ address: t.server.address, logger: { warn: () => {} } });
    const stop = new AbortController();
    const reconnects: string[] = [];
    try {
      await t.watch.watch({ watcherSessionKey: W, target: { key: C } });
      const notices = client.subscribe({
        watchers: [W],
        signal: stop.signal,
        backoff: { initialMs: 20, maxMs: 200 },
        onReconnect: (err) => reconnects.push(String(err.code)),
      });
      const opened = await t.signalLog.append(human(C));
      const first = await notices.next();
      assert.equal(first.value?.notifiedVersion, opened.event?.sequence);
      t = await t.restart({ samePort: true });
      const again = await notices.next();
      assert.deepEqual(again.value, first.value, "the same notice, byte-identical");
      assert.ok(reconnects.length >= 1);
      const ack = await client.ack(again.value!, { reconciledThrough: opened.event!.sequence });
      assert.deepEqual([ack.acknowledged, ack.reopened], [true, false]);
      const later = await t.signalLog.append(goal(C));
      const next = await notices.next();
      assert.equal(next.value?.notifiedVersion, later.event?.sequence);
      stop.abort();
      assert.equal((await notices.next()).done, true);
    } finally {
      stop.abort();
      client.close();
      await t.dispose();
    }
  });

  test("the example gateway spawns, is notified, reconciles and acknowledges", async () => {
    const t = await startTestServer();
    try {
      const example = fileURLToPath(new URL("../examples/gateway.ts", import.meta.url));
      const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", example, t.server.address], { timeout: 60_000 });
      const lines = stdout.trim().split("\n");
      assert.match(lines[0]!, /^spawned agent:main:subagent:example-\d+$/);
      const child = lines[0]!.slice("spawned ".length);
      assert.equal(lines[1], `notice: Session "${child}" changed (other actor). Reconcile before acting: session_status sessionKey "${child}" changesSince 1.`);
      assert.equal(lines[2], `changed: #2 ${EventKind[EventKind.HUMAN_DIRECT_MESSAGE]} "human message via example"`);
      assert.equal(lines[3], "acknowledged=true reopened=false version=2");
      const cursor = (await t.watch.listWatches({ watcherSessionKey: W })).cursors[0];
      assert.deepEqual([cursor?.ackedVersion, cursor?.notifiedVersion, cursor?.materialVersion], [2n, 2n, 2n]);
    } finally {
      await t.dispose();
    }
  });
});
