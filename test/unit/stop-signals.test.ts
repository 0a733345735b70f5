/** The rule of one stop per stop (src/stop-signals.ts): the same signal within a second is the same stop. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { signalAfterStop } from "../../src/stop-signals.js";

test("the same signal within a second is the same stop; another signal, or the same one later, exits now", () => {
  const first = { signal: "SIGINT" as const, atMs: 10_000 };
  assert.equal(signalAfterStop(first, "SIGINT", 10_000), "same stop");
  assert.equal(signalAfterStop(first, "SIGINT", 10_999), "same stop");
  assert.equal(signalAfterStop(first, "SIGINT", 11_000), "exit now");
  assert.equal(signalAfterStop(first, "SIGTERM", 10_001), "exit now");
});
