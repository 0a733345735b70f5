import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { assertStatus, connect, goal, human, metricValue, scrapeMetrics, startTestServer, status, subscribe } from "../support/helpers.js";

const W = "agent:main:main";
const C = "agent:main:subagent:child";

describe("limits", () => {
  test("a request over the size limit is RESOURCE_EXHAUSTED", async () => {
    const t = await startTestServer();
    try {
      await assertStatus(t.signalLog.append(goal(W, { runId: "x".repeat(2 * 1024 * 1024) })), status.RESOURCE_EXHAUSTED);
      assert.equal((await t.reconcile.sessionStatus({ session: { key: W } })).stateVersion, 0n);
    } finally {
      await t.dispose();
    }
  });

  test("stream caps per connection and in total are enforced and released on cancel", async () => {
    const t = await startTestServer({ maxStreamsPerConnection: 2, maxStreams: 3 });
    const second = connect(t.server.address, { ownConnection: true });
    const third = connect(t.server.address, { ownConnection: true });
    try {
      const a = subscribe(t, [W]);
      const b = subscribe(t, [W]);
      await a.untilSynced();
      await b.untilSynced();
      const refused = subscribe(t, [W]);
      await assert.rejects(refused.untilSynced(), (err: { code: number; details: string }) => {
        assert.equal(err.code, status.RESOURCE_EXHAUSTED);
        assert.equal(err.details, "too many open streams on this connection (limit 2)");
        return true;
      });
      const c = subscribe(second, [W]);
      await c.untilSynced();
      const overTotal = subscribe(third, [W]);
      await assert.rejects(overTotal.untilSynced(), (err: { code: number; details: string }) => {
        assert.equal(err.code, status.RESOURCE_EXHAUSTED);
        assert.equal(err.details, "too many open streams on this server (limit 3)");
        return true;
      });
      a.call.cancel();
      const deadline = Date.now() + 5000;
      while (t.server.openStreams() > 2 && Date.now() < deadline) await sleep(10);
      const again = subscribe(third, [W]);
      await again.untilSynced();
      assert.equal(t.server.openStreams(), 3);
      for (const reader of [b, c, again]) reader.call.cancel();
    } finally {
      second.close();
      third.close();
      await t.dispose();
    }
  });

  test("too many keys in a subscription, acks in a call or refs in GetStateVersions are INVALID_ARGUMENT", async () => {
    const t = await startTestServer();
    try {
      const keys = Array.from({ length: 101 }, (_, i) => `agent:main:w${i}`);
      await assertStatus(
        (async () => {
          for await (const _ of t.watch.subscribeStaleNotices({ watcherSessionKeys: keys })) assert.fail("no message expected");
        })(),
        status.INVALID_ARGUMENT,
        "at most 100 keys and prefixes",
      );
      const acks = Array.from({ length: 1001 }, () => ({ watcherSessionKey: W, target: { key: C }, notifiedVersion: 1n }));
      await assertStatus(t.watch.ackNotices({ acks }), status.INVALID_ARGUMENT, "acks: at most 1000");
    } finally {
      await t.dispose();
    }
  });
});

describe("metrics", () => {
  test("the endpoint serves the documented series, and they move when work is done", async () => {
    const t = await startTestServer({ metricsListen: { host: "127.0.0.1", port: 0 } });
    try {
      const port = t.server.metricsPort!;
      const before = await scrapeMetrics(port);
      for (const series of [
        "sessionstate_open_streams 0",
        "sessionstate_pending_notices 0",
        'sessionstate_database_bytes{file="db"}',
        "sessionstate_notices_opened_total 0",
        "sessionstate_notices_delivered_total 0",
        "sessionstate_notices_reopened_total 0",
        "sessionstate_prune_runs_total",
        "sessionstate_monitor_ticks_total 0",
        "sessionstate_process_resident_memory_bytes",
        "sessionstate_store_commit_seconds_count",
        "sessionstate_store_write_wait_seconds_count",
        'sessionstate_event_loop_delay_seconds{quantile="0.99"}',
        'sessionstate_event_loop_delay_seconds{quantile="1"}',
      ]) {
        assert.ok(before.includes(series), `missing ${series}`);
      }
      await t.watch.watch({ watcherSessionKey: W, target: { key: C } });
      const stream = subscribe(t, [W]);
      await stream.untilSynced();
      await t.signalLog.append(human(C));
      await t.signalLog.append(human(C));
      const [notice] = await stream.noticesBeforeBarrier();
      await t.watch.ackNotices({ acks: [{ watcherSessionKey: W, target: { key: C }, notifiedVersion: notice!.notifiedVersion }] });
      await t.watch.ackNotices({ acks: [{ watcherSessionKey: W, target: { key: C }, notifiedVersion: notice!.notifiedVersion }] });
      await t.upstream.scanNow({});
      await t.signalLog.prune({});
      const after = await scrapeMetrics(port);
      assert.equal(metricValue(after, 'sessionstate_appends_total{kind="human_direct_message",result="recorded"}'), 2);
      assert.equal(metricValue(after, 'sessionstate_acks_total{result="acknowledged"}'), 2, "the barrier's ack counts too");
      assert.equal(metricValue(after, 'sessionstate_acks_total{result="stale"}'), 1);
      assert.equal(metricValue(after, "sessionstate_notices_reopened_total"), 1);
      assert.equal(metricValue(after, "sessionstate_notices_opened_total"), 2, "one for W, one for the barrier watcher");
      assert.ok(metricValue(after, "sessionstate_notices_delivered_total") >= 2);
      assert.equal(metricValue(after, "sessionstate_open_streams"), 1);
      assert.equal(metricValue(after, "sessionstate_pending_notices"), 1);
      assert.equal(metricValue(after, "sessionstate_monitor_ticks_total"), 1);
      assert.ok(metricValue(after, "sessionstate_prune_runs_total") >= 2);
      assert.ok(metricValue(after, 'sessionstate_database_bytes{file="db"}') > 0);
      assert.ok(
        metricValue(after, 'sessionstate_rpc_duration_seconds_count{method="/sessionstate.v1.SignalLog/Append",code="OK",protocol="grpc"}') >= 2,
      );
      // Two appends and two acks, each awaited: four group commits at least, each timed with its wait.
      const commits = (text: string): number => metricValue(text, "sessionstate_store_commit_seconds_count");
      assert.ok(commits(after) - commits(before) >= 4, `${commits(after) - commits(before)} commits timed`);
      assert.equal(metricValue(after, "sessionstate_store_write_wait_seconds_count"), commits(after));
      // The live notice (and the barrier's) went through the hub after their changes were heard.
      assert.ok(metricValue(after, "sessionstate_notice_delivery_seconds_count") >= 1);
      // The delay is what a turn waited, the sampling interval taken off: never negative, and under a second here.
      const longest = metricValue(after, 'sessionstate_event_loop_delay_seconds{quantile="1"}');
      assert.ok(longest >= 0 && longest < 1, `event loop delay ${longest} s`);
      assert.equal((await fetch(`http://127.0.0.1:${port}/nope`)).status, 404);
      stream.call.cancel();
    } finally {
      await t.dispose();
    }
  });
});
