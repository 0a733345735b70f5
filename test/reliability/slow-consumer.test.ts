import assert from "node:assert/strict";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { performance } from "node:perf_hooks";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { atFixedRate, connect, human, tempDir, type Clients } from "../support/helpers.js";
import { spawnServer } from "../support/process-helpers.js";
import { durationMs, percentile, rssMb } from "../support/reliability-helpers.js";

const stalled = "agent:main:stalled";
const fast = "agent:main:fast";
const targets = Array.from({ length: 300 }, (_, i) => `agent:main:subagent:t${i}`);
const ratePerSec = 200;

/** Appends at a fixed rate for `ms`; returns when each sequence's append started. */
async function appendAtRate(clients: Clients, ms: number, startedAt: Map<bigint, number>): Promise<void> {
  await atFixedRate(ratePerSec, ms, (i, t0) =>
    clients.signalLog.append(human(targets[(i * 7919) % targets.length]!)).then((r) => void startedAt.set(r.event!.sequence, t0)),
  );
}

/** A subscriber that acks everything at once and records when each notice arrived. */
function fastSubscriber(clients: Clients, arrivedAt: Map<bigint, number>) {
  const call = clients.watch.subscribeStaleNotices({ watcherSessionKeys: [fast] }, { timeoutMs: 600_000 });
  const done = (async () => {
    try {
      for await (const item of call) {
        if (item.message.case !== "notice") continue;
        const notice = item.message.value;
        arrivedAt.set(notice.notifiedVersion, performance.now());
        clients.watch
          .ackNotices({ acks: [{ watcherSessionKey: fast, target: notice.target, notifiedVersion: notice.notifiedVersion }] })
          .catch(() => undefined); // the last ones may race the end of the test
      }
    } catch {
      // cancelled at the end
    }
  })();
  return { call, done };
}

function latencies(startedAt: Map<bigint, number>, arrivedAt: Map<bigint, number>): number[] {
  return [...arrivedAt].flatMap(([sequence, at]) => {
    const began = startedAt.get(sequence);
    return began === undefined ? [] : [at - began];
  });
}

describe("slow consumer", () => {
  test("a subscriber that stops reading costs bounded memory, slows no one, and gets one notice per pair", async (t) => {
    const stallMs = durationMs("RELIABILITY_STALL_MS", 60_000);
    const dir = tempDir();
    // Every collection a full one (V8's --gc-global), so RSS is what the server holds rather than garbage
    // the collector has not reached yet: without it RSS grew 50 MB in these 60 s while the heap left
    // after full collections stayed at 15 MB (measured with a capped old space).
    const server = await spawnServer(["--db", join(dir.dir, "slow.db"), "--listen", "127.0.0.1:0", "--log-level", "warn"], {}, ["--gc-global"]);
    const appender = connect(server.address);
    const subscriber = connect(server.address, { ownConnection: true });
    const sleeper = connect(server.address, { ownConnection: true });
    try {
      for (const target of targets) {
        await appender.watch.watch({ watcherSessionKey: stalled, target: { key: target } });
        await appender.watch.watch({ watcherSessionKey: fast, target: { key: target } });
      }
      // Baseline: no stalled subscriber.
      const baseStart = new Map<bigint, number>();
      const baseArrived = new Map<bigint, number>();
      const baseline = fastSubscriber(subscriber, baseArrived);
      await sleep(200);
      await appendAtRate(appender, 10_000, baseStart);
      await sleep(300);
      baseline.call.cancel();
      await baseline.done;
      const baseP99 = percentile(latencies(baseStart, baseArrived), 99);

      // Stalled run: one subscriber reads the pending notices and the synced marker, then stops reading.
      const stalledCall = sleeper.watch.subscribeStaleNotices({ watcherSessionKeys: [stalled] }, { timeoutMs: 600_000 });
      const events = stalledCall as unknown as Readable; // grpc-js streams are Node readables
      const received: string[] = [];
      let synced = false;
      events.on("error", () => undefined); // our own cancel() at the end
      events.on("data", (item: { message: { case: string; value: { target?: { key: string } } } }) => {
        if (item.message.case === "synced") synced = true;
        else received.push(item.message.value.target!.key);
        if (synced) stalledCall.pause();
      });
      while (!synced) await sleep(10);
      const rssBefore = rssMb(server.child.pid!);
      const stallStart = new Map<bigint, number>();
      const stallArrived = new Map<bigint, number>();
      const during = fastSubscriber(subscriber, stallArrived);
      await sleep(200);
      await appendAtRate(appender, stallMs, stallStart);
      await sleep(300);
      const rssAfter = rssMb(server.child.pid!);
      during.call.cancel();
      await during.done;
      const stallP99 = percentile(latencies(stallStart, stallArrived), 99);
      t.diagnostic(
        `fast subscriber p99: ${baseP99.toFixed(1)} ms alone, ${stallP99.toFixed(1)} ms beside a stalled one; server RSS ${rssBefore.toFixed(0)} -> ${rssAfter.toFixed(0)} MB over ${stallMs / 1000} s`,
      );
      assert.ok(stallP99 <= 2 * Math.max(baseP99, 10), `p99 ${stallP99.toFixed(1)} ms vs ${baseP99.toFixed(1)} ms without the stall`);
      assert.ok(rssAfter - rssBefore < 20, `server memory grew by ${(rssAfter - rssBefore).toFixed(1)} MB`);

      // Resume: one notice per pair, however many events landed.
      stalledCall.resume();
      const pending = (await appender.watch.listWatches({ watcherSessionKey: stalled, pageSize: 1000 })).cursors.filter(
        (c) => c.notifiedVersion > c.ackedVersion,
      ).length;
      const deadline = Date.now() + 20_000;
      while (received.length < pending && Date.now() < deadline) await sleep(20);
      await sleep(200);
      assert.equal(received.length, pending);
      assert.equal(new Set(received).size, received.length, "one notice per pair");
      stalledCall.cancel();
    } finally {
      appender.close();
      subscriber.close();
      sleeper.close();
      server.child.kill("SIGTERM");
      await server.exited;
      dir.remove();
    }
  });
});
