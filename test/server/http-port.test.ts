/**
 * The HTTP port's bounds (issue 36, performance and safety): HTTP/1.1 meets abuse the gRPC port never
 * sees. A client that sends its headers a byte at a time is dropped; open connections are capped; a body
 * past the request limit is refused before it is read whole; error pages echo nothing; health answers.
 */
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { defaultConfig } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import { startServer, type RunningServer } from "../../src/server.js";
import { tempDir } from "../support/helpers.js";

const limits = { headersTimeoutMs: 1000, requestTimeoutMs: 2000, keepAliveTimeoutMs: 1000, maxConnections: 8 };

function hostPort(address: string): { host: string; port: number } {
  const at = address.lastIndexOf(":");
  return { host: address.slice(0, at), port: Number(address.slice(at + 1)) };
}

/** Opens a raw TCP connection to the HTTP port; resolves once connected. */
async function rawConnection(address: string): Promise<Socket> {
  const socket = connect(hostPort(address));
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  return socket;
}

/** Resolves with the milliseconds until the peer closes `socket` (and what it sent), or rejects after `withinMs`. */
function closedWithin(socket: Socket, withinMs: number): Promise<{ ms: number; received: string }> {
  const started = performance.now();
  let received = "";
  socket.on("data", (chunk: Buffer) => (received += chunk.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`still open after ${withinMs} ms`)), withinMs);
    socket.once("close", () => {
      clearTimeout(timer);
      resolve({ ms: performance.now() - started, received });
    });
    socket.on("error", () => {});
  });
}

