import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { ActorType, EventKind, RunOutcome } from "../../gen/sessionstate/v1/types_pb.js";
import type { StaleNotice } from "../../gen/sessionstate/v1/watch_pb.js";
import {
  assertStatus,
  dayMs,
  goal,
  human,
  startTestServer,
  status,
  subscribe,
  type AppendInit,
  type TestServer,
} from "../support/helpers.js";

const W = "agent:main:main";
const P = "agent:main:subagent:parent";
const C = "agent:main:subagent:child";

const spawn = (parent: string): AppendInit => ({
  session: { key: C },
  kind: EventKind.CHILD_SPAWNED,
  actorType: ActorType.AGENT,
  actorId: parent,
  summary: "child spawned",
  notifySessionKeys: [parent],
});

const text = (target: string, since: bigint | number) =>
  `Session "${target}" changed (other actor). Reconcile before acting: session_status sessionKey "${target}" changesSince ${since}.`;

function marks(cursor: { ackedVersion: bigint; notifiedVersion: bigint; materialVersion: bigint } | undefined) {
  assert.ok(cursor, "expected a cursor");
  return [cursor.ackedVersion, cursor.notifiedVersion, cursor.materialVersion];
}

describe("Watch: cursors and stale notices", () => {
  let t: TestServer;
  beforeEach(async () => {
    t = await startTestServer();
  });
  afterEach(async () => {
    await t.dispose();
  });

  const cursorOf = async (watcher: string, target: string, agentId = "") => {
    const res = await t.watch.listWatches({ watcherSessionKey: watcher, target: { key: target, agentId } });
    return res.cursors[0];
  };
  const seq = async (request: AppendInit) => (await t.signalLog.append(request)).event!.sequence;

  test("child_spawned naming the parent seeds its cursor at the spawn, with no notice", async () => {
    const stream = subscribe(t, [W]);
    assert.deepEqual(await stream.untilSynced(), { notices: [], pendingDelivered: 0 });
    await t.signalLog.append(goal(C)); // history before the spawn never notifies
    const seed = await seq(spawn(W));
    assert.deepEqual(marks(await cursorOf(W, C)), [seed, seed, seed]);
    assert.deepEqual(await stream.noticesBeforeBarrier(), []);
    stream.call.cancel();
  });

  test("three human messages after the seed give exactly one notice; N stays frozen", async () => {
    const seed = await seq(spawn(W));
    const stream = subscribe(t, [W]);
    await stream.untilSynced();
    const f = await seq(human(C));
    await seq(human(C));
    const tt = await seq(human(C));
    const notices = await stream.noticesBeforeBarrier();
    assert.equal(notices.length, 1);
    const notice = notices[0]!;
    assert.equal(notice.watcherSessionKey, W);
    assert.deepEqual([notice.target?.key, notice.target?.agentId], [C, "main"]);
    assert.equal(notice.changesSince, seed);
    assert.equal(notice.notifiedVersion, f);
    assert.equal(notice.text, text(C, seed));
    assert.equal(notice.wake, true);
    assert.equal(notice.contextKey, `session-state:${Buffer.from(C).toString("hex")}`);
    assert.deepEqual(marks(await cursorOf(W, C)), [seed, f, tt]);
    stream.call.cancel();
  });

  test("an ack reopens exactly one notice for events after it opened", async () => {
    const seed = await seq(spawn(W));
    const stream = subscribe(t, [W]);
    await stream.untilSynced();
    const f = await seq(human(C));
    const i = await seq(human(C));
    assert.deepEqual((await stream.noticesBeforeBarrier()).map((n) => n.notifiedVersion), [f]);
    const ack = await t.watch.ackNotices({ acks: [{ watcherSessionKey: W, target: { key: C }, notifiedVersion: f }] });
    assert.equal(ack.results.length, 1);
    assert.equal(ack.results[0]?.acknowledged, true);
    assert.equal(ack.results[0]?.reopened, true);
    assert.deepEqual(marks(ack.results[0]?.cursor), [f, i, i]);
    const reopened = await stream.noticesBeforeBarrier();
    assert.equal(reopened.length, 1);
    assert.equal(reopened[0]?.changesSince, f);
    assert.equal(reopened[0]?.notifiedVersion, i);
    assert.equal(reopened[0]?.text, text(C, f));
    assert.ok(seed < f);
    // Every cursor the API returns carries its pending notice's text, byte for byte as delivered.
    assert.equal(ack.results[0]?.cursor?.pendingNoticeText, reopened[0]?.text);
    assert.equal((await cursorOf(W, C))?.pendingNoticeText, text(C, f));
    await t.watch.ackNotices({ acks: [{ watcherSessionKey: W, target: { key: C }, notifiedVersion: i }] });
    assert.equal((await cursorOf(W, C))?.pendingNoticeText, "", "none once acknowledged");
    stream.call.cancel();
  });

  test("an ack with reconciled_through at the head closes everything with no new notice", async () => {
    await seq(spawn(W));
    const stream = subscribe(t, [W]);
    await stream.untilSynced();
    const f = await seq(human(C));
    const i = await seq(human(C));
    await stream.noticesBeforeBarrier();
    const ack = await t.watch.ackNotices({
      acks: [{ watcherSessionKey: W, target: { key: C }, notifiedVersion: f, reconciledThrough: i }],
    });
    assert.deepEqual([ack.results[0]?.acknowledged, ack.results[0]?.reopened], [true, false]);
    assert.deepEqual(marks(ack.results[0]?.cursor), [i, i, i]);
    assert.deepEqual(await stream.noticesBeforeBarrier(), []);
    stream.call.cancel();
  });

  test("twenty rapid human messages give one notice until it is acked", async () => {
    await seq(spawn(W));
    const stream = subscribe(t, [W]);
    await stream.untilSynced();
    const sequences = await Promise.all(Array.from({ length: 20 }, () => seq(human(C))));
    const notices = await stream.noticesBeforeBarrier();
    assert.equal(notices.length, 1);
    const first = notices[0]!;
    assert.equal(first.notifiedVersion, sequences.reduce((a, b) => (a < b ? a : b)));
    const head = sequences.reduce((a, b) => (a > b ? a : b));
    const ack = await t.watch.ackNotices({
      acks: [{ watcherSessionKey: W, target: { key: C }, notifiedVersion: first.notifiedVersion }],
    });
    assert.equal(ack.results[0]?.reopened, true);
    const after = await stream.noticesBeforeBarrier();
    assert.deepEqual(after.map((n) => [n.changesSince, n.notifiedVersion]), [[first.notifiedVersion, head]]);
    stream.call.cancel();
  });

  test("ledger-only kinds never open or reopen a notice; goal_changed and upstream_missing do", async () => {
    const seed = await seq(spawn(W));
    const stream = subscribe(t, [W]);
    await stream.untilSynced();
    const ledger: AppendInit[] = [
      goal(C, { kind: EventKind.RUN_COMPLETED }),
      goal(C, { kind: EventKind.RUN_FAILED, payload: { outcome: RunOutcome.CANCELLED } }),
      goal(C, { kind: EventKind.COMPACTED }),
      goal(C, { kind: EventKind.ADOPTED, actorType: ActorType.HUMAN }),
    ];
    for (const request of ledger) await seq(request);
    assert.deepEqual(await stream.noticesBeforeBarrier(), []);
    assert.deepEqual(marks(await cursorOf(W, C)), [seed, seed, seed]);
    const g = await seq(goal(C));
    assert.deepEqual((await stream.noticesBeforeBarrier()).map((n) => n.notifiedVersion), [g]);
    // While pending, ledger events do not move M; after the ack nothing reopens.
    for (const request of ledger) await seq(request);
    const ack = await t.watch.ackNotices({ acks: [{ watcherSessionKey: W, target: { key: C }, notifiedVersion: g }] });
    assert.deepEqual([ack.results[0]?.acknowledged, ack.results[0]?.reopened], [true, false]);
    const u = await seq(goal(C, { kind: EventKind.UPSTREAM_MISSING, actorType: ActorType.SYSTEM }));
    assert.deepEqual((await stream.noticesBeforeBarrier()).map((n) => [n.changesSince, n.notifiedVersion]), [[g, u]]);
    stream.call.cancel();
  });

  test("a watcher is never told about what it did itself", async () => {
    const seed = await seq(spawn(W));
    const stream = subscribe(t, [W]);
    await stream.untilSynced();
    await seq(goal(C, { actorId: W }));
    assert.deepEqual(await stream.noticesBeforeBarrier(), []);
    assert.deepEqual(marks(await cursorOf(W, C)), [seed, seed, seed]);
    const other = await seq(goal(C, { actorId: P }));
    assert.deepEqual((await stream.noticesBeforeBarrier()).map((n) => n.notifiedVersion), [other]);
    stream.call.cancel();
  });

  test("main watchers are woken; nested subagent watchers are not", async () => {
    await seq(spawn(W));
    await seq(spawn(P));
    const stream = subscribe(t, [W, P]);
    await stream.untilSynced();
    await seq(human(C));
    const notices = await stream.noticesBeforeBarrier();
    const wake = Object.fromEntries(notices.map((n) => [n.watcherSessionKey, n.wake]));
    assert.deepEqual(wake, { [W]: true, [P]: false });
    stream.call.cancel();
  });

  test("an explicit watch starts at the current version and keeps pending state when repeated", async () => {
    const p0 = await seq(goal(C));
    const self = await t.watch.watch({ watcherSessionKey: C, target: { key: C } });
    assert.equal(self.watched, false);
    assert.match(self.reason, /cannot watch itself/);
    const bare = await t.watch.watch({ watcherSessionKey: "global", target: { key: C } });
    assert.equal(bare.watched, false);
    assert.match(bare.reason, /not an agent-qualified/);
    const watched = await t.watch.watch({ watcherSessionKey: W, target: { key: C } });
    assert.equal(watched.watched, true);
    assert.equal(watched.reason, "");
    assert.deepEqual(marks(watched.cursor), [p0, p0, p0]);
    const stream = subscribe(t, [W]);
    assert.deepEqual((await stream.untilSynced()).notices, []);
    const a = await seq(goal(C));
    const notices = await stream.noticesBeforeBarrier();
    assert.deepEqual(notices.map((n) => [n.changesSince, n.notifiedVersion]), [[p0, a]]);
    const again = await t.watch.watch({ watcherSessionKey: W, target: { key: C } });
    assert.equal(again.watched, true);
    assert.deepEqual(marks(again.cursor), [p0, a, a]);
    assert.deepEqual(await stream.noticesBeforeBarrier(), []);
    stream.call.cancel();
  });

  test("a bare key is never watched: Watch says why, and spawns, notifying events and the gate move no cursor", async () => {
    const refused = await t.watch.watch({ watcherSessionKey: W, target: { key: "global", agentId: "ops" } });
    assert.equal(refused.watched, false);
    assert.equal(refused.reason, "target is a bare key: only agent-qualified sessions (agent:<agentId>:<rest>) are watched");
    assert.equal(refused.cursor, undefined);
    const stream = subscribe(t, [W, P]);
    await stream.untilSynced();
    // Logged and versioned as usual, but no cursor is created, seeded or moved and no notice opens.
    const spawned = await t.signalLog.append({
      session: { key: "global", agentId: "ops" },
      kind: EventKind.CHILD_SPAWNED,
      actorType: ActorType.AGENT,
      actorId: P,
      summary: "child spawned",
      notifySessionKeys: [P],
    });
    assert.equal(spawned.recorded, true);
    const named = await t.signalLog.append(human("global", { session: { key: "global", agentId: "ops" }, notifySessionKeys: [W] }));
    assert.equal(named.recorded, true);
    assert.equal(named.stateVersion, named.event?.sequence);
    assert.deepEqual(await stream.noticesBeforeBarrier(), []);
    assert.deepEqual((await t.watch.listWatches({ target: { key: "global", agentId: "ops" } })).cursors, []);
    // No one can listen to a bare-key session: the only_if_watched gate always holds there.
    const gated = await t.signalLog.append(human("global", { session: { key: "global", agentId: "ops" }, notifySessionKeys: [W], onlyIfWatched: true }));
    assert.deepEqual([gated.recorded, gated.stateVersion], [false, named.stateVersion]);
    stream.call.cancel();
  });

  test("only_if_watched writes nothing when no one listens, and records once someone does", async () => {
    const gated = human(C, { onlyIfWatched: true });
    const before = await t.signalLog.append(gated);
    assert.equal(before.recorded, false);
    assert.equal(before.event, undefined);
    assert.equal(before.stateVersion, 0n);
    assert.equal((await t.reconcile.sessionStatus({ session: { key: C } })).stateVersion, 0n);
    await t.watch.watch({ watcherSessionKey: W, target: { key: C } });
    const stream = subscribe(t, [W]);
    await stream.untilSynced();
    const after = await t.signalLog.append(gated);
    assert.equal(after.recorded, true);
    assert.deepEqual((await stream.noticesBeforeBarrier()).map((n) => n.notifiedVersion), [after.event!.sequence]);
    // Naming a watcher also counts as listening, and creates its cursor at L = 0.
    const named = await t.signalLog.append(human("agent:main:other", { onlyIfWatched: true, notifySessionKeys: [W] }));
    assert.equal(named.recorded, true);
    assert.deepEqual(marks(await cursorOf(W, "agent:main:other")), [0n, named.event!.sequence, named.event!.sequence]);
    const [fresh] = await stream.noticesBeforeBarrier();
    assert.equal(fresh?.changesSince, 0n);
    stream.call.cancel();
  });

  test("a stale or repeated ack changes nothing and says so", async () => {
    await seq(spawn(W));
    const f = await seq(human(C));
    const x = await seq(human(C));
    const stale = await t.watch.ackNotices({ acks: [{ watcherSessionKey: W, target: { key: C }, notifiedVersion: x }] });
    assert.equal(stale.results[0]?.acknowledged, false);
    assert.equal(stale.results[0]?.reopened, false);
    const before = await cursorOf(W, C);
    const ok = await t.watch.ackNotices({
      acks: [
        { watcherSessionKey: W, target: { key: C }, notifiedVersion: f, reconciledThrough: x },
        { watcherSessionKey: W, target: { key: C }, notifiedVersion: f, reconciledThrough: x },
        { watcherSessionKey: P, target: { key: C }, notifiedVersion: f },
      ],
    });
    assert.deepEqual(
      ok.results.map((r) => [r.acknowledged, r.reopened, r.cursor === undefined]),
      [
        [true, false, false],
        [false, false, false],
        [false, false, true],
      ],
    );
    assert.deepEqual(marks(before), [before!.ackedVersion, f, x]);
    assert.deepEqual(marks(await cursorOf(W, C)), [x, x, x]);
    await assertStatus(
      t.watch.ackNotices({ acks: [{ watcherSessionKey: W, target: { key: C }, notifiedVersion: -1n }] }),
      status.INVALID_ARGUMENT,
      "acks[0].notified_version:",
    );
    await assertStatus(
      t.watch.ackNotices({ acks: [{ watcherSessionKey: "global", target: { key: C }, notifiedVersion: 1n }] }),
      status.INVALID_ARGUMENT,
      "acks[0].watcher_session_key:",
    );
  });

  test("a new stream gets the unacked notice again, byte-identical, also after a restart", async () => {
    await seq(spawn(W));
    const first = subscribe(t, [W]);
    await first.untilSynced();
    await seq(human(C));
    const [original] = await first.noticesBeforeBarrier();
    first.call.cancel();
    const second = subscribe(t, [W]);
    const resent = await second.untilSynced();
    assert.equal(resent.pendingDelivered, 1);
    assert.deepEqual(resent.notices, [original]);
    second.call.cancel();
    // Several streams for one watcher each get it.
    const [a, b] = [subscribe(t, [W]), subscribe(t, [], ["agent:main:"])];
    assert.deepEqual((await a.untilSynced()).notices, [original]);
    assert.deepEqual((await b.untilSynced()).notices, [original]);
    a.call.cancel();
    b.call.cancel();
    t = await t.restart();
    const afterRestart = subscribe(t, [W]);
    const again = await afterRestart.untilSynced();
    assert.deepEqual(again.notices, [original]);
    assert.equal(again.notices[0]?.text, original!.text);
    afterRestart.call.cancel();
  });

  test("a prefix subscription gets every watcher of one agent and none of another", async () => {
    const ops = "agent:ops:main";
    for (const watcher of [W, P, ops]) await t.watch.watch({ watcherSessionKey: watcher, target: { key: C } });
    const stream = subscribe(t, [], ["Agent:Main:"]);
    await stream.untilSynced();
    await seq(human(C));
    const notices = await stream.noticesBeforeBarrier();
    assert.deepEqual(notices.map((n: StaleNotice) => n.watcherSessionKey).sort(), [W, P].sort());
    stream.call.cancel();
    await assertStatus(
      (async () => {
        for await (const _ of t.watch.subscribeStaleNotices({})) assert.fail("no message expected");
      })(),
      status.INVALID_ARGUMENT,
      "watcher_session_keys:",
    );
    await assertStatus(
      (async () => {
        for await (const _ of t.watch.subscribeStaleNotices({ watcherSessionKeys: ["global"] })) assert.fail("no message expected");
      })(),
      status.INVALID_ARGUMENT,
      "watcher_session_keys[0]:",
    );
  });

  test("ResetSession drops the watcher's cursors; DeleteSession drops cursors both ways", async () => {
    await seq(spawn(W));
    await t.watch.watch({ watcherSessionKey: W, target: { key: "agent:main:other" } });
    await t.watch.watch({ watcherSessionKey: P, target: { key: C } });
    await t.watch.watch({ watcherSessionKey: C, target: { key: W } });
    const reset = await t.signalLog.resetSession({ watcherSessionKey: W });
    assert.equal(reset.cursorsRemoved, 2);
    assert.deepEqual((await t.watch.listWatches({ watcherSessionKey: W })).cursors, []);
    assert.equal((await t.reconcile.sessionStatus({ session: { key: C } })).stateVersion, 1n, "C's history stays");
    const removed = await t.signalLog.deleteSession({ session: { key: C } });
    assert.deepEqual([removed.eventsRemoved, removed.cursorsRemoved], [1, 2]);
    assert.deepEqual((await t.watch.listWatches({})).cursors, []);
  });

  test("Unwatch removes the cursor; ListWatches pages and filters", async () => {
    for (const watcher of [W, P, "agent:ops:x"]) {
      for (const target of ["agent:ops:t1", "agent:ops:t2"]) await t.watch.watch({ watcherSessionKey: watcher, target: { key: target } });
    }
    const seen: string[] = [];
    let pageToken = "";
    do {
      const page = await t.watch.listWatches({ pageSize: 4, pageToken });
      seen.push(...page.cursors.map((c) => `${c.watcherSessionKey}>${c.target?.key}`));
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
    assert.deepEqual(seen, [
      "agent:main:main>agent:ops:t1",
      "agent:main:main>agent:ops:t2",
      "agent:main:subagent:parent>agent:ops:t1",
      "agent:main:subagent:parent>agent:ops:t2",
      "agent:ops:x>agent:ops:t1",
      "agent:ops:x>agent:ops:t2",
    ]);
    const byTarget = await t.watch.listWatches({ target: { key: "agent:ops:t2" } });
    assert.equal(byTarget.cursors.length, 3);
    assert.equal((await t.watch.unwatch({ watcherSessionKey: W, target: { key: "agent:ops:t2" } })).removed, true);
    assert.equal((await t.watch.unwatch({ watcherSessionKey: W, target: { key: "agent:ops:t2" } })).removed, false);
    assert.equal((await t.watch.listWatches({ target: { key: "agent:ops:t2" } })).cursors.length, 2);
    await assertStatus(t.watch.listWatches({ pageToken: "bogus" }), status.INVALID_ARGUMENT, "page_token:");
  });

  test("cursors untouched for the retention period are pruned; re-watching refreshes them", async () => {
    await t.watch.watch({ watcherSessionKey: W, target: { key: "agent:ops:t1" } });
    await t.watch.watch({ watcherSessionKey: W, target: { key: "agent:ops:t2" } });
    t.clock.advance(20 * dayMs);
    await t.watch.watch({ watcherSessionKey: W, target: { key: "agent:ops:t2" } });
    t.clock.advance(11 * dayMs);
    const pruned = await t.signalLog.prune({});
    assert.equal(pruned.cursorsRemoved, 1);
    const left = await t.watch.listWatches({ watcherSessionKey: W });
    assert.deepEqual(left.cursors.map((c) => c.target?.key), ["agent:ops:t2"]);
  });

  test("shutdown ends open notice streams with UNAVAILABLE, saying the server is stopping", async () => {
    const stream = subscribe(t, [W]);
    await stream.untilSynced();
    assert.equal(t.server.openStreams(), 1);
    const closing = t.server.close();
    assert.equal(await stream.endStatus(), status.UNAVAILABLE);
    assert.equal(stream.failure?.details, "server is shutting down; retry later");
    await closing;
  });
});
