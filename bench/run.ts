/**
 * `npm run bench`: measures sessionstate as users run it (its own process) and reports every headline
 * figure as a ratio against a baseline measured in the same run, with medians over several rounds.
 * Writes bench/results/latest.json, bench/results/report.md and bench/results/latency.svg.
 *
 * Set BENCH_SERVER_NODE_ARGS (for example "--cpu-prof --cpu-prof-dir=/tmp/prof") to profile the server,
 * and BENCH_ONLY (for example "reconcile,latency") to run some scenarios only: then nothing is written.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { create, toBinary } from "@bufbuild/protobuf";
import { SessionStatusRequestSchema } from "../gen/sessionstate/v1/reconcile_pb.js";
import { AppendRequestSchema } from "../gen/sessionstate/v1/signal_log_pb.js";
import { ActorType, EventKind } from "../gen/sessionstate/v1/types_pb.js";
import { SessionStateClient } from "../clients/typescript/src/index.js";
import { encodeStateEvent } from "../src/codec/event-codec.js";
import { SqliteStore } from "../src/store/sqlite/sqlite-store.js";
import { atFixedRate, connect, human, metricValue, scrapeMetrics, storeAppend } from "../test/support/helpers.js";
import { etcdPutRate, etcdWatchLatency, startEtcd } from "./etcd-peer.js";
import { grpcBodyFile, h2loadRate, h2loadShape, hasH2load, type H2loadRun } from "./h2load.js";
import { BinaryWriter } from "@bufbuild/protobuf/wire";
import Database from "better-sqlite3";
import { cpuSeconds, median, percentile, rssMb, sleep, spawnListening, unaryRate, type Listening } from "./lib.js";
import { noticeLatency } from "./notice-latency.js";
import { postgresReplicas } from "./postgres-replicas.js";
import { postgresBinDir } from "../test/support/postgres-cluster.js";
import { freePort } from "../test/support/process-helpers.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const resultsDir = join(root, "bench/results");
const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
const roundMs = Number(process.env.BENCH_ROUND_MS ?? 2000);
const work = mkdtempSync(join(tmpdir(), "sessionstate-bench-"));
const serverNodeArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? "").split(" ").filter((a) => a !== "");
const scenarios = ["throughput", "latency", "coalescing", "reconcile", "startup", "stall", "etcd", "h2load", "postgres"] as const;
const only = process.env.BENCH_ONLY?.split(",").map((name) => name.trim());
const unknownScenario = only?.find((name) => !(scenarios as readonly string[]).includes(name));
if (unknownScenario !== undefined) throw new Error(`BENCH_ONLY: unknown scenario ${unknownScenario} (known: ${scenarios.join(", ")})`);
const runs = (scenario: (typeof scenarios)[number]): boolean => only === undefined || only.includes(scenario);

const results: Record<string, number | string> = {};
const rows: string[][] = [];
const curves: Record<string, number[]> = {};

function row(scenario: string, figure: string, value: string, goal = ""): void {
  rows.push([scenario, figure, value, goal]);
  process.stdout.write(`${scenario.padEnd(26)} ${figure.padEnd(46)} ${value.padStart(14)}  ${goal}\n`);
}

async function sessionstate(name: string, extra: string[] = []): Promise<Listening> {
  return spawnListening(
    join(root, "bin/sessionstate.js"),
    ["serve", "--db", join(work, `${name}.db`), "--listen", "127.0.0.1:0", "--log-level", "warn", ...extra],
    serverNodeArgs,
  );
}

const appendRequests = Array.from({ length: 1000 }, (_, i) =>
  Buffer.from(
    toBinary(
      AppendRequestSchema,
      create(AppendRequestSchema, {
        session: { key: `agent:bench:subagent:s${i}` },
        kind: EventKind.GOAL_CHANGED,
        actorType: ActorType.AGENT,
        summary: "goal updated by the benchmark",
      }),
    ),
  ),
);
let nextAppend = 0;
const appendBytes = (): Buffer => appendRequests[nextAppend++ % appendRequests.length]!;

/** 1. Append throughput vs echo, at 1, 16 and 64 in flight; server CPU per 1,000 appends at 64. */
async function appendThroughput(echo: Listening): Promise<void> {
  const server = await sessionstate("throughput");
  try {
    for (const inFlight of [1, 16, 64]) {
      const echoRates: number[] = [];
      const appendRates: number[] = [];
      const cpuPerThousand: number[] = [];
      for (let r = 0; r < rounds; r++) {
        echoRates.push(await unaryRate(echo.address, "/bench.Echo/Echo", appendBytes, inFlight, roundMs));
        const cpu = cpuSeconds(server.child.pid!);
        const rate = await unaryRate(server.address, "/sessionstate.v1.SignalLog/Append", appendBytes, inFlight, roundMs);
        appendRates.push(rate);
        cpuPerThousand.push(((cpuSeconds(server.child.pid!) - cpu) / ((rate * roundMs) / 1000)) * 1000);
      }
      const ratio = median(appendRates) / median(echoRates);
      row("append throughput", `${inFlight} in flight: append/s, echo/s`, `${median(appendRates).toFixed(0)} / ${median(echoRates).toFixed(0)}`);
      row("append throughput", `${inFlight} in flight: ratio to echo`, ratio.toFixed(2), inFlight === 64 ? "goal >= 0.8" : "");
      results[`append_per_sec_${inFlight}`] = median(appendRates);
      results[`echo_per_sec_${inFlight}`] = median(echoRates);
      if (inFlight === 64) {
        results.append_vs_echo_ratio = ratio;
        results.append_cpu_s_per_1000 = median(cpuPerThousand);
      }
    }
  } finally {
    await server.stop();
  }
  const full = await sessionstate("throughput-full", ["--durability", "full"]);
  try {
    const rates: number[] = [];
    for (let r = 0; r < rounds; r++) rates.push(await unaryRate(full.address, "/sessionstate.v1.SignalLog/Append", appendBytes, 64, roundMs));
    results.append_per_sec_64_full = median(rates);
    row("append throughput", "64 in flight, durability full: append/s", median(rates).toFixed(0));
  } finally {
    await full.stop();
  }
}

