/**
 * One behaviour table over every protocol (issue 36): the same calls through gRPC (the gRPC port), and
 * through Connect JSON, Connect binary and gRPC-Web (the HTTP port), each against a server of its own
 * started the same way, give identical answers: responses, refusals (code and message), authentication
 * and namespace refusals, a stream that delivers a notice and is ended by the server's stop.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { toJson, type DescMessage, type DescService, type MessageShape } from "@bufbuild/protobuf";
import { ConnectError, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { Reconcile } from "../../gen/sessionstate/v1/reconcile_pb.js";
import { SignalLog } from "../../gen/sessionstate/v1/signal_log_pb.js";
import { ActorType, EventKind } from "../../gen/sessionstate/v1/types_pb.js";
import { Watch } from "../../gen/sessionstate/v1/watch_pb.js";
import { createServiceClient } from "../../clients/typescript/src/service-client.js";
import { hashToken } from "../../src/rpc/tokens.js";
import { startTestServer, tempDir, type TestServer } from "../support/helpers.js";

const W = "agent:main:main";
const C = "agent:main:subagent:child";
const secrets = { main: "main-token-1f2e", teamB: "team-b-token-5c6d" };

type Protocol = "grpc" | "connect-json" | "connect-binary" | "grpc-web";

/** A call's outcome as the table compares it: the response as JSON (times left out), or the status. */
type Outcome = { ok: unknown } | { code: number; message: string };

/** Calls one method of one service with headers, whatever the protocol. */
type Caller = <S extends DescService>(service: S, method: keyof S["method"] & string, request: object, headers?: Record<string, string>) => Promise<Outcome>;

/** Opens SubscribeStaleNotices: its messages as JSON, then how it ended. */
type Subscriber = (request: object, headers: Record<string, string>) => AsyncIterable<unknown>;

function withoutTimes(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value, (key, inner: unknown) => (key === "occurredAt" || key === "updatedAt" ? undefined : inner)));
}

function subscriberFor(protocol: Protocol, t: TestServer): Subscriber {
  const output = Watch.method.subscribeStaleNotices.output;
  if (protocol === "grpc") {
    return async function* (request, headers) {
      const client = createServiceClient(t.channel, Watch, { timeoutMs: undefined, metadata: headers });
      for await (const message of client.subscribeStaleNotices(request)) yield toJson(output, message);
    };
  }
  const transport = transportFor(protocol, t);
  return async function* (request, headers) {
    for await (const message of createClient(Watch, transport).subscribeStaleNotices(request, { headers })) yield toJson(output, message);
  };
}

function transportFor(protocol: Exclude<Protocol, "grpc">, t: TestServer): Transport {
  const baseUrl = `http://${t.server.httpAddress}`;
  return protocol === "grpc-web"
    ? createGrpcWebTransport({ baseUrl, httpVersion: "1.1" })
    : createConnectTransport({ baseUrl, httpVersion: "1.1", useBinaryFormat: protocol === "connect-binary" });
}

/** How an error ends a call or a stream, as the table compares it. */
function statusOf(err: unknown, protocol: Protocol): { code: number; message: string } {
  if (protocol === "grpc") {
    const { code, details } = err as { code: number; details: string };
    return { code, message: details };
  }
  const error = ConnectError.from(err);
  return { code: error.code, message: error.rawMessage };
}

function callerFor(protocol: Protocol, t: TestServer): Caller {
  if (protocol === "grpc") {
    return async (service, method, request, headers = {}) => {
      const client = createServiceClient(t.channel, service as never, { timeoutMs: 10_000, metadata: headers }) as Record<string, (r: object) => Promise<MessageShape<DescMessage>>>;
      try {
        const response = await client[method]!(request);
        return { ok: withoutTimes(toJson(service.method[method]!.output, response)) };
      } catch (err) {
        return statusOf(err, protocol);
      }
    };
  }
  const transport = transportFor(protocol, t);
  return async (service, method, request, headers = {}) => {
    const client = createClient(service, transport) as unknown as Record<string, (r: object, o: object) => Promise<MessageShape<DescMessage>>>;
    try {
      const response = await client[method]!(request, { headers, timeoutMs: 10_000 });
      return { ok: withoutTimes(toJson(service.method[method]!.output, response)) };
    } catch (err) {
      return statusOf(err, protocol);
    }
  };
}

