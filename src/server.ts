import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { Server, ServerCredentials, setLogger as setGrpcLogger } from "@grpc/grpc-js";
import { file_grpc_health_v1_health, Health } from "../gen/grpc/health/v1/health_pb.js";
import { file_sessionstate_v1_reconcile, Reconcile } from "../gen/sessionstate/v1/reconcile_pb.js";
import { file_sessionstate_v1_signal_log, SignalLog } from "../gen/sessionstate/v1/signal_log_pb.js";
import { file_sessionstate_v1_upstream, Upstream } from "../gen/sessionstate/v1/upstream_pb.js";
import { file_sessionstate_v1_watch, Watch } from "../gen/sessionstate/v1/watch_pb.js";
import { systemClock, type Clock } from "./clock.js";
import { formatHostPort, httpAddress, isLoopbackHost, type Config } from "./config.js";
import type { Logger } from "./logger.js";
import { Metrics, serveMetrics } from "./metrics.js";
import { NoticeHub } from "./notices/notice-hub.js";
import { SharedClaims } from "./notices/shared-claims.js";
import { HealthState } from "./rpc/health.js";
import { addReflection } from "./rpc/reflection.js";
import { AddressInUseError, ensureAddressFree } from "./ports.js";
import { defaultHttpLimits, startHttpPort, type HttpLimits, type HttpPort } from "./rpc/http-port.js";
import { requestLogger } from "./rpc/request-log.js";
import { RpcEdge } from "./rpc/rpc-edge.js";
import { TokenRegistry } from "./rpc/tokens.js";
import { reconcileHandlers } from "./services/reconcile.js";
import { signalLogHandlers } from "./services/signal-log.js";
import { upstreamHandlers } from "./services/upstream.js";
import { watchHandlers } from "./services/watch.js";
import { settleWithin } from "./settle-within.js";
import { Retention, type RetentionSettings } from "./jobs/retention.js";
import { MonitorJob } from "./jobs/monitor-job.js";
import { openStore, type OpenedStore, type StoreLifecycle } from "./store/backends/open-store.js";
import type { StorageObserver } from "./store/storage-tracker.js";
import type { CommitObserver, Store } from "./store/store.js";
import { SessionActivity } from "./upstream/session-activity.js";
import { UpstreamMonitor } from "./upstream/upstream-monitor.js";
import { ActivityByMinute } from "./activity-by-minute.js";
import { packageVersion } from "./command-line.js";
import type { ServerFacts } from "./services/server-info.js";
import { loadConsoleFiles } from "./rpc/console-files.js";
import { hostPolicyFor } from "./rpc/allowed-hosts.js";
import { hookEndpoint } from "./rpc/hook-endpoint.js";
import { HookScans } from "./upstream/hook-scans.js";
import { HookCalls } from "./upstream/hook-calls.js";
import { networkInterfaces } from "node:os";

const dayMs = 24 * 60 * 60 * 1000;
/** The rows of a retention step: the first of a run, and the bounds it is sized within (its time is the backend's). */
const pruneStepRows: RetentionSettings["stepRows"] = { first: 1000, min: 100, max: 50_000 };
const firstMonitorTickMs = 15_000;
/**
 * A graceful stop ends within `stopBudgetMs` whatever the database does (SPEC §11: 5 s): calls in flight
 * get `callGraceMs` to finish and are then answered UNAVAILABLE; the store closes in what is left.
 */
const stopBudgetMs = 4500;
const callGraceMs = 1500;
/** Connections still open after the calls are answered are cut after this. */
const connectionGraceMs = 500;