/**
 * A latency measurement run once to warm up (JIT, caches; discarded), then `rounds` times: the median
 * over rounds of each run's p50, p99 and max, and every sample for the chart.
 */
async function latencyRounds(run: (durationMs: number) => Promise<number[]>, durationMs = 5000) {
  await run(Math.min(durationMs, 2000));
  const runs: number[][] = [];
  for (let r = 0; r < rounds; r++) runs.push(await run(durationMs));
  return {
    p50: median(runs.map((l) => percentile(l, 50))),
    p99: median(runs.map((l) => percentile(l, 99))),
    max: median(runs.map((l) => l.at(-1) ?? Number.NaN)),
    all: runs.flat().sort((a, b) => a - b),
  };
}

/** Round-trip latencies of unary echo calls at a fixed rate: the transport's own floor on this machine. */
async function echoLatency(address: string, ratePerSec: number, durationMs: number): Promise<number[]> {
  const { Client, credentials } = await import("@grpc/grpc-js");
  const client = new Client(address, credentials.createInsecure(), { "grpc.use_local_subchannel_pool": 1 });
  const pass = (b: Buffer): Buffer => b;
  const call = () =>
    new Promise<void>((resolve, reject) => client.makeUnaryRequest("/bench.Echo/Echo", pass, pass, appendBytes(), (err) => (err === null ? resolve() : reject(err))));
  await call();
  const latencies: number[] = [];
  await atFixedRate(ratePerSec, durationMs, (_, began) => call().then(() => void latencies.push(performance.now() - began)));
  client.close();
  return latencies.sort((a, b) => a - b);
}

const formatLatency = (l: { p50: number; p99: number; max: number }): string => `${l.p50.toFixed(1)} / ${l.p99.toFixed(1)} / ${l.max.toFixed(1)}`;

async function noticeLatencies(echo: Listening): Promise<void> {
  const floor = await latencyRounds((ms) => echoLatency(echo.address, 500, ms));
  results.echo_p99_ms_500 = floor.p99;
  row("notice latency", "echo round trip at 500/s (the floor): p50 / p99 / max ms", formatLatency(floor));
  const server = await sessionstate("latency");
  const clients = connect(server.address);
  try {
    for (const rate of [100, 500]) {
      const latency = await latencyRounds((ms) => noticeLatency(clients, clients, `r${rate}`, rate, ms));
      curves[`sessionstate append → notice, ${rate}/s`] = latency.all;
      results[`notice_p50_ms_${rate}`] = latency.p50;
      results[`notice_p99_ms_${rate}`] = latency.p99;
      results[`notice_max_ms_${rate}`] = latency.max;
      row("notice latency", `${rate}/s over 1,000 pairs: p50 / p99 / max ms`, formatLatency(latency), rate === 500 ? "goal p99 < 5 ms" : "");
    }
  } finally {
    clients.close();
    await server.stop();
  }
}

/** 3. 10,000 appends to one target with 100 watchers: exactly 100 notices before any ack. */
async function coalescing(): Promise<void> {
  const server = await sessionstate("coalescing");
  const clients = connect(server.address);
  try {
    const target = "agent:bench:subagent:hot";
    for (let i = 0; i < 100; i++) await clients.watch.watch({ watcherSessionKey: `agent:bench:c${i}`, target: { key: target } });
    let notices = 0;
    let lastAt = 0;
    const stream = clients.watch.subscribeStaleNotices({ watcherKeyPrefixes: ["agent:bench:c"] }, { timeoutMs: 600_000 });
    const reading = (async () => {
      try {
        for await (const item of stream) {
          if (item.message.case === "notice") {
            notices++;
            lastAt = performance.now();
          }
        }
      } catch {
        // cancelled at the end
      }
    })();
    await sleep(200);
    const request = Buffer.from(
      toBinary(AppendRequestSchema, create(AppendRequestSchema, { session: { key: target }, kind: EventKind.HUMAN_DIRECT_MESSAGE, actorType: ActorType.HUMAN, summary: "burst" })),
    );
    const started = performance.now();
    let sent = 0;
    const { Client, credentials } = await import("@grpc/grpc-js");
    const raw = new Client(server.address, credentials.createInsecure());
    const pass = (b: Buffer): Buffer => b;
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (sent < 10_000) {
          sent++;
          await new Promise<void>((resolve, reject) => raw.makeUnaryRequest("/sessionstate.v1.SignalLog/Append", pass, pass, request, (err) => (err === null ? resolve() : reject(err))));
        }
      }),
    );
    const appendsMs = performance.now() - started;
    await sleep(500);
    stream.cancel();
    await reading;
    raw.close();
    results.coalescing_notices = notices;
    results.coalescing_delivery_ms = lastAt - started;
    row("coalescing burst", "10,000 appends, 100 watchers: notices", String(notices), "goal exactly 100");
    row("coalescing burst", "time to the 100th notice / to all appends, ms", `${(lastAt - started).toFixed(0)} / ${appendsMs.toFixed(0)}`);
  } finally {
    clients.close();
    await server.stop();
  }
}

