/**
 * `npm run bench`: runs the service as its own process (as users run it) and measures append throughput
 * and append -> notice latency. Prints a table and writes bench/results/latest.json. Figures vary on
 * shared machines; compare runs on the same machine.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { connect, human } from "../test/helpers.js";
import { spawnServer } from "../test/process-helpers.js";

const resultsDir = fileURLToPath(new URL("./results/", import.meta.url));

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function appendThroughput(address: string, inFlight: number, durationMs: number): Promise<number> {
  const client = connect(address);
  let done = 0;
  const deadline = performance.now() + durationMs;
  let key = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (performance.now() < deadline) {
        await client.signalLog.append(human(`agent:bench:subagent:s${key++ % 1000}`));
        done++;
      }
    }),
  );
  client.close();
  return (done / durationMs) * 1000;
}

async function noticeLatency(address: string, ratePerSec: number, durationMs: number) {
  const client = connect(address);
  const watchers = Array.from({ length: 10 }, (_, i) => `agent:bench:w${i}`);
  const targets: string[] = [];
  for (const [w, watcher] of watchers.entries()) {
    for (let i = 0; i < 100; i++) {
      const target = `agent:bench:subagent:r${ratePerSec}-${w}-${i}`;
      targets.push(target);
      await client.watch.watch({ watcherSessionKey: watcher, target: { key: target } });
    }
  }
  const sentAt = new Map<bigint, number>();
  const arrivedAt = new Map<bigint, number>();
  const stream = client.watch.subscribeStaleNotices({ watcherKeyPrefixes: ["agent:bench:w"] });
  const reading = (async () => {
    try {
      for await (const item of stream) {
        if (item.message.case !== "notice") continue;
        const notice = item.message.value;
        arrivedAt.set(notice.notifiedVersion, performance.now());
        void client.watch.ackNotices({
          acks: [{ watcherSessionKey: notice.watcherSessionKey, target: notice.target, notifiedVersion: notice.notifiedVersion }],
        });
      }
    } catch {
      // cancelled at the end
    }
  })();
  await sleep(200);
  const total = Math.floor((ratePerSec * durationMs) / 1000);
  const start = performance.now();
  const appends: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / ratePerSec;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    const began = performance.now();
    appends.push(
      client.signalLog.append(human(targets[(i * 7919) % targets.length]!)).then((res) => {
        sentAt.set(res.event!.sequence, began);
      }),
    );
  }
  await Promise.all(appends);
  await sleep(500);
  stream.cancel();
  await reading;
  client.close();
  const latencies = [...arrivedAt].flatMap(([sequence, at]) => {
    const began = sentAt.get(sequence);
    return began === undefined ? [] : [at - began];
  });
  latencies.sort((a, b) => a - b);
  return {
    notices: latencies.length,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    max: latencies.at(-1) ?? Number.NaN,
  };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "sessionstate-bench-"));
  // Extra node flags for the server process (for example --cpu-prof) come from BENCH_SERVER_NODE_ARGS.
  const nodeArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? "").split(" ").filter((arg) => arg !== "");
  const server = await spawnServer(["--db", join(dir, "bench.db"), "--listen", "127.0.0.1:0", "--log-level", "warn"], {}, nodeArgs);
  try {
    const rows: Record<string, number> = {};
    for (const inFlight of [1, 16, 64]) {
      rows[`append_per_sec_${inFlight}`] = await appendThroughput(server.address, inFlight, 3000);
      process.stdout.write(`append, ${inFlight} in flight: ${rows[`append_per_sec_${inFlight}`]!.toFixed(0)}/s\n`);
    }
    for (const rate of [100, 500]) {
      const latency = await noticeLatency(server.address, rate, 5000);
      rows[`notice_p50_ms_${rate}`] = latency.p50;
      rows[`notice_p99_ms_${rate}`] = latency.p99;
      rows[`notice_max_ms_${rate}`] = latency.max;
      process.stdout.write(
        `notice latency at ${rate}/s over 1,000 pairs: p50 ${latency.p50.toFixed(2)} ms, p99 ${latency.p99.toFixed(2)} ms, max ${latency.max.toFixed(2)} ms (${latency.notices} notices)\n`,
      );
    }
    mkdirSync(resultsDir, { recursive: true });
    const machine = `${cpus().length} x ${cpus()[0]?.model ?? "cpu"}, node ${process.version}`;
    writeFileSync(join(resultsDir, "latest.json"), `${JSON.stringify({ ...rows, machine, date: new Date().toISOString() }, null, 2)}\n`);
  } finally {
    server.child.kill("SIGTERM");
    await server.exited;
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
