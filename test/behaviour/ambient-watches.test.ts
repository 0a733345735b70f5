/**
 * Ambient watches, queue-only notices and the kinds that notify (SPEC §12.2, §12.3), on the test backend,
 * through the API as a gateway uses it.
 */
import assert from "node:assert/strict";
import { afterEach, beforeEach, describe, test } from "node:test";
import { ActorType, EventKind, RunOutcome, WatchProvenance } from "../../gen/sessionstate/v1/types_pb.js";
import { onBackend, skipBackend } from "../support/backend.js";
import { assertStatus, goal, human, startTestServer, status, subscribe, type AppendInit, type TestServer } from "../support/helpers.js";

const W = "agent:main:main";
const G = "agent:main:group:family";
const C = "agent:main:subagent:child";

const text = (target: string, since: bigint | number) =>
  `Session "${target}" changed (other actor). Reconcile before acting: session_status sessionKey "${target}" changesSince ${since}.`;

const runFailed = (key: string, extra: Partial<AppendInit> = {}): AppendInit =>
  ({ session: { key }, kind: EventKind.RUN_FAILED, actorType: ActorType.AGENT, summary: "run failed", payload: { outcome: RunOutcome.ERROR }, ...extra }) as AppendInit;
const ledger = (key: string, kind: EventKind): AppendInit => ({ session: { key }, kind, actorType: ActorType.AGENT, summary: "ledger" });

describe(onBackend("ambient watches and queue-only notices"), { skip: skipBackend }, () => {
  let t: TestServer;
  beforeEach(async () => {
    t = await startTestServer();
  });
  afterEach(async () => {
    await t.dispose();
  });

  const ambient = () => t.watch.watch({ watcherSessionKey: W, target: { key: G }, provenance: WatchProvenance.AMBIENT });
  const cursorOf = async () => (await t.watch.listWatches({ watcherSessionKey: W, target: { key: G } })).cursors[0];

  test("an ambient pair's notice never wakes and is queue-only, with the same byte-stable text", async () => {
    const watched = await ambient();
    assert.equal(watched.watched, true);
    assert.equal(watched.cursor!.provenance, WatchProvenance.AMBIENT);
    const appended = await t.signalLog.append(human(G));
    const reader = subscribe(t, [W]);
    try {
      const { notices } = await reader.untilSynced();
      assert.equal(notices.length, 1);
      const [notice] = notices;
      assert.deepEqual([notice!.wake, notice!.queueOnly, notice!.text, notice!.notifiedVersion], [false, true, text(G, 0), appended.event!.sequence]);
    } finally {
      reader.call.cancel();
    }
  });

  test("an explicit watch upgrades an ambient pair keeping L, N and M, and its pending notice goes out again, waking", async () => {
    await ambient();
    const first = await t.signalLog.append(human(G));
    await t.signalLog.append(goal(G));
    const reader = subscribe(t, [W]);
    try {
      const { notices } = await reader.untilSynced();
      assert.deepEqual(notices.map((n) => [n.wake, n.queueOnly]), [[false, true]]);
      const before = await cursorOf();
      const upgraded = await t.watch.watch({ watcherSessionKey: W, target: { key: G } });
      assert.equal(upgraded.cursor!.provenance, WatchProvenance.EXPLICIT);
      assert.deepEqual(
        [upgraded.cursor!.ackedVersion, upgraded.cursor!.notifiedVersion, upgraded.cursor!.materialVersion],
        [before!.ackedVersion, before!.notifiedVersion, before!.materialVersion],
      );
      const again = await reader.nextNotice();
      assert.deepEqual([again.wake, again.queueOnly, again.notifiedVersion, again.text], [true, false, first.event!.sequence, text(G, 0)]);
    } finally {
      reader.call.cancel();
    }
  });

  test("an ambient watch never downgrades an explicit pair, and on an ambient pair writes nothing, not even its lifetime", async () => {
    await t.watch.watch({ watcherSessionKey: W, target: { key: G } });
    t.clock.advance(60_000);
    const kept = await ambient();
    assert.equal(kept.cursor!.provenance, WatchProvenance.EXPLICIT);
    assert.equal((await cursorOf())!.provenance, WatchProvenance.EXPLICIT);

    await t.watch.unwatch({ watcherSessionKey: W, target: { key: G } });
    await ambient();
    const made = (await cursorOf())!.updatedAt;
    t.clock.advance(60_000);
    await ambient();
    assert.deepEqual((await cursorOf())!.updatedAt, made, "an ambient watch of an ambient pair writes nothing");
  });

  test("a spawn on an ambient pair makes it explicit", async () => {
    await t.watch.watch({ watcherSessionKey: W, target: { key: C }, provenance: WatchProvenance.AMBIENT });
    await t.signalLog.append({ session: { key: C }, kind: EventKind.CHILD_SPAWNED, actorType: ActorType.AGENT, actorId: W, summary: "spawned", notifySessionKeys: [W] });
    const [cursor] = (await t.watch.listWatches({ watcherSessionKey: W })).cursors;
    assert.equal(cursor!.provenance, WatchProvenance.EXPLICIT);
  });

  test("ListWatches filters by provenance", async () => {
    await ambient();
    await t.watch.watch({ watcherSessionKey: W, target: { key: C } });
    const keys = async (provenance: WatchProvenance) =>
      (await t.watch.listWatches({ watcherSessionKey: W, provenance })).cursors.map((c) => c.target!.key);
    assert.deepEqual(await keys(WatchProvenance.AMBIENT), [G]);
    assert.deepEqual(await keys(WatchProvenance.EXPLICIT), [C]);
    assert.deepEqual((await keys(WatchProvenance.UNSPECIFIED)).sort(), [C, G].sort());
    await assertStatus(t.watch.listWatches({ watcherSessionKey: W, provenance: 9 as WatchProvenance }), status.INVALID_ARGUMENT, "provenance");
  });
});