/** 4. SessionStatus with changes_since over a full 50,000-row log vs echo of a same-sized message. */
async function reconcile(echo: Listening): Promise<void> {
  const path = join(work, "reconcile.db");
  const store = SqliteStore.open(path, "normal", encodeStateEvent);
  for (let i = 0; i < 50_000; i++) await store.append(storeAppend(`agent:bench:r${i % 100}`, Date.now()));
  await store.close();
  const server = await spawnListening(join(root, "bin/sessionstate.js"), ["serve", "--db", path, "--listen", "127.0.0.1:0", "--log-level", "warn"], serverNodeArgs);
  const clients = connect(server.address);
  try {
    // Each session holds sequences s, s+100, ...: ask for the 20 events after a random point.
    const statusRequest = (): Buffer => {
      const session = Math.floor(Math.random() * 100);
      const since = BigInt(session + 1 + 100 * Math.floor(Math.random() * 480));
      return Buffer.from(toBinary(SessionStatusRequestSchema, create(SessionStatusRequestSchema, { session: { key: `agent:bench:r${session}` }, changesSince: since, limit: 20 })));
    };
    const sample = await clients.reconcile.sessionStatus({ session: { key: "agent:bench:r7" }, changesSince: 1008n, limit: 20 });
    const { SessionStatusResponseSchema } = await import("../gen/sessionstate/v1/reconcile_pb.js");
    const responseSize = toBinary(SessionStatusResponseSchema, sample).length;
    const echoPayload = Buffer.alloc(responseSize, 1);
    const echoRates: number[] = [];
    const statusRates: number[] = [];
    for (let r = 0; r < rounds; r++) {
      echoRates.push(await unaryRate(echo.address, "/bench.Echo/Echo", () => echoPayload, 64, roundMs));
      statusRates.push(await unaryRate(server.address, "/sessionstate.v1.Reconcile/SessionStatus", statusRequest, 64, roundMs));
    }
    results.reconcile_per_sec = median(statusRates);
    results.reconcile_vs_echo_ratio = median(statusRates) / median(echoRates);
    row("reconcile", `20 events (${responseSize} B): status/s, echo/s`, `${median(statusRates).toFixed(0)} / ${median(echoRates).toFixed(0)}`);
    row("reconcile", "ratio to echo", (median(statusRates) / median(echoRates)).toFixed(2), "goal >= 0.8");
  } finally {
    clients.close();
    await server.stop();
  }
}

/** 5 and 6. Start-up with 50,000 events and 100,000 cursors (20,000 pending); then memory. */
async function startupAndMemory(): Promise<void> {
  const path = join(work, "startup.db");
  const store = SqliteStore.open(path, "normal", encodeStateEvent);
  const now = Date.now();
  for (let t = 0; t < 1000; t++) {
    for (let w = 0; w < 100; w++) await store.watch(`agent:bw:w${w}`, { namespace: "default", agentId: "bw", key: `agent:bw:t${t}` }, now);
  }
  for (let i = 0; i < 49_800; i++) await store.append(storeAppend(`agent:bw:t${i % 1000}`, now, "run_completed"));
  for (let t = 0; t < 200; t++) await store.append(storeAppend(`agent:bw:t${t}`, now, "human_direct_message"));
  const pending = await store.countPendingNotices();
  await store.close();

  const spawnedAt = performance.now();
  const server = await spawnListening(
    join(root, "bin/sessionstate.js"),
    ["serve", "--db", path, "--listen", "127.0.0.1:0", "--log-level", "warn", "--max-streams-per-connection", "2000"],
    serverNodeArgs,
  );
  const servingMs = performance.now() - spawnedAt;
  const clients = connect(server.address);
  try {
    let delivered = 0;
    const stream = clients.watch.subscribeStaleNotices({ watcherKeyPrefixes: ["agent:bw:"] }, { timeoutMs: 600_000 });
    for await (const item of stream) {
      if (item.message.case === "notice") delivered++;
      else if (item.message.case === "synced") break;
    }
    const allPendingMs = performance.now() - spawnedAt;
    stream.cancel();
    results.startup_serving_ms = servingMs;
    results.startup_all_pending_ms = allPendingMs;
    row("start-up", `${pending} pending of 100,000 cursors: serving ms`, servingMs.toFixed(0), "goal < 1000 (includes node start)");
    row("start-up", `all ${delivered} pending notices received, ms`, allPendingMs.toFixed(0), "goal < 2000");

    // 6. Memory with 1,000 open streams.
    const streams = Array.from({ length: 1000 }, (_, i) => clients.watch.subscribeStaleNotices({ watcherSessionKeys: [`agent:idle:w${i}`] }, { timeoutMs: 600_000 }));
    await Promise.all(streams.map(async (call) => (await call[Symbol.asyncIterator]().next()).value));
    await sleep(500);
    const rss = rssMb(server.child.pid!);
    results.rss_mb = rss;
    row("memory", "RSS, 100,000 cursors and 1,000 open streams, MB", rss.toFixed(0), "goal < 250");

    for (const call of streams) call.cancel();
  } finally {
    clients.close();
    await server.stop();
  }
}

