import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { toBinary } from "@bufbuild/protobuf";
import { SessionStatusResponseSchema } from "../gen/sessionstate/v1/reconcile_pb.js";
import { WireMessage } from "../src/codec/wire-message.js";
import { ChangeStamps } from "../src/store/change-stamps.js";
import { StatusAnswerCache } from "../src/services/status-cache.js";
import { goal, metricValue, scrapeMetrics, seededRandom, startTestServer, type TestServer } from "./support/helpers.js";

const W = "agent:main:main";
const C = "agent:main:subagent:child";

/** The server's count of SessionStatus answers by source. */
async function answers(t: TestServer): Promise<{ store: number; cache: number }> {
  const text = await scrapeMetrics(t.server.metricsPort);
  const count = (source: string): number => metricValue(text, `sessionstate_status_answers_total{source="${source}"}`);
  return { store: count("store"), cache: count("cache") };
}

/** A SessionStatus answer as its bytes, so answers compare exactly. */
async function statusBytes(t: TestServer, key: string, changesSince: bigint | undefined, limit = 0): Promise<string> {
  const answer = await t.reconcile.sessionStatus({ session: { key }, ...(changesSince === undefined ? {} : { changesSince }), limit });
  return Buffer.from(toBinary(SessionStatusResponseSchema, answer)).toString("hex");
}

describe("SessionStatus answers remembered between writes (SQLite)", () => {
  test("the same question is answered from memory until a write touches the session, then from the store", async () => {
    const t = await startTestServer({ metricsListen: { host: "127.0.0.1", port: 0 }, maxEvents: 4 });
    try {
      for (let i = 0; i < 3; i++) await t.signalLog.append(goal(W, { summary: `step ${i}` }));
      const first = await t.reconcile.sessionStatus({ session: { key: W }, changesSince: 0n });
      const again = await t.reconcile.sessionStatus({ session: { key: W }, changesSince: 0n });
      assert.deepEqual(again, first);
      assert.deepEqual(await answers(t), { store: 1, cache: 1 });
      // Another question about the same session is another answer.
      assert.equal((await t.reconcile.sessionStatus({ session: { key: W }, changesSince: 2n })).stateChanges?.events.length, 1);
      assert.deepEqual(await answers(t), { store: 2, cache: 1 });

      // A write to another session leaves the answer standing.
      await t.signalLog.append(goal(C));
      await t.reconcile.sessionStatus({ session: { key: W }, changesSince: 0n });
      assert.deepEqual(await answers(t), { store: 2, cache: 2 });

      // An append to the session is seen by the next question at once.
      await t.signalLog.append(goal(W, { summary: "step 3" }));
      const appended = await t.reconcile.sessionStatus({ session: { key: W }, changesSince: 0n });
      assert.equal(appended.stateVersion, 5n);
      assert.deepEqual(appended.stateChanges?.events.map((e) => e.summary), ["step 0", "step 1", "step 2", "step 3"]);
      assert.deepEqual(await answers(t), { store: 3, cache: 2 });

      // So is pruning (the cap is 4 events): the oldest event goes and the gap shows.
      await t.reconcile.sessionStatus({ session: { key: W }, changesSince: 0n });
      assert.equal((await t.signalLog.prune({})).eventsRemoved, 1);
      const pruned = await t.reconcile.sessionStatus({ session: { key: W }, changesSince: 0n });
      assert.deepEqual(pruned.stateChanges?.events.map((e) => e.summary), ["step 1", "step 2", "step 3"]);
      assert.equal(pruned.stateChanges?.historyGap, true);
      assert.equal(pruned.stateChanges?.earliestAvailableSequence, 2n);

      // And deleting the session.
      await t.signalLog.deleteSession({ session: { key: W } });
      const deleted = await t.reconcile.sessionStatus({ session: { key: W }, changesSince: 0n });
      assert.equal(deleted.stateVersion, 0n);
      assert.deepEqual(deleted.stateChanges?.events, []);
      assert.deepEqual(await answers(t), { store: 5, cache: 3 });
    } finally {
      await t.dispose();
    }
  });

  test("over random writes, every answer equals the one a server without the cache gives", async () => {
    // The same operations on two servers: one remembers answers, one always reads the store.
    const cached = await startTestServer({ maxEvents: 8, metricsListen: { host: "127.0.0.1", port: 0 } });
    const plain = await startTestServer({ maxEvents: 8, statusCacheBytes: 0 });
    const random = seededRandom(7);
    const keys = [W, C, "agent:other:main"];
    try {
      let questions = 0;
      let eventsPruned = 0;
      for (let step = 0; step < 600; step++) {
        const key = keys[random(keys.length)]!;
        const op = random(20);
        const both = async <T>(call: (t: TestServer) => Promise<T>): Promise<[T, T]> => [await call(cached), await call(plain)];
        if (op < 8) {
          const dedupeKey = random(4) === 0 ? `d${random(5)}` : "";
          await both((t) => t.signalLog.append(goal(key, { summary: `step ${step}`, dedupeKey })));
        } else if (op === 8) {
          await both((t) => t.signalLog.deleteSession({ session: { key } }));
        } else if (op === 9) {
          // Every session's history asked for before and after: the answers before are remembered.
          for (const session of keys) await both((t) => statusBytes(t, session, 0n));
          const [a, b] = await both((t) => t.signalLog.prune({}));
          assert.deepEqual(a, b);
          eventsPruned += a.eventsRemoved;
          for (const session of keys) {
            const [x, y] = await both((t) => statusBytes(t, session, 0n));
            assert.equal(x, y, `step ${step}: SessionStatus ${session} since 0 after pruning`);
          }
        } else {
          const version = (await plain.reconcile.sessionStatus({ session: { key } })).stateVersion;
          const since = random(3) === 0 ? undefined : BigInt(random(Number(version) + 1));
          const limit = random(3) === 0 ? 2 : 0;
          const [a, b] = await both((t) => statusBytes(t, key, since, limit));
          assert.equal(a, b, `step ${step}: SessionStatus ${key} since ${since} limit ${limit}`);
          // Asked again, with nothing written in between.
          assert.equal(await statusBytes(cached, key, since, limit), b, `step ${step}: the same question again`);
          questions++;
        }
      }
      assert.ok(questions > 200, `${questions} questions asked`);
      assert.ok(eventsPruned > 20, `${eventsPruned} events pruned`);
      const { cache } = await answers(cached);
      assert.ok(cache >= questions, `${cache} of ${2 * questions} answers from the cache`);
    } finally {
      await cached.dispose();
      await plain.dispose();
    }
  });
});

