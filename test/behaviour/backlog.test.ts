/**
 * Costs that do not grow with the data (issue 33), as behaviour on every backend: a subscription over a
 * large backlog is served a page at a time as its consumer reads, several at once and with notices changing
 * meanwhile, each notice once; retention of a large backlog runs in bounded steps, with every answer exact
 * between them, and a server started over one serves before the first step.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { createLogger } from "../../src/logger.js";
import { compareKeys } from "../../src/domain/pair-order.js";
import type { Notice } from "../../src/domain/notice.js";
import type { CursorRecord, PruneStep, RetentionPolicy } from "../../src/domain/records.js";
import type { SessionId } from "../../src/domain/session-key.js";
import { NoticeHub, noticePageSize, type NoticeSource, type NoticeStreamItem } from "../../src/notices/notice-hub.js";
import type { Store } from "../../src/store/store.js";
import { onBackend, openBehaviourStore, skipBackend } from "../support/backend.js";
import { allPendingCursors, FakeClock, seededRandom, startTestServer, storeAppend, tempDir, until, type Clients } from "../support/helpers.js";

const nowMs = Date.UTC(2026, 11, 1, 12, 0, 0);
const session = (key: string): SessionId => ({ namespace: "default", agentId: key.split(":")[1]!, key });

/** Opens `count` notices for `watcherKey`, one per target `agent:bk:t<i>`: a human turn that names the watcher. */
async function openNotices(store: Store, watcherKey: string, count: number, prefix = "agent:bk:t"): Promise<void> {
  for (let i = 0; i < count; i += 1000) {
    const batch = [];
    for (let t = i; t < Math.min(count, i + 1000); t++) {
      batch.push(store.append({ ...storeAppend(`${prefix}${t}`, nowMs, "human_direct_message"), notifyWatcherKeys: [watcherKey] }));
    }
    await Promise.all(batch);
  }
}

/**
 * The store as the hub sees it, counting the pages of pending notices it reads and their rows; with
 * `answerAfterMs`, every read is answered that long after it was read, so writes land while it is out.
 */
function countingSource(store: Store, answerAfterMs = 0): { source: NoticeSource; reads: { pages: number; rows: number } } {
  const reads = { pages: 0, rows: 0 };
  const late = async <T>(read: T): Promise<T> => {
    if (answerAfterMs > 0) await sleep(answerAfterMs);
    return read;
  };
  const source: NoticeSource = {
    pendingPage: async (namespace, range, after, limit) => {
      reads.pages++;
      const read = await store.pendingPage(namespace, range, after, limit);
      reads.rows += read.cursors.length;
      return late(read);
    },
    getCursors: async (pairs) => late(await store.getCursors(pairs)),
    onPairChanges: (listener) => store.onPairChanges(listener),
    changesHeardThrough: () => store.changesHeardThrough(),
    ...(store.onFeedGap === undefined ? {} : { onFeedGap: (listener: () => void) => store.onFeedGap!(listener) }),
  };
  return { source, reads };
}

/**
 * Runs `test` with a store of the test backend, a hub reading it through `countingSource`, a signal that
 * ends its streams and the watcher's key; closes them after.
 */
async function withCountingHub(
  test: (setup: { store: Store; reads: { pages: number; rows: number }; hub: NoticeHub; signal: AbortSignal; watcher: string }) => Promise<void>,
): Promise<void> {
  const dir = tempDir();
  const { store } = await openBehaviourStore(dir.dir);
  const { source, reads } = countingSource(store);
  const hub = new NoticeHub(source, createLogger("silent"));
  hub.start();
  const abort = new AbortController();
  try {
    await test({ store, reads, hub, signal: abort.signal, watcher: "agent:bk:w" });
  } finally {
    abort.abort();
    hub.stop();
    await store.close();
    dir.remove();
  }
}

const noticeOf = (item: NoticeStreamItem | undefined): Notice | undefined => (item !== undefined && "notice" in item ? item.notice : undefined);
const pairOf = (watcherKey: string, targetKey: string): string => `${watcherKey} -> ${targetKey}`;

