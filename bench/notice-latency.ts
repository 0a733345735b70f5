/**
 * The append -> notice latency loop of `npm run bench`, shared by the SQLite and the replica rows.
 */
import { performance } from "node:perf_hooks";
import { atFixedRate, human, type Clients } from "../test/support/helpers.js";
import { sleep } from "./lib.js";

/**
 * Append (through `writer`) -> notice (on `reader`'s stream) latencies at a fixed rate over 1,000
 * watched pairs, the reader acking each notice as it arrives.
 */
export async function noticeLatency(writer: Clients, reader: Clients, tag: string, ratePerSec: number, durationMs: number): Promise<number[]> {
  const watchers = Array.from({ length: 10 }, (_, i) => `agent:bench:${tag}w${i}`);
  const targets: string[] = [];
  for (const [w, watcher] of watchers.entries()) {
    for (let i = 0; i < 100; i++) {
      const target = `agent:bench:subagent:${tag}-${w}-${i}`;
      targets.push(target);
      await writer.watch.watch({ watcherSessionKey: watcher, target: { key: target } });
    }
  }
  const sentAt = new Map<bigint, number>();
  const arrivedAt = new Map<bigint, number>();
  const stream = reader.watch.subscribeStaleNotices({ watcherKeyPrefixes: [`agent:bench:${tag}w`] }, { timeoutMs: 600_000 });
  const reading = (async () => {
    try {
      for await (const item of stream) {
        if (item.message.case !== "notice") continue;
        const notice = item.message.value;
        arrivedAt.set(notice.notifiedVersion, performance.now());
        reader.watch
          .ackNotices({ acks: [{ watcherSessionKey: notice.watcherSessionKey, target: notice.target, notifiedVersion: notice.notifiedVersion }] })
          .catch(() => undefined);
      }
    } catch {
      // cancelled at the end
    }
  })();
  await sleep(300);
  await atFixedRate(ratePerSec, durationMs, (i, began) =>
    writer.signalLog.append(human(targets[(i * 7919) % targets.length]!)).then((res) => void sentAt.set(res.event!.sequence, began)),
  );
  await sleep(1000);
  stream.cancel();
  await reading;
  return [...arrivedAt].flatMap(([sequence, at]) => (sentAt.has(sequence) ? [at - sentAt.get(sequence)!] : [])).sort((a, b) => a - b);
}
