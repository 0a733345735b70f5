/**
 * The start-up and memory scenario (`startup`).
 */
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { encodeStateEvent } from "../../src/codec/event-codec.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { connect, storeAppend } from "../../test/support/helpers.js";
import { rssMb, sleep, spawnListening } from "../lib.js";
import { root, work, serverNodeArgs, results, row } from "../context.js";

/** 5 and 6. Start-up with 50,000 events and 100,000 cursors (20,000 pending); then memory. */
export async function startupAndMemory(): Promise<void> {
  const path = join(work, "startup.db");
  const store = SqliteStore.open(path, "normal", encodeStateEvent);
  const now = Date.now();
  for (let t = 0; t < 1000; t++) {
    for (let w = 0; w < 100; w++) await store.watch(`agent:bw:w${w}`, { namespace: "default", agentId: "bw", key: `agent:bw:t${t}` }, now);
  }
  for (let i = 0; i < 49_800; i++) await store.append(storeAppend(`agent:bw:t${i % 1000}`, now, "run_completed"));
  for (let t = 0; t < 200; t++) await store.append(storeAppend(`agent:bw:t${t}`, now, "human_direct_message"));
  const pending = await store.countPendingNotices();
  await store.close();

  const spawnedAt = performance.now();
  const server = await spawnListening(
    join(root, "bin/sessionstate.js"),
    ["serve", "--db", path, "--listen", "127.0.0.1:0", "--log-level", "warn", "--max-streams-per-connection", "2000"],
    serverNodeArgs,
  );
  const servingMs = performance.now() - spawnedAt;
  const clients = connect(server.address);
  try {
    let delivered = 0;
    const stream = clients.watch.subscribeStaleNotices({ watcherKeyPrefixes: ["agent:bw:"] }, { timeoutMs: 600_000 });
    for await (const item of stream) {
      if (item.message.case === "notice") delivered++;
      else if (item.message.case === "synced") break;
    }
    const allPendingMs = performance.now() - spawnedAt;
    stream.cancel();
    results.startup_serving_ms = servingMs;
    results.startup_all_pending_ms = allPendingMs;
    row("start-up", `${pending} pending of 100,000 cursors: serving ms`, servingMs.toFixed(0), "goal < 1000 (includes node start)");
    row("start-up", `all ${delivered} pending notices received, ms`, allPendingMs.toFixed(0), "goal < 2000");

    // 6. Memory with 1,000 open streams.
    const streams = Array.from({ length: 1000 }, (_, i) => clients.watch.subscribeStaleNotices({ watcherSessionKeys: [`agent:idle:w${i}`] }, { timeoutMs: 600_000 }));
    await Promise.all(streams.map(async (call) => (await call[Symbol.asyncIterator]().next()).value));
    await sleep(500);
    const rss = rssMb(server.child.pid!);
    results.rss_mb = rss;
    row("memory", "RSS, 100,000 cursors and 1,000 open streams, MB", rss.toFixed(0), "goal < 250");

    for (const call of streams) call.cancel();
  } finally {
    clients.close();
    await server.stop();
  }
}