describe(onBackend("a subscription over a large backlog"), { skip: skipBackend }, () => {
  test("over 50,000 pending notices: the first comes after one page is read, then every one once, in pair order, then synced", { timeout: 120_000 }, () =>
    withCountingHub(async ({ store, reads, hub, signal, watcher }) => {
    await openNotices(store, watcher, 50_000);
    const stream = hub.serve({ namespace: "default", watcherKeys: [watcher], prefixes: [] }, signal);
    const first = noticeOf((await stream.next()).value ?? undefined);
    assert.ok(first !== undefined, "a notice comes first");
    assert.deepEqual(reads, { pages: 1, rows: noticePageSize }, "the first notice after one page of the backlog");

    const targets = [first.target.key];
    let synced: number | undefined;
    for await (const item of stream) {
      if ("synced" in item) {
        synced = item.synced.pendingDelivered;
        break;
      }
      targets.push(item.notice.target.key);
    }
    assert.equal(synced, 50_000);
    assert.equal(targets.length, 50_000);
    assert.equal(new Set(targets).size, 50_000, "each notice once");
    assert.ok(targets.every((key, i) => i === 0 || compareKeys(targets[i - 1]!, key) < 0), "in pair order");
    assert.equal(reads.pages, Math.ceil(50_000 / noticePageSize) + (50_000 % noticePageSize === 0 ? 1 : 0));
    await stream.return();
    }));

  test("a stalled subscriber holds one page: the store reads no more until it asks, and pairs changed meanwhile come newest", { timeout: 60_000 }, () =>
    withCountingHub(async ({ store, reads, hub, signal, watcher }) => {
    await openNotices(store, watcher, 5_000);
    const stream = hub.serve({ namespace: "default", watcherKeys: [watcher], prefixes: [] }, signal);
    const received: Notice[] = [noticeOf((await stream.next()).value ?? undefined)!];
    // Stalled after its first notice: acks reopen notices on pairs before and after where the scan is.
    const before = received[0]!.target;
    const pending = await allPendingCursors(store, "default", [watcher]);
    const after = pending.at(-1)!.target;
    for (const target of [before, after]) {
      const [cursor] = (await store.getCursors([{ watcherKey: watcher, target }])).cursors;
      await store.append(storeAppend(target.key, nowMs, "goal_changed"));
      await store.ackNotices([{ watcherKey: watcher, target, notifiedVersion: cursor!.notified }], nowMs);
    }
    await sleep(200);
    assert.deepEqual(reads, { pages: 1, rows: noticePageSize }, "one page read while stalled");
    assert.equal(hub.queuedPairs, 1, "only the pair the scan has passed waits to be sent again");

    let pendingDelivered: number | undefined;
    for await (const item of stream) {
      if ("synced" in item) {
        pendingDelivered = item.synced.pendingDelivered;
        break;
      }
      received.push(item.notice);
    }
    assert.equal(pendingDelivered, 5_001, "the 5,000 pending and the one reopened behind the scan");
    const final = new Map((await allPendingCursors(store, "default", [watcher])).map((c) => [c.target.key, c.notified]));
    const last = new Map(received.map((n) => [n.target.key, Number(n.notifiedVersion)]));
    assert.deepEqual([...last].sort(), [...final].sort(), "every pending notice, each at its newest version");
    assert.equal(received.filter((n) => n.target.key === after.key).length, 1, "the pair ahead of the scan once, read when reached");
    await stream.return();
    }));

  test("three subscribers drain overlapping backlogs while notices open, reopen and close: each gets every pending notice once, the newest last", { timeout: 120_000 }, async () => {
    const dir = tempDir();
    const opened = await openBehaviourStore(dir.dir);
    // On PostgreSQL the writes go through another replica: its changes reach the hub's through the feed,
    // later than the hub's own reads see them.
    const peer = await opened.openPeer();
    // Each read is answered a little late, so that changes land while it is out.
    const hub = new NoticeHub(countingSource(opened.store, 2).source, createLogger("silent"));
    const store = peer ?? opened.store;
    hub.start();
    const abort = new AbortController();
    const random = seededRandom(33);
    const watchers = Array.from({ length: 6 }, (_, i) => `agent:rx:w${i}`);
    const targets = Array.from({ length: 300 }, (_, i) => session(`agent:rt:t${i}`));
    try {
      for (const watcher of watchers) {
        for (const target of targets) if (random(3) > 0) await store.watch(watcher, target, nowMs);
      }
      await Promise.all(targets.map((target) => store.append(storeAppend(target.key, nowMs, "human_direct_message"))));
      const filters = [
        { namespace: "default", watcherKeys: [], prefixes: ["agent:rx:"] },
        { namespace: "default", watcherKeys: [watchers[1]!, watchers[4]!], prefixes: [] },
        { namespace: "default", watcherKeys: [watchers[2]!, watchers[5]!], prefixes: ["agent:rx:w5", "agent:rx:w1"] },
      ];
      const served = (filter: (typeof filters)[number]) => (watcherKey: string): boolean =>
        filter.watcherKeys.includes(watcherKey) || filter.prefixes.some((prefix) => watcherKey.startsWith(prefix));
      const streams = filters.map((filter, s) => {
        const received: Notice[] = [];
        let synced = false;
        const done = (async () => {
          let n = 0;
          for await (const item of hub.serve(filter, abort.signal)) {
            if ("synced" in item) synced = true;
            else received.push(item.notice);
            // Consumers of different paces: one stalls now and then.
            if (s === 0 && ++n % 97 === 0) await sleep(5);
          }
        })();
        return { filter, received, done, isSynced: () => synced };
      });

      // Meanwhile: turns on targets, acks (some with reconciled_through), unwatches and watches.
      for (let op = 0; op < 1500; op++) {
        const target = targets[random(targets.length)]!;
        const watcher = watchers[random(watchers.length)]!;
        switch (random(4)) {
          case 0:
            await store.append(storeAppend(target.key, nowMs, "human_direct_message"));
            break;
          case 1: {
            const [cursor] = (await store.getCursors([{ watcherKey: watcher, target }])).cursors;
            if (cursor === undefined) break;
            const ack = { watcherKey: watcher, target, notifiedVersion: cursor.notified, ...(random(2) === 0 ? { reconciledThrough: cursor.material } : {}) };
            await store.ackNotices([ack], nowMs);
            break;
          }
          case 2:
            if (random(4) === 0) await store.unwatch(watcher, target);
            else await store.append(storeAppend(target.key, nowMs, "goal_changed"));
            break;
          default:
            await store.watch(watcher, target, nowMs);
        }
        if (op % 50 === 0) await sleep(1);
      }

      const final: CursorRecord[] = await allPendingCursors(store, "default", [], ["agent:rx:"]);
      for (const { filter, received, isSynced } of streams) {
        const expected = new Map(final.filter((c) => served(filter)(c.watcherKey)).map((c) => [pairOf(c.watcherKey, c.target.key), c.notified]));
        const newest = (): Map<string, number> => new Map(received.map((n) => [pairOf(n.watcherKey, n.target.key), Number(n.notifiedVersion)]));
        await until(
          () => isSynced() && hub.queuedPairs === 0 && [...expected].every(([pair, notified]) => newest().get(pair) === notified),
          "every pending notice reaches the stream at its newest version",
          15_000,
        );
        const sent = received.map((n) => `${pairOf(n.watcherKey, n.target.key)} @${n.notifiedVersion}`);
        assert.deepEqual(sent.filter((notice, i) => sent.indexOf(notice) !== i), [], "no pending notice twice on one stream");
        assert.ok(received.every((n) => served(filter)(n.watcherKey)), "only the stream's own watchers");
      }
      abort.abort();
      await Promise.all(streams.map((stream) => stream.done));
    } finally {
      abort.abort();
      hub.stop();
      await peer?.close();
      await opened.store.close();
      dir.remove();
    }
  });
});

