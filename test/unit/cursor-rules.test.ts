/** The cursor rules of SPEC §5–§7 (domain/cursor-rules): what an event, an ack, a watch or a removal does to cursors and which notices it announces. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { cursor, input, nowMs, target } from "../support/domain-fixtures.js";
import type { AckInput, CursorRecord, PairChange } from "../../src/domain/records.js";
import { ReferenceModel } from "../support/reference-model.js";
import { appendNeedsTargetCursors, eventFromAppend, isAppendGated } from "../../src/domain/append-plan.js";
import type { SessionId } from "../../src/domain/session-key.js";
import {
  applyAcks,
  cursorEffectsFromEvent,
  hasLiveNotice,
  pairChangesFromRemoved,
  pairKey,
  watchCursor,
  watchRefusal,
} from "../../src/domain/cursor-rules.js";

const marksOf = (c: CursorRecord) => [c.watcherKey, c.acked, c.notified, c.material];

describe("cursor rules", () => {
  test("a notifying event opens a notice for a named watcher without a cursor (L = 0) and for idle cursor holders, freezes N where one is pending, and skips its own actor", () => {
    const onTarget = [cursor("agent:a:idle", 4, 4, 4), cursor("agent:b:busy", 2, 3, 5), cursor("agent:c:actor", 1, 1, 1)];
    const effects = cursorEffectsFromEvent(
      { sequence: 9, kind: "goal_changed", actorId: "agent:c:actor" },
      input("goal_changed", { notifyWatcherKeys: ["agent:d:named", "agent:a:idle"] }),
      onTarget,
    );
    assert.deepEqual(effects.cursorWrites.map(marksOf), [
      ["agent:a:idle", 4, 9, 9],
      ["agent:b:busy", 2, 3, 9],
      ["agent:d:named", 0, 9, 9],
    ]);
    assert.deepEqual(effects.cursorWrites.map((c) => c.updatedAtMs), [nowMs, nowMs, nowMs]);
    assert.deepEqual(effects.pairChanges.map((c) => c.watcherKey), ["agent:a:idle", "agent:d:named"]);
    assert.equal(effects.noticesOpened, 2);
  });

  test("a spawn seeds each named parent at the event, announcing a notice it closes, and leaves other cursors alone", () => {
    const onTarget = [cursor("agent:main:parent", 2, 3, 5), cursor("agent:x:other", 1, 2, 2)];
    const effects = cursorEffectsFromEvent(
      { sequence: 8, kind: "child_spawned", actorId: "agent:main:parent" },
      input("child_spawned", { notifyWatcherKeys: ["agent:main:parent", "agent:main:new", "agent:main:parent"] }),
      onTarget,
    );
    assert.deepEqual(effects.cursorWrites.map(marksOf), [
      ["agent:main:parent", 8, 8, 8],
      ["agent:main:new", 8, 8, 8],
    ]);
    assert.deepEqual(effects.pairChanges, [{ watcherKey: "agent:main:parent", target }]);
    assert.equal(effects.noticesOpened, 0);
  });

  test("ledger-only kinds touch no cursor that names them not, and need no read unless gated or one may name them", () => {
    for (const kind of ["run_completed", "run_failed", "compacted", "adopted", "created", "imported"] as const) {
      const effects = cursorEffectsFromEvent({ sequence: 3, kind }, input(kind, { notifyWatcherKeys: ["agent:a:x"] }), [cursor("agent:a:x", 1, 1, 1)]);
      assert.deepEqual(effects, { cursorWrites: [], pairChanges: [], noticesOpened: 0 }, kind);
      const nameable = kind === "run_completed" || kind === "run_failed" || kind === "compacted";
      assert.equal(appendNeedsTargetCursors(input(kind)), nameable, kind);
      assert.equal(appendNeedsTargetCursors(input(kind, { onlyIfWatched: true })), true, kind);
    }
    assert.equal(appendNeedsTargetCursors(input("human_direct_message")), true);
    assert.equal(appendNeedsTargetCursors(input("child_spawned")), true);
  });

  test("a bare key takes no part in watching: no cursor moves on its events, Watch refuses it, its old cursors are inert", () => {
    const bare: SessionId = { namespace: "default", agentId: "ops", key: "global" };
    const left = { ...cursor("agent:a:w", 2, 5, 9), target: bare };
    for (const kind of ["human_direct_message", "goal_changed", "child_spawned", "run_failed"] as const) {
      const append = input(kind, { session: bare, notifyWatcherKeys: ["agent:a:w", "agent:b:named"] });
      assert.deepEqual(cursorEffectsFromEvent({ sequence: 12, kind }, append, [left]), { cursorWrites: [], pairChanges: [], noticesOpened: 0 }, kind);
      assert.equal(appendNeedsTargetCursors(append), false, kind);
      assert.equal(isAppendGated({ ...append, onlyIfWatched: true }, [left]), true, kind);
      assert.equal(isAppendGated(append, [left]), false, kind);
    }
    assert.equal(watchRefusal("agent:a:w", bare), "target is a bare key: only agent-qualified sessions (agent:<agentId>:<rest>) are watched");
    assert.equal(watchRefusal("global", target), "watcher is not an agent-qualified session key (agent:<agentId>:<rest>)");
    assert.equal(watchRefusal(target.key, target), "a session cannot watch itself");
    assert.equal(watchRefusal("agent:a:w", target), undefined);
    assert.throws(() => watchCursor("agent:a:w", bare, undefined, 3, nowMs), /bare key/u);
    // A cursor left on a bare target by an earlier version: pending in its marks, but no notice, and an ack changes nothing.
    assert.equal(hasLiveNotice(left), false);
    assert.equal(hasLiveNotice(cursor("agent:a:w", 2, 5, 9)), true);
    const acked = applyAcks([{ watcherKey: "agent:a:w", target: bare, notifiedVersion: 5 }], () => left, nowMs);
    assert.deepEqual(acked, { outcomes: [{ acknowledged: false, reopened: false, cursor: left }], cursorWrites: [], pairChanges: [] });
  });

  test("acks apply in order within one call: the second ack of a pair sees the first, and the pair is written and announced once", () => {
    const stored = new Map([[pairKey("agent:a:w", target), cursor("agent:a:w", 2, 5, 9)]]);
    const ack = (notifiedVersion: number, reconciledThrough?: number): AckInput => ({
      watcherKey: "agent:a:w",
      target,
      notifiedVersion,
      ...(reconciledThrough === undefined ? {} : { reconciledThrough }),
    });
    const unknown: AckInput = { watcherKey: "agent:a:none", target, notifiedVersion: 1 };
    let reads = 0;
    const effects = applyAcks([ack(5), ack(5), ack(9, 9), unknown], (w, t) => {
      reads++;
      return stored.get(pairKey(w, t));
    }, 77);
    assert.equal(reads, 2, "each pair is read once");
    assert.deepEqual(
      effects.outcomes.map((o) => [o.acknowledged, o.reopened, o.cursor === undefined ? undefined : marksOf(o.cursor)]),
      [
        [true, true, ["agent:a:w", 5, 9, 9]],
        [false, false, ["agent:a:w", 5, 9, 9]],
        [true, false, ["agent:a:w", 9, 9, 9]],
        [false, false, undefined],
      ],
    );
    assert.deepEqual(effects.cursorWrites.map(marksOf), [["agent:a:w", 9, 9, 9]]);
    assert.equal(effects.cursorWrites[0]!.updatedAtMs, 77);
    assert.deepEqual(effects.pairChanges, [{ watcherKey: "agent:a:w", target }]);
  });

  test("a stale ack writes nothing and announces nothing", () => {
    const effects = applyAcks([{ watcherKey: "agent:a:w", target, notifiedVersion: 4 }], () => cursor("agent:a:w", 2, 5, 9), 1);
    assert.deepEqual([effects.cursorWrites, effects.pairChanges, effects.outcomes[0]!.acknowledged], [[], [], false]);
  });

  test("a watch starts a new cursor at the target's version and only refreshes an existing one", () => {
    assert.deepEqual(watchCursor("agent:a:w", target, undefined, 12, 5), {
      cursor: { ...cursor("agent:a:w", 12, 12, 12), updatedAtMs: 5 },
      write: "put",
      pairChanges: [],
    });
    const existing = cursor("agent:a:w", 2, 5, 9);
    assert.deepEqual(watchCursor("agent:a:w", target, existing, 12, 6), { cursor: { ...existing, updatedAtMs: 6 }, write: "touch", pairChanges: [] });
    assert.throws(() => watchCursor("agent:ops:worker", target, undefined, 0, 1), /cannot watch itself/);
  });

  test("an ambient watch makes an ambient cursor, writes nothing on an existing pair, and never downgrades an explicit one", () => {
    const ambient = { provenance: "ambient", extraKinds: [] } as const;
    const made = watchCursor("agent:a:w", target, undefined, 12, 5, ambient);
    assert.deepEqual([made.write, made.cursor.provenance, made.cursor.acked], ["put", "ambient", 12]);
    const explicit = cursor("agent:a:w", 2, 5, 9);
    assert.deepEqual(watchCursor("agent:a:w", target, explicit, 12, 6, ambient), { cursor: explicit, write: "none", pairChanges: [] });
    const already = { ...explicit, provenance: "ambient" as const };
    assert.deepEqual(watchCursor("agent:a:w", target, already, 12, 6, ambient), { cursor: already, write: "none", pairChanges: [] }, "not even its lifetime");
  });

  test("an explicit watch upgrades an ambient pair keeping L, N and M (a pending notice is announced: it wakes now), and a new set of extra kinds replaces the old", () => {
    const pending = { ...cursor("agent:a:w", 2, 5, 9), provenance: "ambient" as const };
    const upgraded = watchCursor("agent:a:w", target, pending, 12, 7, { provenance: "explicit", extraKinds: ["run_failed"] });
    assert.deepEqual(upgraded, {
      cursor: { ...pending, provenance: "explicit", extraKinds: ["run_failed"], updatedAtMs: 7 },
      write: "put",
      pairChanges: [{ watcherKey: "agent:a:w", target }],
    });
    const idle = watchCursor("agent:a:w", target, { ...pending, acked: 5 }, 12, 7, { provenance: "explicit", extraKinds: [] });
    assert.deepEqual([idle.write, idle.pairChanges], ["put", []], "an idle pair changes no notice");
    const replaced = watchCursor("agent:a:w", target, upgraded.cursor, 12, 8, { provenance: "explicit", extraKinds: ["run_completed", "compacted"] });
    assert.deepEqual([replaced.write, replaced.cursor.extraKinds], ["put", ["run_completed", "compacted"]]);
  });

  test("a ledger kind notifies only the explicit cursors that name it among their extra kinds, never its actor; a spawn makes an ambient pair explicit", () => {
    const optedIn = { ...cursor("agent:a:in", 4, 4, 4), extraKinds: ["run_failed"] as const };
    const ambient = { ...cursor("agent:a:amb", 4, 4, 4), provenance: "ambient" as const };
    const plain = cursor("agent:a:plain", 4, 4, 4);
    const actor = { ...cursor("agent:a:actor", 4, 4, 4), extraKinds: ["run_failed"] as const };
    const failed = input("run_failed", { actorId: "agent:a:actor", payload: { outcome: "error" } });
    const effects = cursorEffectsFromEvent(eventFromAppend(failed, 10), failed, [optedIn, ambient, plain, actor]);
    assert.deepEqual(effects.cursorWrites.map(marksOf), [["agent:a:in", 4, 10, 10]]);
    assert.deepEqual(effects.pairChanges.map((c) => c.watcherKey), ["agent:a:in"]);
    const completed = input("run_completed");
    assert.deepEqual(cursorEffectsFromEvent(eventFromAppend(completed, 11), completed, [optedIn, ambient, plain]).cursorWrites, [], "run_completed is not among its kinds");
    const spawn = input("child_spawned", { notifyWatcherKeys: ["agent:a:amb"] });
    const seeded = cursorEffectsFromEvent(eventFromAppend(spawn, 12), spawn, [ambient]);
    assert.deepEqual(seeded.cursorWrites.map((c) => [c.watcherKey, c.provenance, c.acked]), [["agent:a:amb", "explicit", 12]]);
  });

  test("removing cursors closes the notices of the pending ones only", () => {
    const removed = [cursor("agent:a:pending", 1, 2, 2), cursor("agent:b:idle", 3, 3, 3), cursor("agent:c:more", 1, 4, 9)];
    assert.deepEqual(pairChangesFromRemoved(removed).map((c) => c.watcherKey), ["agent:a:pending", "agent:c:more"]);
  });
});

describe("cursor rules against the reference model", () => {
  test("random appends, acks, explicit and ambient watches with extra kinds, and removals on one target: same cursors, same pending notices, and the feed names exactly the pairs whose notice opened, changed or closed", () => {
    let seed = 2026;
    const random = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const watchers = ["agent:a:one", "agent:a:two", "agent:b:three", "agent:b:subagent:four", "agent:ops:worker"];
    const kinds = ["human_direct_message", "goal_changed", "upstream_missing", "child_spawned", "run_completed", "run_failed", "compacted", "created"] as const;
    const extraSets = [[], ["run_failed"], ["run_completed", "compacted"], ["run_completed", "run_failed", "compacted"]] as const;
    for (let run = 0; run < 200; run++) {
      const stored = new Map<string, CursorRecord>();
      const model = new ReferenceModel();
      let sequence = 0;
      let version = 0;
      for (let step = 0; step < 80; step++) {
        // A pair's notice as subscribers see it: its version, and whether it wakes (an upgraded pair does).
        const noticeOf = (c: CursorRecord | undefined): string => (c !== undefined && c.notified > c.acked ? `${c.notified} ${c.provenance}` : "");
        const before = new Map([...stored].map(([w, c]) => [w, noticeOf(c)]));
        let changes: PairChange[];
        const op = random(10);
        if (op < 5) {
          const kind = kinds[random(kinds.length)]!;
          const named = watchers.filter(() => random(4) === 0);
          const actorId = random(3) === 0 ? watchers[random(watchers.length)] : undefined;
          const append = input(kind, {
            notifyWatcherKeys: named,
            onlyIfWatched: random(4) === 0,
            ...(actorId === undefined ? {} : { actorId }),
            ...(kind === "run_failed" ? { payload: { outcome: "error" } } : {}),
          });
          const onTarget = [...stored.values()];
          if (isAppendGated(append, onTarget)) continue;
          sequence += 1 + random(3);
          version = sequence;
          const effects = cursorEffectsFromEvent(eventFromAppend(append, sequence), append, onTarget);
          for (const c of effects.cursorWrites) stored.set(c.watcherKey, c);
          changes = effects.pairChanges;
          model.event(kind, sequence, actorId, named.filter((w) => w !== target.key));
        } else if (op < 8) {
          const watcher = watchers[random(watchers.length)]!;
          const current = stored.get(watcher);
          const notifiedVersion = current === undefined ? 1 : random(5) === 0 ? current.notified - 1 : current.notified;
          const through = random(2) === 0 ? undefined : random(sequence + 3);
          const ack: AckInput = { watcherKey: watcher, target, notifiedVersion, ...(through === undefined ? {} : { reconciledThrough: through }) };
          const effects = applyAcks([ack], (w) => stored.get(w), nowMs);
          for (const c of effects.cursorWrites) stored.set(c.watcherKey, c);
          changes = effects.pairChanges;
          model.ack(watcher, notifiedVersion, through);
        } else if (op < 9) {
          const watcher = watchers[random(watchers.length - 1)]!;
          const provenance = random(2) === 0 ? "ambient" : "explicit";
          const extraKinds = provenance === "ambient" ? [] : extraSets[random(extraSets.length)]!;
          const watched = watchCursor(watcher, target, stored.get(watcher), version, nowMs, { provenance, extraKinds });
          stored.set(watcher, watched.cursor);
          changes = watched.pairChanges;
          model.watch(watcher, version, provenance, extraKinds);
        } else {
          const watcher = watchers[random(watchers.length)]!;
          const removed = stored.get(watcher);
          stored.delete(watcher);
          changes = pairChangesFromRemoved(removed === undefined ? [] : [removed]);
          model.remove(watcher);
        }
        for (const c of stored.values()) assert.ok(c.acked <= c.notified && c.notified <= c.material, `run ${run} step ${step}: ${JSON.stringify(c)}`);
        const pending = new Map(
          [...stored].filter(([, c]) => c.notified > c.acked).map(([w, c]) => [w, [c.acked, c.notified, c.provenance] as [number, number, string]]),
        );
        assert.deepEqual(pending, model.pending(), `run ${run} step ${step}: pending notices`);
        const changedPairs = new Set([...new Set([...before.keys(), ...stored.keys()])].filter((w) => (before.get(w) ?? "") !== noticeOf(stored.get(w))));
        assert.deepEqual(new Set(changes.map((c) => c.watcherKey)), changedPairs, `run ${run} step ${step}: the feed`);
      }
    }
  });
});
