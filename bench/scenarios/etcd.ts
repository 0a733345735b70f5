/**
 * The etcd peer scenario (`etcd`).
 */
import { etcdPutRate, etcdWatchLatency, startEtcd } from "../etcd-peer.js";
import { unaryRate } from "../lib.js";
import { rounds, roundMs, results, curves, row, sessionstate, appendBytes, latencyRounds, serverCostRounds, clientLibraryRate, formatLatency, formatGenerator } from "../context.js";

/** 7. etcd doing the same job: a put per event, one prefix watch. Both durability pairings. */
export async function etcdPeer(): Promise<void> {
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
        for (const rate of [500, 2000]) {
          const latency = await latencyRounds((ms) => etcdWatchLatency(etcd, rate, ms));
          curves[`etcd put → watch, ${rate}/s`] = latency.all;
          results[`etcd_watch_p99_ms_${rate}`] = latency.p99;
          results[`etcd_generator_gc_ms_${rate}`] = latency.generator.gcMs;
          results[`etcd_generator_gc_max_ms_${rate}`] = latency.generator.gcMaxMs;
          row("etcd side by side", `etcd put → watch at ${rate}/s: p50 / p99 / max ms; its load generator's CPU; event-loop delay p99 / max ms; its collections, their ms / the longest`, `${formatLatency(latency)}; ${formatGenerator(latency.generator)}`);
        }
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
  for (const rate of [500, 2000]) {
    const ours = Number(results[`notice_p99_ms_${rate}`]);
    const theirs = Number(results[`etcd_watch_p99_ms_${rate}`]);
    const key = rate === 500 ? "etcd_p99_ratio" : `etcd_p99_ratio_${rate}`;
    results[key] = ours / theirs;
    row("etcd side by side", `p99 event → notification at ${rate}/s: ours / etcd ms`, `${ours.toFixed(1)} / ${theirs.toFixed(1)}`);
    row("etcd side by side", `p99 ratio at ${rate}/s`, Number(results[key]).toFixed(2), "goal <= 1");
    const echo = Number(results[`echo_p99_ms_${rate}`]);
    results[`echo_p99_vs_etcd_watch_p99_${rate}`] = echo / theirs;
    row("etcd side by side", `a bare grpc-js echo round trip's p99 / etcd's watch p99 at ${rate}/s (what the ratio above cannot go below)`, (echo / theirs).toFixed(2));
  }
}
