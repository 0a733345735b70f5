/** Session keys and pages of sessions (domain/session-key). */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { sessionPageStart } from "../../src/domain/session-key.js";

describe("session pages", () => {
  test("a page continues after the last (agent id, key); a page of one agent continues only after its own key", () => {
    const after = { namespace: "default", agentId: "ops", key: "agent:ops:b" };
    assert.deepEqual(sessionPageStart(undefined, undefined), { agentId: "", key: "" });
    assert.deepEqual(sessionPageStart(undefined, after), { agentId: "ops", key: "agent:ops:b" });
    assert.deepEqual(sessionPageStart("ops", after), { agentId: "ops", key: "agent:ops:b" });
    assert.deepEqual(sessionPageStart("dev", after), { agentId: "dev", key: "" });
    assert.deepEqual(sessionPageStart("dev", undefined), { agentId: "dev", key: "" });
  });
});
