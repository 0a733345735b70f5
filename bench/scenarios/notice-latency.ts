/**
 * The notice latency scenario (`latency`): append → notice against the echo round trip.
 */
import { performance } from "node:perf_hooks";
import { atFixedRate, connect } from "../../test/support/helpers.js";
import { median, type Listening } from "../lib.js";
import { noticeLatency } from "../notice-latency.js";
import { scrapeServer, windowBetween, type ServerWindow } from "../server-window.js";
import { freePort } from "../../test/support/process-helpers.js";
import { results, curves, row, sessionstate, appendBytes, latencyRounds, formatLatency, formatGenerator } from "../context.js";

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

export async function noticeLatencies(echo: Listening): Promise<void> {
  // The floor: a unary round trip to a bare grpc-js server at the same rates, from the same kind of generator.
  for (const rate of [500, 2000]) {
    const floor = await latencyRounds((ms) => echoLatency(echo.address, rate, ms));
    results[`echo_p99_ms_${rate}`] = floor.p99;
    results[`echo_max_ms_${rate}`] = floor.max;
    row("notice latency", `echo round trip at ${rate}/s (the floor): p50 / p99 / max ms`, formatLatency(floor));
  }
  const metricsPort = await freePort();
  const server = await sessionstate("latency", ["--metrics-listen", `127.0.0.1:${metricsPort}`]);
  const clients = connect(server.address);
  try {
    for (const rate of [100, 500, 2000]) {
      // Each round is a window of the server's own metrics (the first, the warm-up, is dropped).
      const windows: ServerWindow[] = [];
      const latency = await latencyRounds(async (ms) => {
        const opened = await scrapeServer(metricsPort);
        const samples = await noticeLatency(clients, clients, `r${rate}`, rate, ms);
        windows.push(windowBetween(opened, await scrapeServer(metricsPort)));
        return samples;
      });
      const rounds = windows.slice(1);
      const med = (pick: (w: ServerWindow) => number): number => median(rounds.map(pick));
      curves[`sessionstate append → notice, ${rate}/s`] = latency.all;
      results[`notice_p50_ms_${rate}`] = latency.p50;
      results[`notice_p99_ms_${rate}`] = latency.p99;
      results[`notice_max_ms_${rate}`] = latency.max;
      results[`event_loop_p99_ms_${rate}`] = med((w) => w.loopP99Ms);
      results[`event_loop_max_ms_${rate}`] = med((w) => w.loopMaxMs);
      row("notice latency", `${rate}/s over 1,000 pairs: p50 / p99 / max ms`, formatLatency(latency), rate === 500 ? "goal p99 < 5 ms" : "");
      row("notice latency", `${rate}/s, the load generator (appends, stream, acks in one process): CPU; its event-loop delay p99 / max ms; its collections, their ms / the longest`, formatGenerator(latency.generator));
      results[`generator_cpu_percent_${rate}`] = latency.generator.cpuPercent;
      results[`generator_loop_p99_ms_${rate}`] = latency.generator.loopP99Ms;
      results[`generator_gc_ms_${rate}`] = latency.generator.gcMs;
      results[`generator_gc_max_ms_${rate}`] = latency.generator.gcMaxMs;
      row(
        "notice latency",
        `${rate}/s, the server's own event loop delay: p99 / max ms`,
        `${med((w) => w.loopP99Ms).toFixed(1)} / ${med((w) => w.loopMaxMs).toFixed(1)}`,
        rate === 500 ? "goal p99 <= 5" : "",
      );
      row(
        "notice latency",
        `${rate}/s, per 5 s round: GC pauses (major) and their ms; commits, those over 5 ms, and their ms; retention steps and their ms`,
        `${med((w) => w.gcCount).toFixed(0)} (${med((w) => w.gcMajorCount).toFixed(0)}), ${(med((w) => w.gcSeconds) * 1000).toFixed(0)} ms; ` +
          `${med((w) => w.commits).toFixed(0)}, ${med((w) => w.commitsOver5Ms).toFixed(0)}, ${(med((w) => w.commitSeconds) * 1000).toFixed(0)} ms; ` +
          `${med((w) => w.pruneSteps).toFixed(0)}, ${(med((w) => w.pruneSeconds) * 1000).toFixed(0)} ms`,
      );
      row(
        "notice latency",
        `${rate}/s, in the server's hub: mean ms from a committed change to its notice handed to the stream`,
        med((w) => (w.noticeSeconds / Math.max(1, w.notices)) * 1000).toFixed(2),
      );
    }
    results.notice_max_vs_echo_max_500 = Number(results.notice_max_ms_500) / Number(results.echo_max_ms_500);
    for (const rate of [500, 2000]) {
      results[`notice_p99_vs_echo_p99_${rate}`] = Number(results[`notice_p99_ms_${rate}`]) / Number(results[`echo_p99_ms_${rate}`]);
      row("notice latency", `notice p99 / echo round trip p99 at ${rate}/s`, Number(results[`notice_p99_vs_echo_p99_${rate}`]).toFixed(2));
    }
    row("notice latency", "notice max / echo max at 500/s", Number(results.notice_max_vs_echo_max_500).toFixed(2), "goal <= 2");
  } finally {
    clients.close();
    await server.stop();
  }
}
