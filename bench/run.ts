/**
 * `npm run bench`: measures sessionstate as users run it (its own process) and reports every headline
 * figure as a ratio against a baseline measured in the same run, with medians over several rounds.
 * Writes bench/results/latest.json, bench/results/report.md (the goals first, each with its runs' spread)
 * and bench/results/latency.svg.
 *
 * Set BENCH_SERVER_NODE_ARGS (for example "--cpu-prof --cpu-prof-dir=/tmp/prof") to profile the server,
 * BENCH_ONLY (for example "reconcile,latency") to run some scenarios only (then nothing is written), and
 * BENCH_RUNS to run them other than three times (latest.json holds each figure's median over the runs).
 * Each scenario is a module of bench/scenarios/ (the replicas' is bench/postgres-replicas.ts); what they
 * share (settings, results, helpers) is bench/context.ts; the report files are written by bench/report.ts.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { spawnListening } from "./lib.js";
import { postgresReplicas } from "./postgres-replicas.js";
import { postgresBinDir } from "../test/support/postgres-cluster.js";
import { freePort } from "../test/support/process-helpers.js";
import { root, resultsDir, rounds, roundMs, work, serverNodeArgs, results, rows, curves, row, appendBytes } from "./context.js";
import { combineRuns, goalTable, type Results } from "./goals.js";
import { appendThroughput } from "./scenarios/append-throughput.js";
import { noticeLatencies } from "./scenarios/notice-latency.js";
import { coalescing } from "./scenarios/coalescing.js";
import { reconcile } from "./scenarios/reconcile.js";
import { startupAndMemory } from "./scenarios/startup.js";
import { stallMemory } from "./scenarios/stall.js";
import { etcdPeer } from "./scenarios/etcd.js";
import { h2loadPerCall } from "./scenarios/h2load-per-call.js";
import { scale } from "./scenarios/scale.js";
import { streams } from "./scenarios/streams.js";
import { hooks } from "./scenarios/hooks.js";
import { groups } from "./scenarios/groups.js";
import { latencyChart, report } from "./report.js";

const scenarios = ["throughput", "latency", "coalescing", "reconcile", "startup", "stall", "etcd", "h2load", "postgres", "scale", "streams", "hooks", "groups"] as const;
const only = process.env.BENCH_ONLY?.split(",").map((name) => name.trim());
const unknownScenario = only?.find((name) => !(scenarios as readonly string[]).includes(name));
if (unknownScenario !== undefined) throw new Error(`BENCH_ONLY: unknown scenario ${unknownScenario} (known: ${scenarios.join(", ")})`);
const runs = (scenario: (typeof scenarios)[number]): boolean => only === undefined || only.includes(scenario);
/** How many times every scenario runs: each goal is shown with the spread of its runs. */
const benchRuns = Number(process.env.BENCH_RUNS ?? 3);
if (!Number.isInteger(benchRuns) || benchRuns < 1) throw new Error(`BENCH_RUNS: ${process.env.BENCH_RUNS} is not a whole number of runs`);

/**
 * Every scenario asked for, once; the scale and streams scenarios (issue 33), whose goals are ratios within
 * one run and which take minutes, in the first run only.
 */
async function runScenarios(first: boolean): Promise<void> {
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
  if (first && runs("scale")) await scale();
  if (first && runs("streams")) await streams();
  // The hooks scenario (issue 40) waits on the 60 s poller for its hooks-off row: the first run only.
  if (first && runs("hooks")) await hooks();
  if (runs("groups")) await groups();
  if (runs("postgres")) {
    if (postgresBinDir() === undefined) row("postgres", "skipped", "PostgreSQL missing", "apt-get install postgresql");
    else await postgresReplicas({ root, work, rounds, roundMs, serverNodeArgs, row, results, appendBytes, freePort });
  }
}

/** Runs the scenarios `benchRuns` times; the rows and curves kept are the last run's, the results every run's. */
async function main(): Promise<void> {
  const perRun: Results[] = [];
  for (let run = 1; run <= benchRuns; run++) {
    if (benchRuns > 1) process.stdout.write(`\n# run ${run} of ${benchRuns}\n`);
    // Every run starts from nothing: the servers' databases of the run before are gone.
    if (run > 1) {
      rmSync(work, { recursive: true, force: true });
      mkdirSync(work, { recursive: true });
    }
    for (const key of Object.keys(results)) delete results[key];
    for (const key of Object.keys(curves)) delete curves[key];
    rows.length = 0;
    await runScenarios(run === 1);
    perRun.push({ ...results });
  }
  const goalLines = goalTable(perRun);
  process.stdout.write(`\n${goalLines.join("\n")}\n`);
  if (only !== undefined) return;
  const machine = `${cpus().length} x ${cpus()[0]?.model.trim() ?? "cpu"}, node ${process.version}`;
  const date = new Date().toISOString();
  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(join(resultsDir, "latest.json"), `${JSON.stringify({ ...combineRuns(perRun), runs: perRun.length, machine, date }, null, 2)}\n`);
  writeFileSync(join(resultsDir, "report.md"), report(machine, date, perRun.length, goalLines));
  writeFileSync(join(resultsDir, "latency.svg"), latencyChart());
}

try {
  await main();
} finally {
  rmSync(work, { recursive: true, force: true });
}
