import assert from "node:assert/strict";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { describe, test } from "node:test";
import { connect, human, NoticeStreamChecker, reconcileEveryCursor, tempDir } from "../support/helpers.js";
import { spawnServer } from "../support/process-helpers.js";
import { durationMs, percentile } from "../support/reliability-helpers.js";

const watchers = Array.from({ length: 20 }, (_, i) => `agent:main:w${i}`);
const targets = Array.from({ length: 50 }, (_, i) => `agent:main:subagent:t${i}`);

describe("load", () => {
  test("50 appending clients and 20 acking subscribers: no errors, no invariant broken", async (t) => {
    const runMs = durationMs("RELIABILITY_LOAD_MS", 120_000);
    const dir = tempDir();
    const server = await spawnServer(["--db", join(dir.dir, "load.db"), "--listen", "127.0.0.1:0", "--log-level", "warn"]);
    const admin = connect(server.address);
    const appenders = Array.from({ length: 50 }, () => connect(server.address, { ownConnection: true }));
    const subscribers = watchers.map(() => connect(server.address, { ownConnection: true }));
    const errors: string[] = [];
    try {
      for (const watcher of watchers) {
        for (const target of targets) await admin.watch.watch({ watcherSessionKey: watcher, target: { key: target } });
      }
      const streams = watchers.map((watcher, i) => {
        const client = subscribers[i]!;
        const call = client.watch.subscribeStaleNotices({ watcherSessionKeys: [watcher] }, { timeoutMs: runMs + 120_000 });
        const checker = new NoticeStreamChecker((notice) =>
          client.watch.ackNotices({ acks: [{ watcherSessionKey: watcher, target: notice.target, notifiedVersion: notice.notifiedVersion }] }),
        );
        const reading = (async () => {
          try {
            for await (const item of call) if (item.message.case === "notice") checker.onNotice(item.message.value);
          } catch (err) {
            if ((err as { code?: number }).code !== 1) errors.push(`subscriber: ${(err as Error).message}`);
          }
        })();
        return { call, reading, checker };
      });

      const latenciesMs: number[] = [];
      const deadline = performance.now() + runMs;
      let next = 0;
      await Promise.all(
        appenders.map(async (client) => {
          while (performance.now() < deadline) {
            const target = targets[next++ % targets.length]!;
            const started = performance.now();
            try {
              await client.signalLog.append(human(target), { timeoutMs: 10_000 });
              latenciesMs.push(performance.now() - started);
            } catch (err) {
              errors.push(`append: ${(err as Error).message}`);
            }
          }
        }),
      );
      const appends = latenciesMs.length;
      const p50 = percentile(latenciesMs, 50);
      const p99 = percentile(latenciesMs, 99);

      await Promise.all(streams.map((stream) => stream.checker.settled()));
      // Catch every watcher up to each head, then check the cursors.
      const heads = await reconcileEveryCursor(admin, targets);
      const cursors = (await admin.watch.listWatches({ pageSize: 1000 })).cursors;
      assert.equal(cursors.length, watchers.length * targets.length);
      for (const c of cursors) {
        assert.equal(c.materialVersion, heads.get(c.target!.key), "no material event lost");
        assert.equal(c.ackedVersion, c.materialVersion);
        assert.equal(c.notifiedVersion, c.materialVersion);
      }
      for (const stream of streams) stream.call.cancel();
      await Promise.all(streams.map((s) => s.reading));
      await Promise.all(streams.map((stream) => stream.checker.settled()));
      const noticesReceived = streams.reduce((sum, stream) => sum + stream.checker.received, 0);
      t.diagnostic(
        `${appends} appends in ${(runMs / 1000).toFixed(0)} s (${((appends / runMs) * 1000).toFixed(0)}/s) by 50 clients; append latency p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms; ${noticesReceived} notices received and acked by 20 subscribers`,
      );
      assert.deepEqual(errors, []);
      assert.deepEqual(streams.flatMap((stream) => stream.checker.violations), []);
      assert.ok(noticesReceived > 0);
    } finally {
      admin.close();
      for (const client of [...appenders, ...subscribers]) client.close();
      server.child.kill("SIGTERM");
      await server.exited;
      dir.remove();
    }
  });
});