/**
 * RSS growth of a fresh server while 100,000 appends land on 1,000 targets watched by one watcher, with
 * that watcher's subscriber reading (`stall` false) or stalled. The stall's cost is the difference.
 */
async function rssGrowthOverAppends(stall: boolean): Promise<number> {
  const server = await sessionstate(`memory-${stall ? "stalled" : "reading"}`);
  const clients = connect(server.address);
  try {
    for (let t = 0; t < 1000; t++) await clients.watch.watch({ watcherSessionKey: "agent:stall:w", target: { key: `agent:stall:t${t}` } });
    const call = clients.watch.subscribeStaleNotices({ watcherSessionKeys: ["agent:stall:w"] }, { timeoutMs: 600_000 });
    const events = call as unknown as import("node:stream").Readable;
    events.on("error", () => undefined);
    // The reading subscriber acks what it gets, so notices keep flowing; the stalled one reads nothing more.
    events.on("data", (item: { message: { case: string; value: { target?: unknown; notifiedVersion?: bigint } } }) => {
      if (stall) call.pause();
      else if (item.message.case === "notice") {
        clients.watch
          .ackNotices({ acks: [{ watcherSessionKey: "agent:stall:w", target: item.message.value.target as never, notifiedVersion: item.message.value.notifiedVersion! }] })
          .catch(() => undefined);
      }
    });
    await sleep(500);
    const before = rssMb(server.child.pid!);
    const requests = Array.from({ length: 1000 }, (_, t) =>
      Buffer.from(toBinary(AppendRequestSchema, create(AppendRequestSchema, { session: { key: `agent:stall:t${t}` }, kind: EventKind.HUMAN_DIRECT_MESSAGE, actorType: ActorType.HUMAN, summary: "while stalled" }))),
    );
    let n = 0;
    await unaryRate(server.address, "/sessionstate.v1.SignalLog/Append", () => requests[n++ % 1000]!, 64, 1e9, () => n >= 100_000);
    await sleep(500);
    const growth = rssMb(server.child.pid!) - before;
    call.cancel();
    return growth;
  } finally {
    clients.close();
    await server.stop();
  }
}

async function stallMemory(): Promise<void> {
  const reading = await rssGrowthOverAppends(false);
  const stalled = await rssGrowthOverAppends(true);
  results.rss_growth_reading_mb = reading;
  results.rss_growth_stalled_mb = stalled;
  results.stall_extra_mb = stalled - reading;
  row("memory", "RSS growth over 100,000 appends: reading / stalled, MB", `${reading.toFixed(1)} / ${stalled.toFixed(1)}`);
  row("memory", "added by the stall, MB", (stalled - reading).toFixed(1), "goal < 20");
}

/** Median rate and server CPU seconds per 1,000 calls over `rounds` rounds of `measure`. */
async function serverCostRounds(server: Listening, measure: (durationMs: number) => Promise<number>) {
  const rates: number[] = [];
  const cpuPerThousand: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const before = cpuSeconds(server.child.pid!);
    const rate = await measure(roundMs);
    rates.push(rate);
    cpuPerThousand.push(((cpuSeconds(server.child.pid!) - before) / ((rate * roundMs) / 1000)) * 1000);
  }
  return { rate: median(rates), cpuPerThousand: median(cpuPerThousand) };
}

/** Saturated appends through the client library: `inFlight` loops each awaiting `client.append`. */
async function clientLibraryRate(address: string, inFlight: number, durationMs: number): Promise<number> {
  const client = new SessionStateClient({ address });
  const request = (i: number) => ({
    session: { key: `agent:bench:subagent:s${i % 1000}` },
    kind: EventKind.GOAL_CHANGED,
    actorType: ActorType.AGENT,
    summary: "goal updated by the benchmark",
  });
  await client.append(request(0)); // connect before timing
  let calls = 0;
  const started = performance.now();
  const deadline = started + durationMs;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < deadline) await client.append(request(calls++));
    }),
  );
  const rate = (calls / (performance.now() - started)) * 1000;
  client.close();
  return rate;
}

