/**
 * The stalled-subscriber memory scenario (`stall`).
 */
import { create, toBinary } from "@bufbuild/protobuf";
import { AppendRequestSchema } from "../../gen/sessionstate/v1/signal_log_pb.js";
import { ActorType, EventKind } from "../../gen/sessionstate/v1/types_pb.js";
import { connect } from "../../test/support/helpers.js";
import { rssMb, sleep, unaryRate } from "../lib.js";
import { results, row, sessionstate } from "../context.js";

/**
 * RSS growth of a fresh server while 100,000 appends land on 1,000 targets watched by one watcher, with
 * that watcher's subscriber reading (`stall` false) or stalled. The stall's cost is the difference.
 */
async function rssGrowthOverAppends(stall: boolean): Promise<number> {
  const server = await sessionstate(`memory-${stall ? "stalled" : "reading"}`);
  const clients = connect(server.address);
  try {
    for (let t = 0; t < 1000; t++) await clients.watch.watch({ watcherSessionKey: "agent:stall:w", target: { key: `agent:stall:t${t}` } });
    const call = clients.watch.subscribeStaleNotices({ watcherSessionKeys: ["agent:stall:w"] }, { timeoutMs: 600_000 });
    const events = call as unknown as import("node:stream").Readable;
    events.on("error", () => undefined);
    // The reading subscriber acks what it gets, so notices keep flowing; the stalled one reads nothing more.
    events.on("data", (item: { message: { case: string; value: { target?: unknown; notifiedVersion?: bigint } } }) => {
      if (stall) call.pause();
      else if (item.message.case === "notice") {
        clients.watch
          .ackNotices({ acks: [{ watcherSessionKey: "agent:stall:w", target: item.message.value.target as never, notifiedVersion: item.message.value.notifiedVersion! }] })
          .catch(() => undefined);
      }
    });
    await sleep(500);
    const before = rssMb(server.child.pid!);
    const requests = Array.from({ length: 1000 }, (_, t) =>
      Buffer.from(toBinary(AppendRequestSchema, create(AppendRequestSchema, { session: { key: `agent:stall:t${t}` }, kind: EventKind.HUMAN_DIRECT_MESSAGE, actorType: ActorType.HUMAN, summary: "while stalled" }))),
    );
    let n = 0;
    await unaryRate(server.address, "/sessionstate.v1.SignalLog/Append", () => requests[n++ % 1000]!, 64, 1e9, () => n >= 100_000);
    await sleep(500);
    const growth = rssMb(server.child.pid!) - before;
    call.cancel();
    return growth;
  } finally {
    clients.close();
    await server.stop();
  }
}

export async function stallMemory(): Promise<void> {
  const reading = await rssGrowthOverAppends(false);
  const stalled = await rssGrowthOverAppends(true);
  results.rss_growth_reading_mb = reading;
  results.rss_growth_stalled_mb = stalled;
  results.stall_extra_mb = stalled - reading;
  row("memory", "RSS growth over 100,000 appends: reading / stalled, MB", `${reading.toFixed(1)} / ${stalled.toFixed(1)}`);
  row("memory", "added by the stall, MB", (stalled - reading).toFixed(1), "goal < 20");
}
