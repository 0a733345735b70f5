/** Links and scans (domain/upstream-link): adoption, link sources, what a scan may commit. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { input, recorded, target } from "../support/domain-fixtures.js";
import type { LinkRecord, ScanCommit } from "../../src/domain/records.js";
import { isLocalTranscript, isScanCurrent, linkFromAdoption, linkSourceFromText, linkSourceToText, planAdoption, planScanCommit, scanCommitOutcome } from "../../src/domain/upstream-link.js";

const link: LinkRecord = {
  session: target,
  catalogId: "claude",
  hostId: "h",
  threadId: "t",
  source: { kind: "transcript" as const, path: "/transcripts/a.jsonl" },
  marker: "120",
  missedChecks: 1,
  lastScannedAtMs: 900,
  updatedAtMs: 800,
};

describe("links and scans", () => {
  test("an adoption answers its event and the link it writes: a re-adoption of the same source keeps the marker, a declined link writes none", () => {
    const appended = { recorded: true, deduplicated: false, event: recorded, stateVersion: 4, noticesOpened: 0 } as const;
    const wanted = { session: target, catalogId: "claude", hostId: "h", threadId: "t", source: link.source, marker: "999", updatedAtMs: 950 };
    const same = planAdoption(appended, link, { adoptedEvent: input("adopted"), link: wanted });
    assert.deepEqual(same, { event: recorded, link: { ...wanted, marker: "120", missedChecks: 1, lastScannedAtMs: 900 } });
    const moved = planAdoption(appended, link, { adoptedEvent: input("adopted"), link: { ...wanted, source: { kind: "transcript" as const, path: "/elsewhere.jsonl" } } });
    assert.deepEqual(moved.link, { ...wanted, source: { kind: "transcript" as const, path: "/elsewhere.jsonl" }, missedChecks: 0 });
    assert.deepEqual(planAdoption(appended, link, { adoptedEvent: input("adopted") }), { event: recorded });
    assert.throws(() => planAdoption({ recorded: false, stateVersion: 0 }, undefined, { adoptedEvent: input("adopted") }), /never gated/);
  });

  test("only a transcript source is a local transcript; a source is stored as file: or node: text and read back", () => {
    assert.equal(isLocalTranscript({ source: { kind: "transcript" as const, path: "/a.jsonl" } }), true);
    assert.equal(isLocalTranscript({ source: { kind: "paired-node" as const, nodeId: "n1" } }), false);
    assert.equal(linkSourceToText({ kind: "transcript", path: "/a.jsonl" }), "file:/a.jsonl");
    assert.equal(linkSourceToText({ kind: "paired-node", nodeId: "n1" }), "node:n1");
    assert.deepEqual(linkSourceFromText("file:/a:b.jsonl"), { kind: "transcript", path: "/a:b.jsonl" });
    assert.deepEqual(linkSourceFromText("node:n1"), { kind: "paired-node", nodeId: "n1" });
    assert.throws(() => linkSourceFromText("/a.jsonl"), /neither file: nor node:/);
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
      noticesOpened: 1,
    });
  });

  test("re-adopting the same source keeps marker, miss streak and scan time; another source or thread starts afresh", () => {
    const existing: LinkRecord = {
      session: target,
      catalogId: "claude",
      hostId: "h",
      threadId: "t",
      source: { kind: "transcript" as const, path: "/a.jsonl" },
      marker: "120",
      missedChecks: 2,
      lastScannedAtMs: 50,
      updatedAtMs: 10,
    };
    const wanted = { session: target, catalogId: "claude", hostId: "h2", threadId: "t", source: { kind: "transcript" as const, path: "/a.jsonl" }, marker: "999", updatedAtMs: 20 };
    assert.deepEqual(linkFromAdoption(existing, wanted), { ...wanted, marker: "120", missedChecks: 2, lastScannedAtMs: 50 });
    assert.deepEqual(linkFromAdoption(existing, { ...wanted, source: { kind: "transcript" as const, path: "/b.jsonl" } }), { ...wanted, source: { kind: "transcript" as const, path: "/b.jsonl" }, missedChecks: 0 });
    assert.deepEqual(linkFromAdoption(existing, { ...wanted, threadId: "u" }), { ...wanted, threadId: "u", missedChecks: 0 });
    assert.deepEqual(linkFromAdoption(undefined, wanted), { ...wanted, missedChecks: 0 });
  });

  test("a scan applies only to the link as it was read: any change of source, thread, marker, streak or update time refuses it", () => {
    const link: LinkRecord = { session: target, catalogId: "c", hostId: "", threadId: "t", source: { kind: "transcript" as const, path: "/a" }, marker: "1", missedChecks: 0, updatedAtMs: 5 };
    assert.equal(isScanCurrent(link, link), true);
    assert.equal(isScanCurrent({ ...link, lastScannedAtMs: 9, catalogId: "other" }, link), true);
    assert.equal(isScanCurrent(undefined, link), false);
    for (const change of [{ source: { kind: "transcript" as const, path: "/b" } }, { threadId: "u" }, { marker: "2" }, { missedChecks: 1 }, { updatedAtMs: 6 }]) {
      assert.equal(isScanCurrent({ ...link, ...change }, link), false, JSON.stringify(change));
    }
  });
});