/** 7. etcd doing the same job: a put per event, one prefix watch. Both durability pairings. */
async function etcdPeer(): Promise<void> {
  const pairings = [
    { name: "normal", etcdInMemory: true, sessionstateArgs: [] as string[] },
    { name: "full", etcdInMemory: false, sessionstateArgs: ["--durability", "full"] },
  ];
  for (const pairing of pairings) {
    const etcd = await startEtcd(pairing.etcdInMemory, 23790, 23800);
    let etcdRate: { rate: number; cpuPerThousand: number };
    try {
      etcdRate = await etcdPutRate(etcd, 64, roundMs, rounds);
      if (pairing.name === "normal") {
        const latency = await latencyRounds((ms) => etcdWatchLatency(etcd, 500, ms));
        curves["etcd put → watch, 500/s"] = latency.all;
        results.etcd_watch_p99_ms_500 = latency.p99;
      }
    } finally {
      await etcd.stop();
    }
    const server = await sessionstate(`peer-${pairing.name}`, pairing.sessionstateArgs);
    try {
      // As a gateway runs it: the client library, whose append() coalesces the appends of one turn.
      const library = await serverCostRounds(server, (durationMs) => clientLibraryRate(server.address, 64, durationMs));
      // Every append its own unary call, pre-encoded: sessionstate's per-call cost.
      const unary = await serverCostRounds(server, (durationMs) => unaryRate(server.address, "/sessionstate.v1.SignalLog/Append", appendBytes, 64, durationMs));
      const ratio = library.rate / etcdRate.rate;
      results[`etcd_throughput_ratio_${pairing.name}`] = ratio;
      results[`etcd_throughput_ratio_${pairing.name}_unary`] = unary.rate / etcdRate.rate;
      results[`etcd_puts_per_sec_${pairing.name}`] = etcdRate.rate;
      results[`client_library_appends_per_sec_${pairing.name}`] = library.rate;
      row("etcd side by side", `${pairing.name}: append/s (client library / unary) vs etcd put/s`, `${library.rate.toFixed(0)} / ${unary.rate.toFixed(0)} / ${etcdRate.rate.toFixed(0)}`);
      row("etcd side by side", `${pairing.name}: throughput ratio (client library / unary)`, `${ratio.toFixed(2)} / ${(unary.rate / etcdRate.rate).toFixed(2)}`, "goal >= 1");
      if (pairing.name === "normal") {
        results.etcd_cpu_ratio = library.cpuPerThousand / etcdRate.cpuPerThousand;
        results.etcd_cpu_ratio_unary = unary.cpuPerThousand / etcdRate.cpuPerThousand;
        row(
          "etcd side by side",
          "server CPU s per 1,000 events: ours (client library / unary) / etcd",
          `${library.cpuPerThousand.toFixed(3)} / ${unary.cpuPerThousand.toFixed(3)} / ${etcdRate.cpuPerThousand.toFixed(3)}`,
        );
        row("etcd side by side", "CPU ratio (client library / unary)", `${Number(results.etcd_cpu_ratio).toFixed(2)} / ${Number(results.etcd_cpu_ratio_unary).toFixed(2)}`, "goal < 1");
      }
    } finally {
      await server.stop();
    }
  }
  results.etcd_p99_ratio = Number(results.notice_p99_ms_500) / Number(results.etcd_watch_p99_ms_500);
  row("etcd side by side", "p99 event → notification at 500/s: ours / etcd ms", `${Number(results.notice_p99_ms_500).toFixed(1)} / ${Number(results.etcd_watch_p99_ms_500).toFixed(1)}`);
  row("etcd side by side", "p99 ratio", Number(results.etcd_p99_ratio).toFixed(2), "goal < 1");
}

/** Latency distributions as an SVG chart: cumulative share of notices (y) by latency (x, log scale). */
function latencyChart(): string {
  const width = 720;
  const height = 360;
  const pad = 50;
  const colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"];
  const x = (ms: number) => pad + ((Math.log10(Math.max(ms, 0.1)) + 1) / 4) * (width - 2 * pad); // 0.1 ms .. 1000 ms
  const y = (share: number) => height - pad - share * (height - 2 * pad);
  const lines = Object.entries(curves).map(([name, values], i) => {
    const step = Math.max(1, Math.floor(values.length / 300));
    const points: string[] = [];
    for (let j = 0; j < values.length; j += step) points.push(`${x(values[j]!).toFixed(1)},${y((j + 1) / values.length).toFixed(1)}`);
    return `<polyline fill="none" stroke="${colors[i % colors.length]}" stroke-width="2" points="${points.join(" ")}"/>` +
      `<text x="${pad + 10}" y="${pad + 16 * i}" fill="${colors[i % colors.length]}" font-size="12">${name} (n=${values.length})</text>`;
  });
  const ticks = [0.1, 1, 10, 100, 1000].map((ms) => `<line x1="${x(ms)}" y1="${y(0)}" x2="${x(ms)}" y2="${y(1)}" stroke="#ddd"/><text x="${x(ms) - 10}" y="${height - pad + 16}" font-size="11">${ms} ms</text>`);
  const shares = [0, 0.5, 0.99].map((s) => `<line x1="${pad}" y1="${y(s)}" x2="${width - pad}" y2="${y(s)}" stroke="#ddd"/><text x="8" y="${y(s) + 4}" font-size="11">${s * 100}%</text>`);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>${ticks.join("")}${shares.join("")}${lines.join("")}<text x="${width / 2 - 120}" y="${height - 8}" font-size="12">latency (log scale); share of notices at or below</text></svg>\n`;
}

function report(machine: string, date: string): string {
  const table = ["| scenario | figure | value | goal |", "| --- | --- | --- | --- |", ...rows.map((r) => `| ${r.join(" | ")} |`)];
  return `# sessionstate benchmark report\n\n${date}, ${machine}. Server and clients share the machine; every ratio is against a baseline measured in the same run (throughput: medians of ${rounds} rounds of ${roundMs} ms; latency: medians over ${rounds} rounds of 5 s after a warm-up run).\n\n${table.join("\n")}\n\n![latency distributions](latency.svg)\n`;
}

