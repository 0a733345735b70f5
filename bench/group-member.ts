/**
 * One member of a consumer group for the groups scenario, in a process of its own (so that one can be
 * killed with SIGKILL): subscribes for WATCHER in GROUP with MAX in flight and prints one JSON line per
 * notice it gets (`d`: pair, N, delivery count, time) and per ack it sends (`a`, just before sending it),
 * times as ms since the epoch with sub-millisecond precision (comparable across processes). In mode `ack`
 * it holds each notice HOLD_MS (a turn) and acknowledges it; in mode `hold` it acknowledges nothing.
 * Usage: node --import tsx bench/group-member.ts ADDRESS WATCHER GROUP MAX ack|hold HOLD_MS
 */
import { performance } from "node:perf_hooks";
import { SessionStateClient } from "../clients/typescript/src/index.js";

const [address, watcher, group, max, mode, holdText] = process.argv.slice(2);
const client = new SessionStateClient({ address: address!, logger: { warn: () => {} } });
const now = (): number => performance.timeOrigin + performance.now();
const holdMs = Number(holdText);
const say = (line: Record<string, unknown>): boolean => process.stdout.write(`${JSON.stringify(line)}\n`);
for await (const notice of client.subscribe({ watchers: [watcher!], group: group!, maxInFlight: Number(max), onSynced: () => say({ e: "s", t: now() }) })) {
  const k = notice.target!.key;
  const n = Number(notice.notifiedVersion);
  say({ e: "d", k, n, c: notice.deliveryCount, t: now() });
  if (mode === "ack") {
    void (async () => {
      await new Promise((resolve) => setTimeout(resolve, holdMs));
      say({ e: "a", k, n, t: now() });
      await client.ack(notice);
    })();
  }
}
