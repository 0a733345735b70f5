/**
 * `sessionstate mcp` end to end: the MCP SDK's own client starts it over stdio against a real server,
 * lists its tools and calls each; a notice opened by an append appears in stale_notices once, and is
 * gone after it.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ActorType, EventKind } from "../../gen/sessionstate/v1/types_pb.js";
import { binPath } from "../support/process-helpers.js";
import { startTestServer, type TestServer } from "../support/helpers.js";

const agent = "agent:main:main";
const worker = "agent:main:subagent:worker";

/** The JSON a tool answered with (its one text block), or its error text. */
async function call(mcp: Client, name: string, args: Record<string, unknown> = {}): Promise<{ isError: boolean; value: unknown; text: string }> {
  const result = (await mcp.callTool({ name, arguments: args })) as { isError?: boolean; content: { type: string; text: string }[] };
  assert.equal(result.content.length, 1);
  const text = result.content[0]!.text;
  return { isError: result.isError === true, value: result.isError === true ? undefined : JSON.parse(text), text };
}

describe("sessionstate mcp", () => {
  let t: TestServer;
  let mcp: Client;

  before(async () => {
    t = await startTestServer();
    mcp = new Client({ name: "sessionstate-test", version: "1.0.0" });
    await mcp.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [binPath, "mcp", "--server", t.server.address, "--session", agent],
        stderr: "inherit",
      }),
    );
  });
  after(async () => {
    await mcp?.close();
    await t?.dispose();
  });

  test("lists its five tools, each described", async () => {
    const { tools } = await mcp.listTools();
    assert.deepEqual(tools.map((tool) => tool.name).sort(), ["session_status", "session_unwatch", "session_watch", "sessions_list", "stale_notices"]);
    for (const tool of tools) assert.ok((tool.description ?? "").length > 40, tool.name);
    const status = tools.find((tool) => tool.name === "session_status")!;
    assert.deepEqual(Object.keys((status.inputSchema as { properties: object }).properties).sort(), ["changesSince", "limit", "sessionKey"]);
  });

  test("a notice opened by an append is in stale_notices once, acknowledged, and gone after it", async () => {
    assert.deepEqual((await call(mcp, "session_watch", { targetKey: worker })).value, { watched: true });
    assert.deepEqual((await call(mcp, "stale_notices")).value, { session: agent, notices: [] });
    await t.signalLog.append({ session: { key: worker }, kind: EventKind.HUMAN_DIRECT_MESSAGE, actorType: ActorType.HUMAN, summary: "human message via telegram" });
    const text = `Session "${worker}" changed (other actor). Reconcile before acting: session_status sessionKey "${worker}" changesSince 0.`;
    assert.deepEqual((await call(mcp, "stale_notices")).value, {
      session: agent,
      notices: [{ sessionKey: worker, text, changesSince: 0, notifiedVersion: 1, wake: true, queueOnly: false, acknowledged: true, reopened: false }],
    });
    assert.deepEqual((await call(mcp, "stale_notices")).value, { session: agent, notices: [] }, "consumed: gone");

    const status = (await call(mcp, "session_status", { sessionKey: worker, changesSince: 0 })).value as {
      stateVersion: number;
      stateChanges: { events: { sequence: number; kind: string; actorType: string; summary: string }[]; historyGap: boolean; truncated: boolean };
    };
    assert.equal(status.stateVersion, 1);
    assert.deepEqual(
      status.stateChanges.events.map(({ sequence, kind, actorType, summary }) => ({ sequence, kind, actorType, summary })),
      [{ sequence: 1, kind: "human_direct_message", actorType: "human", summary: "human message via telegram" }],
    );
    assert.deepEqual([status.stateChanges.historyGap, status.stateChanges.truncated], [false, false]);
  });

  test("with --group, stale_notices returns only what this member holds, at most --max-in-flight", async () => {
    const grouped = new Client({ name: "sessionstate-test-group", version: "1.0.0" });
    await grouped.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [binPath, "mcp", "--server", t.server.address, "--session", agent, "--group", "agents", "--max-in-flight", "1"],
        stderr: "inherit",
      }),
    );
    try {
      const targets = ["agent:main:subagent:g1", "agent:main:subagent:g2"];
      for (const key of targets) {
        await t.watch.watch({ watcherSessionKey: agent, target: { key } });
        await t.signalLog.append({ session: { key }, kind: EventKind.GOAL_CHANGED, actorType: ActorType.AGENT, summary: "goal set" });
      }
      const first = (await call(grouped, "stale_notices")).value as { notices: { sessionKey: string; acknowledged: boolean }[] };
      const second = (await call(grouped, "stale_notices")).value as { notices: { sessionKey: string; acknowledged: boolean }[] };
      assert.deepEqual([first.notices.length, second.notices.length], [1, 1], "one at a time");
      assert.deepEqual([first.notices[0]!.sessionKey, second.notices[0]!.sessionKey].sort(), targets);
      assert.ok(first.notices[0]!.acknowledged && second.notices[0]!.acknowledged);
      assert.deepEqual(((await call(grouped, "stale_notices")).value as { notices: unknown[] }).notices, []);
    } finally {
      await grouped.close();
    }
  });

  test("reconciledThrough acknowledges through the version the agent already has: no second notice", async () => {
    const target = "agent:main:subagent:reconciled";
    await call(mcp, "session_watch", { targetKey: target });
    // Versions are sequences of the whole log: take them from the appends.
    const append = async (summary: string) =>
      Number((await t.signalLog.append({ session: { key: target }, kind: EventKind.GOAL_CHANGED, actorType: ActorType.HUMAN, summary })).stateVersion);
    const one = await append("one");
    const two = await append("two");
    const first = (await call(mcp, "stale_notices", { reconciledThrough: { [target]: two } })).value as { notices: { notifiedVersion: number; reopened: boolean }[] };
    assert.deepEqual(first.notices.map((n) => [n.notifiedVersion, n.reopened]), [[one, false]], "reconciled through the second change: not reopened");
    const three = await append("three");
    const second = (await call(mcp, "stale_notices")).value as { notices: { changesSince: number; notifiedVersion: number }[] };
    assert.deepEqual(second.notices.map((n) => [n.changesSince, n.notifiedVersion]), [[two, three]]);
    assert.deepEqual((await call(mcp, "session_unwatch", { targetKey: target })).value, { removed: true });
  });

  test("sessions_list gives state versions by agent; refusals are tool errors with the service's message", async () => {
    const ops = await t.signalLog.append({ session: { key: "agent:ops:main" }, kind: EventKind.GOAL_CHANGED, actorType: ActorType.AGENT, summary: "ops" });
    const listed = (await call(mcp, "sessions_list", { agentId: "ops" })).value;
    assert.deepEqual(listed, { sessions: [{ sessionKey: "agent:ops:main", agentId: "ops", stateVersion: Number(ops.stateVersion) }] });
    const refused = await call(mcp, "session_status", { sessionKey: "" });
    assert.deepEqual([refused.isError, refused.text], [true, "INVALID_ARGUMENT: session.key: must not be empty"]);
    const badArgs = await call(mcp, "session_status", { sessionKey: worker, limit: 500 });
    assert.equal(badArgs.isError, true, "limit above 200 is refused by the tool's schema");
  });
});
