/**
 * The goals `npm run bench` is held to (issues 25 and 33): each a key of latest.json, what it compares, and its
 * bound. A full bench runs every scenario BENCH_RUNS times (3 unless set); latest.json holds each key's
 * median over the runs, and the goal table shows that median, every run's value and their spread.
 */
import { median } from "./lib.js";

export interface Goal {
  key: string;
  what: string;
  /** The value must be at most this… */
  atMost?: number;
  /** …or at least this. */
  atLeast?: number;
}

export const goals: readonly Goal[] = [
  { key: "etcd_p99_ratio", what: "SQLite notice p99 / etcd 3.4 watch p99, 500/s", atMost: 1.0 },
  { key: "etcd_p99_ratio_2000", what: "the same at 2,000/s", atMost: 1.0 },
  { key: "notice_max_vs_echo_max_500", what: "SQLite notice max / echo round trip max, 500/s", atMost: 2 },
  { key: "pg_notice_p99_in_replica_vs_sqlite", what: "PostgreSQL notice p99 within one replica / one SQLite process's, 500/s", atMost: 2 },
  { key: "pg_notice_p99_across_vs_within", what: "PostgreSQL notice p99 across replicas / within one, 500/s", atMost: 1.5 },
  { key: "pg_2_replicas_vs_sqlite_client", what: "appends/s, 2 replicas / one SQLite process (client library, 4 gateways)", atLeast: 1.0 },
  { key: "h2load_append_cpu_vs_floor", what: "Append's server CPU per call / its floor's (h2load)", atMost: 1.2 },
  { key: "event_loop_p99_ms_500", what: "the server's own event-loop delay p99 at 500/s, ms (its metric)", atMost: 5 },
  // Issue 33: costs that do not grow with the data (the scale scenario: 1M events / 10k, one run).
  { key: "scale_sqlite_restart_ms_ratio", what: "restart to listening on, 1M events / 10k", atMost: 1.5 },
  { key: "scale_sqlite_restart_backlog_ms_ratio", what: "the same with half the events over the cap", atMost: 1.5 },
  { key: "scale_sqlite_restart_backlog_ms_1M", what: "that restart at 1M events, ms", atMost: 2000 },
  { key: "scale_sqlite_prune_rpc_us_per_event_ratio", what: "cost per pruned event (a Prune RPC of half the size), 1M / 10k", atMost: 2 },
  { key: "scale_sqlite_append_p99_prune_vs_without_1M", what: "Append p99 at 200/s during that Prune RPC / without, at 1M", atMost: 2 },
  { key: "scale_sqlite_first_notice_ms_ratio", what: "a new subscriber's first notice over every pending pair, 200k / 2k pairs", atMost: 2 },
  { key: "scale_sqlite_longest_wait_before_first_ms_1M", what: "the longest call meanwhile, at 1M / 200k, ms", atMost: 50 },
  { key: "scale_sqlite_rss_drained_mb_ratio", what: "RSS after draining every pending notice, 1M / 10k", atMost: 1.5 },
  { key: "scale_sqlite_append_p99_ms_ratio", what: "Append p99 at 200/s, 1M / 10k", atMost: 1.5 },
  { key: "scale_sqlite_status_p99_ms_ratio", what: "SessionStatus p99 at 200/s, 1M / 10k", atMost: 1.5 },
];

export type Results = Record<string, number | string>;

/** Every key of the runs: numbers as their median over the runs that have them, anything else as the last run's. */
export function combineRuns(runs: readonly Results[]): Results {
  const combined: Results = {};
  for (const key of new Set(runs.flatMap((run) => Object.keys(run)))) {
    const values = runs.flatMap((run) => (key in run ? [run[key]!] : []));
    const numbers = values.filter((value): value is number => typeof value === "number");
    combined[key] = numbers.length === values.length ? median(numbers) : values.at(-1)!;
  }
  return combined;
}

function bound(goal: Goal): string {
  return goal.atMost !== undefined ? `≤ ${goal.atMost}` : `≥ ${goal.atLeast}`;
}

function met(goal: Goal, value: number): boolean {
  return goal.atMost !== undefined ? value <= goal.atMost : value >= goal.atLeast!;
}

/** The goal table as markdown lines: each goal measured in these runs, with its median, its runs and their spread. */
export function goalTable(runs: readonly Results[]): string[] {
  const lines = ["| key | what | goal | median | runs | spread (max − min) | met |", "| --- | --- | --- | --- | --- | --- | --- |"];
  for (const goal of goals) {
    const values = runs.flatMap((run) => (typeof run[goal.key] === "number" ? [run[goal.key] as number] : []));
    if (values.length === 0) continue;
    const mid = median(values);
    const spread = Math.max(...values) - Math.min(...values);
    lines.push(
      `| \`${goal.key}\` | ${goal.what} | ${bound(goal)} | ${mid.toFixed(2)} | ${values.map((v) => v.toFixed(2)).join(", ")} | ${spread.toFixed(2)} | ${met(goal, mid) ? "yes" : "no"} |`,
    );
  }
  return lines;
}
