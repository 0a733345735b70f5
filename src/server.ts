import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { Server, ServerCredentials } from "@grpc/grpc-js";
import { file_grpc_health_v1_health, Health } from "../gen/grpc/health/v1/health_pb.js";
import { file_sessionstate_v1_reconcile, Reconcile } from "../gen/sessionstate/v1/reconcile_pb.js";
import { file_sessionstate_v1_signal_log, SignalLog } from "../gen/sessionstate/v1/signal_log_pb.js";
import { file_sessionstate_v1_upstream, Upstream } from "../gen/sessionstate/v1/upstream_pb.js";
import { file_sessionstate_v1_watch, Watch } from "../gen/sessionstate/v1/watch_pb.js";
import { encodeStateEvent } from "./codec/event-codec.js";
import { systemClock, type Clock } from "./clock.js";
import { formatHostPort, isLoopbackHost, type Config } from "./config.js";
import type { Logger } from "./logger.js";
import { Metrics, serveMetrics } from "./metrics.js";
import { NoticeHub } from "./notices/notice-hub.js";
import { HealthState } from "./rpc/health.js";
import { addReflection } from "./rpc/reflection.js";
import { RpcEdge } from "./rpc/rpc-edge.js";
import { TokenRegistry } from "./rpc/tokens.js";
import { reconcileHandlers } from "./services/reconcile.js";
import { signalLogHandlers } from "./services/signal-log.js";
import { upstreamHandlers } from "./services/upstream.js";
import { watchHandlers } from "./services/watch.js";
import { settleWithin } from "./settle-within.js";
import { Retention } from "./jobs/retention.js";
import { MonitorJob } from "./jobs/monitor-job.js";
import { PostgresStore } from "./store/postgres/postgres-store.js";
import { isPostgresUrl, parsePostgresUrl, redactPostgresUrl } from "./store/postgres/postgres-url.js";
import { SqliteStore } from "./store/sqlite/sqlite-store.js";
import type { StorageObserver } from "./store/storage-tracker.js";
import { storeFaultOf } from "./store/store-errors.js";
import type { Store } from "./store/store.js";
import { SessionActivity } from "./upstream/session-activity.js";
import { UpstreamMonitor } from "./upstream/upstream-monitor.js";

const dayMs = 24 * 60 * 60 * 1000;
const pruneRowsPerStep = 2000;
const firstMonitorTickMs = 15_000;
/**
 * A graceful stop ends within `stopBudgetMs` whatever the database does (SPEC §11: 5 s): calls in flight
 * get `callGraceMs` to finish and are then answered UNAVAILABLE; the store closes in what is left.
 */
const stopBudgetMs = 4500;
const callGraceMs = 1500;
/** Connections still open after the calls are answered are cut after this. */
const connectionGraceMs = 500;
/** A replica started while its database is down tries again this often (first), up to the most, with jitter. */
const startRetryFirstMs = 100;
const startRetryMostMs = 1000;

/** A running server. Whoever started it must `close()` it. */
export interface RunningServer {
  /** The port actually bound (useful with port 0). */
  readonly port: number;
  /** `host:port` as bound. */
  readonly address: string;
  /** The metrics listener's port, when metrics are on. */
  readonly metricsPort: number | undefined;
  /** Server streams currently open. */
  openStreams(): number;
  /** Re-reads the tokens file (SIGHUP); keeps the old tokens and throws if the file is bad. */
  reloadTokens(): number;
  /** Graceful stop: NOT_SERVING, streams ended with UNAVAILABLE, calls drained (up to a grace period), db closed. */
  close(): Promise<void>;
}

/** Options beyond the configuration: injected for tests. */
export interface ServerOptions {
  logger: Logger;
  clock?: Clock;
  /** For tests: called with the store once it is open. */
  onStoreOpened?: (store: Store) => void;
  /**
   * Called when the server cannot go on serving and should stop (a replica that found, once its database
   * answered, a schema newer than it knows). Without it, such an error is only logged.
   */
  onFatal?: (error: unknown) => void;
}

