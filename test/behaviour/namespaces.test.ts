/**
 * Namespaces (SPEC §12.1), on the test backend: two gateways whose sessions, agent ids and watchers have
 * the same names, in two namespaces of one service, through every RPC, never see, notify, acknowledge,
 * list or prune each other's anything; a token outside its namespaces changes nothing.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { appendFileSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import Database from "better-sqlite3";
import { SessionStateClient, silentLogger } from "../../clients/typescript/src/session-state-client.js";
import { EventKind } from "../../gen/sessionstate/v1/types_pb.js";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { hashToken } from "../../src/rpc/tokens.js";
import { onBackend, skipBackend, testBackend, testCluster } from "../support/backend.js";
import { assertStatus, connect, goal, human, startTestServer, status, subscribe, tempDir, type TestServer } from "../support/helpers.js";
import { connectTestClient } from "../support/postgres-cluster.js";

const W = "agent:main:main";
const T = "agent:main:subagent:worker";
const S = "agent:main:adopted";

/** Clients of the four services on a connection of their own, every call in `namespace` (none: the header is left out). */
function clientsIn(address: string, namespace: string | undefined, token?: string) {
  return connect(address, { ownConnection: true, ...(namespace === undefined ? {} : { namespace }), ...(token === undefined ? {} : { token }) });
}
type Clients = ReturnType<typeof clientsIn>;

/**
 * A logical checksum of every row the service stores, SQLite file or PostgreSQL schema alike (rows as JSON,
 * sorted, per table; job leases left out: they are renewed by time, not by requests).
 */
async function databaseChecksum(t: TestServer, schema: string | undefined): Promise<string> {
  const hash = createHash("sha256");
  const add = (table: string, rows: unknown[]): void => {
    hash.update(`\u0000${table}\u0000`);
    const texts = rows.map((row) => JSON.stringify(row, (_, v: unknown) => (Buffer.isBuffer(v) ? v.toString("hex") : v))).sort();
    for (const text of texts) hash.update(text);
  };
  if (schema === undefined) {
    const db = new Database(t.dbPath, { readonly: true });
    try {
      const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all() as string[];
      for (const table of tables) add(table, db.prepare(`SELECT * FROM "${table}"`).raw().all());
    } finally {
      db.close();
    }
  } else {
    const client = await connectTestClient(testCluster().url, schema);
    try {
      const { rows: tables } = await client.query<{ name: string }>(
        "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = $1 AND table_name <> 'leases' ORDER BY 1",
        [schema],
      );
      for (const { name } of tables) add(name, (await client.query(`SELECT * FROM "${name}"`)).rows);
    } finally {
      await client.end();
    }
  }
  return hash.digest("hex");
}

/**
 * A tokens file of four scopes: one namespace (team-a), every namespace, admin, and none named (default only).
 */
function writeScopedTokens(path: string, secrets: { teamA: string; everywhere: string; admin: string; plain: string }): void {
  writeFileSync(
    path,
    JSON.stringify({
      tokens: [
        { name: "gateway-a", sha256: hashToken(secrets.teamA), agents: ["main"], namespaces: ["team-a"] },
        { name: "gateway-any", sha256: hashToken(secrets.everywhere), agents: ["main"], namespaces: ["*"] },
        { name: "operator", sha256: hashToken(secrets.admin), admin: true },
        { name: "gateway-default", sha256: hashToken(secrets.plain), agents: ["main"] },
      ],
    }),
  );
}

