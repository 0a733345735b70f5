/**
 * The append throughput scenario (`throughput`).
 */
import { cpuSeconds, median, unaryRate, type Listening } from "../lib.js";
import { rounds, roundMs, results, row, sessionstate, appendBytes } from "../context.js";

/** 1. Append throughput vs echo, at 1, 16 and 64 in flight; server CPU per 1,000 appends at 64. */
export async function appendThroughput(echo: Listening): Promise<void> {
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
