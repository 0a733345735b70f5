/**
 * The `scale` scenario (issue 33): what the service costs as its stored data grows. For each size (10k,
 * 100k and 1M events by default: `BENCH_SCALE_SIZES`; 10 events per target session and 2 watchers per
 * target, every pair with a pending notice, so 2k, 20k and 200k pending pairs) on SQLite, and the middle
 * size on PostgreSQL (`BENCH_SCALE_PG_SIZE`, `none` to skip), it measures as an operator would, through
 * the public API of a server process of its own:
 *
 * - the restart to `listening on`, without and with a prune backlog (half the events over `--max-events`),
 *   and the background pass that works the backlog off (its time, and the server's own step time, per event);
 * - Append p50/p99 at 200/s while a Prune RPC removes half the events (loaded with AppendBatch of 500, whose
 *   rate is a figure too), against the same without a prune;
 * - a new subscriber over every pending pair: its first notice, the longest wait of calls made meanwhile
 *   (SessionStatus at 200/s), the whole drain, and the server's RSS after restart and after the drain;
 * - Append and SessionStatus p50/p99 at 200/s, a ListWatches page, and the database's size.
 *
 * Each figure is printed per size, with the ratio of the largest size to the smallest. The load generator is
 * this process: its CPU share is printed beside the drain and the 200/s rows, so a figure it limits shows as
 * such. `BENCH_SERVER_ROOT` runs another checkout's server (seeded with that checkout's own store), for
 * before/after figures in one hour.
 */
import { existsSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { create } from "@bufbuild/protobuf";
import { AppendBatchRequestSchema, AppendRequestSchema } from "../../gen/sessionstate/v1/signal_log_pb.js";
import { ActorType, EventKind } from "../../gen/sessionstate/v1/types_pb.js";
import { connect, metricValue, scrapeMetrics, type Clients } from "../../test/support/helpers.js";
import { freePort } from "../../test/support/process-helpers.js";
import { startPostgresCluster, postgresBinDir, type PostgresCluster } from "../../test/support/postgres-cluster.js";
import { percentile, rssMb, sleep, spawnListening, type Listening } from "../lib.js";
import { root, work, serverNodeArgs, results, row } from "../context.js";

const serverRoot = process.env.BENCH_SERVER_ROOT ?? root;
const sizes = (process.env.BENCH_SCALE_SIZES ?? "10000,100000,1000000").split(",").map(Number);
const pgSizeSetting = process.env.BENCH_SCALE_PG_SIZE ?? "100000";
const eventsPerTarget = 10;
const watchers = 1000;
const namespace = "default";

/** The i-th target session's key, and the two watchers of each target. */
const targetKey = (i: number): string => `agent:sc:t${i}`;
const watchersOf = (i: number): [string, string] => [`agent:sc:w${i % watchers}`, `agent:sc:w${(i + watchers / 2) % watchers}`];

/** Where one size's state lives: a SQLite file, or a schema of the bench's PostgreSQL cluster. */
interface Place {
  backend: "sqlite" | "postgres";
  /** `--db` and, on PostgreSQL, `--db-schema`. */
  dbArgs: string[];
  /** The bytes of stored state, read from the file (SQLite) or the server's metrics. */
  path?: string;
}

/** What the seeding code of a checkout offers: the store of its own schema version. */
interface SeedStore {
  watch(watcherKey: string, target: { namespace: string; agentId: string; key: string }, nowMs: number): Promise<unknown>;
  append(input: unknown): Promise<unknown>;
  close(): Promise<void>;
}

/** Opens a store of `serverRoot`'s own code on `place`. */
async function openSeedStore(place: Place, cluster: PostgresCluster | undefined): Promise<SeedStore> {
  const { encodeStateEvent } = (await import(join(serverRoot, "src/codec/event-codec.ts"))) as { encodeStateEvent: unknown };
  if (place.backend === "sqlite") {
    const { SqliteStore } = (await import(join(serverRoot, "src/store/sqlite/sqlite-store.ts"))) as {
      SqliteStore: { open(path: string, durability: string, encode: unknown): SeedStore };
    };
    return SqliteStore.open(place.path!, "normal", encodeStateEvent);
  }
  const { PostgresStore } = (await import(join(serverRoot, "src/store/postgres/postgres-store.ts"))) as {
    PostgresStore: { open(options: unknown): Promise<SeedStore> };
  };
  const { parsePostgresUrl } = (await import(join(serverRoot, "src/store/postgres/postgres-url.ts"))) as { parsePostgresUrl(url: string): unknown };
  return PostgresStore.open({
    target: parsePostgresUrl(cluster!.url),
    schema: place.dbArgs[3],
    durability: "normal",
    nodeId: "bench",
    encodeEvent: encodeStateEvent,
    nowMs: () => Date.now(),
  });
}

/** Seeds `events` events over `events / 10` targets, two watchers each (watched before, so every pair is pending). */
async function seed(place: Place, events: number, cluster: PostgresCluster | undefined): Promise<{ eventsPerSec: number }> {
  const store = await openSeedStore(place, cluster);
  const targets = events / eventsPerTarget;
  const now = Date.now();
  const inFlight = 1000;
  try {
    const session = (i: number) => ({ namespace, agentId: "sc", key: targetKey(i) });
    for (let i = 0; i < targets; i += inFlight / 2) {
      const batch: Promise<unknown>[] = [];
      for (let t = i; t < Math.min(targets, i + inFlight / 2); t++) for (const w of watchersOf(t)) batch.push(store.watch(w, session(t), now));
      await Promise.all(batch);
    }
    const started = performance.now();
    // Round-robin over the targets: the oldest half of the log spans every session.
    for (let i = 0; i < events; i += inFlight) {
      const batch: Promise<unknown>[] = [];
      for (let e = i; e < Math.min(events, i + inFlight); e++) {
        batch.push(
          store.append({
            session: session(e % targets),
            kind: "human_direct_message",
            actorType: "human",
            summary: "scale bench event",
            occurredAtMs: now,
            payload: {},
            notifyWatcherKeys: [],
            onlyIfWatched: false,
            nowMs: now,
          }),
        );
      }
      await Promise.all(batch);
    }
    return { eventsPerSec: (events / (performance.now() - started)) * 1000 };
  } finally {
    await store.close();
  }
}

/** A server of `serverRoot` on `place`: how long from spawn to its `listening on` line. */
async function serve(place: Place, maxEvents: number, metricsPort: number): Promise<{ server: Listening; listeningMs: number }> {
  const started = performance.now();
  const server = await spawnListening(
    join(serverRoot, "bin/sessionstate.js"),
    [
      "serve",
      ...place.dbArgs,
      "--listen", "127.0.0.1:0",
      "--metrics-listen", `127.0.0.1:${metricsPort}`,
      "--log-level", "warn",
      "--max-events", String(maxEvents),
      "--max-streams-per-connection", "2000",
    ],
    serverNodeArgs,
  );
  return { server, listeningMs: performance.now() - started };
}

const appendBody = (key: string) =>
  ({ session: { key }, kind: EventKind.GOAL_CHANGED, actorType: ActorType.AGENT, summary: "scale bench append" }) as const;

/** Latencies (ms, sorted) of calls sent at `perSec` until `until()` says stop (at least `minMs`). */
async function latencyAtRate(perSec: number, call: (i: number) => Promise<unknown>, until: () => boolean, minMs = 0): Promise<number[]> {
  const latencies: number[] = [];
  const pending: Promise<void>[] = [];
  const start = performance.now();
  for (let i = 0; ; i++) {
    const at = start + (i * 1000) / perSec;
    if (performance.now() - start >= minMs && until()) break;
    const wait = at - performance.now();
    if (wait > 1) await sleep(wait);
    const sent = performance.now();
    pending.push(call(i).then(() => void latencies.push(performance.now() - sent)));
  }
  await Promise.all(pending);
  return latencies.sort((a, b) => a - b);
}

/** The generator's (this process's) CPU share while `work` runs, in percent of one core. */
async function withGeneratorCpu<T>(work: () => Promise<T>): Promise<{ value: T; cpuPercent: number }> {
  const cpu = process.cpuUsage();
  const started = performance.now();
  const value = await work();
  const used = process.cpuUsage(cpu);
  return { value, cpuPercent: ((used.user + used.system) / 1000 / (performance.now() - started)) * 100 };
}

const fixed = (n: number, digits = 1): string => (Number.isFinite(n) ? n.toFixed(digits) : "n/a");

/** Figures of one size, by key (the report's rows are built from these). */
type SizeFigures = Record<string, number>;

/** Every figure of one size on `place`. */
async function measureSize(place: Place, events: number, cluster: PostgresCluster | undefined): Promise<SizeFigures> {
  const figures: SizeFigures = { events, pairs: (events / eventsPerTarget) * 2 };
  const seeded = await seed(place, events, cluster);
  figures.seed_events_per_s = seeded.eventsPerSec;
  const metricsPort = await freePort();

  // 1. Restart without a backlog; steady calls; a new subscriber over every pending pair; AppendBatch; a Prune RPC.
  let { server, listeningMs } = await serve(place, events, metricsPort);
  figures.restart_ms = listeningMs;
  let clients: Clients = connect(server.address);
  try {
    await clients.reconcile.sessionStatus({ session: { key: targetKey(0) } });
    await sleep(500);
    figures.rss_restart_mb = rssMb(server.child.pid!);

    const steadyAppend = await withGeneratorCpu(() =>
      latencyAtRate(200, (i) => clients.signalLog.append(appendBody(targetKey((i * 7919) % (events / eventsPerTarget)))), () => true, 5000),
    );
    figures.append_p50_ms = percentile(steadyAppend.value, 50);
    figures.append_p99_ms = percentile(steadyAppend.value, 99);
    figures.generator_cpu_200_percent = steadyAppend.cpuPercent;
    const steadyStatus = await latencyAtRate(
      200,
      (i) => clients.reconcile.sessionStatus({ session: { key: targetKey((i * 7919) % (events / eventsPerTarget)) }, changesSince: 0n, limit: 20 }),
      () => true,
      5000,
    );
    figures.status_p50_ms = percentile(steadyStatus, 50);
    figures.status_p99_ms = percentile(steadyStatus, 99);

    const pageTimes: number[] = [];
    for (let i = 0; i < 50; i++) {
      const started = performance.now();
      await clients.watch.listWatches({ pageSize: 100, watcherSessionKey: `agent:sc:w${(i * 37) % watchers}` });
      pageTimes.push(performance.now() - started);
    }
    figures.list_watches_page_ms = percentile(pageTimes.sort((a, b) => a - b), 50);

    // A new subscriber over every pending pair, and SessionStatus at 200/s from another connection meanwhile.
    const prober = connect(server.address, { ownConnection: true });
    try {
      await prober.reconcile.sessionStatus({ session: { key: targetKey(0) } });
      let firstAt: number | undefined;
      let syncedAt: number | undefined;
      let delivered = 0;
      const subscribedAt = performance.now();
      const probeStarts: { sent: number; took: number }[] = [];
      const probing = latencyAtRate(
        200,
        (i) => {
          const sent = performance.now();
          return prober.reconcile
            .sessionStatus({ session: { key: targetKey(i % (events / eventsPerTarget)) } })
            .then(() => void probeStarts.push({ sent, took: performance.now() - sent }));
        },
        () => syncedAt !== undefined,
      );
      const drain = await withGeneratorCpu(async () => {
        const stream = clients.watch.subscribeStaleNotices({ watcherKeyPrefixes: ["agent:sc:"] }, { timeoutMs: 3_600_000 });
        for await (const item of stream) {
          if (item.message.case === "notice") {
            delivered++;
            firstAt ??= performance.now();
          } else if (item.message.case === "synced") {
            syncedAt = performance.now();
            break;
          }
        }
        stream.cancel();
      });
      await probing;
      figures.first_notice_ms = (firstAt ?? Number.NaN) - subscribedAt;
      figures.drain_ms = (syncedAt ?? Number.NaN) - subscribedAt;
      figures.drained_notices = delivered;
      figures.generator_cpu_drain_percent = drain.cpuPercent;
      const waitedUntilFirst = probeStarts.filter((p) => p.sent <= (firstAt ?? 0)).map((p) => p.took);
      figures.longest_wait_before_first_ms = Math.max(0, ...waitedUntilFirst);
      figures.longest_wait_during_drain_ms = Math.max(0, ...probeStarts.map((p) => p.took));
      await sleep(1000);
      figures.rss_drained_mb = rssMb(server.child.pid!);
      // What of it is the JavaScript heap (live objects, and the heap V8 keeps for them), and what is native.
      const memory = await scrapeMetrics(metricsPort);
      figures.heap_used_drained_mb = metricValue(memory, "sessionstate_nodejs_heap_size_used_bytes", Number.NaN) / 1024 / 1024;
      figures.heap_total_drained_mb = metricValue(memory, "sessionstate_nodejs_heap_size_total_bytes", Number.NaN) / 1024 / 1024;
    } finally {
      prober.close();
    }

    // Load half the size again with AppendBatch of 500 (new sessions), then prune it away with Append at 200/s.
    const loadEvents = events / 2;
    const batchOf = (start: number) =>
      create(AppendBatchRequestSchema, {
        appends: Array.from({ length: 500 }, (_, i) => create(AppendRequestSchema, {
          session: { key: `agent:load:s${(start + i) % 10_000}` },
          kind: EventKind.RUN_COMPLETED,
          actorType: ActorType.SYSTEM,
          summary: "scale bench load",
        })),
      });
    const loadStarted = performance.now();
    // Four batches in flight at a time.
    for (let i = 0; i < loadEvents; i += 500 * 4) {
      const starts = [0, 1, 2, 3].map((k) => i + k * 500).filter((start) => start < loadEvents);
      await Promise.all(starts.map((start) => clients.signalLog.appendBatch(batchOf(start))));
    }
    figures.load_events_per_s = (loadEvents / (performance.now() - loadStarted)) * 1000;
    figures.db_mb = place.path === undefined
      ? metricValue(await scrapeMetrics(metricsPort), 'sessionstate_database_bytes{file="db"}', Number.NaN) / 1024 / 1024
      : (statSync(place.path).size + (existsSync(`${place.path}-wal`) ? statSync(`${place.path}-wal`).size : 0)) / 1024 / 1024;

    let pruned: { eventsRemoved: number } | undefined;
    let pruneMs = Number.NaN;
    const pruning = (async () => {
      const started = performance.now();
      pruned = await clients.signalLog.prune({}, { timeoutMs: 3_600_000 });
      pruneMs = performance.now() - started;
    })();
    const duringPrune = await latencyAtRate(200, (i) => clients.signalLog.append(appendBody(targetKey(i % (events / eventsPerTarget)))), () => pruned !== undefined);
    await pruning;
    figures.prune_rpc_ms = pruneMs;
    figures.prune_rpc_events = pruned?.eventsRemoved ?? Number.NaN;
    figures.prune_rpc_us_per_event = (pruneMs * 1000) / (pruned?.eventsRemoved ?? Number.NaN);
    figures.append_during_prune_p50_ms = percentile(duringPrune, 50);
    figures.append_during_prune_p99_ms = percentile(duringPrune, 99);
    figures.append_during_prune_samples = duringPrune.length;
  } finally {
    clients.close();
    await server.stop();
  }

  // 2. Restart with a backlog: half the events over the cap; the background pass works it off.
  const backlogCap = events / 2;
  ({ server, listeningMs } = await serve(place, backlogCap, metricsPort));
  figures.restart_backlog_ms = listeningMs;
  clients = connect(server.address);
  try {
    const passStarted = performance.now();
    let passDone = false;
    const during = latencyAtRate(200, (i) => clients.signalLog.append(appendBody(targetKey(i % (events / eventsPerTarget)))), () => passDone);
    let metrics = "";
    for (;;) {
      metrics = await scrapeMetrics(metricsPort);
      if (metricValue(metrics, "sessionstate_prune_runs_total", 0) >= 1) break;
      await sleep(20);
    }
    passDone = true;
    const duringPass = await during;
    figures.backlog_pass_ms = performance.now() - passStarted;
    const rows = metricValue(metrics, 'sessionstate_pruned_rows_total{table="events"}', 0);
    figures.backlog_pass_events = rows;
    figures.backlog_step_us_per_event = (metricValue(metrics, "sessionstate_prune_step_seconds_sum", 0) * 1e6) / rows;
    figures.append_during_pass_p99_ms = percentile(duringPass, 99);
    figures.append_during_pass_samples = duringPass.length;
  } finally {
    clients.close();
    await server.stop();
  }
  return figures;
}

/** The rows of the report: each figure per size, and the ratio of the largest size to the smallest. */
const reportRows: { key: string; figure: string; digits?: number; goal?: string }[] = [
  { key: "restart_ms", figure: "restart to listening on, ms", digits: 0, goal: "ratio <= 1.5, < 2000 at 1M" },
  { key: "restart_backlog_ms", figure: "restart with half over the cap, ms", digits: 0, goal: "ratio <= 1.5, < 2000 at 1M" },
  { key: "backlog_pass_ms", figure: "background pass over that backlog, ms", digits: 0 },
  { key: "backlog_step_us_per_event", figure: "its step time per pruned event, µs", digits: 2, goal: "ratio <= 2" },
  { key: "append_during_pass_p99_ms", figure: "Append p99 during that pass, ms (200/s)" },
  { key: "prune_rpc_us_per_event", figure: "Prune RPC of half the size: µs per event", digits: 2, goal: "ratio <= 2" },
  { key: "append_during_prune_p50_ms", figure: "Append p50 during the Prune RPC, ms" },
  { key: "append_during_prune_p99_ms", figure: "Append p99 during the Prune RPC, ms", goal: "<= 2 x p99 without" },
  { key: "first_notice_ms", figure: "new subscriber: ms to its first notice", goal: "ratio <= 2" },
  { key: "longest_wait_before_first_ms", figure: "longest wait of a call meanwhile, ms", goal: "<= 50 at 1M" },
  { key: "drain_ms", figure: "its whole backlog to synced, ms", digits: 0 },
  { key: "longest_wait_during_drain_ms", figure: "longest wait of a call during the drain, ms" },
  { key: "generator_cpu_drain_percent", figure: "generator CPU during the drain, %", digits: 0 },
  { key: "rss_restart_mb", figure: "RSS after restart, MiB", digits: 0 },
  { key: "rss_drained_mb", figure: "RSS after draining every pending notice, MiB", digits: 0, goal: "ratio <= 1.5" },
  { key: "heap_used_drained_mb", figure: "of it, the JavaScript heap in use, MiB", digits: 0 },
  { key: "heap_total_drained_mb", figure: "of it, the JavaScript heap V8 holds, MiB", digits: 0 },
  { key: "append_p50_ms", figure: "Append p50 at 200/s, ms" },
  { key: "append_p99_ms", figure: "Append p99 at 200/s, ms", goal: "ratio <= 1.5" },
  { key: "status_p50_ms", figure: "SessionStatus p50 at 200/s, ms" },
  { key: "status_p99_ms", figure: "SessionStatus p99 at 200/s, ms", goal: "ratio <= 1.5" },
  { key: "generator_cpu_200_percent", figure: "generator CPU at 200/s, %", digits: 0 },
  { key: "load_events_per_s", figure: "load rate, AppendBatch of 500, events/s", digits: 0 },
  { key: "list_watches_page_ms", figure: "ListWatches page of 100, ms" },
  { key: "db_mb", figure: "database size, MiB", digits: 0 },
];

/** Prints the rows of one backend's sizes and stores each figure under `scale_<backend>_<key>_<size>`. */
function reportSizes(backend: string, bySize: Map<number, SizeFigures>): void {
  const measured = [...bySize.keys()].sort((a, b) => a - b);
  const label = (n: number): string => (n >= 1_000_000 ? `${n / 1_000_000}M` : `${n / 1000}k`);
  for (const { key, figure, digits = 1, goal } of reportRows) {
    const values = measured.map((size) => bySize.get(size)![key] ?? Number.NaN);
    const ratio = measured.length > 1 ? values.at(-1)! / values[0]! : Number.NaN;
    for (const [i, size] of measured.entries()) results[`scale_${backend}_${key}_${label(size)}`] = values[i]!;
    if (measured.length > 1) results[`scale_${backend}_${key}_ratio`] = ratio;
    const shown = `${values.map((v) => fixed(v, digits)).join(" | ")}${measured.length > 1 ? ` | ×${fixed(ratio, 2)}` : ""}`;
    row(`scale ${backend} ${measured.map(label).join("/")}`, figure, shown, goal ?? "");
  }
  const largest = measured.at(-1);
  if (largest !== undefined) {
    const figures = bySize.get(largest)!;
    results[`scale_${backend}_append_p99_prune_vs_without_${label(largest)}`] = figures.append_during_prune_p99_ms! / figures.append_p99_ms!;
  }
}

export async function scale(): Promise<void> {
  const sqlite = new Map<number, SizeFigures>();
  for (const events of sizes) {
    const path = join(work, `scale-${events}.db`);
    for (const suffix of ["", "-wal", "-shm", ".lock"]) rmSync(`${path}${suffix}`, { force: true });
    sqlite.set(events, await measureSize({ backend: "sqlite", dbArgs: ["--db", path], path }, events, undefined));
    process.stdout.write(`scale sqlite ${events}: ${JSON.stringify(sqlite.get(events))}\n`);
    for (const suffix of ["", "-wal", "-shm", ".lock"]) rmSync(`${path}${suffix}`, { force: true });
  }
  reportSizes("sqlite", sqlite);
  if (pgSizeSetting === "none") return;
  if (postgresBinDir() === undefined) {
    row("scale postgres", "skipped", "PostgreSQL missing", "apt-get install postgresql");
    return;
  }
  const cluster = startPostgresCluster();
  try {
    const events = Number(pgSizeSetting);
    const postgres = new Map<number, SizeFigures>();
    postgres.set(events, await measureSize({ backend: "postgres", dbArgs: ["--db", cluster.url, "--db-schema", "scale"] }, events, cluster));
    process.stdout.write(`scale postgres ${events}: ${JSON.stringify(postgres.get(events))}\n`);
    reportSizes("postgres", postgres);
  } finally {
    cluster.destroy();
  }
}
