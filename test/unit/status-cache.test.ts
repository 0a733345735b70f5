/** The SessionStatus answer cache and the change stamps it is keyed by, without a server. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { WireMessage } from "../../src/codec/wire-message.js";
import { ChangeStamps } from "../../src/store/change-stamps.js";
import { StatusAnswerCache } from "../../src/services/status-cache.js";
import { SessionStatusResponseSchema } from "../../gen/sessionstate/v1/reconcile_pb.js";

const W = "agent:main:main";
const C = "agent:main:subagent:child";

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