describe(onBackend("namespaces keep gateways apart"), { skip: skipBackend }, () => {
  let t: TestServer;
  let root: { dir: string; remove: () => void };
  let a: Clients;
  let b: Clients;
  let plain: Clients;

  before(async () => {
    root = tempDir();
    t = await startTestServer({ transcriptRoot: realpathSync(root.dir), monitorIntervalMs: 86_400_000, maxEvents: 5 });
    a = clientsIn(t.server.address, "team-a");
    b = clientsIn(t.server.address, "team-b");
    plain = clientsIn(t.server.address, undefined);
  });
  after(async () => {
    for (const clients of [a, b, plain]) clients.close();
    await t.dispose();
    root.remove();
  });

  test("the same keys in two namespaces are two sessions: appends, dedupe keys, status, versions, lists and notices never cross", async () => {
    for (const c of [a, b]) await c.watch.watch({ watcherSessionKey: W, target: { key: T } });
    const inA = await a.signalLog.append(human(T, { dedupeKey: "same-key" }));
    const inB = await b.signalLog.append(human(T, { dedupeKey: "same-key" }));
    assert.equal(inB.deduplicated, false, "a dedupe key of one namespace is unknown in another");
    assert.notEqual(inB.event!.sequence, inA.event!.sequence);
    await a.signalLog.append(goal(T));

    const statusA = await a.reconcile.sessionStatus({ session: { key: T }, changesSince: 0n });
    const statusB = await b.reconcile.sessionStatus({ session: { key: T }, changesSince: 0n });
    assert.deepEqual(statusB.stateChanges!.events.map((e) => e.sequence), [inB.event!.sequence]);
    assert.equal(statusA.stateChanges!.events.length, 2);
    assert.equal(statusB.stateVersion, inB.event!.sequence);
    assert.deepEqual(
      (await plain.reconcile.sessionStatus({ session: { key: T } })).stateVersion,
      0n,
      "the default namespace has no such session",
    );
    const versions = async (c: Clients) => (await c.reconcile.getStateVersions({ sessions: [{ key: T }] })).versions[0]!.stateVersion;
    assert.deepEqual([await versions(a), await versions(b), await versions(plain)], [statusA.stateVersion, statusB.stateVersion, undefined]);
    assert.deepEqual((await b.reconcile.listSessions({})).sessions.map((s) => s.session!.key), [T]);
    assert.deepEqual((await plain.reconcile.listSessions({})).sessions, []);
    const watches = async (c: Clients) => (await c.watch.listWatches({ watcherSessionKey: W })).cursors.map((x) => x.notifiedVersion);
    assert.deepEqual([await watches(a), await watches(b)], [[inA.event!.sequence], [inB.event!.sequence]]);

    const onA = subscribe(a, [W]);
    const onB = subscribe(b, [W], ["agent:main:"]);
    const onDefault = subscribe(plain, [W], ["agent:"]);
    try {
      const [seenA, seenB, seenDefault] = await Promise.all([onA.untilSynced(), onB.untilSynced(), onDefault.untilSynced()]);
      assert.deepEqual(seenA.notices.map((n) => n.notifiedVersion), [inA.event!.sequence]);
      assert.deepEqual(seenB.notices.map((n) => n.notifiedVersion), [inB.event!.sequence]);
      assert.deepEqual(seenDefault.notices, []);
      // An ack in A naming B's version acknowledges nothing; B's notice stays, and B's ack closes it.
      const crossed = await a.watch.ackNotices({ acks: [{ watcherSessionKey: W, target: { key: T }, notifiedVersion: inB.event!.sequence }] });
      assert.equal(crossed.results[0]!.acknowledged, false);
      assert.deepEqual(await watches(b), [inB.event!.sequence]);
      const acked = await b.watch.ackNotices({ acks: [{ watcherSessionKey: W, target: { key: T }, notifiedVersion: inB.event!.sequence }] });
      assert.equal(acked.results[0]!.acknowledged, true);
      // A live notice in B reaches B's subscribers only.
      const later = await b.signalLog.append(human(T));
      assert.equal((await onB.nextNotice()).notifiedVersion, later.event!.sequence);
      assert.deepEqual(await onA.noticesBeforeBarrier(), [], "nothing of B's reaches A");
      assert.deepEqual(await onDefault.noticesBeforeBarrier(), [], "nor the default namespace");
    } finally {
      for (const reader of [onA, onB, onDefault]) reader.call.cancel();
    }
  });

  test("adoption, own texts, run flags, remote items and ScanNow stay in their namespace", async () => {
    const fileA = join(realpathSync(root.dir), "a.jsonl");
    const fileB = join(realpathSync(root.dir), "b.jsonl");
    writeFileSync(fileA, "");
    writeFileSync(fileB, "");
    for (const [c, file] of [[a, fileA], [b, fileB]] as const) {
      await c.watch.watch({ watcherSessionKey: W, target: { key: S } });
      const adopted = await c.upstream.adopt({ session: { key: S }, catalogId: "claude", source: { case: "localTranscript", value: { path: file } } });
      assert.equal(adopted.linked, true);
    }
    const links = async (c: Clients) => (await c.upstream.listUpstreamLinks({})).links.map((l) => l.source);
    assert.deepEqual([await links(a), await links(b), await links(plain)], [[`file:${fileA}`], [`file:${fileB}`], []]);
    // A person types into A's transcript, and B's gateway says the same text is its own: B's statement
    // must not hide A's turn, nor B's run flag hold A's scan.
    await b.upstream.recordOwnUserText({ session: { key: S }, text: "deploy now" });
    await b.upstream.setRunActive({ session: { key: S }, active: true });
    appendFileSync(fileA, `${JSON.stringify({ type: "user", message: { role: "user", content: "deploy now" }, timestamp: new Date().toISOString() })}\n`);
    appendFileSync(fileB, `${JSON.stringify({ type: "user", message: { role: "user", content: "deploy now" }, timestamp: new Date().toISOString() })}\n`);
    const scannedB = await b.upstream.scanNow({});
    assert.deepEqual([scannedB.linksScanned, scannedB.eventsRecorded], [0, 0], "B's run is active: its link is skipped, and A's is not B's to scan");
    const scannedA = await a.upstream.scanNow({});
    assert.deepEqual([scannedA.linksScanned, scannedA.eventsRecorded], [1, 1]);
    const kinds = async (c: Clients) =>
      (await c.reconcile.sessionStatus({ session: { key: S }, changesSince: 0n })).stateChanges!.events.map((e) => e.kind);
    assert.deepEqual(await kinds(a), [EventKind.ADOPTED, EventKind.HUMAN_DIRECT_MESSAGE]);
    assert.deepEqual(await kinds(b), [EventKind.ADOPTED]);
  });

  test("delete, reset and retention act on their own namespace only; each namespace keeps --max-events of its own", async () => {
    const key = "agent:main:subagent:busy";
    for (let i = 0; i < 8; i++) await a.signalLog.append(goal(key));
    for (let i = 0; i < 3; i++) await b.signalLog.append(goal(key));
    await b.signalLog.prune({});
    const count = async (c: Clients) => (await c.reconcile.sessionStatus({ session: { key }, changesSince: 0n })).stateChanges!.events.length;
    // maxEvents is 5 here: A's log (with the events of the tests before) is cut to its newest 5; B's 3 and more stay.
    const eventsOfA = async () => {
      let n = 0;
      for (const s of (await a.reconcile.listSessions({})).sessions) {
        n += (await a.reconcile.sessionStatus({ session: s.session, changesSince: 0n })).stateChanges!.events.length;
      }
      return n;
    };
    assert.equal(await eventsOfA(), 5);
    assert.equal(await count(b), 3, "B's history is not pruned for A's volume");

    const before = (await b.watch.listWatches({ watcherSessionKey: W })).cursors.length;
    assert.ok(before > 0);
    const reset = await a.signalLog.resetSession({ watcherSessionKey: W });
    assert.ok(reset.cursorsRemoved > 0);
    assert.equal((await b.watch.listWatches({ watcherSessionKey: W })).cursors.length, before, "A's reset leaves B's cursors");
    const deleted = await a.signalLog.deleteSession({ session: { key } });
    assert.ok(deleted.eventsRemoved > 0);
    assert.equal(await count(b), 3, "A's delete leaves B's session");
  });

  test("a malformed namespace is INVALID_ARGUMENT naming the header, and changes nothing", async () => {
    for (const bad of ["Team-A", "-team", "team_a", "a".repeat(64), "team a"]) {
      const c = clientsIn(t.server.address, bad);
      try {
        await assertStatus(c.signalLog.append(goal(T)), status.INVALID_ARGUMENT, "sessionstate-namespace");
      } finally {
        c.close();
      }
    }
  });
});

