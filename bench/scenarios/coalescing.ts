/**
 * The coalescing scenario (`coalescing`).
 */
import { performance } from "node:perf_hooks";
import { create, toBinary } from "@bufbuild/protobuf";
import { AppendRequestSchema } from "../../gen/sessionstate/v1/signal_log_pb.js";
import { ActorType, EventKind } from "../../gen/sessionstate/v1/types_pb.js";
import { connect } from "../../test/support/helpers.js";
import { sleep } from "../lib.js";
import { results, row, sessionstate } from "../context.js";

/** 3. 10,000 appends to one target with 100 watchers: exactly 100 notices before any ack. */
export async function coalescing(): Promise<void> {
  const server = await sessionstate("coalescing");
  const clients = connect(server.address);
  try {
    const target = "agent:bench:subagent:hot";
    for (let i = 0; i < 100; i++) await clients.watch.watch({ watcherSessionKey: `agent:bench:c${i}`, target: { key: target } });
    let notices = 0;
    let lastAt = 0;
    const stream = clients.watch.subscribeStaleNotices({ watcherKeyPrefixes: ["agent:bench:c"] }, { timeoutMs: 600_000 });
    const reading = (async () => {
      try {
        for await (const item of stream) {
          if (item.message.case === "notice") {
            notices++;
            lastAt = performance.now();
          }
        }
      } catch {
        // cancelled at the end
      }
    })();
    await sleep(200);
    const request = Buffer.from(
      toBinary(AppendRequestSchema, create(AppendRequestSchema, { session: { key: target }, kind: EventKind.HUMAN_DIRECT_MESSAGE, actorType: ActorType.HUMAN, summary: "burst" })),
    );
    const started = performance.now();
    let sent = 0;
    const { Client, credentials } = await import("@grpc/grpc-js");
    const raw = new Client(server.address, credentials.createInsecure());
    const pass = (b: Buffer): Buffer => b;
    await Promise.all(
      Array.from({ length: 64 }, async () => {
        while (sent < 10_000) {
          sent++;
          await new Promise<void>((resolve, reject) => raw.makeUnaryRequest("/sessionstate.v1.SignalLog/Append", pass, pass, request, (err) => (err === null ? resolve() : reject(err))));
        }
      }),
    );
    const appendsMs = performance.now() - started;
    await sleep(500);
    stream.cancel();
    await reading;
    raw.close();
    results.coalescing_notices = notices;
    results.coalescing_delivery_ms = lastAt - started;
    row("coalescing burst", "10,000 appends, 100 watchers: notices", String(notices), "goal exactly 100");
    row("coalescing burst", "time to the 100th notice / to all appends, ms", `${(lastAt - started).toFixed(0)} / ${appendsMs.toFixed(0)}`);
  } finally {
    clients.close();
    await server.stop();
  }
}
