import { randomUUID } from "node:crypto";
import { isIP } from "node:net";
import { checkServerIdentity, type PeerCertificate } from "node:tls";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { Client, credentials, status as GrpcStatus, type ChannelCredentials } from "@grpc/grpc-js";
import { Reconcile } from "./gen/sessionstate/v1/reconcile_pb.js";
import { SignalLog, type AppendRequestSchema, type AppendResponse } from "./gen/sessionstate/v1/signal_log_pb.js";
import { Upstream } from "./gen/sessionstate/v1/upstream_pb.js";
import { Watch, type AckResult, type StaleNotice } from "./gen/sessionstate/v1/watch_pb.js";
import { AppendCoalescer, defaultAppendRetry, defaultMaxBatchBytes, type AppendOptions, type AppendRetry } from "./append-coalescer.js";
import { registerServingRoundRobin, servingRoundRobin } from "./serving-balancer.js";
import { createServiceClient } from "./service-client.js";
import type { CallError, CallOptions } from "./service-types.js";

/**
 * Where the client reports what it does not throw (failed best-effort appends). Pino, bunyan and
 * winston loggers fit; `console` needs a wrapper (see `consoleLogger`).
 */
export interface ClientLogger {
  warn(details: Record<string, unknown>, message: string): void;
}

/** Warnings on standard error through `console.warn`: the default. */
export const consoleLogger: ClientLogger = {
  warn: (details, message) => console.warn(`sessionstate-client: ${message}`, details),
};

/** Reports nothing. */
export const silentLogger: ClientLogger = { warn: () => {} };

/** How the client reaches the service. */
export interface ClientOptions {
  /**
   * Where the service is: any gRPC target. One `host:port`; several replicas as
   * `ipv4:127.0.0.1:5001,127.0.0.1:5002`; or `dns:///name:port` for every address a name resolves to.
   * Calls are spread round-robin over the replicas that answer; a dead one is skipped.
   */
  address: string;
  /** Bearer token, sent as `authorization: Bearer <token>` on every call. */
  token?: string | undefined;
  /**
   * The namespace every call is in (sent as `sessionstate-namespace` metadata): gateways sharing one
   * service keep their sessions apart this way. Default: the server's `default`.
   */
  namespace?: string;
  /** TLS: `true` trusts the system roots; or give a CA (and a client certificate for mutual TLS). */
  tls?: true | { caPem?: Uint8Array; certPem?: Uint8Array; keyPem?: Uint8Array };
  /** Deadline of every call that sets none, in ms. Default 10 s. */
  defaultTimeoutMs?: number;
  /**
   * Largest coalesced AppendBatch request, in bytes: keep it at or below the server's request limit
   * (`--max-request-bytes`, default 1 MiB). Default 1 MiB.
   */
  maxBatchBytes?: number;
  /** Resending appends answered UNAVAILABLE (a replica died): default up to 4 times, within each deadline. */
  appendRetry?: AppendRetry;
  /** Where failures of best-effort calls are logged. Default: `consoleLogger` (warnings on standard error). */
  logger?: ClientLogger;
}

/**
 * Reconnect backoff of `subscribe`: full jitter, exponential from `initialMs` (default 100 ms) up to `maxMs`
 * (default 1 s, so that a subscriber is back within about a second of a replica serving again).
 */
export interface BackoffOptions {
  initialMs?: number;
  maxMs?: number;
}

