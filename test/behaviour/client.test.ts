import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { getEventListeners } from "node:events";
import { readFile } from "node:fs/promises";
import { createServer, type Socket } from "node:net";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, test } from "node:test";
import { EventKind } from "../../gen/sessionstate/v1/types_pb.js";
import { SessionStateClient } from "../../clients/typescript/src/index.js";
import { assertStatus, goal, human, startTestServer, status } from "../support/helpers.js";
import { freePort } from "../support/process-helpers.js";

const W = "agent:main:main";
const C = "agent:main:subagent:child";

async function unusedAddress(): Promise<string> {
  return `127.0.0.1:${await freePort()}`;
}

describe("client library", () => {
  test("the package names every service, message schema and enum of its own generated code in its exports, and the generated code matches the server's", async () => {
    const index: Record<string, unknown> = await import("../../clients/typescript/src/index.js");
    let named = 0;
    for (const file of ["types", "signal_log", "watch", "reconcile", "upstream"]) {
      const own: Record<string, unknown> = await import(`../../clients/typescript/src/gen/sessionstate/v1/${file}_pb.js`);
      for (const [name, value] of Object.entries(own)) {
        assert.equal(index[name], value, `${name} of ${file}_pb is exported by name`);
        named++;
      }
      const servers = await readFile(new URL(`../../gen/sessionstate/v1/${file}_pb.ts`, import.meta.url), "utf8");
      const clients = await readFile(new URL(`../../clients/typescript/src/gen/sessionstate/v1/${file}_pb.ts`, import.meta.url), "utf8");
      assert.equal(clients, servers, `${file}_pb.ts is generated from the same proto/ with the same plugin`);
    }
    assert.equal(named, 86);
  });

  test("appendBestEffort against a stopped server returns undefined within its deadline and logs", async () => {
    const warnings: object[] = [];
    const client = new SessionStateClient({ address: await unusedAddress(), logger: { warn: (details) => warnings.push(details) } });
    try {
      const started = Date.now();
      const result = await client.appendBestEffort(goal(W, { summary: "private summary text" }), { timeoutMs: 500 });
      assert.equal(result, undefined);
      assert.ok(Date.now() - started < 2000, "returns within the deadline");
      assert.equal(warnings.length, 1);
      // Refused at once (UNAVAILABLE), or, when a resend is still on its way at the deadline, DEADLINE_EXCEEDED.
      assert.ok(["UNAVAILABLE", "DEADLINE_EXCEEDED"].includes((warnings[0] as { code: string }).code), JSON.stringify(warnings[0]));
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
      assert.deepEqual([rejected.reason.code, rejected.reason.details], [3, "summary: is required (one line, 1-200 characters)"], "the caller made one append: its error names the field, not the entry");
      const sequences = outcomes.flatMap((o) => (o.status === "fulfilled" ? [o.value.event?.sequence] : []));
      assert.deepEqual(sequences, Array.from({ length: 49 }, (_, i) => BigInt(i + 1)));
      const metrics = await (await fetch(`http://127.0.0.1:${t.server.metricsPort}/metrics`)).text();
      assert.match(metrics, /sessionstate_rpc_duration_seconds_count\{method="\/sessionstate.v1.SignalLog\/AppendBatch",code="OK",protocol="grpc"\} 1\n/);
      assert.doesNotMatch(metrics, /method="\/sessionstate.v1.SignalLog\/Append"/);
      // A lone append later goes out by itself and still answers as Append would.
      assert.equal((await client.append(goal(W))).stateVersion, 50n);
    } finally {
      client.close();
      await t.dispose();
    }
  });

  test("appends of one turn that together exceed the server's 1 MiB request limit are split by size, and all succeed", async () => {
    const t = await startTestServer({ metricsListen: { host: "127.0.0.1", port: 0 } });
    const client = new SessionStateClient({ address: t.server.address, logger: { warn: () => {} } });
    try {
      // About 1.1 KB each: 1,000 of them are ~1.1 MB, over the server's limit in one request.
      const watchers = ["a", "b", "c"].map((name) => `agent:main:${name}-${"x".repeat(350)}`);
      const responses = await Promise.all(
        Array.from({ length: 1000 }, (_, i) => client.append(goal(`agent:main:s${i}`, { notifySessionKeys: watchers }))),
      );
      // Two batches travel together, so their order between them is the server's; each append is recorded once.
      assert.deepEqual(
        responses.map((r) => Number(r.event?.sequence)).sort((a, b) => a - b),
        Array.from({ length: 1000 }, (_, i) => i + 1),
      );
      const metrics = await (await fetch(`http://127.0.0.1:${t.server.metricsPort}/metrics`)).text();
      assert.match(metrics, /sessionstate_rpc_duration_seconds_count\{method="\/sessionstate.v1.SignalLog\/AppendBatch",code="OK",protocol="grpc"\} 2\n/);
      assert.doesNotMatch(metrics, /code="RESOURCE_EXHAUSTED"/);
    } finally {
      client.close();
      await t.dispose();
    }
  });

  test("coalesced appends keep their callers' own deadlines and signals", async () => {
    // A peer that accepts connections and never answers: calls end only by deadline or cancellation.
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const client = new SessionStateClient({ address: `127.0.0.1:${(silent.address() as { port: number }).port}`, logger: { warn: () => {} } });
    try {
      const abort = new AbortController();
      const started = Date.now();
      const settledAt = (promise: Promise<unknown>) =>
        promise.then(
          () => ({ code: -1, ms: Date.now() - started }),
          (err: { code: number }) => ({ code: err.code, ms: Date.now() - started }),
        );
      const short = settledAt(client.append(goal(W), { timeoutMs: 200 }));
      const long = settledAt(client.append(goal(C), { timeoutMs: 1500 }));
      const cancelled = settledAt(client.append(goal("agent:main:other"), { signal: abort.signal, timeoutMs: 5000 }));
      setTimeout(() => abort.abort(), 50);
      const [a, b, c] = await Promise.all([short, long, cancelled]);
      assert.deepEqual([a.code, b.code, c.code], [4, 4, 1], "DEADLINE_EXCEEDED, DEADLINE_EXCEEDED, CANCELLED");
      assert.ok(c.ms < 150, `cancelled at ${c.ms} ms`);
      assert.ok(a.ms >= 190 && a.ms < 1000, `short deadline at ${a.ms} ms`);
      assert.ok(b.ms >= 1490, `long deadline at ${b.ms} ms`);
    } finally {
      client.close();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  test("calls sharing one long-lived signal leave no abort listener behind", async () => {
    const t = await startTestServer();
    const client = new SessionStateClient({ address: t.server.address, logger: { warn: () => {} } });
    const shared = new AbortController();
    try {
      for (let i = 0; i < 20; i++) await client.signalLog.append(goal(W), { signal: shared.signal });
      await Promise.all(Array.from({ length: 20 }, () => client.append(goal(C), { signal: shared.signal })));
      await assertStatus(client.reconcile.sessionStatus({ session: { key: W }, changesSince: 99n }, { signal: shared.signal }), status.OUT_OF_RANGE);
      const stream = client.watch.subscribeStaleNotices({ watcherSessionKeys: [W] }, { signal: shared.signal });
      await stream[Symbol.asyncIterator]().next();
      stream.cancel();
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(getEventListeners(shared.signal, "abort").length, 0);
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
      const example = fileURLToPath(new URL("../../examples/gateway.ts", import.meta.url));
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
