import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { timestampFromMs, timestampMs } from "@bufbuild/protobuf/wkt";
import { ActorType, EventKind, RunOutcome } from "../../gen/sessionstate/v1/types_pb.js";
import { assertStatus, dayMs, goal, startTestServer, status, type AppendInit, type TestServer } from "../support/helpers.js";

const W = "agent:main:main";

describe("SignalLog.Append", () => {
  let t: TestServer;
  beforeEach(async () => {
    t = await startTestServer();
  });
  afterEach(async () => {
    await t.dispose();
  });

  test("an append sets the session's version to its sequence, and sequences rise across sessions", async () => {
    const a = await t.signalLog.append(goal(W));
    const b = await t.signalLog.append(goal("agent:main:subagent:child"));
    const c = await t.signalLog.append(goal(W));
    assert.equal(a.recorded, true);
    assert.equal(a.deduplicated, false);
    assert.deepEqual([a.event?.sequence, b.event?.sequence, c.event?.sequence], [1n, 2n, 3n]);
    assert.equal(a.stateVersion, 1n);
    assert.equal(c.stateVersion, 3n);
    const status = await t.reconcile.sessionStatus({ session: { key: W } });
    assert.equal(status.stateVersion, 3n);
    assert.equal(status.stateChanges, undefined);
    assert.deepEqual(status.session, { $typeName: "sessionstate.v1.SessionRef", key: W, agentId: "main" });
  });

  test("a bare key under two agents has two independent heads and histories", async () => {
    const main = await t.signalLog.append(goal("global", { session: { key: "global", agentId: "main" } }));
    const ops1 = await t.signalLog.append(goal("global", { session: { key: "global", agentId: "ops" } }));
    const ops2 = await t.signalLog.append(goal("global", { session: { key: "global", agentId: "OPS" } }));
    const mainStatus = await t.reconcile.sessionStatus({ session: { key: "global" }, changesSince: 0n });
    const opsStatus = await t.reconcile.sessionStatus({ session: { key: "global", agentId: "ops" }, changesSince: 0n });
    assert.equal(mainStatus.stateVersion, main.event?.sequence);
    assert.deepEqual(mainStatus.stateChanges?.events.map((e) => e.sequence), [1n]);
    assert.equal(opsStatus.stateVersion, ops2.event?.sequence);
    assert.deepEqual(opsStatus.stateChanges?.events.map((e) => e.sequence), [ops1.event?.sequence, ops2.event?.sequence]);
    assert.equal(opsStatus.stateChanges?.events[0]?.session?.agentId, "ops");
  });

  test("agent-qualified keys are trimmed and compared case-insensitively", async () => {
    await t.signalLog.append(goal("  Agent:Main:Main "));
    const status = await t.reconcile.sessionStatus({ session: { key: W, agentId: "MAIN" } });
    assert.equal(status.stateVersion, 1n);
  });

  test("the same dedupe_key twice gives one event, the same sequence, and no version change", async () => {
    const first = await t.signalLog.append(goal(W, { dedupeKey: "turn-42" }));
    await t.signalLog.append(goal("agent:main:other"));
    const again = await t.signalLog.append(goal(W, { dedupeKey: "turn-42", summary: "a retry" }));
    assert.equal(again.recorded, true);
    assert.equal(again.deduplicated, true);
    assert.equal(again.event?.sequence, first.event?.sequence);
    assert.equal(again.event?.summary, "goal updated");
    assert.equal(again.stateVersion, 1n);
    const status = await t.reconcile.sessionStatus({ session: { key: W }, changesSince: 0n });
    assert.equal(status.stateVersion, 1n);
    assert.equal(status.stateChanges?.events.length, 1);
  });

  test("event times are clamped into [now - 24 h, now]; a missing time is now", async () => {
    const now = t.clock.nowMs();
    const old = await t.signalLog.append(goal(W, { occurredAt: timestampFromMs(now - 100 * dayMs) }));
    const future = await t.signalLog.append(goal(W, { occurredAt: timestampFromMs(now + 3_600_000) }));
    const inRange = await t.signalLog.append(goal(W, { occurredAt: timestampFromMs(now - 5000) }));
    const missing = await t.signalLog.append(goal(W));
    assert.equal(timestampMs(old.event!.occurredAt!), now - dayMs);
    assert.equal(timestampMs(future.event!.occurredAt!), now);
    assert.equal(timestampMs(inRange.event!.occurredAt!), now - 5000);
    assert.equal(timestampMs(missing.event!.occurredAt!), now);
    const stored = await t.reconcile.sessionStatus({ session: { key: W }, changesSince: 0n });
    assert.deepEqual(
      stored.stateChanges?.events.map((e) => timestampMs(e.occurredAt!)),
      [now - dayMs, now, now - 5000, now],
    );
  });

  test("payload metadata and ids round-trip", async () => {
    const res = await t.signalLog.append({
      session: { key: "agent:main:subagent:child" },
      kind: EventKind.RUN_FAILED,
      actorType: ActorType.AGENT,
      actorId: "Agent:Main:Main",
      runId: "run-7",
      summary: "child run timed out",
      payload: { outcome: RunOutcome.TIMEOUT, channel: "slack" },
    });
    const stored = await t.reconcile.sessionStatus({ session: { key: "agent:main:subagent:child" }, changesSince: 0n });
    const event = stored.stateChanges?.events[0];
    assert.equal(event?.sequence, res.event?.sequence);
    assert.equal(event?.kind, EventKind.RUN_FAILED);
    assert.equal(event?.actorType, ActorType.AGENT);
    assert.equal(event?.actorId, "agent:main:main");
    assert.equal(event?.runId, "run-7");
    assert.equal(event?.payload?.outcome, RunOutcome.TIMEOUT);
    assert.equal(event?.payload?.channel, "slack");
  });

  const badInputs: Array<[string, AppendInit, string]> = [
    ["an empty key", goal("   "), "session.key"],
    ["a missing session", { ...goal(W), session: undefined }, "session"],
    ["a key over 512 bytes", goal(`agent:main:${"é".repeat(300)}`), "session.key"],
    ["a key with a control character", goal("agent:main:a\u0007b"), "session.key"],
    ["a malformed agent-qualified key", goal("agent:main:"), "session.key"],
    ["a summary over 200 characters", goal(W, { summary: "x".repeat(201) }), "summary"],
    ["a summary with a newline", goal(W, { summary: "line one\nline two" }), "summary"],
    ["an empty summary", goal(W, { summary: "" }), "summary"],
    ["EVENT_KIND_UNSPECIFIED", goal(W, { kind: EventKind.UNSPECIFIED }), "kind"],
    ["an unknown kind number", goal(W, { kind: 99 as EventKind }), "kind"],
    ["ACTOR_TYPE_UNSPECIFIED", goal(W, { actorType: ActorType.UNSPECIFIED }), "actor_type"],
    ["an unknown actor number", goal(W, { actorType: 42 as ActorType }), "actor_type"],
    ["run_failed without outcome", goal(W, { kind: EventKind.RUN_FAILED }), "payload.outcome"],
    ["an outcome on another kind", goal(W, { payload: { outcome: RunOutcome.ERROR } }), "payload.outcome"],
    ["an unknown outcome number", goal(W, { kind: EventKind.RUN_FAILED, payload: { outcome: 7 as RunOutcome } }), "payload.outcome"],
    ["a human message with an agent actor", goal(W, { kind: EventKind.HUMAN_DIRECT_MESSAGE }), "actor_type"],
    ["an agent id that disagrees with the key", goal(W, { session: { key: W, agentId: "ops" } }), "session.agent_id"],
    ["an agent id with a colon", goal("global", { session: { key: "global", agentId: "a:b" } }), "session.agent_id"],
    ["a bad notify key", goal(W, { notifySessionKeys: ["agent:main:ok", ""] }), "notify_session_keys[1]"],
    ["a dedupe key over 256 bytes", goal(W, { dedupeKey: "d".repeat(257) }), "dedupe_key"],
    ["a channel with a newline", goal(W, { payload: { channel: "a\nb" } }), "payload.channel"],
    ["negative timestamp nanos", goal(W, { occurredAt: { seconds: 1n, nanos: -1 } }), "occurred_at.nanos"],
  ];
  for (const [name, request, field] of badInputs) {
    test(`${name} is INVALID_ARGUMENT naming ${field}, and nothing is written`, async () => {
      await t.signalLog.append(goal(W));
      await assertStatus(t.signalLog.append(request), status.INVALID_ARGUMENT, `${field}:`);
      const next = await t.signalLog.append(goal(W));
      assert.equal(next.event?.sequence, 2n, "a refused append must not consume a sequence");
      const sessions = await t.reconcile.listSessions({});
      assert.deepEqual(sessions.sessions.map((s) => s.session?.key), [W]);
    });
  }

  test("a summary of exactly 200 characters (multi-byte) is accepted as is", async () => {
    const summary = "ж".repeat(199) + "😀";
    const res = await t.signalLog.append(goal(W, { summary }));
    assert.equal(res.event?.summary, summary);
  });

  test("bytes that are not a valid message are INVALID_ARGUMENT", async () => {
    const raw = await new Promise<{ code: number; details: string }>((resolve) => {
      t.channel.makeUnaryRequest(
        "/sessionstate.v1.SignalLog/Append",
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.from([0x0a, 0xff, 0xff, 0xff]),
        (err) => resolve(err as unknown as { code: number; details: string }),
      );
    });
    assert.equal(raw.code, status.INVALID_ARGUMENT);
    assert.match(raw.details, /^request: not a valid sessionstate\.v1\.AppendRequest message/);
  });

  test("DeleteSession removes events and head; the next event still gets a higher sequence", async () => {
    await t.signalLog.append(goal(W));
    await t.signalLog.append(goal(W));
    const other = await t.signalLog.append(goal("agent:main:other"));
    const removed = await t.signalLog.deleteSession({ session: { key: W } });
    assert.equal(removed.eventsRemoved, 2);
    assert.equal(removed.cursorsRemoved, 0);
    assert.equal(removed.linkRemoved, false);
    const gone = await t.reconcile.sessionStatus({ session: { key: W }, changesSince: 0n });
    assert.equal(gone.stateVersion, 0n);
    assert.deepEqual(gone.stateChanges?.events, []);
    const versions = await t.reconcile.getStateVersions({ sessions: [{ key: W }] });
    assert.equal(versions.versions[0]?.stateVersion, undefined);
    const next = await t.signalLog.append(goal(W));
    assert.equal(next.event?.sequence, (other.event?.sequence ?? 0n) + 1n);
  });

  test("deleting the newest event's session never lets a sequence be reused", async () => {
    await t.signalLog.append(goal("agent:main:a"));
    const newest = await t.signalLog.append(goal(W));
    await t.signalLog.deleteSession({ session: { key: W } });
    const again = await t.signalLog.append(goal(W));
    assert.equal(again.event?.sequence, newest.event!.sequence + 1n);
  });

  test("a restart on the same file keeps versions, events and watermarks", async () => {
    await t.signalLog.append(goal(W));
    await t.signalLog.append(goal(W));
    await t.signalLog.append(goal("agent:main:other"));
    t.clock.advance(31 * dayMs);
    await t.signalLog.append(goal(W));
    await t.signalLog.prune({});
    const before = await t.reconcile.sessionStatus({ session: { key: W }, changesSince: 0n });
    t = await t.restart();
    const after = await t.reconcile.sessionStatus({ session: { key: W }, changesSince: 0n });
    assert.deepEqual(after, before);
    assert.equal(after.stateVersion, 4n);
    assert.equal(after.stateChanges?.historyGap, true);
    const listed = await t.reconcile.listSessions({});
    assert.deepEqual(
      listed.sessions.map((s) => [s.session?.key, s.stateVersion, s.prunedThrough]),
      [
        ["agent:main:main", 4n, 2n],
        ["agent:main:other", 3n, 3n],
      ],
    );
    const next = await t.signalLog.append(goal("agent:main:new"));
    assert.equal(next.event?.sequence, 5n);
  });
});