/** A running server. Whoever started it must `close()` it. */
export interface RunningServer {
  /** The port actually bound (useful with port 0). */
  readonly port: number;
  /** `host:port` as bound. */
  readonly address: string;
  /** The metrics listener's port, when metrics are on. */
  readonly metricsPort: number | undefined;
  /** The HTTP port's `host:port` as bound (Connect, gRPC-Web, the console), unless it is off. */
  readonly httpAddress: string | undefined;
  /** The names the HTTP port answers to (`Host`), as `host:port`, or a bare configured name (any port). */
  readonly httpHostNames: readonly string[];
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
  /** For tests: tighter bounds of the HTTP port (its timeouts, its connections). */
  httpLimits?: Partial<HttpLimits>;
  /**
   * Called when the server cannot go on serving and should stop (a replica that found, once its database
   * answered, a schema newer than it knows). Without it, such an error is only logged.
   */
  onFatal?: (error: unknown) => void;
  /** Told once, in a person's words, when a replica starts without its database and waits for it. */
  onWaiting?: (line: string) => void;
}

function credentialsFromConfig(config: Config): ServerCredentials {
  const tls = config.tls;
  if (tls === undefined) return ServerCredentials.createInsecure();
  return ServerCredentials.createSsl(
    tls.clientCaPem ?? null,
    [{ private_key: tls.keyPem, cert_chain: tls.certPem }],
    tls.clientCaPem !== undefined,
  );
}


/** The storage observer of the stores: the gauge, the refusal count and one log line per change. */
function storageObserver(storeLog: Logger, metrics: () => Metrics | undefined): StorageObserver {
  return {
    fullChanged: (full) => {
      metrics()?.storageFull.set(full ? 1 : 0);
      if (full) storeLog.error("storage is full: writes are refused until space is freed");
      else storeLog.info("storage is writable again");
    },
    refused: () => metrics()?.storageRefusals.inc(),
  };
}

/** The jobs of one process: retention and the upstream monitor's ticks, each under its lease. */
interface Jobs {
  retention: Retention;
  activity: SessionActivity;
  monitor: UpstreamMonitor;
  monitorJob: MonitorJob;
  /** The scans the CLIs' hooks ask for (SPEC §8.2), and the calls that asked. */
  hookScans: HookScans;
  hookCalls: HookCalls;
}

function createJobs(
  config: Config,
  opened: OpenedStore,
  parts: { clock: Clock; logger: Logger; metrics: Metrics; activityByMinute: ActivityByMinute; leaseHolder: string },
): Jobs {
  const { clock, logger, metrics, activityByMinute, leaseHolder } = parts;
  const { store } = opened;
  const retention = new Retention(
    store,
    clock,
    { retentionMs: config.retentionDays * dayMs, maxEvents: config.maxEvents, stepTargetMs: opened.tuning.pruneStepTargetMs, stepRows: pruneStepRows },
    logger.child({ component: "retention" }),
    metrics,
    () => store.tryLease("retention", leaseHolder, 2 * config.pruneIntervalMs),
  );
  const activity = new SessionActivity(store, clock);
  const monitor = new UpstreamMonitor(
    store,
    activity,
    clock,
    { maxLineBytes: config.maxLineBytes, syntheticPrefixes: config.syntheticPrefixes },
    logger.child({ component: "upstream" }),
    metrics,
    (namespace, noticesOpened) => {
      activityByMinute.count(namespace, "appends");
      activityByMinute.count(namespace, "noticesOpened", noticesOpened);
    },
  );
  const monitorJob = new MonitorJob(
    monitor,
    { firstDelayMs: Math.min(firstMonitorTickMs, config.monitorIntervalMs), intervalMs: config.monitorIntervalMs },
    logger.child({ component: "upstream" }),
    () => store.tryLease(`monitor:${config.nodeId}`, leaseHolder, 3 * config.monitorIntervalMs),
  );
  const hookLog = logger.child({ component: "hooks" });
  const hookScans = new HookScans(store, monitor, activity, hookLog, metrics);
  const hookCalls = new HookCalls({ store, scans: hookScans, clock, transcriptRoot: config.transcriptRoot, log: hookLog, metrics });
  return { retention, activity, monitor, monitorJob, hookScans, hookCalls };
}

