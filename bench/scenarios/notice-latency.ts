/**
 * The notice latency scenario (`latency`): append → notice against the echo round trip.
 */
import { performance } from "node:perf_hooks";
import { atFixedRate, connect } from "../../test/support/helpers.js";
import { type Listening } from "../lib.js";
import { noticeLatency } from "../notice-latency.js";
import { results, curves, row, sessionstate, appendBytes, latencyRounds, formatLatency } from "../context.js";

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
