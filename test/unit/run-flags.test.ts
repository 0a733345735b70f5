/** Run flags and own texts (domain/run-flags). */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { planOwnText } from "../../src/domain/run-flags.js";

describe("own texts", () => {
  test("an own text goes after the newest and only the newest `keep` stay", () => {
    assert.deepEqual(planOwnText(0, 3), { position: 1, trimThrough: -2 });
    assert.deepEqual(planOwnText(7, 3), { position: 8, trimThrough: 5 });
  });
});
