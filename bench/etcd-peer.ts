import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { Etcd3 } from "etcd3";
import { atFixedRate } from "../test/support/helpers.js";
import { cpuSeconds, median, percentile, sleep } from "./lib.js";

/** A running etcd on loopback with a throwaway data directory. */
export interface EtcdPeer {
  pid: number;
  client: Etcd3;
  stop(): Promise<void>;
}

/**
 * Starts Debian's etcd (package etcd-server) on free loopback ports. Debian's etcd 3.4 has no
 * --unsafe-no-fsync; `inMemory` puts the data directory on /dev/shm instead, where fsync costs nothing:
 * the same durability as sessionstate's synchronous=NORMAL against a power loss (none).
 */
export async function startEtcd(inMemory: boolean, clientPort: number, peerPort: number): Promise<EtcdPeer> {
  const dataDir = mkdtempSync(join(inMemory ? "/dev/shm" : tmpdir(), "sessionstate-bench-etcd-"));
  const client = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const child = spawn(
    "etcd",
    [
      "--data-dir", dataDir,
      "--listen-client-urls", client,
      "--advertise-client-urls", client,
      "--listen-peer-urls", peer,
      "--initial-advertise-peer-urls", peer,
      "--initial-cluster", `default=${peer}`,
      "--log-level", "error",
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const spawnFailed = new Promise<never>((_, reject) =>
    child.once("error", (err) => reject(new Error(`cannot run etcd (apt-get install etcd-server, or set BENCH_SKIP_ETCD=1): ${err.message}`))),
  );
  spawnFailed.catch(() => undefined);
  const etcd = new Etcd3({ hosts: client });
  for (let attempt = 0; ; attempt++) {
    try {
      await Promise.race([etcd.put("bench/ready").value("1").exec(), spawnFailed]);
      break;
    } catch (err) {
      if ((err as Error).message.startsWith("cannot run etcd") || attempt > 100) throw new Error(`etcd did not start: ${(err as Error).message}`, { cause: err });
      await sleep(100);
    }
  }
  return {
    pid: child.pid!,
    client: etcd,
    stop: async () => {
      etcd.close();
      child.kill("SIGTERM");
      await exited;
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Saturated puts (a put per event under a per-session prefix) at `inFlight`, and server CPU per 1,000 puts. */
export async function etcdPutRate(peer: EtcdPeer, inFlight: number, durationMs: number, rounds: number) {
  const rates: number[] = [];
  const cpuPerThousand: number[] = [];
  let sequence = 0;
  for (let round = 0; round < rounds; round++) {
    let done = 0;
    const cpuBefore = cpuSeconds(peer.pid);
    const started = performance.now();
    const deadline = started + durationMs;
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        while (performance.now() < deadline) {
          const n = sequence++;
          await peer.client.put(`sessions/agent:bench:s${n % 1000}/${n}`).value("goal_changed agent goal updated");
          done++;
        }
      }),
    );
    rates.push((done / (performance.now() - started)) * 1000);
    cpuPerThousand.push(((cpuSeconds(peer.pid) - cpuBefore) / done) * 1000);
  }
  return { rate: median(rates), cpuPerThousand: median(cpuPerThousand) };
}

/** put -> watch event latency at a fixed rate, with one prefix watch (as a gateway would). */
export async function etcdWatchLatency(peer: EtcdPeer, ratePerSec: number, durationMs: number): Promise<number[]> {
  const sentAt = new Map<string, number>();
  const latencies: number[] = [];
  const watcher = await peer.client.watch().prefix("watched/").create();
  watcher.on("put", (kv) => {
    const began = sentAt.get(kv.key.toString());
    if (began !== undefined) latencies.push(performance.now() - began);
  });
  await atFixedRate(ratePerSec, durationMs, (i, began) => {
    const key = `watched/agent:bench:t${i % 1000}/${i}`;
    sentAt.set(key, began);
    return peer.client.put(key).value("human_direct_message human message").exec();
  });
  await sleep(500);
  await watcher.cancel();
  return latencies.sort((a, b) => a - b);
}

export { percentile };
