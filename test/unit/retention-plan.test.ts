/** The prune step of SPEC §4 (domain/retention): what goes first, the namespace caps, the watermarks. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { RetentionPolicy } from "../../src/domain/records.js";
import { planNamespaceTrim, pruneCursorBudget, pruneNeedsCounts, pruneStepOutcome, pruneWatermarks } from "../../src/domain/retention.js";

describe("the retention plan", () => {
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
});
