import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { createServer as createTlsServer } from "node:tls";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Client, credentials } from "@grpc/grpc-js";
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { Health, HealthCheckResponse_ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { Reconcile } from "../../gen/sessionstate/v1/reconcile_pb.js";
import { ipTargetServerName, SessionStateClient, targetHost } from "../../clients/typescript/src/session-state-client.js";
import { createServiceClient } from "../../clients/typescript/src/service-client.js";
import { hashToken } from "../../src/rpc/tokens.js";
import { assertStatus, goal, human, startTestServer, status, tempDir, type TestServer } from "../support/helpers.js";
import { binPath, runCli, spawnServer } from "../support/process-helpers.js";
import { makeTestPki, type TestPki } from "../support/tls-helpers.js";

const W = "agent:main:main";
const C = "agent:main:subagent:child";
const silent = { warn: () => {} };

test("the host a target names: host:port, [v6]:port, dns: and ipv4: targets, lists", () => {
  assert.deepEqual(
    ["127.0.0.1:50051", "[::1]:50051", "localhost:50051", "dns:///example.com:443", "ipv4:10.0.0.1:1,10.0.0.2:1", "ipv6:[::1]:5", "example.com"].map(targetHost),
    ["127.0.0.1", "::1", "localhost", "example.com", "10.0.0.1", "::1", "example.com"],
  );
});

describe("TLS", () => {
  const dir = tempDir();
  let pki: TestPki;
  before(() => {
    pki = makeTestPki(dir.dir);
  });
  after(() => dir.remove());

  test("a client trusting the CA connects; a plaintext client to the TLS port fails", async () => {
    const t = await startTestServer({ tls: { certPem: pki.serverCertPem, keyPem: pki.serverKeyPem } });
    const client = new SessionStateClient({ address: t.server.address, tls: { caPem: pki.caPem }, logger: silent });
    const plain = new Client(t.server.address, credentials.createInsecure());
    try {
      assert.equal((await client.reconcile.sessionStatus({ session: { key: W } })).stateVersion, 0n);
      const reconcile = createServiceClient(plain, Reconcile, { timeoutMs: 3000 });
      await assertStatus(reconcile.sessionStatus({ session: { key: W } }), status.UNAVAILABLE);
    } finally {
      client.close();
      plain.close();
      await t.dispose();
    }
  });

  test("by IP address the client sends no IP as the TLS server name (Node 26 refuses one), and checks the certificate's IP", async () => {
    // What a TLS server hears from the client: the server name it sends.
    const heard: (string | false | null)[] = [];
    const listener = createTlsServer({ cert: pki.serverCertPem, key: pki.serverKeyPem, ALPNProtocols: ["h2"] }, (socket) => {
      heard.push(socket.servername);
      socket.destroy();
    });
    await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
    const port = (listener.address() as AddressInfo).port;
    const byIp = new SessionStateClient({ address: `127.0.0.1:${port}`, tls: { caPem: pki.caPem }, logger: silent });
    try {
      await assertStatus(byIp.reconcile.sessionStatus({ session: { key: W } }, { timeoutMs: 2000 }), status.UNAVAILABLE);
      assert.ok(heard.length > 0, "the client reached the TLS server");
      assert.deepEqual([...new Set(heard)], [ipTargetServerName]);
    } finally {
      byIp.close();
      listener.close();
    }
    // A certificate that names the host but not its IP address is refused by IP, served by name.
    mkdirSync(join(dir.dir, "name-only"));
    const nameOnly = makeTestPki(join(dir.dir, "name-only"), "DNS:localhost");
    const t = await startTestServer({ tls: { certPem: nameOnly.serverCertPem, keyPem: nameOnly.serverKeyPem } });
    const port2 = t.server.address.slice(t.server.address.lastIndexOf(":") + 1);
    try {
      const refused = await runCli(["sessions", "--server", `127.0.0.1:${port2}`, "--tls-ca", nameOnly.paths.ca]);
      assert.deepEqual(
        { code: refused.code, stderr: refused.stderr },
        {
          code: 1,
          stderr: `sessionstate sessions: TLS with the server at 127.0.0.1:${port2} failed: Hostname/IP does not match certificate's altnames: IP: 127.0.0.1 is not in the cert's list (check --tls-ca, and the names in the server's certificate)\n`,
        },
      );
      const untrusted = await runCli(["sessions", "--server", `localhost:${port2}`, "--tls-ca", pki.paths.ca]);
      assert.equal(untrusted.stderr, `sessionstate sessions: TLS with the server at localhost:${port2} failed: unable to verify the first certificate (check --tls-ca, and the names in the server's certificate)\n`);
      const byName = await runCli(["sessions", "--server", `localhost:${port2}`, "--tls-ca", nameOnly.paths.ca]);
      assert.equal(byName.code, 0, byName.stderr);
    } finally {
      await t.dispose();
    }
  });

  test("the MCP server reaches a TLS server by IP address (Node 26 included) and reads through it", async () => {
    const t = await startTestServer({ tls: { certPem: pki.serverCertPem, keyPem: pki.serverKeyPem } });
    const port = t.server.address.slice(t.server.address.lastIndexOf(":") + 1);
    const mcp = new McpClient({ name: "sessionstate-test", version: "1.0.0" });
    const client = new SessionStateClient({ address: t.server.address, tls: { caPem: pki.caPem }, logger: silent });
    try {
      const appended = await client.signalLog.append(goal(W));
      await mcp.connect(
        new StdioClientTransport({ command: process.execPath, args: [binPath, "mcp", "--server", `127.0.0.1:${port}`, "--tls-ca", pki.paths.ca, "--session", W], stderr: "pipe" }),
      );
      const result = (await mcp.callTool({ name: "sessions_list", arguments: { agentId: "main" } })) as { isError?: boolean; content: { text: string }[] };
      assert.deepEqual(
        { isError: result.isError === true, value: JSON.parse(result.content[0]!.text) as unknown },
        { isError: false, value: { sessions: [{ sessionKey: W, agentId: "main", stateVersion: Number(appended.stateVersion) }] } },
      );
    } finally {
      client.close();
      await mcp.close();
      await t.dispose();
    }
  });

  test("with mutual TLS a client without a certificate is refused, one with a certificate is served", async () => {
    const t = await startTestServer({
      tls: { certPem: pki.serverCertPem, keyPem: pki.serverKeyPem, clientCaPem: pki.caPem },
    });
    const anonymous = new SessionStateClient({ address: t.server.address, tls: { caPem: pki.caPem }, logger: silent });
    const known = new SessionStateClient({
      address: t.server.address,
      tls: { caPem: pki.caPem, certPem: pki.clientCertPem, keyPem: pki.clientKeyPem },
      logger: silent,
    });
    try {
      await assertStatus(anonymous.reconcile.sessionStatus({ session: { key: W } }, { timeoutMs: 3000 }), status.UNAVAILABLE);
      assert.equal((await known.reconcile.sessionStatus({ session: { key: W } })).stateVersion, 0n);
    } finally {
      anonymous.close();
      known.close();
      await t.dispose();
    }
  });
});

describe("authentication and scopes", () => {
  const dir = tempDir();
  const tokensFile = join(dir.dir, "tokens.json");
  const secrets = { main: "main-token-1f2e", ops: "ops-token-9a8b", admin: "admin-token-77cd" };
  let t: TestServer;
  const as = (token?: string) =>
    new SessionStateClient({ address: t.server.address, logger: silent, ...(token === undefined ? {} : { token }) });
  let main: SessionStateClient, ops: SessionStateClient, admin: SessionStateClient, anonymous: SessionStateClient;

  before(async () => {
    writeFileSync(
      tokensFile,
      JSON.stringify({
        tokens: [
          { name: "gateway-main", sha256: hashToken(secrets.main), agents: ["main"] },
          { name: "gateway-ops", sha256: hashToken(secrets.ops), agents: ["ops"] },
          { name: "operator", sha256: hashToken(secrets.admin), admin: true },
        ],
      }),
    );
    t = await startTestServer({ tokensFile });
    [main, ops, admin, anonymous] = [as(secrets.main), as(secrets.ops), as(secrets.admin), as()];
  });
  after(async () => {
    for (const client of [main, ops, admin, anonymous]) client.close();
    await t.dispose();
    dir.remove();
  });

  test("the tokens file holds only hashes", () => {
    const text = readFileSync(tokensFile, "utf8");
    for (const secret of Object.values(secrets)) assert.ok(!text.includes(secret));
  });

  test("no token or an unknown token is UNAUTHENTICATED; health stays open", async () => {
    await assertStatus(anonymous.reconcile.sessionStatus({ session: { key: W } }), status.UNAUTHENTICATED, "missing bearer token: send the metadata authorization: Bearer <token> (the sessionstate commands read it from SESSIONSTATE_TOKEN or --token-file; the clients take a token option)");
    const stranger = as("not-a-token");
    await assertStatus(stranger.signalLog.append(goal(W)), status.UNAUTHENTICATED, "unknown bearer token");
    stranger.close();
    const health = createServiceClient(t.channel, Health);
    assert.equal((await health.check({})).status, HealthCheckResponse_ServingStatus.SERVING);
  });

  test("an ops token touching main's sessions is PERMISSION_DENIED and changes nothing", async () => {
    await main.signalLog.append({ ...goal(C), notifySessionKeys: [W] });
    const before = await admin.watch.listWatches({});
    const version = (await admin.reconcile.sessionStatus({ session: { key: C } })).stateVersion;
    await assertStatus(ops.signalLog.append(goal("agent:main:x")), status.PERMISSION_DENIED, 'agent "main" is outside the scope of token "gateway-ops"');
    await assertStatus(ops.signalLog.append({ ...goal("agent:ops:x"), notifySessionKeys: [W] }), status.PERMISSION_DENIED);
    const batch = await ops.signalLog.appendBatch({ appends: [goal("agent:ops:mine", { onlyIfWatched: true }), goal("agent:main:x")] });
    assert.equal(batch.results[0]?.result.case, "response", "an entry within scope is answered (unwatched: not recorded)");
    assert.deepEqual(
      batch.results[1]?.result.case === "failure" && [batch.results[1].result.value.code, batch.results[1].result.value.message],
      [status.PERMISSION_DENIED, 'appends[1]: agent "main" is outside the scope of token "gateway-ops"'],
    );
    await assertStatus(ops.watch.watch({ watcherSessionKey: "agent:ops:main", target: { key: C } }), status.PERMISSION_DENIED);
    await assertStatus(ops.watch.watch({ watcherSessionKey: W, target: { key: "agent:ops:x" } }), status.PERMISSION_DENIED);
    const stream = ops.subscribe({ prefixes: ["agent:main:"] });
    await assertStatus(stream.next(), status.PERMISSION_DENIED, "watcher prefix");
    await assertStatus(ops.subscribe({ prefixes: ["agent:"] }).next(), status.PERMISSION_DENIED);
    await assertStatus(
      ops.watch.ackNotices({ acks: [{ watcherSessionKey: W, target: { key: C }, notifiedVersion: version }] }),
      status.PERMISSION_DENIED,
    );
    await assertStatus(ops.reconcile.sessionStatus({ session: { key: C } }), status.PERMISSION_DENIED);
    await assertStatus(ops.signalLog.deleteSession({ session: { key: C } }), status.PERMISSION_DENIED);
    await assertStatus(ops.signalLog.resetSession({ watcherSessionKey: W }), status.PERMISSION_DENIED);
    await assertStatus(ops.upstream.setRunActive({ session: { key: C }, active: true }), status.PERMISSION_DENIED);
    assert.deepEqual(await admin.watch.listWatches({}), before);
    assert.equal((await admin.reconcile.sessionStatus({ session: { key: C } })).stateVersion, version);
    assert.equal((await admin.reconcile.sessionStatus({ session: { key: "agent:main:x" } })).stateVersion, 0n);
  });

  test("admin-only RPCs need admin; agent-scoped listing works within scope", async () => {
    await assertStatus(ops.signalLog.prune({}), status.PERMISSION_DENIED, "Prune");
    await assertStatus(ops.reconcile.listSessions({}), status.PERMISSION_DENIED, "ListSessions across agents");
    await assertStatus(ops.upstream.listUpstreamLinks({}), status.PERMISSION_DENIED);
    await assertStatus(ops.upstream.scanNow({}), status.PERMISSION_DENIED);
    await assertStatus(ops.watch.listWatches({}), status.PERMISSION_DENIED);
    await ops.signalLog.append(goal("agent:ops:x"));
    const listed = await ops.reconcile.listSessions({ agentId: "ops" });
    assert.deepEqual(listed.sessions.map((s) => s.session?.key), ["agent:ops:x"]);
    await assertStatus(ops.reconcile.listSessions({ agentId: "main" }), status.PERMISSION_DENIED);
  });

  test("an agent token works within its scope, and admin can do everything", async () => {
    await main.signalLog.append({ ...goal("agent:main:subagent:k"), notifySessionKeys: [W] });
    await main.signalLog.append(human("agent:main:subagent:k"));
    const notices = main.subscribe({ prefixes: ["agent:main:"] });
    const { value: notice } = await notices.next();
    assert.equal(notice?.watcherSessionKey, W);
    assert.equal((await main.ack(notice!)).acknowledged, true);
    await notices.return();
    assert.deepEqual(await admin.signalLog.prune({}), { $typeName: "sessionstate.v1.PruneResponse", eventsRemoved: 0, cursorsRemoved: 0 });
    assert.ok((await admin.reconcile.listSessions({})).sessions.length >= 2);
    assert.equal((await admin.upstream.scanNow({})).linksScanned, 0);
    const all = admin.subscribe({ prefixes: ["agent:"] });
    await all.return();
  });

  test("the tokens file is re-read on reload; a bad file keeps the old tokens", async () => {
    const original = readFileSync(tokensFile, "utf8");
    try {
      writeFileSync(tokensFile, JSON.stringify({ tokens: [{ name: "rotated", sha256: hashToken("rotated-token"), admin: true }] }));
      assert.equal(t.server.reloadTokens(), 1);
      const rotated = as("rotated-token");
      const byRotated = await rotated.reconcile.sessionStatus({ session: { key: C } });
      assert.ok(byRotated.stateVersion > 0n, "the rotated admin token reads main's sessions");
      rotated.close();
      await assertStatus(admin.reconcile.sessionStatus({ session: { key: W } }), status.UNAUTHENTICATED);
      writeFileSync(tokensFile, "{ not json");
      assert.throws(() => t.server.reloadTokens(), /not valid JSON/);
      const still = as("rotated-token");
      assert.ok((await still.reconcile.listSessions({})).sessions.length >= 2, "the rotated token still lists every agent");
      still.close();
    } finally {
      writeFileSync(tokensFile, original);
      t.server.reloadTokens();
    }
  });
});

describe("binding", () => {
  test("a non-loopback address without TLS and auth refuses to start, naming the settings", async () => {
    const dir = tempDir();
    try {
      const result = await runCli(["serve", "--db", join(dir.dir, "x.db"), "--listen", "0.0.0.0:0"]);
      assert.equal(result.code, 2);
      assert.match(result.stderr, /--listen: 0\.0\.0\.0 is not a loopback address/);
      assert.match(result.stderr, /--tls-cert, --tls-key/);
      assert.match(result.stderr, /--tokens-file/);
      assert.match(result.stderr, /--insecure-bind overrides/);
    } finally {
      dir.remove();
    }
  });

  test("--insecure-bind overrides, loudly", async () => {
    const dir = tempDir();
    const server = await spawnServer(["--db", join(dir.dir, "x.db"), "--listen", "0.0.0.0:0", "--insecure-bind"]);
    try {
      assert.match(server.address, /^0\.0\.0\.0:\d+$/);
      const deadline = Date.now() + 5000;
      while (!/INSECURE: serving a non-loopback address/.test(server.stderr()) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.match(server.stderr(), /INSECURE: serving a non-loopback address without TLS and authentication/);
    } finally {
      server.child.kill("SIGTERM");
      await server.exited;
      dir.remove();
    }
  });
});
