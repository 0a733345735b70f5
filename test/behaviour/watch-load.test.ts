import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { connect, human, NoticeStreamChecker, reconcileEveryCursor, startTestServer } from "../support/helpers.js";

/** Polls `condition` every few milliseconds until it holds; fails after `timeoutMs`. */
async function eventually(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting until ${what}`);
    await sleep(10);
  }
}

describe("Watch under load", () => {
  test("1,000 streams opened and cancelled leave no stream open on the server", async () => {
    const t = await startTestServer();
    try {
      for (let batch = 0; batch < 10; batch++) {
        const calls = Array.from({ length: 100 }, (_, i) =>
          t.watch.subscribeStaleNotices({ watcherSessionKeys: [`agent:main:w${batch * 100 + i}`] }, { timeoutMs: 60_000 }),
        );
        // Each stream's first message is the synced marker.
        await Promise.all(calls.map(async (call) => (await call[Symbol.asyncIterator]().next()).value));
        assert.equal(t.server.openStreams(), 100);
        for (const call of calls) call.cancel();
        await eventually(() => t.server.openStreams() === 0, 10_000, "every cancelled stream is released");
      }
    } finally {
      await t.dispose();
    }
  });

  test("20 appenders, 50 targets, 10 acking watchers: never two notices outstanding per pair, and nothing lost", async () => {
    const t = await startTestServer();
    const watchers = Array.from({ length: 10 }, (_, i) => `agent:main:w${i}`);
    const targets = Array.from({ length: 50 }, (_, i) => `agent:main:subagent:t${i}`);
    const appenders = Array.from({ length: 20 }, () => connect(t.server.address));
    try {
      for (const watcher of watchers) {
        for (const target of targets) await t.watch.watch({ watcherSessionKey: watcher, target: { key: target } });
      }
      const streams = watchers.map((watcher) => {
        const call = t.watch.subscribeStaleNotices({ watcherSessionKeys: [watcher] }, { timeoutMs: 120_000 });
        const checker = new NoticeStreamChecker((notice) =>
          t.watch.ackNotices({
            acks: [{ watcherSessionKey: notice.watcherSessionKey, target: notice.target, notifiedVersion: notice.notifiedVersion }],
          }),
        );
        const reading = (async () => {
          try {
            for await (const item of call) if (item.message.case === "notice") checker.onNotice(item.message.value);
          } catch (err) {
            if ((err as { code?: number }).code !== 1) throw err; // 1 = CANCELLED, from our own cancel()
          }
        })();
        return { call, reading, checker, watcher };
      });

      let seed = 7;
      const pick = (): string => {
        seed = (seed * 48271) % 2147483647;
        return targets[seed % targets.length]!;
      };
      await Promise.all(
        appenders.map(async (client) => {
          for (let i = 0; i < 50; i++) await client.signalLog.append(human(pick()));
        }),
      );

      await Promise.all(streams.map((stream) => stream.checker.settled()));
      // Final reconciliation: every watcher catches up to each target's head.
      const heads = await reconcileEveryCursor(t, targets);
      const cursors = (await t.watch.listWatches({ pageSize: 1000 })).cursors;
      assert.equal(cursors.length, watchers.length * targets.length);
      for (const cursor of cursors) {
        const head = heads.get(cursor.target!.key)!;
        assert.equal(cursor.materialVersion, head, `${cursor.watcherSessionKey} lost a material event of ${cursor.target?.key}`);
        assert.equal(cursor.ackedVersion, cursor.materialVersion);
        assert.equal(cursor.notifiedVersion, cursor.materialVersion);
      }
      for (const stream of streams) stream.call.cancel();
      await Promise.all(streams.map((s) => s.reading));
      await Promise.all(streams.map((stream) => stream.checker.settled()));
      assert.deepEqual(streams.flatMap((stream) => stream.checker.violations), []);
      for (const stream of streams) assert.ok(stream.checker.received > 0, `${stream.watcher} received notices`);
    } finally {
      for (const client of appenders) client.close();
      await t.dispose();
    }
  });
});
