import { createServer, type Server as HttpServer } from "node:http";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import { status as GrpcStatus } from "@grpc/grpc-js";

/** How often the event loop's delay is sampled, in ms. */
const loopResolutionMs = 5;

/** Sources of gauges that are read when Prometheus scrapes. */
export interface MetricsSources {
  openStreams(): number;
  pendingNotices(): Promise<number>;
  /** The size of the stored state by file: SQLite's `db` and `wal`, PostgreSQL's schema as `db`. */
  databaseBytes(): Promise<ReadonlyArray<readonly [file: string, bytes: number]>>;
  /** Whether the database answers now (always true for SQLite). */
  databaseReachable(): boolean;
}

/**
 * The service's Prometheus metrics. Counters are moved by the components as work is done; gauges are
 * read from their sources at scrape time. Labels never hold keys, texts or tokens. A gauge read from the
 * database keeps its last value while the database does not answer, so a scrape never fails for it.
 */
export class Metrics {
  readonly registry = new Registry();

  readonly appends = new Counter({
    name: "sessionstate_appends_total",
    help: "Append calls by event kind and result (recorded, deduplicated, not_watched).",
    labelNames: ["kind", "result"] as const,
    registers: [this.registry],
  });
  readonly noticesOpened = new Counter({
    name: "sessionstate_notices_opened_total",
    help: "Stale notices opened by material events.",
    registers: [this.registry],
  });
  readonly noticesReopened = new Counter({
    name: "sessionstate_notices_reopened_total",
    help: "Stale notices reopened by an acknowledgement because more changes arrived.",
    registers: [this.registry],
  });
  readonly noticesDelivered = new Counter({
    name: "sessionstate_notices_delivered_total",
    help: "Notices written to subscriber streams (a notice counts once per stream).",
    registers: [this.registry],
  });
  readonly acks = new Counter({
    name: "sessionstate_acks_total",
    help: "Acknowledgements by result (acknowledged, stale).",
    labelNames: ["result"] as const,
    registers: [this.registry],
  });
  private readonly rpcDurationChildren = new Map<string, ReturnType<Histogram<"method" | "code" | "protocol">["labels"]>>();
  readonly rpcDuration = new Histogram({
    name: "sessionstate_rpc_duration_seconds",
    help: "RPC duration by method, status code and protocol (grpc, connect, grpc-web; streams: their whole life).",
    labelNames: ["method", "code", "protocol"] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 10, 60, 600],
    registers: [this.registry],
  });
  /** Buckets of the store's transaction timings: from 0.1 ms (a SQLite batch) to 2 s (PostgreSQL's deadline). */
  private static readonly storeBuckets = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2];
  readonly storeCommit = new Histogram({
    name: "sessionstate_store_commit_seconds",
    help: "Write transactions of the store (group commits), from BEGIN to COMMIT's answer; on SQLite an automatic WAL checkpoint runs inside the commit that triggers it.",
    buckets: Metrics.storeBuckets,
    registers: [this.registry],
  });
  readonly noticeDelivery = new Histogram({
    name: "sessionstate_notice_delivery_seconds",
    help: "From hearing that a pair's notice opened or changed (after its commit, or from another replica's feed) to handing the notice to the subscriber's stream: the hub's queue and its read of the cursor.",
    buckets: Metrics.storeBuckets,
    registers: [this.registry],
  });
  readonly storeWriteWait = new Histogram({
    name: "sessionstate_store_write_wait_seconds",
    help: "How long the oldest write of each store transaction waited in the store's queue before the transaction began.",
    buckets: Metrics.storeBuckets,
    registers: [this.registry],
  });
  readonly pruneStep = new Histogram({
    name: "sessionstate_prune_step_seconds",
    help: "Retention steps, from the call to its answer: each one transaction, sized to take about the step target (5 ms on SQLite, 25 ms on PostgreSQL).",
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [this.registry],
  });
  readonly pruneRuns = new Counter({
    name: "sessionstate_prune_runs_total",
    help: "Retention runs.",
    registers: [this.registry],
  });
  readonly prunedRows = new Counter({
    name: "sessionstate_pruned_rows_total",
    help: "Rows removed by retention, by table (events, cursors).",
    labelNames: ["table"] as const,
    registers: [this.registry],
  });
  readonly storageRefusals = new Counter({
    name: "sessionstate_storage_full_refusals_total",
    help: "Writes refused because the storage is full.",
    registers: [this.registry],
  });
  readonly statusAnswers = new Counter({
    name: "sessionstate_status_answers_total",
    help: "SessionStatus answers with changes or a version, by source: store (read from the database) or cache (the same question, asked again while nothing it reads changed).",
    labelNames: ["source"] as const,
    registers: [this.registry],
  });
  /** Pre-resolved children of statusAnswers: one is counted on every SessionStatus call. */
  readonly statusAnswersFrom = { store: this.statusAnswers.labels("store"), cache: this.statusAnswers.labels("cache") };
  readonly storageFull = new Gauge({
    name: "sessionstate_storage_full",
    help: "1 while the storage is full (the last write was refused for lack of space), else 0.",
    registers: [this.registry],
  });
  readonly monitorTicks = new Counter({
    name: "sessionstate_monitor_ticks_total",
    help: "Upstream monitor ticks.",
    registers: [this.registry],
  });
  readonly monitorLinks = new Counter({
    name: "sessionstate_monitor_links_total",
    help: "Upstream links checked, by outcome (scanned, recorded, held, discarded, unclassifiable, failed).",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });

  readonly monitorRows = new Counter({
    name: "sessionstate_monitor_rows_total",
    help: "Transcript rows the monitor read, by class (human, injected, tool, other); a row is counted when its scan commits.",
    labelNames: ["class"] as const,
    registers: [this.registry],
  });
  readonly monitorLongLines = new Counter({
    name: "sessionstate_monitor_long_lines_total",
    help: "Transcript lines longer than --max-line-bytes, classified by streaming, by outcome (classified, malformed, too-complex).",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  readonly httpRefusals = new Counter({
    name: "sessionstate_http_refused_total",
    help: "HTTP port requests refused before anything was read, by reason: host (addressed to a name the port does not answer to: 421) or origin (sent by a page of another origin: 403).",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  readonly hookCalls = new Counter({
    name: "sessionstate_hook_calls_total",
    help: "Calls of the CLIs' hooks (POST /hooks/<cli>), by cli and outcome: matched (it named an adopted link, scanned now), unmatched (well-formed, it named none), refused (a bad body or token).",
    labelNames: ["cli", "outcome"] as const,
    registers: [this.registry],
  });
  readonly hookToEvent = new Histogram({
    name: "sessionstate_hook_to_event_seconds",
    help: "From a hook call to the human_direct_message its scan recorded.",
    buckets: [0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5],
    registers: [this.registry],
  });

  constructor(sources: MetricsSources) {
    const registry = this.registry;
    new Gauge({
      name: "sessionstate_open_streams",
      help: "Server streams open now.",
      registers: [registry],
      collect() {
        this.set(sources.openStreams());
      },
    });
    new Gauge({
      name: "sessionstate_pending_notices",
      help: "Watcher/target pairs with a pending notice (N > L).",
      registers: [registry],
      async collect() {
        const pending = await sources.pendingNotices().catch(() => undefined);
        if (pending !== undefined) this.set(pending);
      },
    });
    new Gauge({
      name: "sessionstate_database_bytes",
      help: "Size of the stored state, by file (SQLite: db, wal; PostgreSQL: db, the schema's tables and indexes).",
      labelNames: ["file"] as const,
      registers: [registry],
      async collect() {
        for (const [file, bytes] of await sources.databaseBytes().catch(() => [])) this.set({ file }, bytes);
      },
    });
    new Gauge({
      name: "sessionstate_database_reachable",
      help: "1 while the database answers round trips, 0 while it does not (health NOT_SERVING, calls refused with UNAVAILABLE).",
      registers: [registry],
      collect() {
        this.set(sources.databaseReachable() ? 1 : 0);
      },
    });
    // The event loop's delay: how long a turn that should have run waited for the one before it to end.
    // monitorEventLoopDelay records the time between its timer's firings, the resolution included, so the
    // resolution is taken off (prom-client's nodejs_eventloop_lag_* keep it in).
    const loop = monitorEventLoopDelay({ resolution: loopResolutionMs });
    loop.enable();
    new Gauge({
      name: "sessionstate_event_loop_delay_seconds",
      help: `The event loop's delay over the time since the previous scrape, by quantile (1: the longest), sampled every ${loopResolutionMs} ms.`,
      labelNames: ["quantile"] as const,
      registers: [registry],
      collect() {
        const delay = (nanoseconds: number): number => Math.max(0, nanoseconds / 1e9 - loopResolutionMs / 1000);
        const sampled = loop.count > 0;
        this.set({ quantile: "0.5" }, sampled ? delay(loop.percentile(50)) : 0);
        this.set({ quantile: "0.99" }, sampled ? delay(loop.percentile(99)) : 0);
        this.set({ quantile: "1" }, sampled ? delay(loop.max) : 0);
        loop.reset();
      },
    });
    // Among the defaults: the collector's pauses by kind (sessionstate_nodejs_gc_duration_seconds).
    collectDefaultMetrics({ register: registry, prefix: "sessionstate_" });
  }

  private readonly appendChildren = new Map<string, ReturnType<Metrics["appends"]["labels"]>>();

  /** Counts one append of `kind` with its result; like observeCall, one labelled child per pair, kept. */
  countAppend(kind: string, result: "recorded" | "deduplicated" | "not_watched"): void {
    const key = `${kind} ${result}`;
    let child = this.appendChildren.get(key);
    if (child === undefined) {
      child = this.appends.labels({ kind, result });
      this.appendChildren.set(key, child);
    }
    child.inc();
  }

  /** Records one finished RPC. */
  observeCall(method: string, code: GrpcStatus, seconds: number, protocol: string): void {
    // One labelled child per (method, code, protocol), kept: resolving labels on every call costs more than the observation.
    const key = `${method} ${code} ${protocol}`;
    let child = this.rpcDurationChildren.get(key);
    if (child === undefined) {
      child = this.rpcDuration.labels({ method, code: GrpcStatus[code] ?? String(code), protocol });
      this.rpcDurationChildren.set(key, child);
    }
    child.observe(seconds);
  }
}

/**
 * Serves the metrics as Prometheus text on `GET /metrics` at host:port (port 0 picks one). Resolves with
 * the HTTP server and its port; the caller closes it.
 */
export async function serveMetrics(metrics: Metrics, host: string, port: number): Promise<{ server: HttpServer; port: number }> {
  const server = createServer((request, response) => {
    if (request.method !== "GET" || request.url?.split("?")[0] !== "/metrics") {
      response.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
      return;
    }
    metrics.registry.metrics().then(
      (text) => response.writeHead(200, { "content-type": metrics.registry.contentType }).end(text),
      () => response.writeHead(500, { "content-type": "text/plain" }).end("metrics unavailable\n"),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  return { server, port: typeof address === "object" && address !== null ? address.port : port };
}