describe(onBackend("which kinds notify"), { skip: skipBackend }, () => {
  let t: TestServer;
  beforeEach(async () => {
    t = await startTestServer();
  });
  afterEach(async () => {
    await t.dispose();
  });

  const pendingOf = async () => (await t.watch.listWatches({ watcherSessionKey: W, target: { key: C } })).cursors[0];

  test("a watcher that names run_failed among its extra kinds is notified of one; run_completed stays ledger-only for it; its own run never notifies it", async () => {
    const watched = await t.watch.watch({ watcherSessionKey: W, target: { key: C }, extraMaterialKinds: [EventKind.RUN_FAILED] });
    assert.deepEqual(watched.cursor!.extraMaterialKinds, [EventKind.RUN_FAILED]);
    await t.signalLog.append(ledger(C, EventKind.RUN_COMPLETED));
    assert.equal((await pendingOf())!.notifiedVersion, (await pendingOf())!.ackedVersion, "run_completed: nothing pending");
    await t.signalLog.append(runFailed(C, { actorId: W }));
    assert.equal((await pendingOf())!.notifiedVersion, (await pendingOf())!.ackedVersion, "its own failed run: nothing pending");
    const failed = await t.signalLog.append(runFailed(C, { payload: { outcome: RunOutcome.TIMEOUT, reason: "no answer in 600 s" } }));
    assert.equal((await pendingOf())!.notifiedVersion, failed.event!.sequence);
    assert.equal(failed.event!.payload!.reason, "no answer in 600 s");
  });

  test("without extra kinds, and for an ambient pair, run and compaction events stay ledger-only; watching again with another set replaces it", async () => {
    await t.watch.watch({ watcherSessionKey: W, target: { key: C } });
    for (const kind of [EventKind.RUN_COMPLETED, EventKind.COMPACTED]) await t.signalLog.append(ledger(C, kind));
    await t.signalLog.append(runFailed(C));
    assert.equal((await pendingOf())!.notifiedVersion, (await pendingOf())!.ackedVersion);
    await t.watch.watch({ watcherSessionKey: W, target: { key: C }, extraMaterialKinds: [EventKind.COMPACTED, EventKind.RUN_COMPLETED] });
    const again = await t.watch.watch({ watcherSessionKey: W, target: { key: C }, extraMaterialKinds: [EventKind.COMPACTED] });
    assert.deepEqual(again.cursor!.extraMaterialKinds, [EventKind.COMPACTED]);
    await t.signalLog.append(ledger(C, EventKind.RUN_COMPLETED));
    assert.equal((await pendingOf())!.notifiedVersion, (await pendingOf())!.ackedVersion, "replaced: run_completed no longer");
    const compacted = await t.signalLog.append(ledger(C, EventKind.COMPACTED));
    assert.equal((await pendingOf())!.notifiedVersion, compacted.event!.sequence);
  });

  test("extra kinds other than run_completed, run_failed and compacted, or on an ambient watch, are INVALID_ARGUMENT naming extra_material_kinds and change nothing", async () => {
    for (const extraMaterialKinds of [[EventKind.HUMAN_DIRECT_MESSAGE], [EventKind.ADOPTED], [EventKind.CREATED]]) {
      await assertStatus(t.watch.watch({ watcherSessionKey: W, target: { key: C }, extraMaterialKinds }), status.INVALID_ARGUMENT, "extra_material_kinds");
    }
    await assertStatus(
      t.watch.watch({ watcherSessionKey: W, target: { key: C }, provenance: WatchProvenance.AMBIENT, extraMaterialKinds: [EventKind.RUN_FAILED] }),
      status.INVALID_ARGUMENT,
      "extra_material_kinds",
    );
    await assertStatus(t.watch.watch({ watcherSessionKey: W, target: { key: C }, extraMaterialKinds: [EventKind.UNSPECIFIED] }), status.INVALID_ARGUMENT, "extra_material_kinds[0]");
    assert.deepEqual((await t.watch.listWatches({ watcherSessionKey: W })).cursors, []);
  });

  test("created and imported are recorded and notify nobody; a reason belongs to run_failed only, one line of at most 200 characters", async () => {
    await t.watch.watch({ watcherSessionKey: W, target: { key: C }, extraMaterialKinds: [EventKind.RUN_COMPLETED, EventKind.RUN_FAILED, EventKind.COMPACTED] });
    const created = await t.signalLog.append({ ...ledger(C, EventKind.CREATED), actorId: W });
    const imported = await t.signalLog.append(ledger(C, EventKind.IMPORTED));
    assert.deepEqual([created.event!.kind, imported.event!.kind, created.event!.actorId], [EventKind.CREATED, EventKind.IMPORTED, W]);
    assert.equal((await pendingOf())!.notifiedVersion, (await pendingOf())!.ackedVersion);
    await assertStatus(t.signalLog.append(goal(C, { payload: { reason: "why" } })), status.INVALID_ARGUMENT, "payload.reason");
    await assertStatus(t.signalLog.append(runFailed(C, { payload: { outcome: RunOutcome.ERROR, reason: "x".repeat(201) } })), status.INVALID_ARGUMENT, "payload.reason");
    await assertStatus(t.signalLog.append(runFailed(C, { payload: { outcome: RunOutcome.ERROR, reason: "two\nlines" } })), status.INVALID_ARGUMENT, "payload.reason");
    const longest = await t.signalLog.append(runFailed(C, { payload: { outcome: RunOutcome.ERROR, reason: "é".repeat(200) } }));
    assert.equal(longest.event!.payload!.reason, "é".repeat(200));
  });
});