/** What to subscribe to. */
export interface SubscribeOptions {
  /** Exact watcher keys. */
  watchers?: readonly string[];
  /** Watcher key prefixes, for example `agent:main:`. */
  prefixes?: readonly string[];
  /**
   * A consumer group to join (1-128 characters of A-Z, a-z, 0-9, `.`, `_`, `:`, `-`): the processes of one
   * gateway that subscribe with the same group get each notice once between them, one at a time (the
   * notice's `claimId` and `deliveryCount` are set); `release` gives back one this process cannot take.
   */
  group?: string;
  /** With `group`: the most notices this process holds at once (1-1000; default 16). */
  maxInFlight?: number;
  /** Ends the subscription. */
  signal?: AbortSignal;
  backoff?: BackoffOptions;
  /** Called when each (re)connection's stream starts answering (its first message, a notice or `synced`). */
  onConnected?: () => void;
  /** Called after each (re)connection once the pending notices have been delivered. */
  onSynced?: (pendingDelivered: number) => void;
  /** Called before each reconnect attempt with the failure and the delay. */
  onReconnect?: (error: CallError, delayMs: number) => void;
}

/**
 * Calls resent when a replica answers UNAVAILABLE (it is stopping, or cannot reach its database): reads,
 * and writes whose repetition changes nothing more (a watch, an unwatch, an ack, an adoption, a page of
 * remote items). Appends are resent by the client itself, always with a dedupe key (see `append`).
 */
const retryOnUnavailable = {
  name: [
    { service: "sessionstate.v1.Reconcile" },
    { service: "sessionstate.v1.Watch", method: "Watch" },
    { service: "sessionstate.v1.Watch", method: "Unwatch" },
    { service: "sessionstate.v1.Watch", method: "ListWatches" },
    { service: "sessionstate.v1.Watch", method: "AckNotices" },
    { service: "sessionstate.v1.Upstream", method: "Adopt" },
    { service: "sessionstate.v1.Upstream", method: "ReportRemoteItems" },
    { service: "sessionstate.v1.Upstream", method: "ListUpstreamLinks" },
  ],
  retryPolicy: { maxAttempts: 4, initialBackoff: "0.05s", maxBackoff: "0.5s", backoffMultiplier: 2, retryableStatusCodes: ["UNAVAILABLE"] },
};

/** Codes after which reconnecting cannot help. */
const finalCodes = new Set([
  GrpcStatus.INVALID_ARGUMENT,
  // A request the server refuses for its own state (an older server that serves no consumer groups).
  GrpcStatus.FAILED_PRECONDITION,
  GrpcStatus.UNAUTHENTICATED,
  GrpcStatus.PERMISSION_DENIED,
  GrpcStatus.UNIMPLEMENTED,
]);

/**
 * The host a target names first (its authority's host): `host:port`, `[v6]:port`, a `dns:`, `ipv4:` or
 * `ipv6:` target, or a list of addresses, as grpc-js takes them.
 */
export function targetHost(address: string): string {
  const first = address.replace(/^dns:(\/\/[^/]*\/)?/u, "").replace(/^ipv[46]:/u, "").split(",")[0]!;
  const match = /^\[([^\]]+)\](?::\d+)?$/u.exec(first) ?? /^([^:]+)(?::\d+)?$/u.exec(first);
  return match?.[1] ?? first;
}

/**
 * The TLS server name sent to a server named by its IP address. TLS names no IP address in SNI (RFC 6066),
 * and Node 26 refuses to (grpc-js passes the target's host as the server name): a name under `.invalid`
 * (RFC 2606), which no real name can be, says "no name"; the certificate is checked against the IP address
 * itself (its IP subjectAltName), as before.
 */
export const ipTargetServerName = "ip-address.invalid";

/** TLS credentials, and for a target named by IP address the channel option that keeps the IP out of SNI. */
function channelSecurity(tls: ClientOptions["tls"], address: string): { credentials: ChannelCredentials; options: Record<string, string> } {
  if (tls === undefined) return { credentials: credentials.createInsecure(), options: {} };
  const host = targetHost(address);
  const byIp = isIP(host) !== 0;
  const verify = byIp ? { checkServerIdentity: (_name: string, cert: PeerCertificate) => checkServerIdentity(host, cert) } : {};
  const options: Record<string, string> = byIp ? { "grpc.ssl_target_name_override": ipTargetServerName } : {};
  if (tls === true) return { credentials: credentials.createSsl(null, null, null, verify), options };
  const buffer = (pem: Uint8Array | undefined): Buffer | null => (pem === undefined ? null : Buffer.from(pem));
  return { credentials: credentials.createSsl(buffer(tls.caPem), buffer(tls.keyPem), buffer(tls.certPem), verify), options };
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted === true) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