/** A counter of the server at metrics port `port`, from its own metrics: `series` is `name{labels}` as exposed (0 when absent). */
async function metricCount(port: number, series: string): Promise<number> {
  return metricValue(await scrapeMetrics(port), series, 0);
}

/** How many calls of `method` the server answered OK. */
const okCalls = (port: number, method: string): Promise<number> =>
  metricCount(port, `sessionstate_rpc_duration_seconds_count{method="${method}",code="OK"}`);

/** Medians over rounds of h2load runs; `check` proves afterwards that every call succeeded. */
async function h2loadRounds(url: string, body: string, pid: number): Promise<H2loadRun & { calls: number }> {
  const runs: H2loadRun[] = [];
  for (let r = 0; r < rounds; r++) runs.push(await h2loadRate(url, body, pid));
  if (runs.some((run) => run.succeeded !== h2loadShape.requests)) throw new Error(`h2load: HTTP errors at ${url}`);
  return {
    requestsPerSec: median(runs.map((run) => run.requestsPerSec)),
    serverCpuMsPer1000: median(runs.map((run) => run.serverCpuMsPer1000)),
    succeeded: h2loadShape.requests,
    calls: rounds * (h2loadShape.requests + h2loadShape.warmupRequests),
  };
}

/**
 * h2load against bench/append-floor-server: Append with all of its own work taken away but the row it
 * must store before answering. Every call's row is counted in the file afterwards.
 */
async function appendFloor(body: string): Promise<H2loadRun & { calls: number }> {
  const path = join(work, "append-floor.db");
  const floor = await spawnListening(join(root, "bench/append-floor-server.ts"), [path], ["--import", "tsx"]);
  let run: H2loadRun & { calls: number };
  try {
    run = await h2loadRounds(`http://${floor.address}/bench.Floor/Append`, body, floor.child.pid!);
  } finally {
    await floor.stop();
  }
  const db = new Database(path, { readonly: true });
  try {
    const stored = db.prepare<[], number>("SELECT count(*) FROM events").pluck().get()!;
    if (stored !== run.calls) throw new Error(`h2load Append's floor: ${run.calls} sent, ${stored} stored`);
  } finally {
    db.close();
  }
  return run;
}

/** An etcd PutRequest { bytes key = 1; bytes value = 2; }. */
function etcdPutRequest(key: string, value: string): Uint8Array {
  const writer = new BinaryWriter();
  writer.tag(1, 2).bytes(Buffer.from(key));
  writer.tag(2, 2).bytes(Buffer.from(value));
  return writer.finish();
}

/**
 * 8. Per-call cost with h2load as the load generator (the Node client saturates these cores before the
 * server does): the bare echo server, Append's floor (bench/append-floor-server), Append, SessionStatus with
 * 20 events, and etcd's KV/Put, on tmpfs (against durability normal) and on disk (against full). One
 * server at a time, same shape for each; every call's success is proven from the server's own record
 * afterwards.
 */