describe("the HTTP port's bounds", () => {
  const dir = tempDir();
  let server: RunningServer;
  let base: string;

  before(async () => {
    server = await startServer(
      { ...defaultConfig, dbPath: join(dir.dir, "http.db"), listenHost: "127.0.0.1", listenPort: 0, logLevel: "silent" },
      { logger: createLogger("silent"), httpLimits: limits },
    );
    base = `http://${server.httpAddress}`;
  });

  after(async () => {
    await server.close();
    dir.remove();
  });

  test("/healthz and /readyz answer; any other page is a plain 404 that echoes nothing of the request", async () => {
    const healthz = await fetch(`${base}/healthz`);
    assert.deepEqual([healthz.status, await healthz.text()], [200, "ok\n"]);
    const readyz = await fetch(`${base}/readyz`);
    assert.deepEqual([readyz.status, await readyz.text()], [200, "serving\n"]);
    const probe = "%3Cscript%3Ealert(1)%3C%2Fscript%3E";
    const missing = await fetch(`${base}/${probe}?q=${probe}`);
    assert.deepEqual([missing.status, await missing.text(), missing.headers.get("x-content-type-options")], [404, "not found\n", "nosniff"]);
  });

  test("a request that is not a message is INVALID_ARGUMENT saying so, quoting nothing of it (JSON or binary)", async () => {
    const url = `${base}/sessionstate.v1.SignalLog/Append`;
    for (const [type, body] of [
      ["application/json", "not json <script>alert(1)</script>"],
      ["application/json", '{"session": "<script>"}'],
      ["application/proto", Buffer.from([0xff, 0xff, 0xff])],
    ] as const) {
      const answer = await fetch(url, { method: "POST", headers: { "content-type": type }, body });
      assert.deepEqual([answer.status, await answer.json()], [400, { code: "invalid_argument", message: "request: not a valid sessionstate.v1.AppendRequest message" }], `${type}`);
    }
    // A message that decodes is judged by the handlers, as on the gRPC port.
    const empty = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: '{"session":{"key":""}}' });
    assert.deepEqual([empty.status, await empty.json()], [400, { code: "invalid_argument", message: "session.key: must not be empty" }]);
  });

  test("a stream request, or a gRPC-Web one, that is not a message is INVALID_ARGUMENT too, quoting nothing of it", async () => {
    const envelope = (payload: Buffer): Buffer => Buffer.concat([Buffer.from([0, 0, 0, 0, payload.length]), payload]);
    const stream = `${base}/sessionstate.v1.Watch/SubscribeStaleNotices`;
    const said = "request: not a valid sessionstate.v1.SubscribeStaleNoticesRequest message";
    // Connect streams end with an envelope (flag 2) holding the error as JSON.
    for (const [type, payload] of [
      ["application/connect+json", Buffer.from('{"watcherKeyPrefixes":<script>}')],
      ["application/connect+proto", Buffer.from([0xff, 0xff, 0xff])],
    ] as const) {
      const answer = Buffer.from(await (await fetch(stream, { method: "POST", headers: { "content-type": type }, body: envelope(payload) })).arrayBuffer());
      assert.equal(answer[0], 2, `${type}: the end of the stream`);
      assert.deepEqual(JSON.parse(answer.subarray(5).toString()), { error: { code: "invalid_argument", message: said } }, type);
    }
    // gRPC-Web carries the status in its trailers frame (flag 0x80), unary calls and streams alike.
    for (const [url, message] of [
      [stream, said],
      [`${base}/sessionstate.v1.Reconcile/SessionStatus`, "request: not a valid sessionstate.v1.SessionStatusRequest message"],
    ] as const) {
      const answer = Buffer.from(
        await (await fetch(url, { method: "POST", headers: { "content-type": "application/grpc-web+proto" }, body: envelope(Buffer.from([0xff, 0xff, 0xff])) })).arrayBuffer(),
      );
      assert.equal(answer[0], 0x80, `${url}: trailers`);
      assert.equal(answer.subarray(5).toString(), `grpc-status: 3\r\ngrpc-message: ${encodeURIComponent(message)}\r\n`, url);
    }
  });

  test("a client that sends its headers a byte at a time is dropped once the headers timeout passes", async () => {
    const socket = await rawConnection(server.httpAddress!);
    const closed = closedWithin(socket, 10_000);
    socket.write(`GET /healthz HTTP/1.1\r\nHost: ${server.httpAddress}\r\n`);
    const drip = setInterval(() => socket.writable && socket.write("X"), 200);
    try {
      const { ms, received } = await closed;
      console.log(`slow headers: dropped after ${Math.round(ms)} ms (headers timeout ${limits.headersTimeoutMs} ms)`);
      assert.ok(ms < limits.headersTimeoutMs + 1500, `dropped after ${ms} ms`);
      assert.match(received, /^(HTTP\/1\.1 408 |$)/, "a 408, or nothing");
    } finally {
      clearInterval(drip);
      socket.destroy();
    }
  });

  test("an idle kept-alive connection is closed once the keep-alive timeout passes", async () => {
    const socket = await rawConnection(server.httpAddress!);
    const closed = closedWithin(socket, 5000);
    socket.write(`GET /healthz HTTP/1.1\r\nHost: ${server.httpAddress}\r\n\r\n`);
    const { ms, received } = await closed;
    console.log(`idle connection closed ${ms.toFixed(0)} ms after its one request (keep-alive timeout ${limits.keepAliveTimeoutMs} ms)`);
    assert.match(received, /^HTTP\/1\.1 200 OK\r\n/);
    assert.ok(ms >= limits.keepAliveTimeoutMs - 100 && ms < limits.keepAliveTimeoutMs + 1500, `closed after ${ms.toFixed(0)} ms`);
  });

  test("a client that sends its body a byte at a time is dropped once the request timeout passes", async () => {
    const socket = await rawConnection(server.httpAddress!);
    const closed = closedWithin(socket, 10_000);
    socket.write(`POST /sessionstate.v1.Reconcile/ListNamespaces HTTP/1.1\r\nHost: ${server.httpAddress}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n`);
    const drip = setInterval(() => socket.writable && socket.write(" "), 200);
    try {
      const { ms } = await closed;
      console.log(`a body dripped a byte every 200 ms was dropped after ${ms.toFixed(0)} ms (request timeout ${limits.requestTimeoutMs} ms)`);
      assert.ok(ms >= limits.requestTimeoutMs - 100 && ms < limits.requestTimeoutMs + 1500, `dropped after ${ms.toFixed(0)} ms`);
    } finally {
      clearInterval(drip);
    }
  });

  test("open connections are capped: past the cap a connection is closed at once, and one is taken again once a place is free", async () => {
    const held = await Promise.all(Array.from({ length: limits.maxConnections }, () => rawConnection(server.httpAddress!)));
    try {
      await sleep(100);
      const extra = await rawConnection(server.httpAddress!);
      const { ms } = await closedWithin(extra, 2000);
      console.log(`connection over the cap of ${limits.maxConnections}: closed after ${Math.round(ms)} ms`);
      held.pop()!.destroy();
      await sleep(100);
      const healthz = await fetch(`${base}/healthz`);
      assert.equal(healthz.status, 200);
    } finally {
      for (const socket of held) socket.destroy();
      // The server counts a connection gone once it has seen it close.
      await sleep(200);
    }
  });

  test("a body over the request limit is refused RESOURCE_EXHAUSTED before it is read whole, and the connection is closed", async () => {
    const socket = await rawConnection(server.httpAddress!);
    const closed = closedWithin(socket, 10_000);
    const declared = 64 * 1024 * 1024;
    socket.write(
      `POST /sessionstate.v1.SignalLog/Append HTTP/1.1\r\nHost: ${server.httpAddress}\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n`,
    );
    // Send 2 MiB of the 64 declared, then wait for the answer without sending more.
    socket.write(Buffer.alloc(2 * 1024 * 1024, 0x20));
    let answer = "";
    socket.on("data", (chunk: Buffer) => (answer += chunk.toString()));
    const deadline = Date.now() + 5000;
    while (!answer.includes("resource_exhausted") && Date.now() < deadline) await sleep(20);
    socket.destroy();
    await closed.catch(() => undefined);
    assert.match(answer, /^HTTP\/1\.1 429 /);
    assert.match(answer, /"code":"resource_exhausted"/);
    assert.match(answer, /"message":"the request is 67108864 bytes, more than this server takes \(--max-request-bytes 1048576\)"/);
    // The rest of the body is never read, so the connection cannot carry another request: the answer says so.
    assert.match(answer, /\r\nConnection: close\r\n/i);
  });
});

test("a replica that cannot reach its database is alive but not ready: /healthz 200, /readyz 503", async () => {
  // Nothing listens on port 1: the replica starts, listens, and waits for its database.
  const replica = await startServer(
    { ...defaultConfig, dbPath: "postgres://sessionstate@127.0.0.1:1/none", listenHost: "127.0.0.1", listenPort: 0, logLevel: "silent" },
    { logger: createLogger("silent") },
  );
  try {
    const base = `http://${replica.httpAddress}`;
    const health = await fetch(`${base}/healthz`);
    assert.deepEqual([health.status, await health.text()], [200, "ok\n"]);
    const ready = await fetch(`${base}/readyz`);
    assert.deepEqual([ready.status, await ready.text()], [503, "not serving\n"]);
  } finally {
    await replica.close();
  }
});