/**
 * The client a gateway uses: one channel, typed clients of the four services, a best-effort append that
 * never breaks a turn, and a self-healing notice subscription. Call `close()` when done.
 */
export class SessionStateClient {
  readonly signalLog;
  readonly watch;
  readonly reconcile;
  readonly upstream;
  private readonly channel: Client;
  private readonly logger: ClientLogger;
  private readonly coalescer: AppendCoalescer;
  private readonly defaultTimeoutMs: number;

  constructor(options: ClientOptions) {
    registerServingRoundRobin();
    const security = channelSecurity(options.tls, options.address);
    this.channel = new Client(options.address, security.credentials, {
      ...security.options,
      "grpc.keepalive_time_ms": 60_000,
      "grpc.keepalive_timeout_ms": 20_000,
      // Every replica a target names, round-robin over those whose health says SERVING; calls that are
      // safe to repeat are resent (to the next replica) when one answers UNAVAILABLE.
      "grpc.service_config": JSON.stringify({ loadBalancingConfig: [{ [servingRoundRobin]: {} }], methodConfig: [retryOnUnavailable] }),
      // A server or replica that comes back is found within a second (grpc-js backs off up to 2 minutes by
      // default), as `subscribe` is back within a second: its streams resume within SPEC §11's 3 s of it
      // serving again, and it is there to take over when another one dies.
      "grpc.initial_reconnect_backoff_ms": 100,
      "grpc.max_reconnect_backoff_ms": 1000,
    });
    const metadata: Record<string, string> = {};
    if (options.token !== undefined) metadata.authorization = `Bearer ${options.token}`;
    if (options.namespace !== undefined) metadata["sessionstate-namespace"] = options.namespace;
    const defaults: CallOptions = { timeoutMs: options.defaultTimeoutMs ?? 10_000, metadata };
    this.signalLog = createServiceClient(this.channel, SignalLog, defaults);
    this.watch = createServiceClient(this.channel, Watch, defaults);
    this.reconcile = createServiceClient(this.channel, Reconcile, defaults);
    this.upstream = createServiceClient(this.channel, Upstream, defaults);
    this.defaultTimeoutMs = options.defaultTimeoutMs ?? 10_000;
    this.coalescer = new AppendCoalescer(
      ({ appends, deadlineMs, signal }) =>
        this.signalLog.appendBatch(
          { appends },
          { timeoutMs: deadlineMs === undefined ? undefined : Math.max(0, deadlineMs - Date.now()), signal },
        ),
      () => Date.now(),
      options.maxBatchBytes ?? defaultMaxBatchBytes,
      options.appendRetry ?? defaultAppendRetry,
    );
    this.logger = options.logger ?? consoleLogger;
  }

  /**
   * Appends an event. Appends made in the same turn of the event loop travel together in one
   * AppendBatch call (one round trip, one commit; split by count and by `maxBatchBytes`); each still
   * resolves to its own AppendResponse or rejects with its own status, as `signalLog.append` would, and
   * keeps its own deadline (default: the client's) and signal. An append without a dedupe key gets a
   * random one, so that resending it after UNAVAILABLE (to another replica) can never record it twice.
   */
  append(request: MessageInitShape<typeof AppendRequestSchema>, options: AppendOptions = {}): Promise<AppendResponse> {
    const keyed = request.dedupeKey === undefined || request.dedupeKey === "" ? { ...request, dedupeKey: `client:${randomUUID()}` } : request;
    return this.coalescer.append(keyed, { timeoutMs: options.timeoutMs ?? this.defaultTimeoutMs, ...(options.signal === undefined ? {} : { signal: options.signal }) });
  }