/** Seeds `sessions` sessions of `perSession` events each, round-robin; returns each session's sequences. */
async function seedEvents(store: Store, sessions: number, perSession: number): Promise<Map<string, number[]>> {
  const sequences = new Map<string, number[]>();
  const total = sessions * perSession;
  for (let i = 0; i < total; i += 1000) {
    const batch = [];
    for (let e = i; e < Math.min(total, i + 1000); e++) batch.push(store.append(storeAppend(`agent:pr:s${e % sessions}`, nowMs, "run_completed")));
    for (const outcome of await Promise.all(batch)) {
      assert.ok(outcome.recorded);
      const list = sequences.get(outcome.event.sessionKey) ?? [];
      list.push(outcome.event.sequence);
      sequences.set(outcome.event.sessionKey, list);
    }
  }
  return sequences;
}

/**
 * Checks a SessionStatus answer against what was appended (SPEC §4, §7): it holds exactly the retained
 * events after `changesSince`, and `historyGap` is true exactly when an event after it is gone.
 */
function assertExact(
  seeded: readonly number[],
  changesSince: number,
  answer: { events: readonly number[]; historyGap: boolean; earliest: number },
  limit: number,
  what: string,
): void {
  const after = seeded.filter((sequence) => sequence > changesSince);
  const retained = after.filter((sequence) => answer.earliest !== 0 && sequence >= answer.earliest);
  assert.deepEqual(answer.events, retained.slice(0, limit), `${what}: the retained events after ${changesSince}`);
  assert.equal(answer.historyGap, retained.length < after.length, `${what}: history_gap after ${changesSince}`);
}