/** The gRPC server with every service on the edge, health and reflection; not bound yet. */
function createGrpcServer(
  config: Config,
  parts: {
    store: Store;
    hub: NoticeHub;
    jobs: Jobs;
    clock: Clock;
    metrics: Metrics;
    tokens: TokenRegistry | undefined;
    logger: Logger;
    facts: ServerFacts;
  },
): { server: Server; edge: RpcEdge; health: HealthState } {
  const { store, hub, jobs, clock, metrics, tokens, logger, facts } = parts;
  const { activityByMinute } = facts;
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
  const logCall = requestLogger(logger.child({ component: "requests" }));
  const edge = new RpcEdge(server, logger.child({ component: "rpc" }), {
    authenticate: tokens === undefined ? undefined : (token) => tokens.authenticate(token),
    maxStreamsPerConnection: config.maxStreamsPerConnection,
    maxStreams: config.maxStreams,
    observe: (call) => {
      metrics.observeCall(call.method, call.code, call.seconds, call.protocol);
      logCall(call);
    },
  });
  const services = [SignalLog, Watch, Reconcile, Upstream];
  const health = new HealthState(services.map((service) => service.typeName));
  edge.addService(
    SignalLog,
    signalLogHandlers({ store, clock, retention: jobs.retention, metrics, log: logger.child({ component: "rpc" }), activityByMinute }),
  );
  edge.addService(Watch, watchHandlers({ store, hub, clock, metrics, activityByMinute }));
  edge.addService(Reconcile, reconcileHandlers({ store, statusCacheBytes: config.statusCacheBytes, metrics, server: facts }), {
    everyNamespace: ["listNamespaces"],
  });
  edge.addService(Upstream, upstreamHandlers({
      store,
      monitor: jobs.monitor,
      activity: jobs.activity,
      hookScans: jobs.hookScans,
      clock,
      transcriptRoot: config.transcriptRoot,
      maxLineBytes: config.maxLineBytes,
      syntheticPrefixes: config.syntheticPrefixes,
      activityByMinute,
    }));
  edge.addService(Health, health.handlers(), { isPublic: true });
  addReflection(server, [
    file_sessionstate_v1_signal_log,
    file_sessionstate_v1_watch,
    file_sessionstate_v1_reconcile,
    file_sessionstate_v1_upstream,
    file_grpc_health_v1_health,
  ]);
  return { server, edge, health };
}

type MetricsServer = Awaited<ReturnType<typeof serveMetrics>>;

/**
 * Binds the gRPC address, then the metrics listener when configured. An address taken since it was found
 * free is an AddressInUseError too.
 */
async function listen(server: Server, config: Config, metrics: Metrics): Promise<{ port: number; metricsServer: MetricsServer | undefined }> {
  const address = formatHostPort(config.listenHost, config.listenPort);
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(address, credentialsFromConfig(config), (err, bound) =>
      err === null ? resolve(bound) : reject(/EADDRINUSE|address already in use/iu.test(err.message) ? new AddressInUseError("--listen", address, { cause: err }) : err),
    );
  });
  let metricsServer: MetricsServer | undefined;
  if (config.metricsListen !== undefined) {
    const { host, port: metricsPort } = config.metricsListen;
    metricsServer = await serveMetrics(metrics, host, metricsPort).catch((err: unknown) => {
      throw (err as NodeJS.ErrnoException).code === "EADDRINUSE" ? new AddressInUseError("--metrics-listen", formatHostPort(host, metricsPort), { cause: err }) : err;
    });
  }
  return { port, metricsServer };
}

/** Closes an HTTP server and every connection it holds. */
function closeHttp(http: MetricsServer["server"]): Promise<void> {
  return new Promise<void>((resolve) => {
    http.close(() => resolve());
    http.closeAllConnections();
  });
}

