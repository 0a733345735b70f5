import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { hostname } from "node:os";
import { resolve } from "node:path";
import { redactPostgresUrl } from "../../src/store/postgres/postgres-url.js";
import { onBackend, openBehaviourStore, skipBackend, testBackend } from "../support/backend.js";
import { assertStatus, dayMs, goal, startTestServer, status, storeAppend, tempDir, type TestServer } from "../support/helpers.js";

const W = "agent:main:main";
const C = "agent:main:subagent:child";

describe("Reconcile", () => {
  let t: TestServer;
  beforeEach(async () => {
    t = await startTestServer();
  });
  afterEach(async () => {
    await t.dispose();
  });

  async function appendMany(key: string, n: number): Promise<bigint[]> {
    const sequences: bigint[] = [];
    for (let i = 0; i < n; i++) sequences.push((await t.signalLog.append(goal(key))).event!.sequence);
    return sequences;
  }

  test("changes_since returns later events ascending; limit 2 of 3 is truncated", async () => {
    const [s1, s2, s3] = await appendMany(W, 3);
    const page = await t.reconcile.sessionStatus({ session: { key: W }, changesSince: 0n, limit: 2 });
    assert.deepEqual(page.stateChanges?.events.map((e) => e.sequence), [s1, s2]);
    assert.equal(page.stateChanges?.truncated, true);
    assert.equal(page.stateChanges?.historyGap, false);
    assert.equal(page.stateChanges?.earliestAvailableSequence, s1);
    const rest = await t.reconcile.sessionStatus({ session: { key: W }, changesSince: s2!, limit: 2 });
    assert.deepEqual(rest.stateChanges?.events.map((e) => e.sequence), [s3]);
    assert.equal(rest.stateChanges?.truncated, false);
    const none = await t.reconcile.sessionStatus({ session: { key: W }, changesSince: s3! });
    assert.deepEqual(none.stateChanges?.events, []);
    assert.equal(none.stateChanges?.truncated, false);
  });

  test("250 events give 200 and truncated; a limit above 200 is clamped", async () => {
    await appendMany(W, 250);
    const page = await t.reconcile.sessionStatus({ session: { key: W }, changesSince: 0n });
    assert.equal(page.stateChanges?.events.length, 200);
    assert.equal(page.stateChanges?.events.at(-1)?.sequence, 200n);
    assert.equal(page.stateChanges?.truncated, true);
    const clamped = await t.reconcile.sessionStatus({ session: { key: W }, changesSince: 0n, limit: 1000 });
    assert.equal(clamped.stateChanges?.events.length, 200);
  });

  test("changes_since past the head is OUT_OF_RANGE; negative is INVALID_ARGUMENT", async () => {
    await appendMany(W, 2);
    await assertStatus(t.reconcile.sessionStatus({ session: { key: W }, changesSince: 3n }), status.OUT_OF_RANGE, "changes_since 3");
    await assertStatus(
      t.reconcile.sessionStatus({ session: { key: W }, changesSince: 2n ** 62n }),
      status.OUT_OF_RANGE,
    );
    const err = await assertStatus(t.reconcile.sessionStatus({ session: { key: W }, changesSince: -1n }), status.INVALID_ARGUMENT);
    assert.equal(err.details, "changes_since: must not be negative");
    await assertStatus(t.reconcile.sessionStatus({ session: { key: W }, limit: -1 }), status.INVALID_ARGUMENT, "limit: must not be negative (0 means 200; more than 200 is served as 200)");
    await assertStatus(t.reconcile.sessionStatus({}), status.INVALID_ARGUMENT, "session:");
  });

  test("an unknown session has version 0, and changes_since 0 returns nothing without a gap", async () => {
    const res = await t.reconcile.sessionStatus({ session: { key: "never-seen" }, changesSince: 0n });
    assert.equal(res.stateVersion, 0n);
    assert.deepEqual(res.stateChanges?.events, []);
    assert.equal(res.stateChanges?.historyGap, false);
    assert.equal(res.stateChanges?.earliestAvailableSequence, 0n);
    assert.deepEqual(res.session, { $typeName: "sessionstate.v1.SessionRef", key: "never-seen", agentId: "main" });
  });

  test("sparse sequences never make a gap", async () => {
    const w1 = (await t.signalLog.append(goal(W))).event!.sequence;
    await appendMany(C, 5);
    const w2 = (await t.signalLog.append(goal(W))).event!.sequence;
    const res = await t.reconcile.sessionStatus({ session: { key: W }, changesSince: w1 });
    assert.deepEqual(res.stateChanges?.events.map((e) => e.sequence), [w2]);
    assert.equal(res.stateChanges?.historyGap, false);
  });

  test("the head survives pruning, and history_gap is exact", async () => {
    const [, , last] = await appendMany(C, 3);
    await appendMany(W, 2);
    t.clock.advance(31 * dayMs);
    await t.signalLog.append(goal(W)); // W keeps a fresh event
    const pruned = await t.signalLog.prune({});
    assert.equal(pruned.eventsRemoved, 5);
    const status0 = await t.reconcile.sessionStatus({ session: { key: C }, changesSince: 0n });
    assert.equal(status0.stateVersion, last);
    assert.deepEqual(status0.stateChanges?.events, []);
    assert.equal(status0.stateChanges?.historyGap, true);
    assert.equal(status0.stateChanges?.earliestAvailableSequence, 0n);
    const atMark = await t.reconcile.sessionStatus({ session: { key: C }, changesSince: last! });
    assert.equal(atMark.stateChanges?.historyGap, false);
    const belowMark = await t.reconcile.sessionStatus({ session: { key: C }, changesSince: last! - 1n });
    assert.equal(belowMark.stateChanges?.historyGap, true);
    const w = await t.reconcile.sessionStatus({ session: { key: W }, changesSince: 4n });
    assert.deepEqual(w.stateChanges?.events.map((e) => e.sequence), [6n]);
    assert.equal(w.stateChanges?.historyGap, true, "4 < W's watermark 5");
    const w5 = await t.reconcile.sessionStatus({ session: { key: W }, changesSince: 5n });
    assert.equal(w5.stateChanges?.historyGap, false);
    assert.equal(w5.stateChanges?.earliestAvailableSequence, 6n);
  });

  test("ListSessions pages by agent and key, and filters by agent", async () => {
    for (const [key, agentId] of [
      ["global", "ops"],
      [W, ""],
      ["global", "main"],
      ["agent:ops:main", ""],
      [C, ""],
    ] as const) {
      await t.signalLog.append(goal(key, { session: { key, agentId } }));
    }
    const seen: string[] = [];
    let pageToken = "";
    let pages = 0;
    do {
      const page = await t.reconcile.listSessions({ pageSize: 2, pageToken });
      seen.push(...page.sessions.map((s) => `${s.session?.agentId}/${s.session?.key}`));
      pageToken = page.nextPageToken;
      pages++;
    } while (pageToken !== "");
    assert.equal(pages, 3);
    assert.deepEqual(seen, [
      "main/agent:main:main",
      "main/agent:main:subagent:child",
      "main/global",
      "ops/agent:ops:main",
      "ops/global",
    ]);
    const ops = await t.reconcile.listSessions({ agentId: "OPS" });
    assert.deepEqual(ops.sessions.map((s) => s.session?.key), ["agent:ops:main", "global"]);
    assert.equal(ops.nextPageToken, "");
    const first = ops.sessions[0]!;
    assert.equal(first.stateVersion, 4n);
    assert.equal(first.prunedThrough, 0n);
    assert.equal(first.hasUpstream, false);
    await assertStatus(t.reconcile.listSessions({ pageToken: "not-a-token" }), status.INVALID_ARGUMENT, "page_token:");
    await assertStatus(t.reconcile.listSessions({ pageSize: -1 }), status.INVALID_ARGUMENT, "page_size:");
  });

  test("ListSessions by key prefix pages by key then agent, and most recently changed first pages by time", async () => {
    // Five sessions, each changed a second after the one before; then the first changes again.
    const keys: Array<[string, string]> = [
      ["agent:ops:sub:a", ""],
      ["agent:main:sub:b", ""],
      ["agent:main:sub:a", ""],
      ["sub:bare", "ops"],
      ["agent:main:other", ""],
    ];
    for (const [key, agentId] of keys) {
      t.clock.advance(1000);
      await t.signalLog.append(goal(key, { session: { key, agentId } }));
    }
    t.clock.advance(1000);
    await t.signalLog.append(goal("agent:ops:sub:a"));
    const listAll = async (request: { keyPrefix?: string; recentFirst?: boolean; agentId?: string }): Promise<string[]> => {
      const seen: string[] = [];
      let pageToken = "";
      do {
        const page = await t.reconcile.listSessions({ ...request, pageSize: 2, pageToken });
        seen.push(...page.sessions.map((s) => `${s.session?.agentId}/${s.session?.key}`));
        pageToken = page.nextPageToken;
      } while (pageToken !== "");
      return seen;
    };
    assert.deepEqual(await listAll({ keyPrefix: "agent:main:sub:" }), ["main/agent:main:sub:a", "main/agent:main:sub:b"]);
    assert.deepEqual(await listAll({ keyPrefix: " AGENT:" }), [
      "main/agent:main:other",
      "main/agent:main:sub:a",
      "main/agent:main:sub:b",
      "ops/agent:ops:sub:a",
    ]);
    assert.deepEqual(await listAll({ keyPrefix: "sub:" }), ["ops/sub:bare"]);
    assert.deepEqual(await listAll({ keyPrefix: "agent:ops:", agentId: "main" }), []);
    assert.deepEqual(await listAll({ keyPrefix: "agent:main:s", agentId: "main" }), ["main/agent:main:sub:a", "main/agent:main:sub:b"]);
    assert.deepEqual(await listAll({ recentFirst: true }), [
      "ops/agent:ops:sub:a",
      "main/agent:main:other",
      "ops/sub:bare",
      "main/agent:main:sub:a",
      "main/agent:main:sub:b",
    ]);
    assert.deepEqual(await listAll({ recentFirst: true, agentId: "main" }), ["main/agent:main:other", "main/agent:main:sub:a", "main/agent:main:sub:b"]);
    const newest = (await t.reconcile.listSessions({ recentFirst: true, pageSize: 1 })).sessions[0]!;
    assert.equal(newest.updatedAt?.seconds, BigInt(t.clock.nowMs() / 1000));
    // A token of one order is refused by another; the two orders do not combine.
    const byKey = await t.reconcile.listSessions({ keyPrefix: "agent:", pageSize: 1 });
    await assertStatus(t.reconcile.listSessions({ recentFirst: true, pageToken: byKey.nextPageToken }), status.INVALID_ARGUMENT, "page_token:");
    await assertStatus(t.reconcile.listSessions({ pageToken: byKey.nextPageToken }), status.INVALID_ARGUMENT, "page_token:");
    await assertStatus(t.reconcile.listSessions({ keyPrefix: "agent:", recentFirst: true }), status.INVALID_ARGUMENT, "recent_first:");
    await assertStatus(t.reconcile.listSessions({ keyPrefix: "x".repeat(513) }), status.INVALID_ARGUMENT, "key_prefix:");
    await assertStatus(t.reconcile.listSessions({ keyPrefix: "a\u0000" }), status.INVALID_ARGUMENT, "key_prefix:");
  });

  test("GetServerInfo: the server, the caller, and the namespace's appends, notices and acks by minute", async () => {
    await t.signalLog.append(goal(C, { dedupeKey: "once" }));
    await t.signalLog.append(goal(C, { dedupeKey: "once" }));
    await t.watch.watch({ watcherSessionKey: W, target: { key: C } });
    const appended = await t.signalLog.append(goal(C));
    t.clock.advance(60_000);
    await t.watch.ackNotices({ acks: [{ watcherSessionKey: W, target: { key: C }, notifiedVersion: appended.event!.sequence }] });
    const info = await t.reconcile.getServerInfo({});
    assert.equal(info.backend, testBackend);
    assert.match(info.version, /^\d+\.\d+\.\d+/);
    assert.equal(info.nodeId, hostname());
    assert.equal(info.databaseReachable, true);
    // Where the data lives (authentication is off here, so it is shown): the file, or the URL and schema.
    assert.equal(info.database, testBackend === "postgres" ? `${redactPostgresUrl(t.dbPath)} schema ${t.dbSchema}` : resolve(t.dbPath));
    assert.equal(info.namespace, "default");
    assert.deepEqual(
      { authenticated: info.caller?.authenticated, admin: info.caller?.admin, agents: info.caller?.agents },
      { authenticated: false, admin: false, agents: [] },
    );
    assert.equal(info.retention?.retentionDays, 30);
    assert.equal(info.retention?.maxEvents, 50_000n);
    assert.equal(info.minutes.length, 60);
    const [before, now] = info.minutes.slice(-2).map((m) => [Number(m.minute!.seconds) * 1000, m.appends, m.noticesOpened, m.noticesAcknowledged]);
    const minute = Math.floor(t.clock.nowMs() / 60_000) * 60_000;
    // Two events recorded (the repeated dedupe key is not counted), one notice opened, acknowledged a minute later.
    assert.deepEqual(before, [minute - 60_000, 2n, 1n, 0n]);
    assert.deepEqual(now, [minute, 0n, 0n, 1n]);
    assert.ok(info.minutes.slice(0, -2).every((m) => m.appends === 0n && m.noticesOpened === 0n && m.noticesAcknowledged === 0n));
  });

  test("GetStateVersions answers in the order asked, absent where there is no head", async () => {
    await t.signalLog.append(goal(W));
    await t.signalLog.append(goal("global", { session: { key: "global", agentId: "ops" } }));
    const res = await t.reconcile.getStateVersions({
      sessions: [{ key: "global", agentId: "ops" }, { key: "nobody" }, { key: W }, { key: "global" }],
    });
    assert.deepEqual(
      res.versions.map((v) => [v.session?.agentId, v.session?.key, v.stateVersion]),
      [
        ["ops", "global", 2n],
        ["main", "nobody", undefined],
        ["main", W, 1n],
        ["main", "global", undefined],
      ],
    );
    const many = Array.from({ length: 1001 }, (_, i) => ({ key: `s${i}` }));
    await assertStatus(t.reconcile.getStateVersions({ sessions: many }), status.INVALID_ARGUMENT, "sessions:");
    await assertStatus(
      t.reconcile.getStateVersions({ sessions: [{ key: W }, { key: "" }] }),
      status.INVALID_ARGUMENT,
      "sessions[1].key:",
    );
    const thousand = await t.reconcile.getStateVersions({ sessions: many.slice(0, 1000) });
    assert.equal(thousand.versions.length, 1000);
  });
});

