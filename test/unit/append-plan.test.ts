/** The plan of one append (domain/append-plan): dedupe, the only_if_watched gate, the event and its sequence. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { cursor, input, nowMs, recorded, target } from "../support/domain-fixtures.js";
import type { EventFields } from "../../src/domain/event.js";
import { eventFromAppend, isAppendGated, planAppend } from "../../src/domain/append-plan.js";


/** An encoder that shows which sequence it encoded, so a test sees the wire bytes were made from the fields. */
const encode = (fields: EventFields): Uint8Array => new TextEncoder().encode(`#${fields.sequence}`);

/** A sequence source that counts how often it was asked. */
function sequences(next: number): { take: () => number; taken: () => number } {
  let taken = 0;
  return { take: () => next + taken++, taken: () => taken };
}

describe("the append plan", () => {
  test("an append records the next sequence with its wire bytes and cursor effects", () => {
    const seq = sequences(10);
    const plan = planAppend(input("goal_changed"), { cursorsOnTarget: [cursor("agent:a:w", 3, 3, 3)] }, seq.take, encode);
    assert.equal(plan.action, "record");
    if (plan.action !== "record") return;
    assert.equal(seq.taken(), 1);
    assert.equal(plan.event.sequence, 10);
    assert.equal(new TextDecoder().decode(plan.event.wire), "#10");
    assert.deepEqual(plan.cursorWrites.map((c) => [c.watcherKey, c.acked, c.notified, c.material]), [["agent:a:w", 3, 10, 10]]);
    assert.deepEqual(plan.changes, [{ watcherKey: "agent:a:w", target }]);
    assert.deepEqual(
      { ...plan.outcome, event: plan.outcome.event.sequence },
      { recorded: true, deduplicated: false, event: 10, stateVersion: 10, noticesOpened: 1 },
    );
  });

  test("a dedupe hit answers with the recorded event and the session's version, taking no sequence", () => {
    const seq = sequences(10);
    const plan = planAppend(input("goal_changed", { dedupeKey: "k" }), { duplicate: { event: recorded, stateVersion: 7 }, cursorsOnTarget: [] }, seq.take, encode);
    assert.deepEqual(plan, { action: "deduplicated", outcome: { recorded: true, deduplicated: true, event: recorded, stateVersion: 7, noticesOpened: 0 } });
    assert.equal(seq.taken(), 0);
  });

  test("the only_if_watched gate holds an unwatched append and takes no sequence; a cursor or a named watcher opens it", () => {
    const seq = sequences(10);
    assert.deepEqual(planAppend(input("goal_changed", { onlyIfWatched: true }), { cursorsOnTarget: [] }, seq.take, encode), { action: "gated" });
    assert.equal(seq.taken(), 0);
    const watched = planAppend(input("goal_changed", { onlyIfWatched: true }), { cursorsOnTarget: [cursor("agent:a:w", 0, 0, 0)] }, seq.take, encode);
    assert.equal(watched.action, "record");
    const named = planAppend(input("goal_changed", { onlyIfWatched: true, notifyWatcherKeys: ["agent:b:w"] }), { cursorsOnTarget: [] }, seq.take, encode);
    assert.equal(named.action, "record");
    assert.equal(seq.taken(), 2);
  });

  test("only_if_watched writes nothing when no watcher is named (the session itself does not count) and no cursor targets the session", () => {
    const gated = input("human_direct_message", { onlyIfWatched: true });
    assert.equal(isAppendGated(gated, []), true);
    assert.equal(isAppendGated({ ...gated, notifyWatcherKeys: ["agent:ops:worker"] }, []), true);
    assert.equal(isAppendGated({ ...gated, notifyWatcherKeys: ["agent:main:boss"] }, []), false);
    assert.equal(isAppendGated(gated, [cursor("agent:main:boss", 0, 0, 0)]), false);
    assert.equal(isAppendGated({ ...gated, onlyIfWatched: false }, []), false);
  });

  test("the event of an append carries its fields and the sequence the backend took", () => {
    const fields = eventFromAppend(input("run_failed", { actorId: "agent:main:boss", runId: "r1", payload: { outcome: "error" } }), 42);
    assert.deepEqual(fields, {
      sequence: 42,
      namespace: "default",
      agentId: "ops",
      sessionKey: "agent:ops:worker",
      kind: "run_failed",
      actorType: "agent",
      actorId: "agent:main:boss",
      runId: "r1",
      summary: "s",
      occurredAtMs: nowMs,
      payload: { outcome: "error" },
    });
    assert.equal("actorId" in eventFromAppend(input("goal_changed"), 1), false);
  });
});