async function h2loadPerCall(echo: Listening): Promise<void> {
  if (!(await hasH2load())) {
    row("h2load", "skipped", "h2load missing", "apt-get install nghttp2-client");
    return;
  }
  const shape = `${h2loadShape.requests} requests, -c ${h2loadShape.connections} -m ${h2loadShape.streams}`;
  const appendBody = grpcBodyFile(work, "append", appendRequests[0]!);
  const appendSession = "agent:bench:subagent:s0";
  const echoRun = await h2loadRounds(`http://${echo.address}/bench.Echo/Echo`, appendBody, echo.child.pid!);
  row("h2load", `echo (${shape}): calls/s, server CPU ms per 1,000`, `${echoRun.requestsPerSec.toFixed(0)} / ${echoRun.serverCpuMsPer1000.toFixed(0)}`);
  results.h2load_echo_per_sec = echoRun.requestsPerSec;
  results.h2load_echo_cpu_ms_per_1000 = echoRun.serverCpuMsPer1000;
  const floor = await appendFloor(appendBody);
  row("h2load", `Append's floor (grpc-js + the store's one group-committed row, nothing else): calls/s, CPU ms per 1,000`, `${floor.requestsPerSec.toFixed(0)} / ${floor.serverCpuMsPer1000.toFixed(0)}`);
  row("h2load", "Append's floor / echo (throughput): the most Append / echo can be", (floor.requestsPerSec / echoRun.requestsPerSec).toFixed(2));
  results.h2load_floor_per_sec = floor.requestsPerSec;
  results.h2load_floor_cpu_ms_per_1000 = floor.serverCpuMsPer1000;
  results.h2load_floor_vs_echo = floor.requestsPerSec / echoRun.requestsPerSec;

  const ours = async (durability: "normal" | "full", statusCache = true) => {
    const metricsPort = await freePort();
    const server = await sessionstate(`h2load-${durability}${statusCache ? "" : "-nocache"}`, [
      "--durability", durability,
      "--metrics-listen", `127.0.0.1:${metricsPort}`,
      ...(statusCache ? [] : ["--status-cache-bytes", "0"]),
    ]);
    const clients = connect(server.address);
    try {
      const append = await h2loadRounds(`http://${server.address}/sessionstate.v1.SignalLog/Append`, appendBody, server.child.pid!);
      const version = (await clients.reconcile.sessionStatus({ session: { key: appendSession } })).stateVersion;
      const appendOk = await okCalls(metricsPort, "/sessionstate.v1.SignalLog/Append");
      if (version !== BigInt(append.calls) || appendOk !== append.calls) {
        throw new Error(`h2load Append: ${append.calls} sent, ${appendOk} answered OK, state version ${version}`);
      }
      if (durability === "full") return { append };
      const statusSession = "agent:bench:status";
      for (let i = 0; i < 20; i++) await clients.signalLog.append(human(statusSession, { summary: `event ${i} of the reconcile benchmark` }));
      const statusBody = grpcBodyFile(
        work,
        "status",
        toBinary(SessionStatusRequestSchema, create(SessionStatusRequestSchema, { session: { key: statusSession }, changesSince: 0n })),
      );
      const status = await h2loadRounds(`http://${server.address}/sessionstate.v1.Reconcile/SessionStatus`, statusBody, server.child.pid!);
      const statusOk = await okCalls(metricsPort, "/sessionstate.v1.Reconcile/SessionStatus");
      // One more call: the clients' own SessionStatus above.
      if (statusOk !== status.calls + 1) throw new Error(`h2load SessionStatus: ${status.calls} sent, ${statusOk - 1} answered OK`);
      // Where the answers came from: with the cache all but the first from memory, without it all from the store.
      const fromCache = await metricCount(metricsPort, 'sessionstate_status_answers_total{source="cache"}');
      const expectedFromCache = statusCache ? status.calls - 1 : 0;
      if (fromCache !== expectedFromCache) throw new Error(`h2load SessionStatus: ${fromCache} answers from the cache, expected ${expectedFromCache}`);
      return { append, status };
    } finally {
      clients.close();
      await server.stop();
    }
  };
  const etcdPut = async (inMemory: boolean) => {
    const etcd = await startEtcd(inMemory, 23790, 23800);
    try {
      const key = "sessions/agent:bench:subagent:s0/h2load";
      const body = grpcBodyFile(work, "etcd-put", etcdPutRequest(key, "goal_changed agent goal updated by the benchmark"));
      const before = Number((await etcd.client.get(key).exec()).header.revision);
      const put = await h2loadRounds("http://127.0.0.1:23790/etcdserverpb.KV/Put", body, etcd.pid);
      const after = Number((await etcd.client.get(key).exec()).header.revision);
      if (after - before !== put.calls) throw new Error(`h2load etcd Put: ${put.calls} sent, revision moved ${after - before}`);
      return put;
    } finally {
      await etcd.stop();
    }
  };

  const normal = await ours("normal");
  const uncached = await ours("normal", false);
  const full = await ours("full");
  row("h2load", `Append: calls/s, server CPU ms per 1,000`, `${normal.append.requestsPerSec.toFixed(0)} / ${normal.append.serverCpuMsPer1000.toFixed(0)}`);
  row("h2load", "Append / echo (throughput)", (normal.append.requestsPerSec / echoRun.requestsPerSec).toFixed(2), "goal >= 0.8");
  row("h2load", `SessionStatus, 20 events: calls/s, CPU ms per 1,000`, `${normal.status!.requestsPerSec.toFixed(0)} / ${normal.status!.serverCpuMsPer1000.toFixed(0)}`);
  row("h2load", "SessionStatus / echo (throughput)", (normal.status!.requestsPerSec / echoRun.requestsPerSec).toFixed(2), "goal >= 0.7");
  row("h2load", `SessionStatus uncached (--status-cache-bytes 0): calls/s, CPU ms per 1,000`, `${uncached.status!.requestsPerSec.toFixed(0)} / ${uncached.status!.serverCpuMsPer1000.toFixed(0)}`);
  row("h2load", "SessionStatus uncached / echo (throughput)", (uncached.status!.requestsPerSec / echoRun.requestsPerSec).toFixed(2));
  results.h2load_status_uncached_per_sec = uncached.status!.requestsPerSec;
  results.h2load_status_uncached_cpu_ms_per_1000 = uncached.status!.serverCpuMsPer1000;
  results.h2load_status_uncached_vs_echo = uncached.status!.requestsPerSec / echoRun.requestsPerSec;
  results.h2load_append_per_sec = normal.append.requestsPerSec;
  results.h2load_append_cpu_ms_per_1000 = normal.append.serverCpuMsPer1000;
  results.h2load_status_per_sec = normal.status!.requestsPerSec;
  results.h2load_status_cpu_ms_per_1000 = normal.status!.serverCpuMsPer1000;
  results.h2load_append_vs_echo = normal.append.requestsPerSec / echoRun.requestsPerSec;
  results.h2load_status_vs_echo = normal.status!.requestsPerSec / echoRun.requestsPerSec;
  results.h2load_append_full_per_sec = full.append.requestsPerSec;
  results.h2load_append_full_cpu_ms_per_1000 = full.append.serverCpuMsPer1000;
  if (process.env.BENCH_SKIP_ETCD !== undefined) return;
  const tmpfs = await etcdPut(true);
  const disk = await etcdPut(false);
  row("h2load", "etcd Put, tmpfs: calls/s, CPU ms per 1,000", `${tmpfs.requestsPerSec.toFixed(0)} / ${tmpfs.serverCpuMsPer1000.toFixed(0)}`);
  row("h2load", "etcd Put, disk: calls/s, CPU ms per 1,000", `${disk.requestsPerSec.toFixed(0)} / ${disk.serverCpuMsPer1000.toFixed(0)}`);
  row("h2load", "Append full: calls/s, CPU ms per 1,000", `${full.append.requestsPerSec.toFixed(0)} / ${full.append.serverCpuMsPer1000.toFixed(0)}`);
  results.h2load_etcd_put_per_sec = tmpfs.requestsPerSec;
  results.h2load_etcd_put_cpu_ms_per_1000 = tmpfs.serverCpuMsPer1000;
  results.h2load_etcd_put_disk_per_sec = disk.requestsPerSec;
  results.h2load_etcd_put_disk_cpu_ms_per_1000 = disk.serverCpuMsPer1000;
  results.h2load_append_cpu_vs_etcd_put = normal.append.serverCpuMsPer1000 / tmpfs.serverCpuMsPer1000;
  // The floor under that ratio: a grpc-js server that does nothing but answer.
  results.h2load_echo_cpu_vs_etcd_put = echoRun.serverCpuMsPer1000 / tmpfs.serverCpuMsPer1000;
  results.h2load_floor_cpu_vs_etcd_put = floor.serverCpuMsPer1000 / tmpfs.serverCpuMsPer1000;
  results.h2load_append_vs_etcd_put = normal.append.requestsPerSec / tmpfs.requestsPerSec;
  results.h2load_append_full_cpu_vs_etcd_put_disk = full.append.serverCpuMsPer1000 / disk.serverCpuMsPer1000;
  results.h2load_append_full_vs_etcd_put_disk = full.append.requestsPerSec / disk.requestsPerSec;
  row("h2load", "Append CPU per call / etcd Put's (tmpfs; full vs disk)", `${Number(results.h2load_append_cpu_vs_etcd_put).toFixed(2)}; ${Number(results.h2load_append_full_cpu_vs_etcd_put_disk).toFixed(2)}`, "goal <= 1.0");
  row("h2load", "echo's and Append's floor's CPU per call / etcd Put's (tmpfs): what the ratio above cannot go below", `${Number(results.h2load_echo_cpu_vs_etcd_put).toFixed(2)}; ${Number(results.h2load_floor_cpu_vs_etcd_put).toFixed(2)}`);
  row("h2load", "Append / etcd Put throughput (tmpfs; full vs disk)", `${Number(results.h2load_append_vs_etcd_put).toFixed(2)}; ${Number(results.h2load_append_full_vs_etcd_put_disk).toFixed(2)}`);
}