  /**
   * Appends an event without ever throwing: on any failure (server down, deadline, refusal) it logs a
   * warning and resolves to `undefined`, within `timeoutMs` (default 2 s). Recording a signal must never
   * break the turn that caused it.
   */
  async appendBestEffort(
    request: MessageInitShape<typeof AppendRequestSchema>,
    { timeoutMs = 2000 }: { timeoutMs?: number } = {},
  ): Promise<AppendResponse | undefined> {
    try {
      return await this.append(request, { timeoutMs });
    } catch (err) {
      const error = err as Partial<CallError>;
      this.logger.warn(
        { code: error.code === undefined ? undefined : GrpcStatus[error.code], details: error.details, session: request.session?.key },
        "sessionstate append failed; the turn goes on",
      );
      return undefined;
    }
  }

  /**
   * Streams stale notices for the given watchers as an async iterator. On a broken stream it reconnects
   * with jittered exponential backoff and resumes: notices still pending are delivered again (the same
   * text), so consumers should act on a notice and then `ack` it. Refusals that a retry cannot fix
   * (INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED) end the iteration with that error.
   */
  async *subscribe(options: SubscribeOptions): AsyncGenerator<StaleNotice, void, undefined> {
    const initialMs = options.backoff?.initialMs ?? 100;
    const maxMs = options.backoff?.maxMs ?? 1000;
    const aborted = (): boolean => options.signal?.aborted === true;
    let attempt = 0;
    while (!aborted()) {
      const call = this.watch.subscribeStaleNotices(
        {
          watcherSessionKeys: [...(options.watchers ?? [])],
          watcherKeyPrefixes: [...(options.prefixes ?? [])],
          consumerGroup: options.group ?? "",
          maxInFlight: options.maxInFlight ?? 0,
        },
        // A stream lives until cancelled: no deadline.
        { timeoutMs: undefined, ...(options.signal === undefined ? {} : { signal: options.signal }) },
      );
      try {
        let connected = false;
        for await (const message of call) {
          if (!connected) {
            connected = true;
            options.onConnected?.();
          }
          if (message.message.case === "synced") {
            attempt = 0;
            options.onSynced?.(message.message.value.pendingDelivered);
          } else if (message.message.case === "notice") {
            yield message.message.value;
          }
        }
      } catch (err) {
        const error = err as CallError;
        if (aborted()) return;
        if (finalCodes.has(error.code)) throw err;
        const delayMs = Math.random() * Math.min(maxMs, initialMs * 2 ** attempt++);
        options.onReconnect?.(error, delayMs);
        await sleep(delayMs, options.signal);
        continue;
      } finally {
        call.cancel();
      }
      // The server ended the stream normally (it should not): reconnect after a pause.
      await sleep(Math.random() * Math.min(maxMs, initialMs * 2 ** attempt++), options.signal);
    }
  }

  /**
   * Acknowledges a consumed notice. Pass `reconciledThrough` (the state version you caught up to with
   * SessionStatus) to avoid a second notice for changes you already saw.
   */
  async ack(notice: StaleNotice, { reconciledThrough }: { reconciledThrough?: bigint } = {}): Promise<AckResult> {
    const response = await this.watch.ackNotices({
      acks: [
        {
          watcherSessionKey: notice.watcherSessionKey,
          target: notice.target,
          notifiedVersion: notice.notifiedVersion,
          ...(reconciledThrough === undefined ? {} : { reconciledThrough }),
        },
      ],
    });
    return response.results[0]!;
  }

  /**
   * Gives back consumer-group notices this process cannot take (their `claimId`s): each goes to another
   * member of the group at once. One answer per notice: false when it was not held any more (acknowledged,
   * or handed on when this process's stream ended).
   */
  async release(notices: readonly Pick<StaleNotice, "claimId">[]): Promise<boolean[]> {
    return (await this.watch.releaseNotices({ claimIds: notices.map((notice) => notice.claimId) })).released;
  }

  /** Closes the channel; open streams end. */
  close(): void {
    this.channel.close();
  }
}
