/**
 * Consumer groups (SPEC §6.1, issue 41), on each backend (one server; two replicas: test/postgres/
 * consumer-group-replicas.test.ts): within a group each pending notice is held by one
 * member at a time; max_in_flight bounds what a member holds; an ack ends a claim and frees its slot;
 * ReleaseNotices and a member's end hand a notice on at once with its delivery_count one higher; a group
 * name is per namespace; only the connection that holds a claim may give it back; bad input is INVALID_ARGUMENT naming the field. Negative checks ("B gets
 * nothing") wait a bounded 300 ms: what a member would get comes within milliseconds.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import type { StaleNotice } from "../../gen/sessionstate/v1/watch_pb.js";
import { assertStatus, connect, goal, NoticeReader, startTestServer, status, until, type Clients, type TestServer } from "../support/helpers.js";
import { SessionStateClient } from "../../clients/typescript/src/index.js";
import { runCli } from "../support/process-helpers.js";
import { onBackend, skipBackend } from "../support/backend.js";

const W = "agent:main:main";
const target = (i: number): string => `agent:main:subagent:t${i}`;

/** A member of `group` serving W. */
function member(clients: Clients, group: string, maxInFlight = 0): NoticeReader {
  return new NoticeReader(clients, clients.watch.subscribeStaleNotices({ watcherSessionKeys: [W], consumerGroup: group, maxInFlight }, { timeoutMs: 60_000 }));
}

/** The notices a reader gets before it is quiet for `quietMs`. */
async function drain(reader: NoticeReader, quietMs = 300): Promise<StaleNotice[]> {
  const notices: StaleNotice[] = [];
  for (;;) {
    const item = await reader.next(quietMs).catch(() => undefined);
    if (item === undefined) return notices;
    if (item.message.case === "notice") notices.push(item.message.value);
  }
}

