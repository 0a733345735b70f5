/**
 * The HTTP port answers only its own names (SPEC §13.1, issue 40): a request addressed to another name
 * (what a DNS-rebinding page's browser sends as Host) is 421 before anything is read or written, and a
 * request from a page of another origin is 403, on every path: the API, the hooks, the console, /readyz.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { hostPolicyFor } from "../../src/rpc/allowed-hosts.js";
import { loadConfig } from "../../src/config.js";
import { metricValue, scrapeMetrics, startTestServer, type TestServer } from "../support/helpers.js";
import { rawHttp } from "../support/raw-http.js";

const json = { "content-type": "application/json" };
const misdirected = "misdirected request: this server does not answer to that name (see --http-allowed-hosts)\n";
const forbidden = "forbidden: requests from pages of another origin are refused\n";

describe("the names the HTTP port answers to", () => {
  let server: TestServer;
  let address: string;
  let port: number;

  before(async () => {
    server = await startTestServer({ httpListen: { host: "127.0.0.1", port: 0 }, httpAllowedHosts: ["sessionstate.internal"], metricsListen: { host: "127.0.0.1", port: 0 } });
    address = server.server.httpAddress!;
    port = Number(address.slice(address.lastIndexOf(":") + 1));
  });
  after(() => server.dispose());

  test("a Host that is not one of its names is 421 with a fixed text on every path, and nothing is read or written", async () => {
    for (const [method, path, body] of [
      ["POST", "/sessionstate.v1.Reconcile/ListNamespaces", "{}"],
      ["POST", "/sessionstate.v1.SignalLog/Append", JSON.stringify({ session: { key: "agent:main:rebound" }, kind: "EVENT_KIND_GOAL_CHANGED", actorType: "ACTOR_TYPE_AGENT", summary: "x" })],
      ["POST", "/hooks/claude", JSON.stringify({ session_id: "s" })],
      ["GET", "/", undefined],
      ["GET", "/readyz", undefined],
      ["GET", "/healthz", undefined],
    ] as const) {
      for (const host of ["attacker.test", `attacker.test:${port}`, `127.0.0.2:${port}`, `localhost:${port + 1}`]) {
        const answer = await rawHttp(address, { method, path, headers: { host, ...json }, ...(body === undefined ? {} : { body }) });
        assert.deepEqual([answer.status, answer.text], [421, misdirected], `${method} ${path} Host ${host}`);
      }
    }
    const status = await server.reconcile.sessionStatus({ session: { key: "agent:main:rebound" } });
    assert.equal(status.stateVersion, 0n, "the refused Append wrote nothing");
    const metrics = await scrapeMetrics(server.server.metricsPort);
    assert.equal(metricValue(metrics, 'sessionstate_http_refused_total{reason="host"}'), 24);
  });

  test("its own names answer: 127.0.0.1, localhost and [::1] with its port, and a configured name on any port", async () => {
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, "sessionstate.internal", `sessionstate.internal:8443`, `LOCALHOST:${port}`]) {
      const readyz = await rawHttp(address, { path: "/readyz", headers: { host } });
      assert.deepEqual([readyz.status, readyz.text], [200, "serving\n"], host);
      const api = await rawHttp(address, { method: "POST", path: "/sessionstate.v1.Reconcile/ListNamespaces", headers: { host, ...json }, body: "{}" });
      assert.equal(api.status, 200, host);
    }
  });

  test("an Origin of another page is 403 on every path; its own origin and no Origin at all pass", async () => {
    const host = `127.0.0.1:${port}`;
    for (const origin of ["http://attacker.test", `http://attacker.test:${port}`, "null", `http://127.0.0.1:${port + 1}`, `file://`, `http://localhost:${port}/x`]) {
      for (const [method, path] of [["POST", "/sessionstate.v1.Reconcile/ListNamespaces"], ["POST", "/hooks/codex"], ["GET", "/"], ["GET", "/readyz"], ["OPTIONS", "/sessionstate.v1.SignalLog/Append"]] as const) {
        const answer = await rawHttp(address, { method, path, headers: { host, origin, ...json }, ...(method === "POST" ? { body: "{}" } : {}) });
        assert.deepEqual([answer.status, answer.text], [403, forbidden], `${method} ${path} Origin ${origin}`);
      }
    }
    for (const origin of [`http://127.0.0.1:${port}`, `http://localhost:${port}`, `http://[::1]:${port}`, "https://sessionstate.internal"]) {
      const answer = await rawHttp(address, { method: "POST", path: "/sessionstate.v1.Reconcile/ListNamespaces", headers: { host, origin, ...json }, body: "{}" });
      assert.equal(answer.status, 200, origin);
    }
  });
});

describe("hostPolicyFor", () => {
  test("a wildcard address answers to itself and the machine's own IP literals, nothing else unless configured", () => {
    const policy = hostPolicyFor({ listenHost: "0.0.0.0", port: 8080, tls: true, configured: [], interfaceAddresses: ["127.0.0.1", "10.1.2.3", "::1", "fe80::1%eth0"] });
    assert.deepEqual(policy.names, ["0.0.0.0:8080", "127.0.0.1:8080", "10.1.2.3:8080", "[::1]:8080", "[fe80::1]:8080"]);
    assert.equal(policy.allowsHost("10.1.2.3:8080"), true);
    assert.equal(policy.allowsHost("10.1.2.3"), false, "the port is 8080, not TLS's 443");
    assert.equal(policy.allowsHost("localhost:8080"), false);
    assert.equal(policy.allowsHost("example.com:8080"), false);
    assert.equal(policy.allowsHost(undefined), false);
  });

  test("a non-loopback address answers to itself and its configured names; a name with a port only there", () => {
    const policy = hostPolicyFor({ listenHost: "10.1.2.3", port: 443, tls: true, configured: ["state.example.com", "proxy.local:8443"], interfaceAddresses: [] });
    assert.equal(policy.allowsHost("10.1.2.3"), true, "443 is TLS's default port");
    assert.equal(policy.allowsHost("state.example.com:9999"), true);
    assert.equal(policy.allowsHost("proxy.local:8443"), true);
    assert.equal(policy.allowsHost("proxy.local:443"), false);
    assert.equal(policy.allowsHost("127.0.0.1:443"), false);
    assert.equal(policy.allowsOrigin("https://state.example.com"), true);
    assert.equal(policy.allowsOrigin("https://evil.example.com"), false);
  });

  test("--http-allowed-hosts takes names, IP literals and [IPv6] with optional ports, and names every bad one", () => {
    assert.deepEqual(loadConfig(["--http-allowed-hosts", "A.example.com, 10.0.0.1:8080,[::1]"], {}).httpAllowedHosts, ["a.example.com", "10.0.0.1:8080", "[::1]"]);
    assert.throws(
      () => loadConfig(["--http-allowed-hosts", "http://x,a..b,[zz],h:70000"], {}),
      (err: Error) =>
        err.message.includes('--http-allowed-hosts: "http://x" is not a host name, an IP address or [IPv6], with an optional :PORT; "a..b" is not a host name; "[zz]" is not a host name, an IP address or [IPv6], with an optional :PORT; "h:70000": the port must be 1-65535'),
    );
  });
});
