/**
 * The PostgreSQL rows of `npm run bench` (issue 13): replicas on one throwaway PostgreSQL cluster beside
 * one SQLite process, measured in the same run. Appends through the client library (64 loops) and as
 * unary calls, with 1 and 2 replicas; append -> notice latency at 500/s within one replica and across
 * two; SessionStatus; and failover: from SIGKILL of a replica to the next append the client gets through,
 * and to every pending notice redelivered to a subscriber that was on the killed replica.
 */
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { create, toBinary } from "@bufbuild/protobuf";
import { SessionStatusRequestSchema } from "../gen/sessionstate/v1/reconcile_pb.js";
import { AppendRequestSchema } from "../gen/sessionstate/v1/signal_log_pb.js";
import { SessionStateClient } from "../clients/typescript/src/index.js";
import { connect, goal, human, type Clients } from "../test/support/helpers.js";
import { noticeLatency } from "./notice-latency.js";
import { scrapeServer, windowBetween, type ServerWindow } from "./server-window.js";
import { startPostgresCluster } from "../test/support/postgres-cluster.js";
import { grpcBodyFile, h2loadRate, h2loadShape, hasH2load } from "./h2load.js";
import { median, percentile, sleep, spawnListening, unaryRate, type Listening } from "./lib.js";

/** What the scenario needs from the bench's runner. */
export interface BenchContext {
  root: string;
  work: string;
  rounds: number;
  roundMs: number;
  serverNodeArgs: string[];
  row(scenario: string, figure: string, value: string, goal?: string): void;
  results: Record<string, number | string>;
  appendBytes(): Buffer;
  freePort(): Promise<number>;
}

/**
 * Appends through the client library as `gateways` gateways would send them: a client each, `loops`
 * loops each awaiting `client.append`, for `durationMs`. One client coalesces a turn's appends into one
 * call, so a single client measures one call's latency; several measure what the service can take.
 */
async function clientRate(address: string, gateways: number, loops: number, durationMs: number): Promise<number> {
  const clients = Array.from({ length: gateways }, () => new SessionStateClient({ address, logger: { warn: () => {} } }));
  await Promise.all(clients.map((client) => client.append(goal("agent:bench:subagent:s0"))));
  let calls = 0;
  const started = performance.now();
  const deadline = started + durationMs;
  await Promise.all(
    clients.flatMap((client) =>
      Array.from({ length: loops }, async () => {
        while (performance.now() < deadline) await client.append(goal(`agent:bench:subagent:s${calls++ % 1000}`));
      }),
    ),
  );
  const rate = (calls / (performance.now() - started)) * 1000;
  for (const client of clients) client.close();
  return rate;
}

