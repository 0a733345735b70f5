/**
 * The `streams` scenario (issue 33, 4): many open streams, kept so. 10,000 subscribers through the client
 * library (`subscribe`, one watcher each): how long until all are synced, the server's memory per open
 * stream, a notice's latency with 10,000 streams open against 100, and, after the server restarts, how long
 * the 10,000 take to come back (the client's backoff, with full jitter, from 100 ms up to 1 s) until every
 * one is synced again. The streams share one connection here (the client library's channels to one
 * address do), so the server runs with per-connection and total stream limits above 10,000.
 */
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { EventKind, ActorType } from "../../gen/sessionstate/v1/types_pb.js";
import { SessionStateClient, type StaleNotice } from "../../clients/typescript/src/index.js";
import { atFixedRate } from "../../test/support/helpers.js";
import { freePort } from "../../test/support/process-helpers.js";
import { percentile, rssMb, sleep, spawnListening, type Listening } from "../lib.js";
import { root, work, serverNodeArgs, results, row } from "../context.js";

const streamCount = Number(process.env.BENCH_STREAMS ?? 10_000);
const fewStreams = 100;
const watcherOf = (i: number): string => `agent:st:w${i}`;
const targetOf = (i: number): string => `agent:st:t${i}`;

/** One subscription of the client library, counting its syncs and handing its notices to `onNotice`. */
interface Subscriber {
  syncs: number;
  stop(): void;
}

function subscribeOne(client: SessionStateClient, i: number, onNotice: (i: number, notice: StaleNotice) => void): Subscriber {
  const abort = new AbortController();
  const subscriber: Subscriber = { syncs: 0, stop: () => abort.abort() };
  void (async () => {
    try {
      for await (const notice of client.subscribe({ watchers: [watcherOf(i)], signal: abort.signal, onSynced: () => subscriber.syncs++ })) onNotice(i, notice);
    } catch {
      // Ended by the bench.
    }
  })();
  return subscriber;
}

async function until(check: () => boolean, limitMs: number): Promise<boolean> {
  const deadline = performance.now() + limitMs;
  while (!check()) {
    if (performance.now() > deadline) return false;
    await sleep(5);
  }
  return true;
}

/**
 * Notice latencies (ms, sorted): appends at `perSec` for `durationMs` to targets of subscribers below `among`,
 * each marked in `waiting` until its notice arrives (the notice handler moves its latency to `measured`).
 */
async function noticeLatency(
  client: SessionStateClient,
  waiting: Map<number, number>,
  measured: number[],
  among: number,
  perSec: number,
  durationMs: number,
): Promise<number[]> {
  await atFixedRate(perSec, durationMs, async (k) => {
    const i = (k * 7919) % among;
    if (waiting.has(i)) return;
    waiting.set(i, performance.now());
    await client.signalLog.append({ session: { key: targetOf(i) }, kind: EventKind.HUMAN_DIRECT_MESSAGE, actorType: ActorType.HUMAN, summary: "streams bench" });
  });
  await until(() => waiting.size === 0, 10_000);
  return measured.splice(0).sort((a, b) => a - b);
}

