/**
 * What every scenario of `npm run bench` shares: the settings (BENCH_ROUNDS, BENCH_ROUND_MS,
 * BENCH_SERVER_NODE_ARGS), the scratch folder, the results and report rows, and the helpers that start a
 * server and measure rates, latencies and server CPU.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay, performance, PerformanceObserver } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { create, toBinary } from "@bufbuild/protobuf";
import { AppendRequestSchema } from "../gen/sessionstate/v1/signal_log_pb.js";
import { ActorType, EventKind } from "../gen/sessionstate/v1/types_pb.js";
import { SessionStateClient } from "../clients/typescript/src/index.js";
import { metricValue, scrapeMetrics } from "../test/support/helpers.js";
import { cpuSeconds, median, percentile, spawnListening, type Listening } from "./lib.js";

export const root = fileURLToPath(new URL("..", import.meta.url));

export const resultsDir = join(root, "bench/results");

export const rounds = Number(process.env.BENCH_ROUNDS ?? 3);

export const roundMs = Number(process.env.BENCH_ROUND_MS ?? 2000);

export const work = mkdtempSync(join(tmpdir(), "sessionstate-bench-"));

export const serverNodeArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? "").split(" ").filter((a) => a !== "");

export const results: Record<string, number | string> = {};

export const rows: string[][] = [];

export const curves: Record<string, number[]> = {};

export function row(scenario: string, figure: string, value: string, goal = ""): void {
  rows.push([scenario, figure, value, goal]);
  process.stdout.write(`${scenario.padEnd(26)} ${figure.padEnd(46)} ${value.padStart(14)}  ${goal}\n`);
}

export async function sessionstate(name: string, extra: string[] = []): Promise<Listening> {
  return spawnListening(
    join(root, "bin/sessionstate.js"),
    // BENCH_LOG_LEVEL: the servers' log level (default warn); `info` measures what the request log costs there.
    ["serve", "--db", join(work, `${name}.db`), "--listen", "127.0.0.1:0", "--log-level", process.env.BENCH_LOG_LEVEL ?? "warn", ...extra],
    serverNodeArgs,
  );
}

export const appendRequests = Array.from({ length: 1000 }, (_, i) =>
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

export const appendBytes = (): Buffer => appendRequests[nextAppend++ % appendRequests.length]!;

/**
 * A latency measurement run once to warm up (JIT, caches; discarded), then `rounds` times: the median
 * over rounds of each run's p50, p99 and max, and every sample for the chart. Also what the load generator
 * (this process) spent per round, the median over rounds: its CPU share and its own event-loop delay, so a
 * tail the generator causes shows as such.
 */
export async function latencyRounds(run: (durationMs: number) => Promise<number[]>, durationMs = 5000) {
  await run(Math.min(durationMs, 2000));
  const runs: number[][] = [];
  const generatorRounds: GeneratorFigures[] = [];
  const loop = monitorEventLoopDelay({ resolution: loopResolutionMs });
  // The generator's own collections: a pause here delays every notice and call in flight, like the server's.
  let gcPauses: number[] = [];
  const gc = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) gcPauses.push(entry.duration);
  });
  loop.enable();
  gc.observe({ entryTypes: ["gc"] });
  try {
    for (let r = 0; r < rounds; r++) {
      loop.reset();
      gcPauses = [];
      const cpu = process.cpuUsage();
      const started = performance.now();
      runs.push(await run(durationMs));
      const used = process.cpuUsage(cpu);
      generatorRounds.push({
        cpuPercent: ((used.user + used.system) / 1000 / (performance.now() - started)) * 100,
        loopP99Ms: Math.max(0, loop.percentile(99) / 1e6 - loopResolutionMs),
        loopMaxMs: Math.max(0, loop.max / 1e6 - loopResolutionMs),
        gcCount: gcPauses.length,
        gcMs: gcPauses.reduce((sum, ms) => sum + ms, 0),
        gcMaxMs: Math.max(0, ...gcPauses),
      });
    }
  } finally {
    loop.disable();
    gc.disconnect();
  }
  const generatorMedian = (key: keyof GeneratorFigures): number => median(generatorRounds.map((round) => round[key]));
  return {
    p50: median(runs.map((l) => percentile(l, 50))),
    p99: median(runs.map((l) => percentile(l, 99))),
    max: median(runs.map((l) => l.at(-1) ?? Number.NaN)),
    all: runs.flat().sort((a, b) => a - b),
    generator: {
      cpuPercent: generatorMedian("cpuPercent"),
      loopP99Ms: generatorMedian("loopP99Ms"),
      loopMaxMs: generatorMedian("loopMaxMs"),
      gcCount: generatorMedian("gcCount"),
      gcMs: generatorMedian("gcMs"),
      gcMaxMs: generatorMedian("gcMaxMs"),
    } satisfies GeneratorFigures,
  };
}

/** What the load generator (the bench process) spent in a latency round: CPU share, event-loop delay, collections. */
interface GeneratorFigures {
  cpuPercent: number;
  loopP99Ms: number;
  loopMaxMs: number;
  gcCount: number;
  gcMs: number;
  gcMaxMs: number;
}

/** The sampling interval of the generator's event-loop delay monitor (subtracted from what it reports). */
const loopResolutionMs = 5;

/** The load generator's figures of latencyRounds, for a report row. */
export const formatGenerator = (g: GeneratorFigures): string =>
  `${g.cpuPercent.toFixed(0)} %; ${g.loopP99Ms.toFixed(1)} / ${g.loopMaxMs.toFixed(1)}; ${g.gcCount.toFixed(0)}, ${g.gcMs.toFixed(0)} / ${g.gcMaxMs.toFixed(1)}`;

export const formatLatency = (l: { p50: number; p99: number; max: number }): string => `${l.p50.toFixed(1)} / ${l.p99.toFixed(1)} / ${l.max.toFixed(1)}`;

/** Median rate and server CPU seconds per 1,000 calls over `rounds` rounds of `measure`. */
export async function serverCostRounds(server: Listening, measure: (durationMs: number) => Promise<number>) {
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
export async function clientLibraryRate(address: string, inFlight: number, durationMs: number): Promise<number> {
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

/** A counter of the server at metrics port `port`, from its own metrics: `series` is `name{labels}` as exposed (0 when absent). */
export async function metricCount(port: number, series: string): Promise<number> {
  return metricValue(await scrapeMetrics(port), series, 0);
}

/** How many calls of `method` the server answered OK (over gRPC, or `protocol`). */
export const okCalls = (port: number, method: string, protocol: "grpc" | "connect" | "grpc-web" = "grpc"): Promise<number> =>
  metricCount(port, `sessionstate_rpc_duration_seconds_count{method="${method}",code="OK",protocol="${protocol}"}`);