describe(onBackend("namespaces in tokens"), { skip: skipBackend }, () => {
  const dir = tempDir();
  const tokensFile = join(dir.dir, "tokens.json");
  const secrets = { teamA: "team-a-token-51c0", everywhere: "star-token-2b7e", admin: "admin-token-88aa", plain: "plain-token-0d1f" };
  let t: TestServer;
  let schema: string | undefined;

  before(async () => {
    writeScopedTokens(tokensFile, secrets);
    t = await startTestServer({ tokensFile });
    schema = testBackend === "postgres" ? t.dbSchema : undefined;
  });
  after(async () => {
    await t.dispose();
    dir.remove();
  });

  test("a token used outside its namespaces is PERMISSION_DENIED and changes nothing; admin and \"*\" tokens go anywhere", async () => {
    const as = (token: string, namespace?: string) => clientsIn(t.server.address, namespace, token);
    const teamA = as(secrets.teamA, "team-a");
    await teamA.watch.watch({ watcherSessionKey: W, target: { key: T } });
    await teamA.signalLog.append(human(T));
    teamA.close();
    // SQLite's file is the server's alone while it runs: the rows are read with the server stopped.
    await t.stop();
    const before = await databaseChecksum(t, schema);
    t = await t.restart();
    const refusals: [string | undefined, string][] = [
      ["team-b", secrets.teamA],
      [undefined, secrets.teamA], // absent header: default, not one of the token's
      ["team-a", secrets.plain], // absent "namespaces": default only
    ];
    for (const [namespace, token] of refusals) {
      const c = as(token, namespace);
      try {
        const where = namespace ?? "default";
        await assertStatus(c.signalLog.append(human(T)), status.PERMISSION_DENIED, `namespace "${where}"`);
        await assertStatus(c.watch.watch({ watcherSessionKey: W, target: { key: T } }), status.PERMISSION_DENIED);
        await assertStatus(c.watch.ackNotices({ acks: [{ watcherSessionKey: W, target: { key: T }, notifiedVersion: 1n }] }), status.PERMISSION_DENIED);
        await assertStatus(c.signalLog.resetSession({ watcherSessionKey: W }), status.PERMISSION_DENIED);
        await assertStatus(c.signalLog.deleteSession({ session: { key: T } }), status.PERMISSION_DENIED);
        await assertStatus(c.reconcile.sessionStatus({ session: { key: T } }), status.PERMISSION_DENIED);
        await assertStatus(c.upstream.setRunActive({ session: { key: T }, active: true }), status.PERMISSION_DENIED);
        const stream = c.watch.subscribeStaleNotices({ watcherSessionKeys: [W] });
        await assertStatus((async () => { for await (const _ of stream); })(), status.PERMISSION_DENIED);
      } finally {
        c.close();
      }
    }
    await t.stop();
    assert.equal(await databaseChecksum(t, schema), before, "refused requests changed nothing");
    t = await t.restart();
    for (const [token, namespace] of [[secrets.everywhere, "team-z"], [secrets.admin, "team-a"], [secrets.admin, "team-q"], [secrets.plain, undefined]] as const) {
      const c = as(token, namespace);
      try {
        assert.equal((await c.signalLog.append(goal(T))).recorded, true, `${token} in ${namespace ?? "default"}`);
      } finally {
        c.close();
      }
    }
  });

  test("the TypeScript client takes a namespace", async () => {
    const client = new SessionStateClient({ address: t.server.address, token: secrets.teamA, namespace: "team-a", logger: silentLogger });
    const wrong = new SessionStateClient({ address: t.server.address, token: secrets.teamA, namespace: "team-b", logger: silentLogger });
    try {
      const appended = await client.append(goal("agent:main:ts-client"));
      assert.equal(appended.recorded, true);
      await assertStatus(wrong.append(goal("agent:main:ts-client")), status.PERMISSION_DENIED);
    } finally {
      client.close();
      wrong.close();
    }
  });
});