describe(onBackend("consumer groups"), { skip: skipBackend }, () => {
  let t: TestServer;
  const readers: NoticeReader[] = [];
  const open = (reader: NoticeReader): NoticeReader => (readers.push(reader), reader);

  beforeEach(async () => {
    t = await startTestServer();
    for (let i = 1; i <= 5; i++) {
      await t.watch.watch({ watcherSessionKey: W, target: { key: target(i) } });
      await t.signalLog.append(goal(target(i)));
    }
  });
  afterEach(async () => {
    for (const reader of readers.splice(0)) reader.call.cancel();
    await t.dispose();
  });

  test("each pending notice goes to one member; max_in_flight bounds each; synced comes when a member holds all it may", async () => {
    const a = open(member(t, "gw", 2));
    const first = await a.untilSynced();
    assert.equal(first.notices.length, 2);
    assert.deepEqual(first.notices.map((n) => n.deliveryCount), [1, 1]);
    assert.ok(first.notices.every((n) => n.claimId !== ""));
    const b = open(member(t, "gw", 2));
    const second = await b.untilSynced();
    assert.equal(second.notices.length, 2);
    const c = open(member(t, "gw", 2));
    const third = await c.untilSynced();
    assert.equal(third.notices.length, 1);
    const keys = [...first.notices, ...second.notices, ...third.notices].map((n) => n.target!.key).sort();
    assert.deepEqual(keys, [1, 2, 3, 4, 5].map(target), "all five, each once");
    assert.deepEqual(await drain(a), [], "nothing twice");
    // A plain subscription beside the group gets every notice, as before.
    const plain = open(new NoticeReader(t, t.watch.subscribeStaleNotices({ watcherSessionKeys: [W] }, { timeoutMs: 60_000 })));
    assert.equal((await plain.untilSynced()).notices.length, 5);
  });

  test("an ack ends the claim and frees the slot: the member takes the next notice at once", async () => {
    const a = open(member(t, "gw", 2));
    const held = (await a.untilSynced()).notices;
    const b = open(member(t, "gw", 3));
    assert.equal((await b.untilSynced()).notices.length, 3);
    await t.signalLog.append(goal(target(6)));
    await t.watch.watch({ watcherSessionKey: W, target: { key: target(6) } });
    await t.signalLog.append(goal(target(6)));
    assert.deepEqual(await drain(a), [], "a is full, and b too: the new notice waits");
    assert.deepEqual(await drain(b), []);
    await t.watch.ackNotices({ acks: [{ watcherSessionKey: W, target: held[0]!.target!, notifiedVersion: held[0]!.notifiedVersion }] });
    const next = await a.nextNotice();
    assert.equal(next.target?.key, target(6));
    assert.equal(next.deliveryCount, 1);
    const listed = await t.watch.listWatches({ watcherSessionKey: W, target: { key: target(6) } });
    assert.match(listed.cursors[0]!.claimedBy, /^gw \S+$/);
  });

  test("a released notice goes to another member at once with delivery_count 2; the releaser does not get it back", async () => {
    const a = open(member(t, "gw", 5));
    const held = (await a.untilSynced()).notices;
    assert.equal(held.length, 5);
    const b = open(member(t, "gw", 5));
    assert.deepEqual((await b.untilSynced()).notices, []);
    const released = await t.watch.releaseNotices({ claimIds: [held[2]!.claimId, held[2]!.claimId, "no-such-claim"] });
    assert.deepEqual(released.released, [true, false, false], "released once; a second time and an unknown id: false");
    const handed = await b.nextNotice();
    assert.deepEqual([handed.target?.key, handed.deliveryCount, handed.text], [held[2]!.target?.key, 2, held[2]!.text]);
    assert.notEqual(handed.claimId, held[2]!.claimId);
    assert.deepEqual(await drain(a), [], "the releaser does not get it back");
    // An acknowledged notice's claim is not held any more.
    await t.watch.ackNotices({ acks: [{ watcherSessionKey: W, target: handed.target!, notifiedVersion: handed.notifiedVersion }] });
    await drain(b, 100);
    assert.deepEqual((await t.watch.releaseNotices({ claimIds: [handed.claimId] })).released, [false]);
  });

  test("a claim is given back only over the connection that holds it: another member's claim id answers false", async () => {
    const a = open(member(t, "gw", 5));
    const held = (await a.untilSynced()).notices;
    const other = connect(t.server.address, { ownConnection: true });
    try {
      const b = open(member(other, "gw", 5));
      assert.deepEqual((await b.untilSynced()).notices, []);
      assert.deepEqual((await other.watch.releaseNotices({ claimIds: [held[0]!.claimId] })).released, [false]);
      assert.deepEqual(await drain(b), [], "still a's");
      assert.deepEqual((await t.watch.releaseNotices({ claimIds: [held[0]!.claimId] })).released, [true]);
      assert.equal((await b.nextNotice()).target?.key, held[0]!.target?.key);
    } finally {
      other.close();
    }
  });

  test("a member that never reads its stream holds no more than its max_in_flight; the others get the rest", async () => {
    const idle = t.watch.subscribeStaleNotices({ watcherSessionKeys: [W], consumerGroup: "gw", maxInFlight: 2 }, { timeoutMs: 60_000 });
    // It takes its first message and reads nothing more until the end of the test.
    let readOn!: () => void;
    const stuck = new Promise<void>((resolve) => (readOn = resolve));
    const idleDone = (async () => {
      try {
        for await (const _ of idle) await stuck;
      } catch {
        // cancelled at the end
      }
    })();
    try {
      const held = async (): Promise<number> => (await t.watch.listWatches({ watcherSessionKey: W })).cursors.filter((c) => c.claimedBy !== "").length;
      await until(async () => (await held()) === 2, "the member that does not read holds two");
      const b = open(member(t, "gw", 10));
      assert.equal((await b.untilSynced()).notices.length, 3, "the other three");
      assert.equal(await held(), 5);
    } finally {
      (idle as unknown as { cancel(): void }).cancel();
      readOn();
      await idleDone;
    }
  });

  test("a member whose stream ends hands every claim on at once, each delivery_count one higher", async () => {
    const a = open(member(t, "gw", 3));
    const held = (await a.untilSynced()).notices;
    const b = open(member(t, "gw", 10));
    assert.equal((await b.untilSynced()).notices.length, 2);
    a.call.cancel();
    const handed = [await b.nextNotice(), await b.nextNotice(), await b.nextNotice()];
    assert.deepEqual(handed.map((n) => n.target!.key).sort(), held.map((n) => n.target!.key).sort());
    assert.deepEqual(handed.map((n) => n.deliveryCount), [2, 2, 2]);
  });

  test("a group name in two namespaces is two groups", async () => {
    const teamB = connect(t.server.address, { namespace: "team-b" });
    try {
      await teamB.watch.watch({ watcherSessionKey: W, target: { key: target(1) } });
      await teamB.signalLog.append(goal(target(1)));
      const a = open(member(t, "gw", 10));
      const b = open(member(teamB, "gw", 10));
      assert.equal((await a.untilSynced()).notices.length, 5);
      assert.deepEqual((await b.untilSynced()).notices.map((n) => n.target?.key), [target(1)]);
    } finally {
      teamB.close();
    }
  });

  test("the TypeScript client: two processes in one group get each notice once between them; release() hands one on", async () => {
    const gateways = [new SessionStateClient({ address: t.server.address }), new SessionStateClient({ address: t.server.address })];
    const stop = new AbortController();
    const got: StaleNotice[][] = [[], []];
    const synced = gateways.map(
      (client, i) =>
        new Promise<void>((resolve) => {
          void (async () => {
            for await (const notice of client.subscribe({ watchers: [W], group: "gateway", maxInFlight: 3, signal: stop.signal, onSynced: () => resolve() })) got[i]!.push(notice);
          })();
        }),
    );
    try {
      await Promise.all(synced);
      await until(() => got[0]!.length + got[1]!.length === 5, "five notices between the two");
      const keys = [...got[0]!, ...got[1]!].map((n) => n.target!.key).sort();
      assert.deepEqual(keys, [1, 2, 3, 4, 5].map(target));
      const [holder, other] = got[0]!.length === 3 ? [0, 1] : [1, 0];
      assert.equal(got[other]!.length, 2);
      const given = got[holder]![0]!;
      assert.deepEqual(await gateways[holder]!.release([given]), [true]);
      await until(() => got[other]!.length === 3, "the released notice reaches the other process");
      assert.deepEqual([got[other]![2]!.target?.key, got[other]![2]!.deliveryCount], [given.target?.key, 2]);
    } finally {
      stop.abort();
      for (const client of gateways) client.close();
    }
  });

  test("sessionstate watches and pending say which member holds a notice", async () => {
    const a = open(member(t, "gw", 1));
    const [held] = (await a.untilSynced()).notices;
    const watches = await runCli(["watches", "--watcher", W, "--server", t.server.address]);
    assert.equal(watches.code, 0, watches.stderr);
    const row = watches.stdout.split("\n").find((line) => line.includes(held!.target!.key))!;
    assert.match(row, / {2}yes, held by gw 127\.0\.0\.1:\d+ +explicit +/);
    assert.equal(watches.stdout.split("\n").filter((line) => line.includes("held by")).length, 1, "the others wait, held by none");
    const pending = await runCli(["pending", "--watcher", W, "--target", held!.target!.key, "--server", t.server.address]);
    assert.match(pending.stdout, /\n {2}held by gw 127\.0\.0\.1:\d+\n$/);
  });

  test("bad groups and bounds are INVALID_ARGUMENT naming the field", async () => {
    for (const [request, field] of [
      [{ consumerGroup: "has space" }, "consumer_group"],
      [{ consumerGroup: "x".repeat(129) }, "consumer_group"],
      [{ consumerGroup: "gw", maxInFlight: 1001 }, "max_in_flight"],
      [{ consumerGroup: "gw", maxInFlight: -1 }, "max_in_flight"],
      [{ maxInFlight: 4 }, "max_in_flight"],
    ] as const) {
      const reader = new NoticeReader(t, t.watch.subscribeStaleNotices({ watcherSessionKeys: [W], ...request }, { timeoutMs: 10_000 }));
      assert.equal(await reader.endStatus(), status.INVALID_ARGUMENT, JSON.stringify(request));
      assert.match(reader.failure?.details ?? "", new RegExp(`^${field}: `));
    }
    await assertStatus(t.watch.releaseNotices({ claimIds: [""] }), status.INVALID_ARGUMENT, "claim_ids[0]: ");
    await assertStatus(t.watch.releaseNotices({ claimIds: Array.from({ length: 1001 }, (_, i) => `c${i}`) }), status.INVALID_ARGUMENT, "claim_ids: at most 1000");
  });
});