describe(onBackend("the store reads a session's events as one blob"), { skip: skipBackend }, () => {
  test("every byte value, lengths from 1 to 300, ascending, across the limit and other sessions' rows", async () => {
    const dir = tempDir();
    // Wire bytes that are not protobuf: 0x00, 0xff and every value between, at lengths that need two-byte varints.
    const wireOf = (sequence: number): Uint8Array => Uint8Array.from({ length: 1 + ((sequence * 37) % 300) }, (_, i) => (sequence * 7 + i) % 256);
    const { store } = await openBehaviourStore(dir.dir, () => 1000, (fields) => wireOf(fields.sequence));
    try {
      for (let i = 0; i < 60; i++) await store.append(storeAppend(i % 3 === 0 ? "agent:main:a" : "agent:main:b", 1000));
      const session = { namespace: "default", agentId: "main", key: "agent:main:a" };
      const all = await store.sessionStatus(session, 0, 200);
      assert.deepEqual(all.changes?.events.map((e) => e.sequence), Array.from({ length: 20 }, (_, i) => 1 + 3 * i));
      for (const event of all.changes!.events) assert.deepEqual([...event.wire], [...wireOf(event.sequence)], `event ${event.sequence}`);
      const page = await store.sessionStatus(session, 4, 5);
      assert.deepEqual(page.changes?.events.map((e) => e.sequence), [7, 10, 13, 16, 19]);
      assert.equal(page.changes?.truncated, true);
      for (const event of page.changes!.events) assert.deepEqual([...event.wire], [...wireOf(event.sequence)], `event ${event.sequence}`);
      const none = await store.sessionStatus(session, 58, 5);
      assert.deepEqual(none.changes?.events, []);
      assert.equal(none.changes?.truncated, false);
    } finally {
      await store.close();
      dir.remove();
    }
  });
});