export async function streams(): Promise<void> {
  const port = await freePort();
  const args = [
    "serve",
    "--db", join(work, "streams.db"),
    "--listen", `127.0.0.1:${port}`,
    "--http-listen", "127.0.0.1:0",
    "--log-level", "warn",
    "--max-streams-per-connection", String(streamCount + 100),
    "--max-streams", String(streamCount + 100),
  ];
  // BENCH_SERVER_ROOT runs another checkout's server, as in the scale scenario.
  const start = (): Promise<Listening> => spawnListening(join(process.env.BENCH_SERVER_ROOT ?? root, "bin/sessionstate.js"), args, serverNodeArgs);
  let server = await start();
  const client = new SessionStateClient({ address: `127.0.0.1:${port}`, logger: { warn: () => {} } });
  const subscribers: Subscriber[] = [];
  // A notice is acknowledged as soon as it arrives, and its latency taken when the bench waits for it.
  const waiting = new Map<number, number>();
  const measured: number[] = [];
  const onNotice = (i: number, notice: StaleNotice): void => {
    const sentAt = waiting.get(i);
    if (sentAt !== undefined) {
      measured.push(performance.now() - sentAt);
      waiting.delete(i);
    }
    void client.ack(notice).catch(() => undefined);
  };
  try {
    for (let i = 0; i < streamCount; i += 500) {
      await Promise.all(
        Array.from({ length: Math.min(500, streamCount - i) }, (_, k) => client.watch.watch({ watcherSessionKey: watcherOf(i + k), target: { key: targetOf(i + k) } })),
      );
    }
    for (let i = 0; i < fewStreams; i++) subscribers.push(subscribeOne(client, i, onNotice));
    await until(() => subscribers.every((s) => s.syncs >= 1), 30_000);
    await sleep(500);
    const rssFew = rssMb(server.child.pid!);
    const few = await noticeLatency(client, waiting, measured, fewStreams, 200, 5000);

    const opening = performance.now();
    for (let i = fewStreams; i < streamCount; i++) subscribers.push(subscribeOne(client, i, onNotice));
    const allSynced = await until(() => subscribers.every((s) => s.syncs >= 1), 120_000);
    const syncedMs = performance.now() - opening;
    await sleep(1000);
    const rssMany = rssMb(server.child.pid!);
    const many = await noticeLatency(client, waiting, measured, streamCount, 200, 5000);

    // The server restarts: every stream ends, and the client library brings each back by itself.
    await server.stop();
    const stoppedAt = performance.now();
    server = await start();
    const listeningAt = performance.now();
    const back = await until(() => subscribers.every((s) => s.syncs >= 2), 120_000);
    const resyncedMs = performance.now() - listeningAt;
    await sleep(1000);
    const rssAfterRestart = rssMb(server.child.pid!);

    const perStreamKiB = ((rssMany - rssFew) * 1024) / (streamCount - fewStreams);
    Object.assign(results, {
      streams_synced_ms: syncedMs,
      streams_rss_kib_per_stream: perStreamKiB,
      streams_notice_p50_ms_few: percentile(few, 50),
      streams_notice_p99_ms_few: percentile(few, 99),
      streams_notice_p50_ms_many: percentile(many, 50),
      streams_notice_p99_ms_many: percentile(many, 99),
      streams_resynced_ms: resyncedMs,
      streams_restart_gap_ms: listeningAt - stoppedAt,
    });
    const label = `streams ${streamCount}`;
    row(label, `${streamCount} subscribers synced, ms`, `${syncedMs.toFixed(0)}${allSynced ? "" : " (not all)"}`, "was 3,200");
    row(label, "server RSS per open stream, KiB", perStreamKiB.toFixed(1), `was 17 (${rssFew.toFixed(0)} → ${rssMany.toFixed(0)} MiB)`);
    row(label, `notice p50 / p99, ms: ${fewStreams} streams`, `${percentile(few, 50).toFixed(1)} / ${percentile(few, 99).toFixed(1)}`, `was 1.2 / 4.0 (${few.length} notices)`);
    row(label, `notice p50 / p99, ms: ${streamCount} streams`, `${percentile(many, 50).toFixed(1)} / ${percentile(many, 99).toFixed(1)}`, `was 1.1 / 5.1 (${many.length} notices)`);
    row(label, "after a restart: all synced again, ms from listening", `${resyncedMs.toFixed(0)}${back ? "" : " (not all)"}`, `backoff 100 ms-1 s, full jitter; RSS then ${rssAfterRestart.toFixed(0)} MiB`);
  } finally {
    for (const subscriber of subscribers) subscriber.stop();
    client.close();
    await server.stop();
  }
}
