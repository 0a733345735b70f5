/**
 * The monitor's scans (SPEC §8, §12.4), on the test backend: a scan's result is thrown away, its marker
 * unmoved, when between reading and committing the session was reset or deleted, a run started, or the
 * link changed; a scan that reads past its deadline is abandoned for the tick (`timed_out`); a stop ends
 * the scans in flight. The store the monitor uses is wrapped so that each of these happens at the one
 * moment that matters: after the transcript was read, before the commit.
 */
import assert from "node:assert/strict";
import { appendFileSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import type { LinkRecord, ScanCommit } from "../../src/domain/records.js";
import type { SessionId } from "../../src/domain/session-key.js";
import { createLogger } from "../../src/logger.js";
import type { Store } from "../../src/store/store.js";
import { defaultSyntheticPrefixes } from "../../src/upstream/claude-classifier.js";
import { SessionActivity } from "../../src/upstream/session-activity.js";
import { UpstreamMonitor } from "../../src/upstream/upstream-monitor.js";
import { onBackend, openBehaviourStore, skipBackend } from "../support/backend.js";
import { storeAppend, tempDir } from "../support/helpers.js";

const S: SessionId = { namespace: "default", agentId: "main", key: "agent:main:adopted" };
const W = "agent:main:main";
const nowMs = 1_764_600_000_000;
const prompt = (text: string) => `${JSON.stringify({ type: "user", message: { role: "user", content: text }, timestamp: new Date(nowMs).toISOString() })}\n`;

/** The store, with a hook that runs just before each scan is committed, and one that holds a scan while it reads. */
function hooked(store: Store, hooks: { beforeCommit?: () => Promise<void>; whileReading?: () => Promise<void> }): Store {
  return new Proxy(store, {
    get(target, name, receiver) {
      if (name === "commitScan") {
        return async (scanned: LinkRecord, commit: ScanCommit) => {
          await hooks.beforeCommit?.();
          return target.commitScan(scanned, commit);
        };
      }
      if (name === "ownTextDigests") {
        return async (session: SessionId) => {
          await hooks.whileReading?.();
          return target.ownTextDigests(session);
        };
      }
      const value: unknown = Reflect.get(target, name, receiver);
      return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

describe(onBackend("the monitor's scans"), { skip: skipBackend }, () => {
  let dir: ReturnType<typeof tempDir>;
  let store: Store;
  let file: string;
  const clock = { nowMs: () => nowMs };

  beforeEach(async () => {
    dir = tempDir();
    store = (await openBehaviourStore(dir.dir, () => nowMs)).store;
    file = join(realpathSync(dir.dir), "session.jsonl");
    writeFileSync(file, prompt("the first prompt"));
    await adopt(file);
    await store.watch(W, S, nowMs);
    appendFileSync(file, prompt("a person typed this"));
  });
  afterEach(async () => {
    await store.close();
    dir.remove();
  });

  async function adopt(path: string): Promise<void> {
    const marker = String(Buffer.byteLength(prompt("the first prompt")));
    await store.adopt({
      adoptedEvent: { ...storeAppend(S.key, nowMs, "adopted"), actorType: "human", dedupeKey: `adopted:${S.key}` },
      link: { session: S, catalogId: "claude", hostId: "", threadId: "", source: { kind: "transcript", path: path }, marker, updatedAtMs: nowMs },
    });
  }

  function monitorOf(hooks: Parameters<typeof hooked>[1], scanTimeoutMs = 45_000): UpstreamMonitor {
    const wrapped = hooked(store, hooks);
    return new UpstreamMonitor(
      wrapped,
      new SessionActivity(wrapped, clock),
      clock,
      { maxLineBytes: 1 << 20, syntheticPrefixes: defaultSyntheticPrefixes, scanTimeoutMs },
      createLogger("silent"),
    );
  }

  const humanTurns = async () =>
    (await store.sessionStatus(S, 0, 200)).changes?.events.length ?? 0;

  test("with nothing in between, the scan records the person's turn and moves the marker", async () => {
    const report = await monitorOf({}).tick();
    assert.deepEqual([report.linksScanned, report.eventsRecorded], [1, 1]);
    assert.equal((await store.getLink(S))!.marker, String(Buffer.byteLength(prompt("the first prompt") + prompt("a person typed this"))));
  });

  const interferences: [string, () => Promise<void>, "kept" | "gone"][] = [
    ["the session was reset", async () => void (await store.resetWatcher("default", S.key, nowMs)), "kept"],
    ["the session was deleted", async () => void (await store.deleteSession(S)), "gone"],
    ["a run started", () => store.setRunActive(S, true, nowMs), "kept"],
    ["a run started and ended", async () => {
      await store.setRunActive(S, true, nowMs);
      await store.setRunActive(S, false, nowMs);
    }, "kept"],
    ["the link changed", async () => {
      const other = join(realpathSync(dir.dir), "other.jsonl");
      writeFileSync(other, prompt("the first prompt"));
      await adopt(other);
    }, "kept"],
  ];
  for (const [what, interfere, link] of interferences) {
    test(`a scan is discarded, its marker unmoved, when between reading and committing ${what}`, async () => {
      const before = await store.getLink(S);
      const eventsBefore = await humanTurns();
      const report = await monitorOf({ beforeCommit: interfere }).tick();
      assert.deepEqual([report.linksScanned, report.eventsRecorded], [0, 0], "nothing scanned, nothing recorded");
      const after = await store.getLink(S);
      if (link === "gone") assert.equal(after, undefined, "the link went with the session");
      // Re-adopted from another source, the link starts at that source's end; otherwise the marker stays.
      else if (after!.source === before!.source) assert.equal(after!.marker, before!.marker, "the marker did not move");
      assert.ok((await humanTurns()) <= eventsBefore, "no human_direct_message recorded");
    });
  }

  test("a scan that reads past its deadline is abandoned for the tick, marker unmoved, outcome timed_out; the next tick reads it", async () => {
    const before = await store.getLink(S);
    let slow = true;
    const monitor = monitorOf({ whileReading: () => (slow ? sleep(300) : Promise.resolve()) }, 50);
    const report = await monitor.tick();
    assert.deepEqual([report.linksScanned, report.eventsRecorded, report.linksTimedOut], [0, 0, 1]);
    assert.equal((await store.getLink(S))!.marker, before!.marker);
    await sleep(300); // the abandoned read ends on its own
    slow = false;
    const again = await monitor.tick();
    assert.deepEqual([again.linksScanned, again.eventsRecorded, again.linksTimedOut], [1, 1, 0]);
  });

  test("a stop ends the scans in flight at once, their markers unmoved", async () => {
    const before = await store.getLink(S);
    let reading!: () => void;
    const started = new Promise<void>((resolve) => (reading = resolve));
    const monitor = monitorOf({
      whileReading: async () => {
        reading();
        // Unreferenced: the scan is stopped long before, and the timer must not keep the test file alive.
        await sleep(10_000, undefined, { ref: false });
      },
    });
    const ticking = monitor.tick();
    await started;
    const stopAt = Date.now();
    await monitor.stop();
    const report = await ticking;
    assert.ok(Date.now() - stopAt < 1000, "the stop did not wait for the scan");
    assert.deepEqual([report.linksScanned, report.eventsRecorded], [0, 0]);
    assert.equal((await store.getLink(S))!.marker, before!.marker);
  });
});