export async function postgresReplicas(ctx: BenchContext): Promise<void> {
  const { row, results, rounds, roundMs } = ctx;
  const cluster = startPostgresCluster();
  let schemas = 0;
  const started: Listening[] = [];
  const serve = async (args: string[]): Promise<Listening> => {
    const server = await spawnListening(join(ctx.root, "bin/sessionstate.js"), ["serve", "--log-level", "warn", ...args], ctx.serverNodeArgs);
    started.push(server);
    return server;
  };
  const replicas = async (count: number, listen: string[] = [], extra: string[][] = []): Promise<Listening[]> => {
    const schema = `bench${++schemas}`;
    const servers: Listening[] = [];
    for (let i = 0; i < count; i++) {
      // A named gRPC port's next one is not known to be free: the HTTP port takes a free one.
      servers.push(await serve(["--db", cluster.url, "--db-schema", schema, "--listen", listen[i] ?? "127.0.0.1:0", "--http-listen", "127.0.0.1:0", ...(extra[i] ?? [])]));
    }
    return servers;
  };
  const stopAll = async (servers: Listening[]): Promise<void> => {
    for (const server of servers) await server.stop();
  };
  try {
    // Appends: one SQLite process, one replica, two replicas, measured in alternation.
    const sqlite = await serve(["--db", join(ctx.work, "pg-baseline.db"), "--listen", "127.0.0.1:0"]);
    const one = await replicas(1);
    const two = await replicas(2);
    const bothTargets = `ipv4:${two.map((server) => server.address).join(",")}`;
    const rates = { sqlite: [] as number[], one: [] as number[], two: [] as number[], unaryOne: [] as number[], unaryTwo: [] as number[], unarySqlite: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      rates.sqlite.push(await clientRate(sqlite.address, 4, 64, roundMs));
      rates.one.push(await clientRate(one[0]!.address, 4, 64, roundMs));
      rates.two.push(await clientRate(bothTargets, 4, 64, roundMs));
      const path = "/sessionstate.v1.SignalLog/Append";
      rates.unarySqlite.push(await unaryRate(sqlite.address, path, ctx.appendBytes, 64, roundMs));
      rates.unaryOne.push(await unaryRate(one[0]!.address, path, ctx.appendBytes, 64, roundMs));
      const halves = await Promise.all(two.map((server) => unaryRate(server.address, path, ctx.appendBytes, 32, roundMs)));
      rates.unaryTwo.push(halves[0]! + halves[1]!);
    }
    const m = Object.fromEntries(Object.entries(rates).map(([k, v]) => [k, median(v)])) as Record<keyof typeof rates, number>;
    row("postgres", "client library, 4 gateways x 64 loops: SQLite / 1 replica / 2 replicas (appends/s)", `${m.sqlite.toFixed(0)} / ${m.one.toFixed(0)} / ${m.two.toFixed(0)}`);
    row("postgres", "2 replicas vs one SQLite process (client library)", (m.two / m.sqlite).toFixed(2), "goal >= 1.0");
    row("postgres", "unary, 64 in flight: SQLite / 1 replica / 2 replicas (appends/s)", `${m.unarySqlite.toFixed(0)} / ${m.unaryOne.toFixed(0)} / ${m.unaryTwo.toFixed(0)}`);
    Object.assign(results, {
      pg_client_appends_per_sec_sqlite: m.sqlite,
      pg_client_appends_per_sec_1_replica: m.one,
      pg_client_appends_per_sec_2_replicas: m.two,
      pg_2_replicas_vs_sqlite_client: m.two / m.sqlite,
      pg_unary_appends_per_sec_sqlite: m.unarySqlite,
      pg_unary_appends_per_sec_1_replica: m.unaryOne,
      pg_unary_appends_per_sec_2_replicas: m.unaryTwo,
    });

    // Reconcile: SessionStatus with 20 events after a point, on one replica and on SQLite.
    const seedReconcile = async (address: string): Promise<void> => {
      const client = new SessionStateClient({ address, logger: { warn: () => {} } });
      await Promise.all(Array.from({ length: 5000 }, (_, i) => client.append(goal(`agent:bench:r${i % 50}`))));
      client.close();
    };
    await seedReconcile(sqlite.address);
    await seedReconcile(one[0]!.address);
    const statusRequest = (): Buffer =>
      Buffer.from(
        toBinary(
          SessionStatusRequestSchema,
          create(SessionStatusRequestSchema, { session: { key: `agent:bench:r${Math.floor(Math.random() * 50)}` }, changesSince: 0n, limit: 20 }),
        ),
      );
    const status = { sqlite: [] as number[], pg: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      status.sqlite.push(await unaryRate(sqlite.address, "/sessionstate.v1.Reconcile/SessionStatus", statusRequest, 64, roundMs));
      status.pg.push(await unaryRate(one[0]!.address, "/sessionstate.v1.Reconcile/SessionStatus", statusRequest, 64, roundMs));
    }
    row("postgres", "SessionStatus, 20 events: SQLite / 1 replica (calls/s)", `${median(status.sqlite).toFixed(0)} / ${median(status.pg).toFixed(0)}`);
    results.pg_status_per_sec_sqlite = median(status.sqlite);
    results.pg_status_per_sec_1_replica = median(status.pg);
    await stopAll([sqlite, ...one, ...two]);

    // h2load: raw Append calls, one SQLite process, one replica, two replicas (an h2load each, at once).
    // Every call is proven: the one session's state version is the number of events stored.
    if (await hasH2load()) {
      const h2Session = "agent:bench:subagent:h2load";
      const body = grpcBodyFile(ctx.work, "pg-append", toBinary(AppendRequestSchema, create(AppendRequestSchema, goal(h2Session))));
      const perRun = h2loadShape.requests + h2loadShape.warmupRequests;
      const h2 = async (servers: Listening[]): Promise<number> => {
        const runs = await Promise.all(servers.map((s) => h2loadRate(`http://${s.address}/sessionstate.v1.SignalLog/Append`, body, s.child.pid!)));
        const clients = connect(servers[0]!.address, { ownConnection: true });
        const stored = (await clients.reconcile.sessionStatus({ session: { key: h2Session } })).stateVersion;
        clients.close();
        if (stored !== BigInt(perRun * servers.length)) throw new Error(`h2load: ${stored} events stored of ${perRun * servers.length} sent`);
        return runs.reduce((sum, run) => sum + run.requestsPerSec, 0);
      };
      const h2Sqlite = await serve(["--db", join(ctx.work, "pg-h2load.db"), "--listen", "127.0.0.1:0"]);
      const sqliteRate = await h2([h2Sqlite]);
      await h2Sqlite.stop();
      const h2One = await replicas(1);
      const oneRate = await h2(h2One);
      await stopAll(h2One);
      const h2Two = await replicas(2);
      const twoRate = await h2(h2Two);
      await stopAll(h2Two);
      row("postgres", "h2load Append: SQLite / 1 replica / 2 replicas (calls/s)", `${sqliteRate.toFixed(0)} / ${oneRate.toFixed(0)} / ${twoRate.toFixed(0)}`);
      Object.assign(results, { pg_h2load_append_per_sec_sqlite: sqliteRate, pg_h2load_append_per_sec_1_replica: oneRate, pg_h2load_append_per_sec_2_replicas: twoRate });
    }

    // Notice latency at 500/s: written and subscribed on one replica, then written on one and read on the other.
    // The writing replica's metrics say where an append's time goes: waiting in its queue, or in its transaction.
    // One SQLite process is measured in the rounds between the replicas' in-replica rounds: its p99 is
    // what the in-replica p99 is compared with, on the machine as it is in that minute.
    const metricsPort = await ctx.freePort();
    const pair = await replicas(2, [], [["--metrics-listen", `127.0.0.1:${metricsPort}`]]);
    const single = await serve(["--db", join(ctx.work, "pg-latency.db"), "--listen", "127.0.0.1:0"]);
    const [a, b] = pair.map((server) => connect(server.address, { ownConnection: true })) as [Clients, Clients];
    const s = connect(single.address, { ownConnection: true });
    try {
      const windows: ServerWindow[] = [];
      const sqliteRuns: number[][] = [];
      const latency = async (writer: Clients, reader: Clients, tag: string, alternate?: Clients) => {
        await noticeLatency(writer, reader, `${tag}warm`, 500, 1000);
        if (alternate !== undefined) await noticeLatency(alternate, alternate, `${tag}swarm`, 500, 1000);
        const runs: number[][] = [];
        for (let r = 0; r < rounds; r++) {
          if (alternate !== undefined) sqliteRuns.push(await noticeLatency(alternate, alternate, `${tag}s${r}`, 500, 4000));
          const opened = await scrapeServer(metricsPort);
          runs.push(await noticeLatency(writer, reader, `${tag}${r}`, 500, 4000));
          windows.push(windowBetween(opened, await scrapeServer(metricsPort)));
        }
        return { p50: median(runs.map((l) => percentile(l, 50))), p99: median(runs.map((l) => percentile(l, 99))) };
      };
      const within = await latency(a, a, "in", s);
      const sqliteP99 = median(sqliteRuns.map((l) => percentile(l, 99)));
      const inReplica = windows.splice(0);
      const meanMs = (seconds: (w: ServerWindow) => number): number => median(inReplica.map((w) => (seconds(w) / Math.max(1, w.commits)) * 1000));
      row(
        "postgres",
        "within one replica at 500/s, the writer's transactions per round; mean ms in each / its oldest write's wait before it",
        `${median(inReplica.map((w) => w.commits)).toFixed(0)}; ${meanMs((w) => w.commitSeconds).toFixed(1)} / ${meanMs((w) => w.waitSeconds).toFixed(1)}`,
      );
      row(
        "postgres",
        "within one replica at 500/s, per round: the writer's transactions over 5 ms; its event-loop delay p99 / max ms; GC pauses and their ms",
        `${median(inReplica.map((w) => w.commitsOver5Ms)).toFixed(0)}; ${median(inReplica.map((w) => w.loopP99Ms)).toFixed(1)} / ${median(inReplica.map((w) => w.loopMaxMs)).toFixed(1)}; ` +
          `${median(inReplica.map((w) => w.gcCount)).toFixed(0)}, ${(median(inReplica.map((w) => w.gcSeconds)) * 1000).toFixed(0)} ms`,
      );
      const hubMs = median(inReplica.map((w) => (w.noticeSeconds / Math.max(1, w.notices)) * 1000));
      row("postgres", "within one replica at 500/s, in the hub: mean ms from a committed change to its notice handed to the stream", hubMs.toFixed(1));
      Object.assign(results, {
        pg_commit_mean_ms_500: meanMs((w) => w.commitSeconds),
        pg_write_wait_mean_ms_500: meanMs((w) => w.waitSeconds),
        pg_hub_mean_ms_500: hubMs,
      });
      const across = await latency(a, b, "x");
      row("postgres", "notice at 500/s within one replica: p50 / p99 ms", `${within.p50.toFixed(1)} / ${within.p99.toFixed(1)}`);
      row("postgres", "notice at 500/s across replicas: p50 / p99 ms", `${across.p50.toFixed(1)} / ${across.p99.toFixed(1)}`);
      row("postgres", "cross-replica p99 / in-replica p99", (across.p99 / within.p99).toFixed(2), "goal <= 1.5");
      Object.assign(results, {
        pg_notice_p99_ms_in_replica: within.p99,
        pg_notice_p99_ms_across_replicas: across.p99,
        pg_notice_p99_across_vs_within: across.p99 / within.p99,
        pg_notice_p99_ms_sqlite: sqliteP99,
        pg_notice_p99_in_replica_vs_sqlite: within.p99 / sqliteP99,
      });
      row("postgres", "notice at 500/s, one SQLite process in the same minutes: p99 ms", sqliteP99.toFixed(1));
      row("postgres", "in-replica p99 / SQLite p99", (within.p99 / sqliteP99).toFixed(2), "goal <= 2");
    } finally {
      a.close();
      b.close();
      s.close();
      await stopAll([...pair, single]);
    }

    // Failover: the subscriber and the appender use a client on both replicas; the subscriber's stream
    // is on the victim (the survivor starts after it subscribed), which is then SIGKILLed.
    const ports = [await ctx.freePort(), await ctx.freePort()];
    const [victim] = await replicas(1, [`127.0.0.1:${ports[0]}`]);
    const schema = `bench${schemas}`;
    const client = new SessionStateClient({ address: `ipv4:127.0.0.1:${ports[0]},127.0.0.1:${ports[1]}`, logger: { warn: () => {} } });
    const pendingPairs = 200;
    for (let i = 0; i < pendingPairs; i++) {
      await client.watch.watch({ watcherSessionKey: "agent:bench:failover", target: { key: `agent:bench:subagent:f${i}` } });
      await client.append(human(`agent:bench:subagent:f${i}`));
    }
    const abort = new AbortController();
    let syncs = 0;
    let redeliveredAt = 0;
    const subscription = (async () => {
      for await (const _ of client.subscribe({
        watchers: ["agent:bench:failover"],
        signal: abort.signal,
        backoff: { initialMs: 50, maxMs: 500 },
        onSynced: (delivered) => {
          syncs++;
          if (syncs === 2 && delivered === pendingPairs) redeliveredAt = performance.now();
        },
      })) {
        // notices are not acked: all stay pending
      }
    })().catch(() => undefined);
    while (syncs < 1) await sleep(10);
    const survivor = await serve(["--db", cluster.url, "--db-schema", schema, "--listen", `127.0.0.1:${ports[1]}`, "--http-listen", "127.0.0.1:0"]);
    await sleep(1500); // the client connects to the survivor too
    let appending = true;
    let firstAfterKill = 0;
    let killedAt = 0;
    const appender = (async () => {
      while (appending) {
        await client.append(goal("agent:bench:failover-target"), { timeoutMs: 5000 }).then(
          () => {
            if (killedAt > 0 && firstAfterKill === 0) firstAfterKill = performance.now();
          },
          () => undefined,
        );
      }
    })();
    await sleep(300);
    killedAt = performance.now();
    victim!.child.kill("SIGKILL");
    await victim!.exited;
    const deadline = performance.now() + 15_000;
    while ((firstAfterKill === 0 || redeliveredAt === 0) && performance.now() < deadline) await sleep(5);
    appending = false;
    await appender;
    abort.abort();
    await subscription;
    client.close();
    await survivor.stop();
    const appendMs = firstAfterKill === 0 ? Number.NaN : firstAfterKill - killedAt;
    const noticesMs = redeliveredAt === 0 ? Number.NaN : redeliveredAt - killedAt;
    row("postgres", "failover: SIGKILL -> next append through the client (ms)", appendMs.toFixed(0), "goal < 2000");
    row("postgres", `failover: SIGKILL -> all ${pendingPairs} pending notices redelivered (ms)`, noticesMs.toFixed(0), "goal < 2000");
    results.pg_failover_append_ms = appendMs;
    results.pg_failover_notices_ms = noticesMs;
  } finally {
    for (const server of started) server.child.kill("SIGKILL");
    cluster.destroy();
  }
}