describe(onBackend("retention of a large backlog"), { skip: skipBackend }, () => {
  test("a prune of 60,000 of 100,000 events goes in steps of at most the step's rows, with SessionStatus exact between steps", { timeout: 180_000 }, async () => {
    const dir = tempDir();
    const { store } = await openBehaviourStore(dir.dir);
    const random = seededRandom(4);
    try {
      const seeded = await seedEvents(store, 1000, 100);
      const policy: RetentionPolicy = { cutoffMs: nowMs - 30 * 24 * 3600 * 1000, maxEvents: 40_000, maxRowsPerStep: 2000 };
      let removed = 0;
      let steps = 0;
      for (let step: PruneStep | undefined; step?.done !== true; ) {
        step = await store.pruneStep(policy);
        steps++;
        assert.ok(step.eventsRemoved + step.cursorsRemoved <= policy.maxRowsPerStep, `step ${steps} removed ${step.eventsRemoved}`);
        removed += step.eventsRemoved;
        for (let probe = 0; probe < 5; probe++) {
          const key = `agent:pr:s${random(1000)}`;
          const changesSince = random(seeded.get(key)!.at(-1)! + 1);
          const status = await store.sessionStatus(session(key), changesSince, 20);
          assertExact(
            seeded.get(key)!,
            changesSince,
            {
              events: status.changes?.events.map((e) => e.sequence) ?? [],
              historyGap: status.changes?.historyGap ?? false,
              earliest: status.changes?.earliestAvailableSequence ?? 0,
            },
            20,
            `after step ${steps}, ${key}`,
          );
        }
      }
      assert.equal(removed, 60_000);
      assert.equal(steps, 31, "30 full steps and the one that found nothing left");
    } finally {
      await store.close();
      dir.remove();
    }
  });

  test("a server started over a backlog serves before retention's first step, and answers exactly between its steps", { timeout: 120_000 }, async () => {
    const dir = tempDir();
    const seeding = await openBehaviourStore(dir.dir);
    const seeded = await seedEvents(seeding.store, 200, 100);
    await seeding.store.close();
    // Each step waits for the test's leave, so the test sees the server between steps.
    let leave: (() => void) | undefined;
    let lastStep: PruneStep | undefined;
    const server = await startTestServer({ ...seeding.database, maxEvents: 5000 }, { clock: new FakeClock(nowMs), dir }, (store) => {
      const pruneStep = store.pruneStep.bind(store);
      store.pruneStep = async (policy) => {
        await new Promise<void>((resolve) => (leave = resolve));
        lastStep = await pruneStep(policy);
        return lastStep;
      };
    });
    const random = seededRandom(5);
    const probe = async (clients: Clients, what: string): Promise<void> => {
      for (let i = 0; i < 5; i++) {
        const key = `agent:pr:s${random(200)}`;
        const changesSince = random(seeded.get(key)!.at(-1)! + 1);
        const answer = await clients.reconcile.sessionStatus({ session: { key }, changesSince: BigInt(changesSince), limit: 50 });
        assertExact(
          seeded.get(key)!,
          changesSince,
          {
            events: answer.stateChanges?.events.map((e) => Number(e.sequence)) ?? [],
            historyGap: answer.stateChanges?.historyGap ?? false,
            earliest: Number(answer.stateChanges?.earliestAvailableSequence ?? 0),
          },
          50,
          `${what}, ${key}`,
        );
      }
    };
    try {
      await until(() => leave !== undefined, "retention asks for its first step");
      await probe(server, "before the first step");
      let steps = 0;
      while (lastStep?.done !== true) {
        const go = leave!;
        leave = undefined;
        go();
        steps++;
        await until(() => leave !== undefined || lastStep?.done === true, `step ${steps} ends`);
        await probe(server, `after step ${steps}`);
      }
      assert.ok(steps > 1, `the backlog of 15,000 went in ${steps} steps`);
      const answer = await server.reconcile.sessionStatus({ session: { key: "agent:pr:s0" }, changesSince: 0n, limit: 200 });
      assert.equal(answer.stateChanges?.events.length, 25, "each session keeps its newest 25 of 100");
    } finally {
      leave?.();
      await server.dispose();
    }
  });
});
