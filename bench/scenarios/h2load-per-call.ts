/**
 * The per-call scenario with h2load (`h2load`).
 */
import { join } from "node:path";
import { create, toBinary } from "@bufbuild/protobuf";
import { SessionStatusRequestSchema } from "../../gen/sessionstate/v1/reconcile_pb.js";
import { connect, human } from "../../test/support/helpers.js";
import { startEtcd } from "../etcd-peer.js";
import { connectJsonCall, grpcBodyFile, grpcCall, h2loadRate, h2loadShape, hasH2load, type H2loadRequest, type H2loadRun } from "../h2load.js";
import { writeFileSync } from "node:fs";
import { BinaryWriter } from "@bufbuild/protobuf/wire";
import Database from "better-sqlite3";
import { median, spawnListening, type Listening } from "../lib.js";
import { freePort } from "../../test/support/process-helpers.js";
import { root, rounds, work, results, row, sessionstate, metricCount, okCalls, appendRequests } from "../context.js";

/** Medians over rounds of h2load runs; `check` proves afterwards that every call succeeded. */
async function h2loadRounds(url: string, body: string, pid: number, request: H2loadRequest = grpcCall): Promise<H2loadRun & { calls: number }> {
  const runs: H2loadRun[] = [];
  for (let r = 0; r < rounds; r++) runs.push(await h2loadRate(url, body, pid, request));
  if (runs.some((run) => run.succeeded !== h2loadShape.requests)) throw new Error(`h2load: HTTP errors at ${url}`);
  return {
    requestsPerSec: median(runs.map((run) => run.requestsPerSec)),
    serverCpuMsPer1000: median(runs.map((run) => run.serverCpuMsPer1000)),
    succeeded: h2loadShape.requests,
    calls: rounds * (h2loadShape.requests + h2loadShape.warmupRequests),
  };
}

/**
 * h2load against bench/append-floor-server: Append with all of its own work taken away but the row it
 * must store before answering. Every call's row is counted in the file afterwards.
 */
async function appendFloor(body: string): Promise<H2loadRun & { calls: number }> {
  const path = join(work, "append-floor.db");
  const floor = await spawnListening(join(root, "bench/append-floor-server.ts"), [path], ["--import", "tsx"]);
  let run: H2loadRun & { calls: number };
  try {
    run = await h2loadRounds(`http://${floor.address}/bench.Floor/Append`, body, floor.child.pid!);
  } finally {
    await floor.stop();
  }
  const db = new Database(path, { readonly: true });
  try {
    const stored = db.prepare<[], number>("SELECT count(*) FROM events").pluck().get()!;
    if (stored !== run.calls) throw new Error(`h2load Append's floor: ${run.calls} sent, ${stored} stored`);
  } finally {
    db.close();
  }
  return run;
}

/** An etcd PutRequest { bytes key = 1; bytes value = 2; }. */
function etcdPutRequest(key: string, value: string): Uint8Array {
  const writer = new BinaryWriter();
  writer.tag(1, 2).bytes(Buffer.from(key));
  writer.tag(2, 2).bytes(Buffer.from(value));
  return writer.finish();
}

/**
 * 8. Per-call cost with h2load as the load generator (the Node client saturates these cores before the
 * server does): the bare echo server, Append's floor (bench/append-floor-server), Append, SessionStatus with
 * 20 events, and etcd's KV/Put, on tmpfs (against durability normal) and on disk (against full). One
 * server at a time, same shape for each; every call's success is proven from the server's own record
 * afterwards.
 */