describe("SignalLog.AppendBatch", () => {
  let t: TestServer;
  beforeEach(async () => {
    t = await startTestServer();
  });
  afterEach(async () => {
    await t.dispose();
  });

  test("each entry is handled as its own Append would be, results in request order", async () => {
    await t.watch.watch({ watcherSessionKey: W, target: { key: "agent:main:watched" } });
    const { results } = await t.signalLog.appendBatch({
      appends: [
        goal("agent:main:a", { dedupeKey: "once" }),
        goal("agent:main:b", { summary: "" }),
        goal("agent:main:a", { dedupeKey: "once", summary: "a retry" }),
        goal("agent:main:quiet", { onlyIfWatched: true }),
        goal("agent:main:watched", { onlyIfWatched: true }),
        { ...goal("agent:main:c"), kind: 99 as EventKind },
      ],
    });
    assert.deepEqual(
      results.map((r) => r.result.case),
      ["response", "failure", "response", "response", "response", "failure"],
    );
    const response = (i: number) => {
      const result = results[i]!.result;
      assert.equal(result.case, "response");
      return result.value;
    };
    const failure = (i: number) => {
      const result = results[i]!.result;
      assert.equal(result.case, "failure");
      return result.value;
    };
    assert.deepEqual([response(0).recorded, response(0).deduplicated, response(0).event?.sequence, response(0).stateVersion], [true, false, 1n, 1n]);
    assert.deepEqual([failure(1).code, failure(1).message], [status.INVALID_ARGUMENT, "appends[1]: summary: is required (one line, 1-200 characters)"]);
    assert.deepEqual([response(2).deduplicated, response(2).event?.sequence, response(2).event?.summary], [true, 1n, "goal updated"]);
    assert.deepEqual([response(3).recorded, response(3).stateVersion, response(3).event], [false, 0n, undefined]);
    assert.deepEqual([response(4).recorded, response(4).event?.sequence], [true, 2n]);
    assert.equal(failure(5).code, status.INVALID_ARGUMENT);
    assert.match(failure(5).message, /^appends\[5\]: kind: /);
    const versions = await t.reconcile.getStateVersions({ sessions: [{ key: "agent:main:a" }, { key: "agent:main:b" }, { key: "agent:main:watched" }] });
    assert.deepEqual(versions.versions.map((v) => v.stateVersion), [1n, undefined, 2n]);
  });

  test("an empty batch records nothing; more than 1000 entries is INVALID_ARGUMENT and records nothing", async () => {
    assert.deepEqual((await t.signalLog.appendBatch({ appends: [] })).results, []);
    await assertStatus(
      t.signalLog.appendBatch({ appends: Array.from({ length: 1001 }, (_, i) => goal(`agent:main:s${i}`)) }),
      status.INVALID_ARGUMENT,
      "appends: at most 1000 per call (got 1001)",
    );
    assert.deepEqual((await t.reconcile.listSessions({})).sessions, []);
    const full = await t.signalLog.appendBatch({ appends: Array.from({ length: 1000 }, (_, i) => goal(`agent:main:s${i}`)) });
    assert.deepEqual(full.results.map((r) => (r.result.case === "response" ? r.result.value.event?.sequence : 0n)), Array.from({ length: 1000 }, (_, i) => BigInt(i + 1)));
  });
});