function credentialsOf(config: Config): ServerCredentials {
  const tls = config.tls;
  if (tls === undefined) return ServerCredentials.createInsecure();
  return ServerCredentials.createSsl(
    tls.clientCaPem ?? null,
    [{ private_key: tls.keyPem, cert_chain: tls.certPem }],
    tls.clientCaPem !== undefined,
  );
}

/** Resolves after `ms`; the timer does not keep the process alive. */
function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/**
 * Opens the database, builds the services and starts serving. Throws `DatabaseInUseError` when another
 * process owns the database, and the bind error when the address is taken. On PostgreSQL, a database
 * that cannot be reached does not stop it: it serves health (NOT_SERVING), refuses other calls with
 * UNAVAILABLE and keeps trying (SPEC §11); any other failure to open the database is thrown.
 */
export async function startServer(config: Config, { logger, clock = systemClock, onStoreOpened, onFatal }: ServerOptions): Promise<RunningServer> {
  const log = logger.child({ component: "server" });
  const tokens = config.tokensFile === undefined ? undefined : new TokenRegistry(config.tokensFile);
  const storeLog = logger.child({ component: "store" });
  let metrics: Metrics | undefined;
  const storage: StorageObserver = {
    fullChanged: (full) => {
      metrics?.storageFull.set(full ? 1 : 0);
      if (full) storeLog.error("storage is full: writes are refused until space is freed");
      else storeLog.info("storage is writable again");
    },
    refused: () => metrics?.storageRefusals.inc(),
  };
  const postgres = isPostgresUrl(config.dbPath)
    ? new PostgresStore({
        target: parsePostgresUrl(config.dbPath),
        schema: config.dbSchema,
        durability: config.durability,
        nodeId: config.nodeId,
        encodeEvent: encodeStateEvent,
        nowMs: () => clock.nowMs(),
        storage,
        // While the database is away health says so once; any other failure of the feed is worth a warning.
        onFeedError: (err) =>
          storeFaultOf(err) === "unreachable"
            ? storeLog.debug({ err }, "reading other replicas' changes failed; retrying")
            : storeLog.warn({ err }, "reading other replicas' changes failed; retrying"),
      })
    : undefined;
  // The first attempt is made before listening: a database that is there is served from the first call.
  let databaseReady = postgres === undefined;
  if (postgres !== undefined) {
    try {
      await postgres.start();
      databaseReady = true;
    } catch (err) {
      if (storeFaultOf(err) !== "unreachable") {
        await postgres.close();
        throw err;
      }
      storeLog.error({ err }, "database unreachable: listening, not serving, and retrying");
    }
  }
  const store: Store = postgres ?? SqliteStore.open(config.dbPath, config.durability, encodeStateEvent, storage);
  const dbDescription = postgres === undefined ? config.dbPath : `${redactPostgresUrl(config.dbPath)} schema ${config.dbSchema}`;
  onStoreOpened?.(store);
  // Jobs that run on one replica at a time hold a lease; this process is one holder.
  const leaseHolder = `${config.nodeId}/${process.pid}/${randomUUID()}`;
  let edge: RpcEdge | undefined;
  const databaseReachable = (): boolean => postgres === undefined || (databaseReady && postgres.isReachable);
  // A scrape while the database is away answers at once, with the gauges it cannot read left as they were.
  const unlessUnreachable = <T>(read: () => Promise<T>): Promise<T> =>
    databaseReachable() ? read() : Promise.reject(new Error("the database is unreachable"));
  metrics = new Metrics({
    openStreams: () => edge?.openStreams ?? 0,
    pendingNotices: () => unlessUnreachable(() => store.countPendingNotices()),
    databaseBytes: () => unlessUnreachable(() => store.databaseBytes()),
    databaseReachable,
  });
  const retention = new Retention(
    store,
    clock,
    { retentionMs: config.retentionDays * dayMs, maxEvents: config.maxEvents, maxRowsPerStep: pruneRowsPerStep },
    logger.child({ component: "retention" }),
    metrics,
    () => store.tryLease("retention", leaseHolder, 2 * config.pruneIntervalMs),
  );
  const hub = new NoticeHub(store, logger.child({ component: "notices" }), metrics);
  hub.start();
  const activity = new SessionActivity(store, clock);
  const monitor = new UpstreamMonitor(
    store,
    activity,
    clock,
    { maxLineBytes: config.maxLineBytes, syntheticPrefixes: config.syntheticPrefixes },
    logger.child({ component: "upstream" }),
    metrics,
  );
  const monitorJob = new MonitorJob(
    monitor,
    { firstDelayMs: Math.min(firstMonitorTickMs, config.monitorIntervalMs), intervalMs: config.monitorIntervalMs },
    logger.child({ component: "upstream" }),
    () => store.tryLease(`monitor:${config.nodeId}`, leaseHolder, 3 * config.monitorIntervalMs),
  );
  const server = new Server({
    // Find dead peers: ping after a minute of silence, give up after 20 s without an answer.
    "grpc.keepalive_time_ms": 60_000,
    "grpc.keepalive_timeout_ms": 20_000,
    // Rotate connections hourly, so long-lived streams move between servers; clients resume.
    "grpc.max_connection_age_ms": 60 * 60 * 1000,
    "grpc.max_connection_age_grace_ms": 5 * 60 * 1000,
    "grpc.max_receive_message_length": config.maxRequestBytes,
    // Nothing serves channelz here, and its per-call bookkeeping costs CPU on every call.
    "grpc.enable_channelz": 0,
  });
  edge = new RpcEdge(server, logger.child({ component: "rpc" }), {
    authenticate: tokens === undefined ? undefined : (token) => tokens.authenticate(token),
    maxStreamsPerConnection: config.maxStreamsPerConnection,
    maxStreams: config.maxStreams,
    observe: (method, code, seconds) => metrics.observeCall(method, code, seconds),
  });
  const services = [SignalLog, Watch, Reconcile, Upstream];
  const health = new HealthState(services.map((service) => service.typeName));
  edge.addService(SignalLog, signalLogHandlers({ store, clock, retention, metrics, log: logger.child({ component: "rpc" }) }));
  edge.addService(Watch, watchHandlers({ store, hub, clock, metrics }));
  edge.addService(Reconcile, reconcileHandlers({ store, statusCacheBytes: config.statusCacheBytes, metrics }));
  edge.addService(Upstream, upstreamHandlers({ store, monitor, activity, clock, transcriptRoot: config.transcriptRoot }));
  edge.addService(Health, health.handlers(), { isPublic: true });
  addReflection(server, [
    file_sessionstate_v1_signal_log,
    file_sessionstate_v1_watch,
    file_sessionstate_v1_reconcile,
    file_sessionstate_v1_upstream,
    file_grpc_health_v1_health,
  ]);

  let port: number;
  let metricsServer: Awaited<ReturnType<typeof serveMetrics>> | undefined;
  try {
    port = await new Promise<number>((resolve, reject) => {
      server.bindAsync(formatHostPort(config.listenHost, config.listenPort), credentialsOf(config), (err, bound) =>
        err === null ? resolve(bound) : reject(err),
      );
    });
    if (config.metricsListen !== undefined) {
      metricsServer = await serveMetrics(metrics, config.metricsListen.host, config.metricsListen.port);
    }
  } catch (err) {
    server.forceShutdown();
    hub.stop();
    await store.close();
    throw err;
  }
  if (!isLoopbackHost(config.listenHost) && (config.tls === undefined || tokens === undefined)) {
    log.warn(
      { address: config.listenHost, tls: config.tls !== undefined, auth: tokens !== undefined },
      "INSECURE: serving a non-loopback address without TLS and authentication (--insecure-bind)",
    );
  }

  let stopping = false;
  /** Serving: health SERVING and calls taken, or NOT_SERVING and calls refused at once. */
  const setServing = (serving: boolean): void => {
    health.setServing(serving);
    edge.setAvailable(serving);
  };
  // On PostgreSQL health follows the database: NOT_SERVING while it does not answer, SERVING once it does.
  const unfollow = postgres?.onReachabilityChange((reachable) => {
    if (stopping || !databaseReady) return;
    setServing(reachable);
    if (reachable) log.info("database reachable again: serving");
    else log.error("database unreachable: not serving");
  });
  /** Jobs that need the database run once it has answered. */
  const startJobs = async (): Promise<void> => {
    // Events past retention are gone before the first call is answered.
    await retention.start(config.pruneIntervalMs);
    monitorJob.start();
  };
  if (databaseReady) {
    setServing(true);
    await startJobs();
  } else {
    setServing(false);
    void (async () => {
      for (let attempt = 0; !stopping; attempt++) {
        await pause(Math.min(startRetryMostMs, startRetryFirstMs * 2 ** attempt) * (0.5 + Math.random() / 2));
        if (stopping) return;
        try {
          await postgres!.start();
        } catch (err) {
          if (storeFaultOf(err) === "unreachable") continue;
          log.fatal({ err }, "opening the database failed");
          onFatal?.(err);
          return;
        }
        if (stopping) return;
        databaseReady = true;
        setServing(postgres!.isReachable);
        log.info("database reachable: serving");
        await startJobs();
        return;
      }
    })();
  }
  const address = formatHostPort(config.listenHost, port);
  log.info(
    {
      address,
      db: dbDescription,
      nodeId: config.nodeId,
      durability: config.durability,
      tls: config.tls === undefined ? "off" : config.tls.clientCaPem === undefined ? "on" : "mutual",
      auth: tokens === undefined ? "off" : "tokens",
      metricsPort: metricsServer?.port,
    },
    databaseReady ? "serving" : "listening; not serving until the database answers",
  );

  let closing: Promise<void> | undefined;
  const close = async (): Promise<void> => {
    const stopByMs = performance.now() + stopBudgetMs;
    const remainingMs = (): number => Math.max(0, stopByMs - performance.now());
    stopping = true;
    unfollow?.();
    setServing(false);
    edge.shutDownCalls();
    await edge.drainUnaryCalls(callGraceMs);
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        log.warn({ graceMs: connectionGraceMs }, "connections still open after the calls were answered; closing them");
        server.forceShutdown();
        resolve();
      }, connectionGraceMs);
      timer.unref();
      server.tryShutdown(() => {
        clearTimeout(timer);
        resolve();
      });
    });
    hub.stop();
    await settleWithin(remainingMs(), monitorJob.stop());
    await settleWithin(remainingMs(), retention.stop());
    // Another replica may take this one's jobs at once rather than after the leases expire.
    if (postgres?.isReachable === true) {
      await settleWithin(
        Math.min(remainingMs(), 1000),
        postgres.releaseLeases(leaseHolder).catch((err: unknown) => log.warn({ err }, "releasing job leases failed")),
      );
    }
    if (metricsServer !== undefined) {
      const http = metricsServer.server;
      await new Promise<void>((resolve) => {
        http.close(() => resolve());
        http.closeAllConnections();
      });
    }
    if (postgres !== undefined) await postgres.close(remainingMs());
    else await store.close();
    log.info("stopped");
  };
  return {
    port,
    address,
    metricsPort: metricsServer?.port,
    openStreams: () => edge.openStreams,
    reloadTokens: () => {
      if (tokens === undefined) return 0;
      return tokens.reload();
    },
    close: () => (closing ??= close()),
  };
}