describe("StatusAnswerCache", () => {
  const answer = (bytes: number): WireMessage<typeof SessionStatusResponseSchema> => new WireMessage(new Uint8Array(bytes));
  /** A cache over settable stamps. */
  const cacheOf = (maxBytes: number, stampsCurrent?: () => Promise<void>) => {
    const stamps = new Map<string, number>();
    const cache = new StatusAnswerCache(maxBytes, (session) => stamps.get(session.key) ?? 0, stampsCurrent);
    const ask = async (key: string, read?: WireMessage<typeof SessionStatusResponseSchema>) => {
      const found = await cache.lookup({ namespace: "default", agentId: "main", key }, 0, 200);
      if ("answer" in found) return found.answer;
      if (read !== undefined) found.remember(read);
      return undefined;
    };
    return { cache, stamps, ask };
  };

  test("an answer is served only under the stamp it was read with", async () => {
    const { cache, stamps, ask } = cacheOf(1000);
    const remembered = answer(10);
    assert.equal(await ask(W, remembered), undefined);
    assert.equal(await ask(W), remembered);
    stamps.set(W, 1);
    assert.equal(await ask(W), undefined);
    // A stale entry is dropped when found stale.
    assert.deepEqual(cache.size, { answers: 0, bytes: 0 });
  });

  test("a write between the lookup and the store's read makes the answer miss later", async () => {
    const { stamps, ask, cache } = cacheOf(1000);
    const found = await cache.lookup({ namespace: "default", agentId: "main", key: W }, 0, 200);
    assert.ok("remember" in found);
    stamps.set(W, 1); // the write
    found.remember(answer(10)); // read after the write, remembered under the stamp from before it
    assert.equal(await ask(W), undefined);
  });

  test("keys tell apart every part of the question", () => {
    const keys = [
      StatusAnswerCache.keyOf({ namespace: "default", agentId: "a", key: "agent:a:b" }, 0, 200),
      StatusAnswerCache.keyOf({ namespace: "default", agentId: "a", key: "agent:a:b" }, undefined, 200),
      StatusAnswerCache.keyOf({ namespace: "default", agentId: "a", key: "agent:a:b" }, 0, 20),
      StatusAnswerCache.keyOf({ namespace: "default", agentId: "a", key: "agent:a:b" }, 1, 200),
      StatusAnswerCache.keyOf({ namespace: "default", agentId: "a", key: "gent:a:b" }, 0, 200),
      StatusAnswerCache.keyOf({ namespace: "default", agentId: "aa", key: "gent:a:b" }, 0, 200),
      StatusAnswerCache.keyOf({ namespace: "default", agentId: "", key: "agent:a:b" }, 0, 200),
      StatusAnswerCache.keyOf({ namespace: "other", agentId: "a", key: "agent:a:b" }, 0, 200),
      StatusAnswerCache.keyOf({ namespace: "defaulta", agentId: "", key: "agent:a:b" }, 0, 200),
    ];
    assert.equal(new Set(keys).size, keys.length);
  });

  test("the bytes held stay under the bound; the least recently used go first", async () => {
    const { cache, ask } = cacheOf(1000);
    for (let i = 0; i < 4; i++) await ask(`k${i}`, answer(100));
    assert.equal(cache.size.answers, 4);
    await ask("k0");
    // Each takes 123 bytes (100 and its key, which names the namespace): 8 fit, so the 9th pushes out the
    // least recently used, k1.
    for (let i = 4; i < 9; i++) await ask(`k${i}`, answer(100));
    assert.deepEqual(cache.size, { answers: 8, bytes: 984 });
    assert.equal(await ask("k1"), undefined);
    for (const kept of ["k0", "k2", "k3", "k8"]) assert.notEqual(await ask(kept), undefined, kept);
    // An answer above an eighth of the bound is not kept at all; a bound of 0 keeps nothing.
    await ask("k99", answer(200));
    assert.equal(await ask("k99"), undefined);
    const none = cacheOf(0);
    await none.ask("k0", answer(1));
    assert.equal(await none.ask("k0"), undefined);
  });

  test("where other processes write, a held answer is served only after the stamps have heard of every write", async () => {
    let heard = 0;
    const unheard: string[] = [];
    // The store's stamps learn of another process's writes only when asked to catch up.
    const { stamps, ask } = cacheOf(1000, async () => {
      heard++;
      for (const key of unheard.splice(0)) stamps.set(key, (stamps.get(key) ?? 0) + 1);
    });
    const remembered = answer(10);
    assert.equal(await ask(W, remembered), undefined);
    assert.equal(heard, 0, "a question with no answer held does not wait to catch up");
    assert.equal(await ask(W), remembered);
    assert.equal(heard, 1);
    unheard.push(W); // another replica wrote to W
    assert.equal(await ask(W), undefined, "the write is heard before the held answer is served");
    assert.equal(heard, 2);
    unheard.push(C); // a write to another session leaves W's answer standing
    assert.equal(await ask(W, remembered), undefined);
    assert.equal(await ask(W), remembered);
  });
});

describe("ChangeStamps", () => {
  test("a bump changes the session's stamp and no stamp read before it comes back", () => {
    const stamps = new ChangeStamps();
    const a = { namespace: "default", agentId: "main", key: W };
    const b = { namespace: "default", agentId: "main", key: C };
    const seen = new Set([stamps.of(a)]);
    for (let i = 0; i < 5; i++) {
      stamps.bump(a);
      assert.ok(!seen.has(stamps.of(a)));
      seen.add(stamps.of(a));
    }
    const beforeAll = [stamps.of(a), stamps.of(b)];
    stamps.bumpAll();
    assert.notEqual(stamps.of(a), beforeAll[0]);
    assert.notEqual(stamps.of(b), beforeAll[1]);
    const bBefore = stamps.of(b);
    stamps.bump(a);
    // Sessions in different slots keep their stamps (these two hash apart).
    assert.equal(stamps.of(b), bBefore);
  });
});
