import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { toBinary } from "@bufbuild/protobuf";
import { SessionStatusResponseSchema } from "../../gen/sessionstate/v1/reconcile_pb.js";
import { goal, metricValue, scrapeMetrics, seededRandom, startTestServer, type TestServer } from "../support/helpers.js";

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
