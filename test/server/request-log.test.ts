/**
 * The request log, read from the real command's standard error: at debug one line per call with its
 * method, namespace, status, time and token name, and never a request's content or a token; at info only
 * the failures an operator acts on.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { Client, credentials } from "@grpc/grpc-js";
import { createServiceClient } from "../../clients/typescript/src/service-client.js";
import { SignalLog } from "../../gen/sessionstate/v1/signal_log_pb.js";
import { Reconcile } from "../../gen/sessionstate/v1/reconcile_pb.js";
import { Watch } from "../../gen/sessionstate/v1/watch_pb.js";
import { hashToken } from "../../src/rpc/tokens.js";
import { assertStatus, goal, status, tempDir, until } from "../support/helpers.js";
import { spawnServer } from "../support/process-helpers.js";

const token = "request-log-token-5a9c";
const secretSummary = "a summary that must never be logged";

interface LogLine {
  level: number;
  msg: string;
  component?: string;
  method?: string;
  namespace?: string | null;
  code?: string;
  ms?: number;
  token?: string | null;
}

/** The request log's lines in what a server wrote to standard error. */
function requestLines(stderr: string): LogLine[] {
  return stderr
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as LogLine)
    .filter((line) => line.component === "requests");
}

async function callsAgainst(logLevel: string): Promise<{ stderr: string }> {
  const dir = tempDir();
  const tokensFile = join(dir.dir, "tokens.json");
  writeFileSync(tokensFile, JSON.stringify({ tokens: [{ name: "gateway-main", sha256: hashToken(token), admin: true }] }));
  const server = await spawnServer(["--db", join(dir.dir, "log.db"), "--listen", "127.0.0.1:0", "--tokens-file", tokensFile, "--log-level", logLevel, "--max-streams-per-connection", "1"]);
  const channel = new Client(server.address, credentials.createInsecure());
  const signalLog = createServiceClient(channel, SignalLog, { metadata: { authorization: `Bearer ${token}`, "sessionstate-namespace": "team-a" } });
  const reconcile = createServiceClient(channel, Reconcile, { metadata: { authorization: `Bearer ${token}`, "sessionstate-namespace": "team-a" } });
  const anonymous = createServiceClient(channel, Reconcile, {});
  const watch = createServiceClient(channel, Watch, { metadata: { authorization: `Bearer ${token}`, "sessionstate-namespace": "team-a" } });
  try {
    await signalLog.append({ ...goal("agent:main:main"), summary: secretSummary });
    await assertStatus(reconcile.sessionStatus({ session: { key: "agent:main:main" }, changesSince: 99n }), status.OUT_OF_RANGE);
    await assertStatus(anonymous.sessionStatus({ session: { key: "agent:main:main" } }), status.UNAUTHENTICATED);
    // A second stream on a connection allowed one: RESOURCE_EXHAUSTED.
    const first = watch.subscribeStaleNotices({ watcherSessionKeys: ["agent:main:main"] });
    const firstOpen = first[Symbol.asyncIterator]();
    await firstOpen.next();
    await assertStatus((async () => { for await (const _ of watch.subscribeStaleNotices({ watcherSessionKeys: ["agent:main:main"] })); })(), status.RESOURCE_EXHAUSTED);
    first.cancel();
    await until(() => requestLines(server.stderr()).length >= (logLevel === "debug" ? 5 : 1), `the request log's lines in:\n${server.stderr()}`);
    return { stderr: server.stderr() };
  } finally {
    channel.close();
    server.child.kill("SIGTERM");
    await server.exited;
    dir.remove();
  }
}

describe("the request log", () => {
  test("at debug, one line per call: method, namespace, status, ms and the token's name; never a summary or a token", async () => {
    const { stderr } = await callsAgainst("debug");
    const lines = requestLines(stderr);
    assert.deepEqual(
      lines.map((l) => [l.msg, l.method, l.namespace, l.code, l.token]),
      [
        ["call", "/sessionstate.v1.SignalLog/Append", "team-a", "OK", "gateway-main"],
        ["call", "/sessionstate.v1.Reconcile/SessionStatus", "team-a", "OUT_OF_RANGE", "gateway-main"],
        ["call", "/sessionstate.v1.Reconcile/SessionStatus", null, "UNAUTHENTICATED", null],
        ["call failed", "/sessionstate.v1.Watch/SubscribeStaleNotices", "team-a", "RESOURCE_EXHAUSTED", "gateway-main"],
        // The first stream, cancelled by its client.
        ["call", "/sessionstate.v1.Watch/SubscribeStaleNotices", "team-a", "CANCELLED", "gateway-main"],
      ],
    );
    for (const line of lines) assert.ok(typeof line.ms === "number" && line.ms >= 0);
    assert.doesNotMatch(stderr, new RegExp(secretSummary));
    assert.doesNotMatch(stderr, new RegExp(token));
  });

  test("at info, only calls that failed with INTERNAL, UNAVAILABLE or RESOURCE_EXHAUSTED", async () => {
    const { stderr } = await callsAgainst("info");
    assert.deepEqual(
      requestLines(stderr).map((l) => [l.msg, l.method, l.code]),
      [["call failed", "/sessionstate.v1.Watch/SubscribeStaleNotices", "RESOURCE_EXHAUSTED"]],
    );
  });
});