export async function h2loadPerCall(echo: Listening): Promise<void> {
  if (!(await hasH2load())) {
    row("h2load", "skipped", "h2load missing", "apt-get install nghttp2-client");
    return;
  }
  const shape = `${h2loadShape.requests} requests, -c ${h2loadShape.connections} -m ${h2loadShape.streams}`;
  const appendBody = grpcBodyFile(work, "append", appendRequests[0]!);
  const appendSession = "agent:bench:subagent:s0";
  const echoRun = await h2loadRounds(`http://${echo.address}/bench.Echo/Echo`, appendBody, echo.child.pid!);
  row("h2load", `echo (${shape}): calls/s, server CPU ms per 1,000`, `${echoRun.requestsPerSec.toFixed(0)} / ${echoRun.serverCpuMsPer1000.toFixed(0)}`);
  results.h2load_echo_per_sec = echoRun.requestsPerSec;
  results.h2load_echo_cpu_ms_per_1000 = echoRun.serverCpuMsPer1000;
  const floor = await appendFloor(appendBody);
  row("h2load", `Append's floor (grpc-js + the store's one group-committed row, nothing else): calls/s, CPU ms per 1,000`, `${floor.requestsPerSec.toFixed(0)} / ${floor.serverCpuMsPer1000.toFixed(0)}`);
  row("h2load", "Append's floor / echo (throughput): the most Append / echo can be", (floor.requestsPerSec / echoRun.requestsPerSec).toFixed(2));
  results.h2load_floor_per_sec = floor.requestsPerSec;
  results.h2load_floor_cpu_ms_per_1000 = floor.serverCpuMsPer1000;
  results.h2load_floor_vs_echo = floor.requestsPerSec / echoRun.requestsPerSec;

  // The HTTP port is on (and idle during the gRPC rows) as by default; `httpPort: false` turns it off for the A/B.
  const ours = async (durability: "normal" | "full", statusCache = true, httpPort = true) => {
    const metricsPort = await freePort();
    const httpAddress = `127.0.0.1:${await freePort()}`;
    const server = await sessionstate(`h2load-${durability}${statusCache ? "" : "-nocache"}${httpPort ? "" : "-nohttp"}`, [
      "--durability", durability,
      "--metrics-listen", `127.0.0.1:${metricsPort}`,
      "--http-listen", httpPort ? httpAddress : "off",
      ...(statusCache ? [] : ["--status-cache-bytes", "0"]),
    ]);
    const clients = connect(server.address);
    try {
      const append = await h2loadRounds(`http://${server.address}/sessionstate.v1.SignalLog/Append`, appendBody, server.child.pid!);
      const version = (await clients.reconcile.sessionStatus({ session: { key: appendSession } })).stateVersion;
      const appendOk = await okCalls(metricsPort, "/sessionstate.v1.SignalLog/Append");
      if (version !== BigInt(append.calls) || appendOk !== append.calls) {
        throw new Error(`h2load Append: ${append.calls} sent, ${appendOk} answered OK, state version ${version}`);
      }
      if (durability === "full") return { append };
      const statusSession = "agent:bench:status";
      for (let i = 0; i < 20; i++) await clients.signalLog.append(human(statusSession, { summary: `event ${i} of the reconcile benchmark` }));
      const statusBody = grpcBodyFile(
        work,
        "status",
        toBinary(SessionStatusRequestSchema, create(SessionStatusRequestSchema, { session: { key: statusSession }, changesSince: 0n })),
      );
      const status = await h2loadRounds(`http://${server.address}/sessionstate.v1.Reconcile/SessionStatus`, statusBody, server.child.pid!);
      const statusOk = await okCalls(metricsPort, "/sessionstate.v1.Reconcile/SessionStatus");
      // One more call: the clients' own SessionStatus above.
      if (statusOk !== status.calls + 1) throw new Error(`h2load SessionStatus: ${status.calls} sent, ${statusOk - 1} answered OK`);
      // Where the answers came from: with the cache all but the first from memory, without it all from the store.
      const fromCache = await metricCount(metricsPort, 'sessionstate_status_answers_total{source="cache"}');
      const expectedFromCache = statusCache ? status.calls - 1 : 0;
      if (fromCache !== expectedFromCache) throw new Error(`h2load SessionStatus: ${fromCache} answers from the cache, expected ${expectedFromCache}`);
      if (!httpPort || !statusCache) return { append, status };
      // The same question as Connect JSON over HTTP/1.1 on the HTTP port, as curl asks it.
      const jsonBody = join(work, "status.json");
      writeFileSync(jsonBody, JSON.stringify({ session: { key: statusSession }, changesSince: "0" }));
      const statusJson = await h2loadRounds(`http://${httpAddress}/sessionstate.v1.Reconcile/SessionStatus`, jsonBody, server.child.pid!, connectJsonCall);
      const jsonOk = await okCalls(metricsPort, "/sessionstate.v1.Reconcile/SessionStatus", "connect");
      if (jsonOk !== statusJson.calls) throw new Error(`h2load SessionStatus over Connect JSON: ${statusJson.calls} sent, ${jsonOk} answered OK`);
      return { append, status, statusJson };
    } finally {
      clients.close();
      await server.stop();
    }
  };
  const etcdPut = async (inMemory: boolean) => {
    const etcd = await startEtcd(inMemory, 23790, 23800);
    try {
      const key = "sessions/agent:bench:subagent:s0/h2load";
      const body = grpcBodyFile(work, "etcd-put", etcdPutRequest(key, "goal_changed agent goal updated by the benchmark"));
      const before = Number((await etcd.client.get(key).exec()).header.revision);
      const put = await h2loadRounds("http://127.0.0.1:23790/etcdserverpb.KV/Put", body, etcd.pid);
      const after = Number((await etcd.client.get(key).exec()).header.revision);
      if (after - before !== put.calls) throw new Error(`h2load etcd Put: ${put.calls} sent, revision moved ${after - before}`);
      return put;
    } finally {
      await etcd.stop();
    }
  };

  const normal = await ours("normal");
  const withoutHttp = await ours("normal", true, false);
  const uncached = await ours("normal", false);
  const full = await ours("full");
  row("h2load", `Append: calls/s, server CPU ms per 1,000`, `${normal.append.requestsPerSec.toFixed(0)} / ${normal.append.serverCpuMsPer1000.toFixed(0)}`);
  row("h2load", "Append / echo (throughput)", (normal.append.requestsPerSec / echoRun.requestsPerSec).toFixed(2), "goal >= 0.8");
  row("h2load", `SessionStatus, 20 events: calls/s, CPU ms per 1,000`, `${normal.status!.requestsPerSec.toFixed(0)} / ${normal.status!.serverCpuMsPer1000.toFixed(0)}`);
  row("h2load", "SessionStatus / echo (throughput)", (normal.status!.requestsPerSec / echoRun.requestsPerSec).toFixed(2), "goal >= 0.7");
  row("h2load", `SessionStatus uncached (--status-cache-bytes 0): calls/s, CPU ms per 1,000`, `${uncached.status!.requestsPerSec.toFixed(0)} / ${uncached.status!.serverCpuMsPer1000.toFixed(0)}`);
  row("h2load", "SessionStatus uncached / echo (throughput)", (uncached.status!.requestsPerSec / echoRun.requestsPerSec).toFixed(2));
  results.h2load_status_uncached_per_sec = uncached.status!.requestsPerSec;
  results.h2load_status_uncached_cpu_ms_per_1000 = uncached.status!.serverCpuMsPer1000;
  results.h2load_status_uncached_vs_echo = uncached.status!.requestsPerSec / echoRun.requestsPerSec;
  // The HTTP port on and idle against off: it must not slow the gRPC port (issue 36).
  results.h2load_append_http_off_per_sec = withoutHttp.append.requestsPerSec;
  results.h2load_status_http_off_per_sec = withoutHttp.status!.requestsPerSec;
  results.h2load_append_http_on_vs_off = normal.append.requestsPerSec / withoutHttp.append.requestsPerSec;
  results.h2load_status_http_on_vs_off = normal.status!.requestsPerSec / withoutHttp.status!.requestsPerSec;
  row(
    "h2load",
    "Append, SessionStatus with the HTTP port on and idle / off (throughput)",
    `${Number(results.h2load_append_http_on_vs_off).toFixed(2)}, ${Number(results.h2load_status_http_on_vs_off).toFixed(2)} (off: ${withoutHttp.append.requestsPerSec.toFixed(0)}, ${withoutHttp.status!.requestsPerSec.toFixed(0)} calls/s)`,
    "within noise",
  );
  const json = normal.statusJson!;
  results.h2load_status_connect_json_per_sec = json.requestsPerSec;
  results.h2load_status_connect_json_cpu_ms_per_1000 = json.serverCpuMsPer1000;
  results.h2load_status_connect_json_vs_grpc = json.requestsPerSec / normal.status!.requestsPerSec;
  row(
    "h2load",
    `SessionStatus, 20 events, Connect JSON over HTTP/1.1 (h2load --h1, ${h2loadShape.connections * h2loadShape.streams} connections): calls/s, CPU ms per 1,000; / gRPC's`,
    `${json.requestsPerSec.toFixed(0)} / ${json.serverCpuMsPer1000.toFixed(0)}; ${Number(results.h2load_status_connect_json_vs_grpc).toFixed(2)}`,
  );
  results.h2load_append_per_sec = normal.append.requestsPerSec;
  results.h2load_append_cpu_ms_per_1000 = normal.append.serverCpuMsPer1000;
  results.h2load_status_per_sec = normal.status!.requestsPerSec;
  results.h2load_status_cpu_ms_per_1000 = normal.status!.serverCpuMsPer1000;
  results.h2load_append_vs_echo = normal.append.requestsPerSec / echoRun.requestsPerSec;
  results.h2load_status_vs_echo = normal.status!.requestsPerSec / echoRun.requestsPerSec;
  results.h2load_append_full_per_sec = full.append.requestsPerSec;
  results.h2load_append_full_cpu_ms_per_1000 = full.append.serverCpuMsPer1000;
  results.h2load_append_cpu_vs_floor = normal.append.serverCpuMsPer1000 / floor.serverCpuMsPer1000;
  row("h2load", "Append's CPU per call / its floor's", Number(results.h2load_append_cpu_vs_floor).toFixed(2), "goal <= 1.2");
  if (process.env.BENCH_SKIP_ETCD !== undefined) return;
  const tmpfs = await etcdPut(true);
  const disk = await etcdPut(false);
  row("h2load", "etcd Put, tmpfs: calls/s, CPU ms per 1,000", `${tmpfs.requestsPerSec.toFixed(0)} / ${tmpfs.serverCpuMsPer1000.toFixed(0)}`);
  row("h2load", "etcd Put, disk: calls/s, CPU ms per 1,000", `${disk.requestsPerSec.toFixed(0)} / ${disk.serverCpuMsPer1000.toFixed(0)}`);
  row("h2load", "Append full: calls/s, CPU ms per 1,000", `${full.append.requestsPerSec.toFixed(0)} / ${full.append.serverCpuMsPer1000.toFixed(0)}`);
  results.h2load_etcd_put_per_sec = tmpfs.requestsPerSec;
  results.h2load_etcd_put_cpu_ms_per_1000 = tmpfs.serverCpuMsPer1000;
  results.h2load_etcd_put_disk_per_sec = disk.requestsPerSec;
  results.h2load_etcd_put_disk_cpu_ms_per_1000 = disk.serverCpuMsPer1000;
  results.h2load_append_cpu_vs_etcd_put = normal.append.serverCpuMsPer1000 / tmpfs.serverCpuMsPer1000;
  // The floor under that ratio: a grpc-js server that does nothing but answer.
  results.h2load_echo_cpu_vs_etcd_put = echoRun.serverCpuMsPer1000 / tmpfs.serverCpuMsPer1000;
  results.h2load_floor_cpu_vs_etcd_put = floor.serverCpuMsPer1000 / tmpfs.serverCpuMsPer1000;
  results.h2load_append_vs_etcd_put = normal.append.requestsPerSec / tmpfs.requestsPerSec;
  results.h2load_append_full_cpu_vs_etcd_put_disk = full.append.serverCpuMsPer1000 / disk.serverCpuMsPer1000;
  results.h2load_append_full_vs_etcd_put_disk = full.append.requestsPerSec / disk.requestsPerSec;
  row("h2load", "Append CPU per call / etcd Put's (tmpfs; full vs disk)", `${Number(results.h2load_append_cpu_vs_etcd_put).toFixed(2)}; ${Number(results.h2load_append_full_cpu_vs_etcd_put_disk).toFixed(2)}`, "goal <= 1.0");
  row("h2load", "echo's and Append's floor's CPU per call / etcd Put's (tmpfs): what the ratio above cannot go below", `${Number(results.h2load_echo_cpu_vs_etcd_put).toFixed(2)}; ${Number(results.h2load_floor_cpu_vs_etcd_put).toFixed(2)}`);
  row("h2load", "Append / etcd Put throughput (tmpfs; full vs disk)", `${Number(results.h2load_append_vs_etcd_put).toFixed(2)}; ${Number(results.h2load_append_full_vs_etcd_put_disk).toFixed(2)}`);
}
