/**
 * The reconcile scenario (`reconcile`).
 */
import { join } from "node:path";
import { create, toBinary } from "@bufbuild/protobuf";
import { SessionStatusRequestSchema } from "../../gen/sessionstate/v1/reconcile_pb.js";
import { encodeStateEvent } from "../../src/codec/event-codec.js";
import { SqliteStore } from "../../src/store/sqlite/sqlite-store.js";
import { connect, storeAppend } from "../../test/support/helpers.js";
import { median, spawnListening, unaryRate, type Listening } from "../lib.js";
import { root, rounds, roundMs, work, serverNodeArgs, results, row } from "../context.js";

/** 4. SessionStatus with changes_since over a full 50,000-row log vs echo of a same-sized message. */
export async function reconcile(echo: Listening): Promise<void> {
  const path = join(work, "reconcile.db");
  const store = SqliteStore.open(path, "normal", encodeStateEvent);
  for (let i = 0; i < 50_000; i++) await store.append(storeAppend(`agent:bench:r${i % 100}`, Date.now()));
  await store.close();
  const server = await spawnListening(join(root, "bin/sessionstate.js"), ["serve", "--db", path, "--listen", "127.0.0.1:0", "--log-level", "warn"], serverNodeArgs);
  const clients = connect(server.address);
  try {
    // Each session holds sequences s, s+100, ...: ask for the 20 events after a random point.
    const statusRequest = (): Buffer => {
      const session = Math.floor(Math.random() * 100);
      const since = BigInt(session + 1 + 100 * Math.floor(Math.random() * 480));
      return Buffer.from(toBinary(SessionStatusRequestSchema, create(SessionStatusRequestSchema, { session: { key: `agent:bench:r${session}` }, changesSince: since, limit: 20 })));
    };
    const sample = await clients.reconcile.sessionStatus({ session: { key: "agent:bench:r7" }, changesSince: 1008n, limit: 20 });
    const { SessionStatusResponseSchema } = await import("../../gen/sessionstate/v1/reconcile_pb.js");
    const responseSize = toBinary(SessionStatusResponseSchema, sample).length;
    const echoPayload = Buffer.alloc(responseSize, 1);
    const echoRates: number[] = [];
    const statusRates: number[] = [];
    for (let r = 0; r < rounds; r++) {
      echoRates.push(await unaryRate(echo.address, "/bench.Echo/Echo", () => echoPayload, 64, roundMs));
      statusRates.push(await unaryRate(server.address, "/sessionstate.v1.Reconcile/SessionStatus", statusRequest, 64, roundMs));
    }
    results.reconcile_per_sec = median(statusRates);
    results.reconcile_vs_echo_ratio = median(statusRates) / median(echoRates);
    row("reconcile", `20 events (${responseSize} B): status/s, echo/s`, `${median(statusRates).toFixed(0)} / ${median(echoRates).toFixed(0)}`);
    row("reconcile", "ratio to echo", (median(statusRates) / median(echoRates)).toFixed(2), "goal >= 0.8");
  } finally {
    clients.close();
    await server.stop();
  }
}