describe(onBackend("ListNamespaces"), { skip: skipBackend }, () => {
  const dir = tempDir();
  const tokensFile = join(dir.dir, "tokens.json");
  const secrets = { teamA: "team-a-token-7f01", everywhere: "star-token-93c2", admin: "admin-token-4d5e", plain: "plain-token-a6b7" };
  let t: TestServer;

  before(async () => {
    writeScopedTokens(tokensFile, secrets);
    t = await startTestServer({ tokensFile });
    const inNamespace = (namespace: string) => clientsIn(t.server.address, namespace, secrets.admin);
    const [plainNs, teamA, teamB, teamC] = [inNamespace("default"), inNamespace("team-a"), inNamespace("team-b"), inNamespace("team-c")];
    try {
      await plainNs.signalLog.append(goal(T));
      await teamA.watch.watch({ watcherSessionKey: W, target: { key: T } });
      await teamA.signalLog.append(human(T));
      await teamA.signalLog.append(goal(S));
      // A cursor and no session: listed, with no update time.
      await teamB.watch.watch({ watcherSessionKey: W, target: { key: T } });
      // Everything removed again: not listed.
      await teamC.signalLog.append(goal(T));
      await teamC.signalLog.deleteSession({ session: { key: T } });
    } finally {
      for (const c of [plainNs, teamA, teamB, teamC]) c.close();
    }
  });
  after(async () => {
    await t.dispose();
    dir.remove();
  });

  /** Every namespace a token sees, page by page (with the header `namespace`, which ListNamespaces ignores). */
  async function listed(token: string, namespace?: string, pageSize = 0): Promise<{ pages: number; rows: unknown[] }> {
    const c = clientsIn(t.server.address, namespace, token);
    try {
      const rows: unknown[] = [];
      let pageToken = "";
      let pages = 0;
      do {
        const page = await c.reconcile.listNamespaces({ pageSize, pageToken });
        pages++;
        rows.push(
          ...page.namespaces.map((n) => [n.name, n.sessions, n.events, n.watches, n.pendingNotices, n.updatedAt === undefined ? "never" : "updated"]),
        );
        pageToken = page.nextPageToken;
      } while (pageToken !== "");
      return { pages, rows };
    } finally {
      c.close();
    }
  }

  test("it lists the namespaces holding a session or a cursor, with exact counts, whatever the namespace header", async () => {
    const all = [
      ["default", 1n, 1n, 0n, 0n, "updated"],
      ["team-a", 2n, 2n, 1n, 1n, "updated"],
      ["team-b", 0n, 0n, 1n, 0n, "never"],
    ];
    assert.deepEqual(await listed(secrets.admin), { pages: 1, rows: all });
    assert.deepEqual(await listed(secrets.admin, "team-q", 2), { pages: 2, rows: all });
    assert.deepEqual(await listed(secrets.everywhere, "team-b"), { pages: 1, rows: all });
    const c = clientsIn(t.server.address, "team-a", secrets.admin);
    try {
      const [teamA] = (await c.reconcile.listNamespaces({ pageSize: 1, pageToken: (await c.reconcile.listNamespaces({ pageSize: 1 })).nextPageToken })).namespaces;
      assert.equal(teamA?.name, "team-a");
      assert.deepEqual(teamA?.updatedAt, timestampFromMs(t.clock.nowMs()));
    } finally {
      c.close();
    }
  });

  test("a token sees exactly the namespaces it may use, even without a header it could use elsewhere", async () => {
    assert.deepEqual((await listed(secrets.teamA)).rows, [["team-a", 2n, 2n, 1n, 1n, "updated"]]);
    assert.deepEqual((await listed(secrets.plain, "team-a")).rows, [["default", 1n, 1n, 0n, 0n, "updated"]]);
    await assertStatus(listed("not-a-token"), status.UNAUTHENTICATED, "unknown bearer token");
  });

  test("a bad page token or page size is INVALID_ARGUMENT naming the field", async () => {
    const c = clientsIn(t.server.address, undefined, secrets.admin);
    try {
      await assertStatus(c.reconcile.listNamespaces({ pageToken: "bogus" }), status.INVALID_ARGUMENT, "page_token:");
      await assertStatus(c.reconcile.listNamespaces({ pageSize: -1 }), status.INVALID_ARGUMENT, "page_size:");
    } finally {
      c.close();
    }
  });
});