/** The first message of a stream, or the status that ended it first. */
async function firstOrEnd(messages: AsyncIterable<unknown>, protocol: Protocol): Promise<Outcome> {
  try {
    for await (const message of messages) return { ok: message };
    return { ok: "ended" };
  } catch (err) {
    return statusOf(err, protocol);
  }
}

/** The table: every row a call and its outcome, in order, on a new server. */
async function table(protocol: Protocol): Promise<Record<string, Outcome>> {
  const dir = tempDir();
  const tokensFile = join(dir.dir, "tokens.json");
  writeFileSync(
    tokensFile,
    JSON.stringify({
      tokens: [
        { name: "gateway-main", sha256: hashToken(secrets.main), agents: ["main"] },
        { name: "team-b", sha256: hashToken(secrets.teamB), agents: ["main"], namespaces: ["team-b"] },
      ],
    }),
  );
  const t = await startTestServer({ tokensFile });
  const call = callerFor(protocol, t);
  const main = { authorization: `Bearer ${secrets.main}` };
  const rows: Record<string, Outcome> = {};
  try {
    rows["Append"] = await call(SignalLog, "append", { session: { key: C }, kind: EventKind.GOAL_CHANGED, actorType: ActorType.AGENT, actorId: W, summary: "goal set" }, main);
    rows["Append, no key"] = await call(SignalLog, "append", { session: { key: "" }, kind: EventKind.GOAL_CHANGED, actorType: ActorType.AGENT, summary: "x" }, main);
    rows["Append, no token"] = await call(SignalLog, "append", { session: { key: C }, kind: EventKind.GOAL_CHANGED, actorType: ActorType.AGENT, summary: "x" });
    rows["Append, unknown token"] = await call(SignalLog, "append", { session: { key: C }, kind: EventKind.GOAL_CHANGED, actorType: ActorType.AGENT, summary: "x" }, { authorization: "Bearer nope" });
    rows["Append, another agent"] = await call(SignalLog, "append", { session: { key: "agent:ops:x" }, kind: EventKind.GOAL_CHANGED, actorType: ActorType.AGENT, summary: "x" }, main);
    rows["SessionStatus, another namespace"] = await call(Reconcile, "sessionStatus", { session: { key: C } }, { ...main, "sessionstate-namespace": "team-b" });
    rows["SessionStatus, a bad namespace"] = await call(Reconcile, "sessionStatus", { session: { key: C } }, { ...main, "sessionstate-namespace": "Team B" });
    rows["SessionStatus, changes_since -1"] = await call(Reconcile, "sessionStatus", { session: { key: C }, changesSince: -1n }, main);
    rows["SessionStatus, changes_since 9"] = await call(Reconcile, "sessionStatus", { session: { key: C }, changesSince: 9n }, main);
    rows["Watch"] = await call(Watch, "watch", { watcherSessionKey: W, target: { key: C } }, main);
    rows["Watch, a bare key"] = await call(Watch, "watch", { watcherSessionKey: W, target: { key: "global" } }, main);
    rows["Append, a person"] = await call(SignalLog, "append", { session: { key: C }, kind: EventKind.HUMAN_DIRECT_MESSAGE, actorType: ActorType.HUMAN, summary: "stop" }, main);
    rows["SessionStatus, changes_since 1"] = await call(Reconcile, "sessionStatus", { session: { key: C }, changesSince: 1n }, main);
    rows["ListWatches"] = await call(Watch, "listWatches", { watcherSessionKey: W }, main);
    rows["ListNamespaces"] = await call(Reconcile, "listNamespaces", {}, main);
    rows["ListNamespaces, team token"] = await call(Reconcile, "listNamespaces", {}, { authorization: `Bearer ${secrets.teamB}` });
    rows["ListSessions, key prefix"] = await call(Reconcile, "listSessions", { agentId: "main", keyPrefix: "agent:main:sub" }, main);
    rows["ListSessions, recent first"] = await call(Reconcile, "listSessions", { agentId: "main", recentFirst: true }, main);
    rows["ListSessions, both"] = await call(Reconcile, "listSessions", { agentId: "main", recentFirst: true, keyPrefix: "a" }, main);
    rows["GetServerInfo"] = await call(Reconcile, "getServerInfo", {}, main);
    // Past the request limit (1 MiB): the same code; the wording is each transport's own (grpc-js, connect-es).
    const oversized = await call(SignalLog, "append", { session: { key: C }, kind: EventKind.GOAL_CHANGED, actorType: ActorType.AGENT, summary: "x".repeat(2 << 20) }, main);
    rows["Append, 2 MiB (code)"] = "code" in oversized ? { code: oversized.code, message: "" } : oversized;
    rows["AckNotices, stale"] = await call(Watch, "ackNotices", { acks: [{ watcherSessionKey: W, target: { key: C }, notifiedVersion: 1n }] }, main);
    rows["AckNotices"] = await call(Watch, "ackNotices", { acks: [{ watcherSessionKey: W, target: { key: C }, notifiedVersion: 2n }] }, main);
    rows["Prune"] = await call(SignalLog, "prune", {}, main);
    rows["SubscribeStaleNotices, no token"] = await firstOrEnd(subscriberFor(protocol, t)({ watcherSessionKeys: [W] }, {}), protocol);
    // A stream: synced, then the notice an append opens, then the server's stop ends it.
    const stream = subscriberFor(protocol, t)({ watcherSessionKeys: [W] }, main)[Symbol.asyncIterator]();
    rows["SubscribeStaleNotices, synced"] = { ok: (await stream.next()).value };
    await call(SignalLog, "append", { session: { key: C }, kind: EventKind.HUMAN_DIRECT_MESSAGE, actorType: ActorType.HUMAN, summary: "again" }, main);
    rows["SubscribeStaleNotices, the notice"] = { ok: (await stream.next()).value };
    const ended = stream.next().then(
      (next) => ({ ok: next }),
      (err: unknown) => statusOf(err, protocol),
    );
    await t.server.close();
    rows["SubscribeStaleNotices, the server stops"] = await ended;
    return rows;
  } finally {
    await t.dispose();
    dir.remove();
  }
}

test("every call gives the same answer over gRPC, Connect JSON, Connect binary and gRPC-Web", async () => {
  const grpc = await table("grpc");
  if (process.env.SHOW_TABLE === "1") console.log(JSON.stringify(grpc, null, 1));
  // The table is what the gRPC port answers; the HTTP port must answer the same, row by row.
  assert.deepEqual(grpc["Append, no token"], {
    code: 16,
    message: "missing bearer token: send the metadata authorization: Bearer <token> (the sessionstate commands read it from SESSIONSTATE_TOKEN or --token-file; the clients take a token option)",
  });
  assert.deepEqual(grpc["SessionStatus, changes_since -1"], { code: 3, message: "changes_since: must not be negative" });
  assert.deepEqual(grpc["Append, 2 MiB (code)"], { code: 8, message: "" });
  assert.deepEqual(grpc["ListSessions, both"], { code: 3, message: "recent_first: cannot be combined with key_prefix" });
  for (const protocol of ["connect-json", "connect-binary", "grpc-web"] as const) {
    const rows = await table(protocol);
    for (const row of Object.keys(grpc)) assert.deepEqual(rows[row], grpc[row], `${protocol}: ${row}`);
  }
});