/** Lets the gRPC server's connections close by themselves for `connectionGraceMs`, then cuts them. */
function shutDownTransport(server: Server, log: Logger): Promise<void> {
  return new Promise<void>((resolve) => {
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
}

/**
 * Health and the edge follow the database (SPEC §11): a database that answered serves at once and starts
 * the jobs; one that did not is tried again in the background, and serves and starts the jobs once it
 * answers. On PostgreSQL, SERVING and NOT_SERVING then follow its reachability. `stop()` ends all of it.
 */
function followDatabase(
  lifecycle: StoreLifecycle,
  hooks: { setServing: (serving: boolean) => void; startJobs: () => void; log: Logger; onFatal: ((error: unknown) => void) | undefined },
): { stop(): void } {
  const { setServing, startJobs, log } = hooks;
  let stopping = false;
  const unfollow = lifecycle.onReachabilityChange((reachable) => {
    if (stopping || !lifecycle.ready) return;
    setServing(reachable);
    if (reachable) log.info("database reachable again: serving");
    else log.error("database unreachable: not serving");
  });
  const wasReady = lifecycle.ready;
  if (!wasReady) setServing(false);
  lifecycle.whenReady(
    () => {
      if (stopping) return;
      setServing(lifecycle.reachable);
      if (!wasReady) log.info("database reachable: serving");
      startJobs();
    },
    (err) => {
      log.fatal({ err }, "opening the database failed");
      hooks.onFatal?.(err);
    },
  );
  return {
    stop: () => {
      stopping = true;
      unfollow();
    },
  };
}

/**
 * The graceful stop, within `stopBudgetMs` whatever the database does (SPEC §11): health NOT_SERVING, new
 * calls refused and streams ended with UNAVAILABLE, unary calls given `callGraceMs`, connections closed,
 * jobs stopped, leases given up, the metrics listener and the store closed.
 */
async function stopGracefully(parts: {
  server: Server;
  edge: RpcEdge;
  health: HealthState;
  hub: NoticeHub;
  jobs: Jobs;
  lifecycle: StoreLifecycle;
  metricsServer: MetricsServer | undefined;
  httpPort: HttpPort | undefined;
  leaseHolder: string;
  log: Logger;
}): Promise<void> {
  const { server, edge, health, hub, jobs, lifecycle, metricsServer, httpPort, leaseHolder, log } = parts;
  const stopByMs = performance.now() + stopBudgetMs;
  const remainingMs = (): number => Math.max(0, stopByMs - performance.now());
  // Health first: clients' health watches hear NOT_SERVING (and send nothing more here) before those streams
  // are ended. Their handlers write it in the microtasks that follow, so the streams are ended a turn of the
  // event loop later (ended at once, they never said it, and a client's balancer went on sending calls
  // here). Then calls and streams are told the server is stopping (not that the database is away).
  health.setServing(false);
  await new Promise<void>((resolve) => setImmediate(resolve));
  edge.shutDownCalls();
  await Promise.all([edge.drainUnaryCalls(callGraceMs), httpPort?.close(callGraceMs)]);
  await shutDownTransport(server, log);
  hub.stop();
  await settleWithin(remainingMs(), Promise.all([jobs.hookScans.stop(), jobs.monitorJob.stop()]));
  await settleWithin(remainingMs(), jobs.retention.stop());
  // Another replica may take this one's jobs, and its members' claims, at once rather than after the leases expire.
  const claimsGiven = hub.claims.stop().catch((err: unknown) => log.warn({ err }, "handing on consumer groups' claims failed"));
  if (lifecycle.reachable) {
    await settleWithin(
      Math.min(remainingMs(), 1000),
      Promise.all([claimsGiven, lifecycle.releaseLeases(leaseHolder).catch((err: unknown) => log.warn({ err }, "releasing job leases failed"))]),
    );
  }
  if (metricsServer !== undefined) await closeHttp(metricsServer.server);
  await lifecycle.close(remainingMs());
  log.info("stopped");
}

/**
 * Opens the database, builds the services and starts serving. Throws `DatabaseInUseError` when another
 * process owns the database, and the bind error when the address is taken. On PostgreSQL, a database
 * that cannot be reached does not stop it: it serves health (NOT_SERVING), refuses other calls with
 * UNAVAILABLE and keeps trying (SPEC §11); any other failure to open the database is thrown.
 */
export async function startServer(config: Config, { logger, clock = systemClock, onStoreOpened, onFatal, onWaiting, httpLimits }: ServerOptions): Promise<RunningServer> {
  const startedAtMs = clock.nowMs();
  const log = logger.child({ component: "server" });
  // grpc-js's own messages (errors only, by default) as JSON lines like every other, not bare text.
  const grpcLog = logger.child({ component: "grpc-js" });
  setGrpcLogger({ error: (...parts: unknown[]) => grpcLog.warn(parts.map(String).join(" ")) });
  const tokens = config.tokensFile === undefined ? undefined : new TokenRegistry(config.tokensFile);
  // The store may report full storage before the metrics exist: it reaches them through this.
  let metrics: Metrics | undefined;
  const commits: CommitObserver = {
    committed: (seconds, _writes, waitedSeconds) => {
      metrics?.storeCommit.observe(seconds);
      metrics?.storeWriteWait.observe(waitedSeconds);
    },
  };
  // Nothing is opened or created before the addresses are known to be free.
  await ensureAddressFree("--listen", config.listenHost, config.listenPort);
  if (config.metricsListen !== undefined) await ensureAddressFree("--metrics-listen", config.metricsListen.host, config.metricsListen.port);
  const http = httpAddress(config);
  if (http !== undefined) await ensureAddressFree("--http-listen", http.host, http.port);
  const storeLog = logger.child({ component: "store" });
  const opened = await openStore(config, { clock, log: storeLog, storage: storageObserver(storeLog, () => metrics), commits, ...(onWaiting === undefined ? {} : { waiting: onWaiting }) });
  const { store, lifecycle } = opened;
  // Until the database is followed (below), it is ready when the first attempt found it.
  onStoreOpened?.(store);
  // Jobs that run on one replica at a time hold a lease; this process is one holder.
  const leaseHolder = `${config.nodeId}/${process.pid}/${randomUUID()}`;
  // The metrics count open streams through the edge, made after them.
  let edge: RpcEdge | undefined;
  const databaseReachable = (): boolean => lifecycle.reachable;
  // A scrape while the database is away answers at once, with the gauges it cannot read left as they were.
  const unlessUnreachable = <T>(read: () => Promise<T>): Promise<T> =>
    databaseReachable() ? read() : Promise.reject(new Error("the database is unreachable"));
  const serverMetrics = new Metrics({
    openStreams: () => edge?.openStreams ?? 0,
    pendingNotices: () => unlessUnreachable(() => store.countPendingNotices()),
    databaseBytes: () => unlessUnreachable(() => store.databaseBytes()),
    databaseReachable,
  });
  metrics = serverMetrics;
  const activityByMinute = new ActivityByMinute(clock);
  const jobs = createJobs(config, opened, { clock, logger, metrics: serverMetrics, activityByMinute, leaseHolder });
  // Replicas keep consumer groups' claims where every replica sees them; SQLite, in this process.
  const sharedClaims =
    opened.claims === undefined ? undefined : new SharedClaims(opened.claims, logger.child({ component: "claims" }), leaseHolder, () => opened.lifecycle.ready);
  sharedClaims?.start();
  const hub = new NoticeHub(store, logger.child({ component: "notices" }), serverMetrics, sharedClaims);
  hub.start();
  const facts: ServerFacts = {
    version: packageVersion(),
    backend: opened.backend,
    nodeId: config.nodeId,
    database: opened.description,
    startedAtMs,
    retentionDays: config.retentionDays,
    maxEvents: config.maxEvents,
    monitorIntervalMs: config.monitorIntervalMs,
    databaseReachable,
    retention: jobs.retention,
    monitor: jobs.monitor,
    hookCalls: jobs.hookCalls,
    activityByMinute,
  };
  const grpc = createGrpcServer(config, { store, hub, jobs, clock, metrics: serverMetrics, tokens, logger, facts });
  const { server, health } = grpc;
  edge = grpc.edge;
  const rpcEdge = grpc.edge;

  let bound: Awaited<ReturnType<typeof listen>>;
  try {
    bound = await listen(server, config, serverMetrics);
  } catch (err) {
    server.forceShutdown();
    hub.stop();
    await store.close();
    throw err;
  }
  const { port, metricsServer } = bound;
  let serving = lifecycle.ready;
  let httpPort: HttpPort | undefined;
  let hostNames: readonly string[] = [];
  if (http !== undefined) {
    try {
      httpPort = await startHttpPort({
        ...http,
        tls: config.tls,
        limits: { ...defaultHttpLimits, maxRequestBytes: config.maxRequestBytes, ...httpLimits },
        routes: (router) => rpcEdge.routes(router),
        serving: () => serving,
        consoleFiles: loadConsoleFiles(),
        hostPolicy: (boundPort) => {
          const policy = hostPolicyFor({
            listenHost: http.host,
            port: boundPort,
            tls: config.tls !== undefined,
            configured: config.httpAllowedHosts,
            interfaceAddresses: Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((entry) => entry.address)),
          });
          hostNames = policy.names;
          return policy;
        },
        refused: (reason) => serverMetrics.httpRefusals.inc({ reason }),
        hooks: hookEndpoint(jobs.hookCalls, tokens === undefined ? undefined : (token) => tokens.authenticate(token)),
      });
    } catch (err) {
      server.forceShutdown();
      if (metricsServer !== undefined) await closeHttp(metricsServer.server);
      hub.stop();
      await store.close();
      throw (err as NodeJS.ErrnoException).code === "EADDRINUSE" ? new AddressInUseError("--http-listen", formatHostPort(http.host, http.port), { cause: err }) : err;
    }
  }
  if (!isLoopbackHost(config.listenHost) && (config.tls === undefined || tokens === undefined)) {
    log.warn(
      { address: config.listenHost, tls: config.tls !== undefined, auth: tokens !== undefined },
      "INSECURE: serving a non-loopback address without TLS and authentication (--insecure-bind)",
    );
  }

  /** Serving: health SERVING and calls taken, or NOT_SERVING and calls refused at once. */
  const setServing = (now: boolean): void => {
    serving = now;
    health.setServing(now);
    rpcEdge.setAvailable(now);
  };
  const database = followDatabase(lifecycle, {
    setServing,
    // Serving comes first: a backlog of retention is worked off in the background, in steps between calls,
    // and every answer stays exact meanwhile (SPEC §4).
    startJobs: () => {
      void jobs.retention.start(config.pruneIntervalMs);
      jobs.monitorJob.start();
    },
    log,
    onFatal,
  });
  const address = formatHostPort(config.listenHost, port);
  log.info(
    {
      address,
      db: opened.description,
      nodeId: config.nodeId,
      durability: config.durability,
      tls: config.tls === undefined ? "off" : config.tls.clientCaPem === undefined ? "on" : "mutual",
      auth: tokens === undefined ? "off" : "tokens",
      metricsPort: metricsServer?.port,
      httpPort: httpPort?.port,
    },
    lifecycle.ready ? "serving" : "listening; not serving until the database answers",
  );

  const close = async (): Promise<void> => {
    database.stop();
    serving = false;
    await stopGracefully({ server, edge: rpcEdge, health, hub, jobs, lifecycle, metricsServer, httpPort, leaseHolder, log });
  };
  let closing: Promise<void> | undefined;
  return {
    port,
    address,
    metricsPort: metricsServer?.port,
    httpAddress: http === undefined || httpPort === undefined ? undefined : formatHostPort(http.host, httpPort.port),
    httpHostNames: hostNames,
    openStreams: () => rpcEdge.openStreams,
    reloadTokens: () => (tokens === undefined ? 0 : tokens.reload()),
    close: () => (closing ??= close()),
  };
}
