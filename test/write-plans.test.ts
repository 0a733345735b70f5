import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { cursor, input, target } from "./support/domain-fixtures.js";
import type { EventFields, StoredEvent } from "../src/domain/event.js";
import type { LinkRecord, RetentionPolicy, ScanCommit } from "../src/domain/records.js";
import {
  isLocalTranscript,
  planAdoption,
  planAppend,
  planNamespaceTrim,
  planOwnText,
  planScanCommit,
  pruneCursorBudget,
  pruneNeedsCounts,
  pruneStepOutcome,
  pruneWatermarks,
  scanCommitOutcome,
  sessionPageStart,
} from "../src/domain/write-plans.js";


/** An encoder that shows which sequence it encoded, so a test sees the wire bytes were made from the fields. */
const encode = (fields: EventFields): Uint8Array => new TextEncoder().encode(`#${fields.sequence}`);

/** A sequence source that counts how often it was asked. */
function sequences(next: number): { take: () => number; taken: () => number } {
  let taken = 0;
  return { take: () => next + taken++, taken: () => taken };
}

const recorded: StoredEvent = {
  sequence: 4,
  namespace: "default",
  agentId: "ops",
  sessionKey: "agent:ops:worker",
  kind: "goal_changed",
  actorType: "agent",
  summary: "s",
  occurredAtMs: 5,
  payload: {},
  wire: new Uint8Array([1]),
};

const link: LinkRecord = {
  session: target,
  catalogId: "claude",
  hostId: "h",
  threadId: "t",
  source: "file:/transcripts/a.jsonl",
  marker: "120",
  missedChecks: 1,
  lastScannedAtMs: 900,
  updatedAtMs: 800,
};

describe("write plans", () => {
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

  test("an adoption answers its event and the link it writes: a re-adoption of the same source keeps the marker, a declined link writes none", () => {
    const appended = { recorded: true, deduplicated: false, event: recorded, stateVersion: 4, noticesOpened: 0 } as const;
    const wanted = { session: target, catalogId: "claude", hostId: "h", threadId: "t", source: link.source, marker: "999", updatedAtMs: 950 };
    const same = planAdoption(appended, link, { adoptedEvent: input("adopted"), link: wanted });
    assert.deepEqual(same, { event: recorded, link: { ...wanted, marker: "120", missedChecks: 1, lastScannedAtMs: 900 } });
    const moved = planAdoption(appended, link, { adoptedEvent: input("adopted"), link: { ...wanted, source: "file:/elsewhere.jsonl" } });
    assert.deepEqual(moved.link, { ...wanted, source: "file:/elsewhere.jsonl", missedChecks: 0 });
    assert.deepEqual(planAdoption(appended, link, { adoptedEvent: input("adopted") }), { event: recorded });
    assert.throws(() => planAdoption({ recorded: false, stateVersion: 0 }, undefined, { adoptedEvent: input("adopted") }), /never gated/);
  });

  test("only a file source is a local transcript", () => {
    assert.equal(isLocalTranscript({ source: "file:/a.jsonl" }), true);
    assert.equal(isLocalTranscript({ source: "node:n1" }), false);
    assert.equal(isLocalTranscript({ source: "/a.jsonl" }), false);
  });

  test("a scan commit records the scan, appends its event, removes the link, or is discarded when the link changed or a run started", () => {
    const commit: ScanCommit = { marker: "200", missedChecks: 0, nowMs: 1_100 };
    assert.deepEqual(planScanCommit(link, link, commit, undefined), {
      action: "commit",
      link: { marker: "200", missedChecks: 0, scannedAtMs: 1_100 },
    });
    const event = input("human_direct_message");
    assert.deepEqual(planScanCommit(link, link, { ...commit, event, removeLink: true }, undefined), { action: "commit", append: event, link: "remove" });
    assert.deepEqual(planScanCommit({ ...link, marker: "130" }, link, commit, undefined), { action: "discard" });
    assert.deepEqual(planScanCommit(undefined, link, commit, undefined), { action: "discard" });
    const ran = { active: false, starts: 3, refreshedAtMs: 1_000 };
    assert.deepEqual(planScanCommit(link, link, { ...commit, runStartsBefore: 2 }, ran), { action: "discard" });
    assert.equal(planScanCommit(link, link, { ...commit, runStartsBefore: 3 }, ran).action, "commit");
    assert.deepEqual(scanCommitOutcome(undefined), { committed: true });
    assert.deepEqual(scanCommitOutcome({ recorded: false, stateVersion: 3 }), { committed: true });
    assert.deepEqual(scanCommitOutcome({ recorded: true, deduplicated: false, event: recorded, stateVersion: 4, noticesOpened: 1 }), {
      committed: true,
      event: recorded,
    });
  });

  test("a prune step removes old events first, then each namespace's excess within what is left, then untouched cursors", () => {
    const policy: RetentionPolicy = { cutoffMs: 0, maxEvents: 100, maxRowsPerStep: 50 };
    const counts = [
      { namespace: "a", n: 130 },
      { namespace: "b", n: 90 },
      { namespace: "c", n: 140 },
    ];
    assert.equal(pruneNeedsCounts(policy, 50), false);
    assert.equal(pruneNeedsCounts(policy, 49), true);
    // 10 old events went: 40 rows are left, 30 go from a, and c gets the last 10 of its 40 over.
    assert.deepEqual(planNamespaceTrim(counts, policy, 10), [
      { namespace: "a", count: 30 },
      { namespace: "c", count: 10 },
    ]);
    assert.deepEqual(planNamespaceTrim(counts, policy, 50), []);
    assert.deepEqual(planNamespaceTrim(counts, { ...policy, maxRowsPerStep: 1_000 }, 0), [
      { namespace: "a", count: 30 },
      { namespace: "c", count: 40 },
    ]);
    assert.equal(pruneCursorBudget(policy, 45), 5);
    assert.equal(pruneCursorBudget(policy, 60), 0);
    assert.deepEqual(pruneStepOutcome(policy, 45, 5), { eventsRemoved: 45, cursorsRemoved: 5, done: false });
    assert.deepEqual(pruneStepOutcome(policy, 45, 4), { eventsRemoved: 45, cursorsRemoved: 4, done: true });
  });

  test("each session's prune watermark is the highest sequence it loses", () => {
    const marks = pruneWatermarks([
      { sessionId: 1, sequence: 5 },
      { sessionId: 2, sequence: 3 },
      { sessionId: 1, sequence: 9 },
      { sessionId: 1, sequence: 7 },
    ]);
    assert.deepEqual([...marks], [
      [1, 9],
      [2, 3],
    ]);
  });

  test("an own text goes after the newest and only the newest `keep` stay", () => {
    assert.deepEqual(planOwnText(0, 3), { position: 1, trimThrough: -2 });
    assert.deepEqual(planOwnText(7, 3), { position: 8, trimThrough: 5 });
  });

  test("a page continues after the last (agent id, key); a page of one agent continues only after its own key", () => {
    const after = { namespace: "default", agentId: "ops", key: "agent:ops:b" };
    assert.deepEqual(sessionPageStart(undefined, undefined), { agentId: "", key: "" });
    assert.deepEqual(sessionPageStart(undefined, after), { agentId: "ops", key: "agent:ops:b" });
    assert.deepEqual(sessionPageStart("ops", after), { agentId: "ops", key: "agent:ops:b" });
    assert.deepEqual(sessionPageStart("dev", after), { agentId: "dev", key: "" });
    assert.deepEqual(sessionPageStart("dev", undefined), { agentId: "dev", key: "" });
  });
});