async function main(): Promise<void> {
  const echo = await spawnListening(join(root, "bench/echo-server.ts"), [], ["--import", "tsx"]);
  try {
    if (runs("throughput")) await appendThroughput(echo);
    if (runs("latency")) await noticeLatencies(echo);
    if (runs("coalescing")) await coalescing();
    if (runs("reconcile")) await reconcile(echo);
    if (runs("startup")) await startupAndMemory();
    if (runs("stall")) await stallMemory();
    if (runs("h2load")) await h2loadPerCall(echo);
  } finally {
    await echo.stop();
  }
  if (process.env.BENCH_SKIP_ETCD === undefined && runs("etcd")) await etcdPeer();
  if (runs("postgres")) {
    if (postgresBinDir() === undefined) row("postgres", "skipped", "PostgreSQL missing", "apt-get install postgresql");
    else await postgresReplicas({ root, work, rounds, roundMs, serverNodeArgs, row, results, appendBytes, freePort });
  }
  if (only !== undefined) return;
  const machine = `${cpus().length} x ${cpus()[0]?.model.trim() ?? "cpu"}, node ${process.version}`;
  const date = new Date().toISOString();
  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(join(resultsDir, "latest.json"), `${JSON.stringify({ ...results, machine, date }, null, 2)}\n`);
  writeFileSync(join(resultsDir, "report.md"), report(machine, date));
  writeFileSync(join(resultsDir, "latency.svg"), latencyChart());
}

try {
  await main();
} finally {
  rmSync(work, { recursive: true, force: true });
}
