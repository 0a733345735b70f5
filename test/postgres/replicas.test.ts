/**
 * Several `sessionstate serve` processes on one PostgreSQL schema, as users run them (SPEC §11).
 */
import assert from "node:assert/strict";
import { appendFileSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { toBinary } from "@bufbuild/protobuf";
import { Health, HealthCheckResponse_ServingStatus } from "../../gen/grpc/health/v1/health_pb.js";
import { SessionStatusResponseSchema } from "../../gen/sessionstate/v1/reconcile_pb.js";
import { SessionStateClient, silentLogger } from "../../clients/typescript/src/session-state-client.js";
import { createServiceClient } from "../../clients/typescript/src/service-client.js";
import { postgresMigrations } from "../../src/store/postgres/migrations.js";
import { ActorType, EventKind, RunOutcome, WatchProvenance } from "../../gen/sessionstate/v1/types_pb.js";
import type { EventKind as KindName } from "../../src/domain/event.js";
import { freshSchema, testCluster } from "../support/backend.js";
import { ReferenceModel } from "../support/reference-model.js";
import { connectTestClient, skipWithoutPostgres, type PostgresCluster } from "../support/postgres-cluster.js";
import { allEventSequences, connect, goal, human, metricValue, scrapeMetrics, seededRandom, subscribe, tempDir, until, type Clients } from "../support/helpers.js";
import { freePort, runCli, spawnServer, type ServerProcess } from "../support/process-helpers.js";
import { FaultProxy } from "../support/fault-proxy.js";
import { parsePostgresUrl } from "../../src/store/postgres/postgres-url.js";

const boss = "agent:main:boss";
const worker = "agent:main:subagent:worker";

interface Replica {
  process: ServerProcess;
  clients: Clients;
  /** Kills the process (SIGTERM unless told otherwise) and closes the clients. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

describe("replicas on one PostgreSQL", { skip: skipWithoutPostgres() }, () => {
  let cluster: PostgresCluster;
  const running = new Set<Replica>();

  before(() => {
    cluster = testCluster();
  });
  after(async () => {
    for (const replica of running) await replica.stop("SIGKILL");
  });

  async function startReplica(schema: string, extra: string[] = [], url = cluster.url): Promise<Replica> {
    const process = await spawnServer(["--db", url, "--db-schema", schema, "--listen", "127.0.0.1:0", "--log-level", "warn", ...extra]);
    const clients = connect(process.address, { ownConnection: true });
    const replica: Replica = {
      process,
      clients,
      stop: async (signal = "SIGTERM") => {
        running.delete(replica);
        clients.close();
        process.child.kill(signal);
        await process.exited;
      },
    };
    running.add(replica);
    return replica;
  }

  /** Rows of the schema, read directly: what every replica shares. */
  async function query<T extends object>(schema: string, text: string): Promise<T[]> {
    const client = await connectTestClient(cluster.url, schema);
    try {
      return (await client.query<T>(text)).rows;
    } finally {
      await client.end();
    }
  }

  test("a notice opened through one replica reaches a subscriber of another; an ack through that one reopens it for the first", async () => {
    const schema = freshSchema();
    const [a, b] = [await startReplica(schema), await startReplica(schema)];
    const onA = subscribe(a.clients, [boss]);
    const onB = subscribe(b.clients, [boss]);
    try {
      await onA.untilSynced();
      await onB.untilSynced();
      await a.clients.watch.watch({ watcherSessionKey: boss, target: { key: worker } });
      const first = await a.clients.signalLog.append(human(worker));
      const noticeOnB = await onB.nextNotice();
      assert.equal(noticeOnB.notifiedVersion, first.event!.sequence);
      assert.equal(noticeOnB.changesSince, 0n);
      assert.equal((await onA.nextNotice()).notifiedVersion, first.event!.sequence);

      const second = await a.clients.signalLog.append(goal(worker));
      const ack = await b.clients.watch.ackNotices({
        acks: [{ watcherSessionKey: boss, target: noticeOnB.target, notifiedVersion: noticeOnB.notifiedVersion }],
      });
      assert.deepEqual(
        ack.results.map((r) => [r.acknowledged, r.reopened]),
        [[true, true]],
      );
      const reopened = await onA.nextNotice();
      assert.equal(reopened.notifiedVersion, second.event!.sequence);
      assert.equal(reopened.changesSince, first.event!.sequence);
      assert.equal(reopened.text, noticeOnB.text.replace(`changesSince 0.`, `changesSince ${first.event!.sequence}.`));

      const onEach = await Promise.all(
        [a, b].map((r) => r.clients.reconcile.sessionStatus({ session: { key: worker }, changesSince: 0n })),
      );
      assert.deepEqual(onEach[0], onEach[1]);
      assert.deepEqual(
        onEach[0]!.stateChanges!.events.map((e) => e.sequence),
        [first.event!.sequence, second.event!.sequence],
      );
    } finally {
      onA.call.cancel();
      onB.call.cancel();
      await a.stop();
      await b.stop();
    }
  });

  test("4 clients appending through 2 replicas while readers poll both: sequences unique and increasing, never one below a version already seen", async () => {
    const schema = freshSchema();
    const replicas = [await startReplica(schema), await startReplica(schema)];
    const sessions = ["agent:main:s0", "agent:main:s1", "agent:main:s2"];
    let writing = true;
    const acknowledged: bigint[] = [];
    const violations: string[] = [];
    try {
      const writers = Array.from({ length: 4 }, async (_, i) => {
        const { clients } = replicas[i % 2]!;
        for (let n = 0; writing; n++) {
          const response = await clients.signalLog.append(goal(sessions[(i + n) % sessions.length]!));
          acknowledged.push(response.event!.sequence);
        }
      });
      const readers = replicas.flatMap(({ clients }) =>
        sessions.map(async (key) => {
          // Everything this reader has seen of the session, and the highest sequence.
          const seen = new Set<bigint>();
          let highest = 0n;
          while (writing) {
            const status = await clients.reconcile.sessionStatus({ session: { key }, changesSince: 0n });
            for (const event of status.stateChanges!.events) {
              if (!seen.has(event.sequence) && event.sequence < highest) {
                violations.push(`${key}: ${event.sequence} appeared after ${highest} was seen`);
              }
              seen.add(event.sequence);
              if (event.sequence > highest) highest = event.sequence;
            }
          }
        }),
      );
      // Enough appends to mean something, while the readers keep polling (it was a fixed 3 s).
      await until(() => acknowledged.length >= 400, "400 appends acknowledged", 20_000);
      writing = false;
      await Promise.all([...writers, ...readers]);
      assert.deepEqual(violations, []);
      assert.ok(acknowledged.length > 200, `enough appends to mean something (${acknowledged.length})`);
      assert.equal(new Set(acknowledged).size, acknowledged.length, "every sequence is unique");
      for (const key of sessions) {
        const events = (await replicas[0]!.clients.reconcile.sessionStatus({ session: { key }, changesSince: 0n, limit: 200 })).stateChanges!.events;
        const sequences = events.map((e) => e.sequence);
        assert.deepEqual(sequences, [...sequences].sort((x, y) => (x < y ? -1 : 1)));
      }
    } finally {
      writing = false;
      for (const replica of replicas) await replica.stop();
    }
  });

  test("the client on both replicas carries on when one is killed: every append acknowledged, none lost or doubled; its subscription resumes on the other", async () => {
    const schema = freshSchema();
    const [a, b] = [await startReplica(schema), await startReplica(schema)];
    const client = new SessionStateClient({ address: `ipv4:${a.process.address},${b.process.address}`, logger: { warn: () => {} } });
    const sessions = ["agent:main:f0", "agent:main:f1"];
    const abort = new AbortController();
    const notices: bigint[] = [];
    const subscription = (async () => {
      for await (const notice of client.subscribe({ watchers: [boss], signal: abort.signal, backoff: { initialMs: 50, maxMs: 200 } })) {
        notices.push(notice.notifiedVersion);
        await client.ack(notice);
      }
    })();
    let appending = true;
    const acknowledged: bigint[] = [];
    const failures: string[] = [];
    try {
      await client.watch.watch({ watcherSessionKey: boss, target: { key: worker } });
      const appenders = Array.from({ length: 4 }, async (_, i) => {
        for (let n = 0; appending; n++) {
          try {
            acknowledged.push((await client.append(goal(sessions[(i + n) % 2]!), { timeoutMs: 5000 })).event!.sequence);
          } catch (err) {
            failures.push((err as Error).message);
          }
        }
      });
      await until(() => acknowledged.length >= 100, "100 appends acknowledged before the kill", 20_000);
      const before = acknowledged.length;
      await a.stop("SIGKILL");
      await until(() => acknowledged.length >= before + 100, "100 more appends acknowledged after the kill", 20_000);
      appending = false;
      await Promise.all(appenders);
      assert.deepEqual(failures, []);
      assert.ok(acknowledged.length > before + 50, `appends went on after the kill (${before} -> ${acknowledged.length})`);
      const stored = (await Promise.all(sessions.map((key) => allEventSequences(b.clients, key)))).flat();
      assert.deepEqual(
        [...stored].sort((x, y) => (x < y ? -1 : 1)),
        [...acknowledged].sort((x, y) => (x < y ? -1 : 1)),
        "exactly the acknowledged appends are stored, each once",
      );
      const after = await b.clients.signalLog.append(human(worker));
      const deadline = Date.now() + 10_000;
      while (!notices.includes(after.event!.sequence)) {
        assert.ok(Date.now() < deadline, "the subscription never delivered the notice opened after the kill");
        await sleep(50);
      }
    } finally {
      appending = false;
      abort.abort();
      await subscription.catch(() => undefined);
      client.close();
      await b.stop();
    }
  });

  test("random appends, explicit and ambient watches with extra kinds, unwatches, acks and resets, each through a random replica, leave the pending notices of a reference model", async () => {
    const schema = freshSchema();
    const replicas = [await startReplica(schema), await startReplica(schema)];
    const watchers = ["agent:main:w0", "agent:main:w1", "agent:main:w2", "agent:ops:w3"];
    const targets = ["agent:main:subagent:t0", "agent:main:subagent:t1", "agent:main:subagent:t2"];
    const kinds: [EventKind, KindName, ActorType][] = [
      [EventKind.HUMAN_DIRECT_MESSAGE, "human_direct_message", ActorType.HUMAN],
      [EventKind.GOAL_CHANGED, "goal_changed", ActorType.AGENT],
      [EventKind.CHILD_SPAWNED, "child_spawned", ActorType.AGENT],
      [EventKind.RUN_COMPLETED, "run_completed", ActorType.AGENT],
      [EventKind.RUN_FAILED, "run_failed", ActorType.AGENT],
      [EventKind.COMPACTED, "compacted", ActorType.SYSTEM],
    ];
    const extraSets: [EventKind, KindName][][] = [
      [],
      [[EventKind.RUN_FAILED, "run_failed"]],
      [[EventKind.RUN_COMPLETED, "run_completed"], [EventKind.COMPACTED, "compacted"]],
    ];
    const models = new Map(targets.map((target) => [target, new ReferenceModel()]));
    let seed = 1107;
    const random = (n: number): number => {
      seed = (seed * 48271) % 2147483647;
      return seed % n;
    };
    const pick = <T>(items: readonly T[]): T => items[random(items.length)]!;
    try {
      for (let step = 1; step <= 300; step++) {
        const { clients } = pick(replicas);
        const target = pick(targets);
        const model = models.get(target)!;
        const op = random(10);
        if (op < 5) {
          const [kind, kindName, actorType] = pick(kinds);
          const named = watchers.filter(() => random(3) === 0);
          const actorId = actorType === ActorType.AGENT && random(3) === 0 ? pick(watchers) : undefined;
          const response = await clients.signalLog.append({
            session: { key: target },
            kind,
            actorType,
            summary: "model step",
            notifySessionKeys: named,
            ...(actorId === undefined ? {} : { actorId }),
            ...(kind === EventKind.RUN_FAILED ? { payload: { outcome: RunOutcome.ERROR, reason: "exit 1" } } : {}),
          });
          model.event(kindName, Number(response.event!.sequence), actorId, named);
        } else if (op < 7) {
          const watcher = pick(watchers);
          const pending = model.pending().get(watcher);
          const notifiedVersion = pending === undefined || random(5) === 0 ? BigInt(random(50)) : BigInt(pending[1]);
          const through = random(2) === 0 ? undefined : random(Number((await clients.reconcile.sessionStatus({ session: { key: target } })).stateVersion) + 2);
          await clients.watch.ackNotices({
            acks: [{ watcherSessionKey: watcher, target: { key: target }, notifiedVersion, ...(through === undefined ? {} : { reconciledThrough: BigInt(through) }) }],
          });
          model.ack(watcher, Number(notifiedVersion), through);
        } else if (op < 8) {
          const watcher = pick(watchers);
          const ambient = random(2) === 0;
          const extra = ambient ? [] : pick(extraSets);
          const response = await clients.watch.watch({
            watcherSessionKey: watcher,
            target: { key: target },
            provenance: ambient ? WatchProvenance.AMBIENT : WatchProvenance.EXPLICIT,
            extraMaterialKinds: extra.map(([kind]) => kind),
          });
          model.watch(watcher, Number(response.cursor!.ackedVersion), ambient ? "ambient" : "explicit", extra.map(([, name]) => name));
        } else if (op < 9) {
          const watcher = pick(watchers);
          await clients.watch.unwatch({ watcherSessionKey: watcher, target: { key: target } });
          model.remove(watcher);
        } else {
          const watcher = pick(watchers);
          await clients.signalLog.resetSession({ watcherSessionKey: watcher });
          for (const each of models.values()) each.remove(watcher);
        }
        if (step % 5 === 0) {
          const cursors = (await pick(replicas).clients.watch.listWatches({ pageSize: 1000 })).cursors;
          for (const c of cursors) assert.ok(c.ackedVersion <= c.notifiedVersion && c.notifiedVersion <= c.materialVersion, `step ${step}: L <= N <= M`);
          const stored = cursors
            .filter((c) => c.notifiedVersion > c.ackedVersion)
            .map((c) => `${c.target!.key} ${c.watcherSessionKey} ${c.ackedVersion} ${c.notifiedVersion} ${WatchProvenance[c.provenance]!.toLowerCase()}`)
            .sort();
          const expected = [...models]
            .flatMap(([key, each]) => [...each.pending()].map(([w, [l, n, provenance]]) => `${key} ${w} ${l} ${n} ${provenance}`))
            .sort();
          assert.deepEqual(stored, expected, `step ${step}: pending notices`);
        }
      }
    } finally {
      for (const replica of replicas) await replica.stop();
    }
  });

  test("the listener's connection killed while appends go on: no notice is missed", async () => {
    const schema = freshSchema();
    const [a, b] = [await startReplica(schema), await startReplica(schema)];
    const targets = Array.from({ length: 20 }, (_, i) => `agent:main:subagent:t${i}`);
    const onB = subscribe(b.clients, [boss]);
    try {
      await onB.untilSynced();
      for (const target of targets) await a.clients.watch.watch({ watcherSessionKey: boss, target: { key: target } });
      const appending = (async () => {
        for (const [i, target] of targets.entries()) {
          await a.clients.signalLog.append(human(target));
          if (i === 5 || i === 12) {
            await query(schema, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name LIKE '% listener'");
          }
          await sleep(20);
        }
      })();
      const received = new Set<string>();
      while (received.size < targets.length) received.add((await onB.nextNotice()).target!.key);
      await appending;
      assert.deepEqual([...received].sort(), [...targets].sort());
    } finally {
      onB.call.cancel();
      await a.stop();
      await b.stop();
    }
  });

  test("PostgreSQL stopped and started again: replicas report NOT_SERVING and UNAVAILABLE, then serve again by themselves", async () => {
    const schema = freshSchema();
    const replica = await startReplica(schema);
    const health = createServiceClient(replica.clients.channel, Health, { timeoutMs: 2000 });
    const waitFor = async (wanted: HealthCheckResponse_ServingStatus): Promise<void> => {
      const deadline = Date.now() + 15_000;
      while ((await health.check({})).status !== wanted) {
        assert.ok(Date.now() < deadline, `health never became ${HealthCheckResponse_ServingStatus[wanted]}`);
        await sleep(100);
      }
    };
    try {
      await replica.clients.signalLog.append(goal(worker));
      await waitFor(HealthCheckResponse_ServingStatus.SERVING);
      cluster.stop();
      await waitFor(HealthCheckResponse_ServingStatus.NOT_SERVING);
      // A person asking with the CLI is told so in a sentence, not in grpc-js's words about subchannels.
      const asked = await runCli(["status", worker, "--server", replica.process.address]);
      assert.deepEqual(
        [asked.code, asked.stderr],
        [1, `sessionstate status: the server at ${replica.process.address} is not serving: it cannot reach its database, or it is stopping (its log says which); try again shortly\n`],
      );
      for (let i = 0; i < 20; i++) {
        await assert.rejects(replica.clients.signalLog.append(goal(worker), { timeoutMs: 5000 }), (err: { code: number; details: string }) => {
          assert.equal(err.code, 14, "UNAVAILABLE");
          assert.equal(err.details, "database unavailable; retry later");
          return true;
        });
      }
      cluster.start();
      await waitFor(HealthCheckResponse_ServingStatus.SERVING);
      const appended = await replica.clients.signalLog.append(goal(worker));
      assert.equal(appended.stateVersion, 2n);
      // The outage is logged once, not once per refused call.
      const errors = replica.process.stderr().split("\n").filter((line) => line.includes('"level":50'));
      assert.deepEqual(errors.map((line) => (JSON.parse(line) as { msg: string }).msg), ["database unreachable: not serving"]);
    } finally {
      cluster.start();
      await replica.stop();
    }
  });

  test("a local transcript is scanned only by replicas with the node id that adopted it", async () => {
    const schema = freshSchema();
    const root = tempDir();
    const dir = realpathSync(root.dir);
    const file = join(dir, "session.jsonl");
    const line = (text: string): string => `${JSON.stringify({ type: "user", message: { role: "user", content: text }, timestamp: new Date().toISOString() })}\n`;
    writeFileSync(file, line("the first prompt"));
    // Both hosts see the same folder here; on real hosts only the adopting one would.
    const on = (node: string) => ["--node-id", node, "--transcript-root", dir, "--monitor-interval-ms", "86400000"];
    const [a, b] = [await startReplica(schema, on("host-a")), await startReplica(schema, on("host-b"))];
    try {
      const adopted = await a.clients.upstream.adopt({
        session: { key: worker },
        catalogId: "claude",
        hostId: "host-a",
        source: { case: "localTranscript", value: { path: file } },
      });
      assert.equal(adopted.linked, true);
      await b.clients.watch.watch({ watcherSessionKey: boss, target: { key: worker } });
      appendFileSync(file, line("a person typed this"));
      const elsewhere = await b.clients.upstream.scanNow({});
      assert.deepEqual([elsewhere.linksScanned, elsewhere.eventsRecorded], [0, 0], "host-b never reads host-a's file");
      const home = await a.clients.upstream.scanNow({});
      assert.deepEqual([home.linksScanned, home.eventsRecorded], [1, 1]);
      const events = (await b.clients.reconcile.sessionStatus({ session: { key: worker }, changesSince: 0n })).stateChanges!.events;
      assert.deepEqual(
        events.map((e) => e.kind),
        [EventKind.ADOPTED, EventKind.HUMAN_DIRECT_MESSAGE],
      );
    } finally {
      await a.stop();
      await b.stop();
      root.remove();
    }
  });

  test("retention runs on one replica at a time, and moves when its holder is killed", async () => {
    const schema = freshSchema();
    const interval = ["--prune-interval-ms", "1000"];
    const [a, b] = await Promise.all([startReplica(schema, interval), startReplica(schema, interval)]);
    const holder = async (): Promise<string> => (await query<{ holder: string }>(schema, "SELECT holder FROM leases WHERE job = 'retention'"))[0]!.holder;
    try {
      const leased = async (): Promise<boolean> => (await query(schema, "SELECT holder FROM leases WHERE job = 'retention'")).length > 0;
      await until(leased, "one replica takes the retention lease", 10_000);
      const first = await holder();
      const [held, other] = first.includes(`/${a.process.child.pid}/`) ? [a, b] : [b, a];
      assert.ok(first.includes(`/${held.process.child.pid}/`));
      await held.stop("SIGKILL");
      const deadline = Date.now() + 10_000;
      while (!(await holder()).includes(`/${other.process.child.pid}/`)) {
        assert.ok(Date.now() < deadline, "the lease never moved to the surviving replica");
        await sleep(200);
      }
    } finally {
      for (const r of [a, b]) if (running.has(r)) await r.stop();
    }
  });

  test("the client sends no call to a replica whose health says NOT_SERVING, and goes back to it once it serves", { timeout: 60_000 }, async () => {
    const schema = freshSchema();
    const proxy = await FaultProxy.start({ path: parsePostgresUrl(cluster.url).socketPath! });
    const a = await startReplica(schema);
    // B reaches PostgreSQL through a proxy that can cut it off; its metrics count the calls it answers.
    const metricsPort = await freePort();
    const b = await startReplica(schema, ["--metrics-listen", `127.0.0.1:${metricsPort}`], `postgres://postgres@127.0.0.1:${proxy.port}/postgres`);
    const client = new SessionStateClient({ address: `ipv4:${a.process.address},${b.process.address}`, logger: silentLogger });
    const callsOnB = async (): Promise<number> => {
      const text = await scrapeMetrics(metricsPort);
      return [...text.matchAll(/^sessionstate_rpc_duration_seconds_count\{[^}]*method="\/sessionstate\.v1\.Reconcile\/SessionStatus"[^}]*\} (\d+)$/gmu)].reduce((n, m) => n + Number(m[1]), 0);
    };
    try {
      for (let i = 0; i < 20; i++) await client.reconcile.sessionStatus({ session: { key: worker } });
      assert.ok((await callsOnB()) > 0, "with both serving, both take calls");
      proxy.blackhole();
      const bHealth = createServiceClient(b.clients.channel, Health, { timeoutMs: 2000 });
      const deadline = Date.now() + 5000;
      while ((await bHealth.check({})).status !== HealthCheckResponse_ServingStatus.NOT_SERVING) {
        assert.ok(Date.now() < deadline, "B never said NOT_SERVING");
        await sleep(50);
      }
      await sleep(200); // the client's health watch hears it
      const before = await callsOnB();
      for (let i = 0; i < 40; i++) await client.reconcile.sessionStatus({ session: { key: worker } }, { timeoutMs: 2000 });
      assert.equal((await callsOnB()) - before, 0, "no call went to the replica that said NOT_SERVING");
      proxy.heal();
      const back = Date.now() + 5000;
      while ((await bHealth.check({})).status !== HealthCheckResponse_ServingStatus.SERVING) {
        assert.ok(Date.now() < back, "B never served again");
        await sleep(50);
      }
      await sleep(200);
      const healed = await callsOnB();
      for (let i = 0; i < 40; i++) await client.reconcile.sessionStatus({ session: { key: worker } });
      assert.ok((await callsOnB()) - healed > 0, "B takes calls again once it serves");
    } finally {
      client.close();
      await a.stop();
      await b.stop();
      await proxy.close();
    }
  });

  test("the client carries reads, watches and appends through a replica cut off from its database and then stopped: none fails", { timeout: 60_000 }, async () => {
    const schema = freshSchema();
    const proxy = await FaultProxy.start({ path: parsePostgresUrl(cluster.url).socketPath! });
    const a = await startReplica(schema);
    const b = await startReplica(schema, [], `postgres://postgres@127.0.0.1:${proxy.port}/postgres`);
    const client = new SessionStateClient({ address: `ipv4:${a.process.address},${b.process.address}`, logger: silentLogger });
    const failures: string[] = [];
    let calls = 0;
    let going = true;
    try {
      const loops = Array.from({ length: 6 }, async (_, i) => {
        while (going) {
          try {
            if (i % 3 === 0) await client.reconcile.sessionStatus({ session: { key: worker } }, { timeoutMs: 5000 });
            else if (i % 3 === 1) await client.watch.watch({ watcherSessionKey: boss, target: { key: `${worker}${i}` } }, { timeoutMs: 5000 });
            else await client.append(goal(worker), { timeoutMs: 5000 });
            calls++;
          } catch (err) {
            failures.push(`${(err as { code?: number }).code}: ${(err as { details?: string }).details}`);
          }
        }
      });
      await until(() => calls >= 60, "60 calls answered with both serving", 20_000);
      // Calls on their way to B when it is cut off end UNAVAILABLE (and so do those its stop ends): each is
      // sent again, to A.
      proxy.blackhole();
      await sleep(300);
      await b.stop("SIGTERM");
      const atStop = calls;
      await until(() => calls >= atStop + 100, "100 more calls answered after B stopped", 20_000);
      going = false;
      await Promise.all(loops);
      assert.deepEqual(failures, [], `${calls} calls, none failed`);
      assert.ok(calls > 100);
    } finally {
      going = false;
      client.close();
      await a.stop();
      await proxy.close();
    }
  });

  test("namespaces across replicas: the same keys in two namespaces, written through either replica, notify and list only their own", async () => {
    const schema = freshSchema();
    const [r1, r2] = [await startReplica(schema), await startReplica(schema)];
    const inNamespace = (replica: Replica, namespace: string) =>
      new SessionStateClient({ address: replica.process.address, namespace, logger: silentLogger });
    const a1 = inNamespace(r1, "team-a");
    const b1 = inNamespace(r1, "team-b");
    const a2 = inNamespace(r2, "team-a");
    const b2 = inNamespace(r2, "team-b");
    const abort = new AbortController();
    try {
      await a1.watch.watch({ watcherSessionKey: boss, target: { key: worker } });
      await b2.watch.watch({ watcherSessionKey: boss, target: { key: worker } });
      const seen: string[] = [];
      const follow = (client: SessionStateClient, label: string) =>
        (async () => {
          for await (const notice of client.subscribe({ watchers: [boss], signal: abort.signal })) seen.push(`${label} ${notice.notifiedVersion}`);
        })().catch(() => undefined);
      const following = [follow(a2, "a"), follow(b1, "b")];
      const inA = await a1.append(human(worker));
      const inB = await b2.append(human(worker));
      const deadline = Date.now() + 5000;
      while (seen.length < 2 && Date.now() < deadline) await sleep(20);
      await sleep(300); // anything that should not come would have come by now
      assert.deepEqual(seen.sort(), [`a ${inA.event!.sequence}`, `b ${inB.event!.sequence}`].sort(), "each replica's subscriber hears its own namespace only");
      assert.deepEqual((await a2.reconcile.listSessions({})).sessions.map((s) => s.stateVersion), [inA.event!.sequence]);
      assert.deepEqual((await b1.reconcile.listSessions({})).sessions.map((s) => s.stateVersion), [inB.event!.sequence]);
      abort.abort();
      await Promise.all(following);
    } finally {
      abort.abort();
      for (const client of [a1, b1, a2, b2]) client.close();
      await r1.stop();
      await r2.stop();
    }
  });

  test("two replicas started at the same moment on an empty schema both come up; one facing a newer schema exits 1 naming both versions", async () => {
    const schema = freshSchema();
    const both = await Promise.all([startReplica(schema), startReplica(schema)]);
    try {
      for (const replica of both) assert.equal((await replica.clients.reconcile.sessionStatus({ session: { key: worker } })).stateVersion, 0n);
    } finally {
      for (const replica of both) await replica.stop();
    }
    const future = postgresMigrations.length + 1;
    await query(schema, `UPDATE schema_version SET version = ${future}`);
    const refused = await runCli(["serve", "--db", cluster.url, "--db-schema", schema, "--listen", "127.0.0.1:0"]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, new RegExp(`at version ${future}, newer than this program knows \\(${postgresMigrations.length}\\)`));
  });

  test("remembered SessionStatus answers: over random writes through two replicas, every answer equals an uncached replica's", { timeout: 120_000 }, async () => {
    const schema = freshSchema();
    const ports = [await freePort(), await freePort()];
    const cached = [
      await startReplica(schema, ["--max-events", "8", "--metrics-listen", `127.0.0.1:${ports[0]}`]),
      await startReplica(schema, ["--max-events", "8", "--metrics-listen", `127.0.0.1:${ports[1]}`]),
    ];
    const plain = await startReplica(schema, ["--max-events", "8", "--status-cache-bytes", "0"]);
    const random = seededRandom(11);
    const keys = [boss, worker, "agent:other:main"];
    /** A SessionStatus answer as its bytes, so answers compare exactly. */
    const statusBytes = async (replica: Replica, key: string, changesSince: bigint | undefined, limit: number): Promise<string> => {
      const answer = await replica.clients.reconcile.sessionStatus({ session: { key }, ...(changesSince === undefined ? {} : { changesSince }), limit });
      return Buffer.from(toBinary(SessionStatusResponseSchema, answer)).toString("hex");
    };
    try {
      let questions = 0;
      let eventsPruned = 0;
      for (let step = 0; step < 400; step++) {
        const key = keys[random(keys.length)]!;
        const through = cached[random(2)]!;
        const op = random(20);
        if (op < 7) {
          const dedupeKey = random(4) === 0 ? `d${random(5)}` : "";
          await through.clients.signalLog.append(goal(key, { summary: `step ${step}`, dedupeKey }));
        } else if (op === 7) {
          await through.clients.signalLog.deleteSession({ session: { key } });
        } else if (op === 8) {
          eventsPruned += (await through.clients.signalLog.prune({})).eventsRemoved;
        } else {
          const version = (await plain.clients.reconcile.sessionStatus({ session: { key } })).stateVersion;
          const since = random(3) === 0 ? undefined : BigInt(random(Number(version) + 1));
          const limit = random(3) === 0 ? 2 : 0;
          const expected = await statusBytes(plain, key, since, limit);
          // Each cached replica asked twice: the second answer may come from its memory.
          for (const [i, replica] of cached.entries()) {
            for (const ask of ["first", "again"]) {
              assert.equal(await statusBytes(replica, key, since, limit), expected, `step ${step}: replica ${i}, ${ask}: SessionStatus ${key} since ${since} limit ${limit}`);
            }
          }
          questions++;
        }
      }
      assert.ok(questions > 150, `${questions} questions asked`);
      assert.ok(eventsPruned > 10, `${eventsPruned} events pruned`);
      for (const port of ports) {
        const fromCache = metricValue(await scrapeMetrics(port), 'sessionstate_status_answers_total{source="cache"}');
        assert.ok(fromCache >= questions * 0.75, `${fromCache} answers from the cache for ${questions} questions`);
      }
    } finally {
      for (const replica of [...cached, plain]) await replica.stop();
    }
  });

  test("a write through one replica is never hidden by another's remembered answer, even while that one hears of it late", { timeout: 60_000 }, async () => {
    const schema = freshSchema();
    const writer = await startReplica(schema);
    // The reader's every byte to and from PostgreSQL, its notifications too, is held 25 ms.
    const proxy = await FaultProxy.start({ path: parsePostgresUrl(cluster.url).socketPath! });
    const metricsPort = await freePort();
    const reader = await startReplica(schema, ["--metrics-listen", `127.0.0.1:${metricsPort}`], `postgres://postgres@127.0.0.1:${proxy.port}/postgres`);
    try {
      proxy.delay(25);
      for (let round = 0; round < 40; round++) {
        const asked = { session: { key: worker }, changesSince: 0n };
        const before = await reader.clients.reconcile.sessionStatus(asked);
        assert.deepEqual(await reader.clients.reconcile.sessionStatus(asked), before, `round ${round}: asked again`);
        const written = await writer.clients.signalLog.append(goal(worker, { summary: `round ${round}` }));
        // Asked at once: the notification of the write is still on its way to the reader.
        const after = await reader.clients.reconcile.sessionStatus(asked);
        assert.equal(after.stateVersion, written.stateVersion, `round ${round}: the reader answers with the write`);
        assert.equal(after.stateChanges!.events.at(-1)!.summary, `round ${round}`);
      }
      const text = await scrapeMetrics(metricsPort);
      assert.ok(metricValue(text, 'sessionstate_status_answers_total{source="cache"}') >= 40, "the repeated questions came from memory");
    } finally {
      await reader.stop();
      await writer.stop();
      await proxy.close();
    }
  });
});
