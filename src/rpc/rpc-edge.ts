import { create, fromBinary, toBinary, type DescMessage, type DescMethod, type MessageInitShape } from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import {
  status as GrpcStatus,
  type Server,
  type Metadata,
  type ServerUnaryCall,
  type ServerWritableStream,
  type StatusObject,
  type UntypedServiceImplementation,
  type sendUnaryData,
} from "@grpc/grpc-js";
import type { Logger } from "../logger.js";
import { mayUseNamespace, type Principal } from "../domain/principal.js";
import { defaultNamespace, isValidNamespace } from "../domain/session-key.js";
import {
  grpcServiceDefinition,
  methodPath,
  type CallContext,
  type ServerStream,
  type ServerStreamHandler,
  type ServiceHandlers,
  type UnaryHandler,
} from "./service-adapter.js";
import { statusFromError } from "./status-from-error.js";
import { WireMessage } from "../codec/wire-message.js";

type Status = Pick<StatusObject, "code" | "details">;

const shuttingDown: Status = { code: GrpcStatus.UNAVAILABLE, details: "server is shutting down; retry later" };
const notServing: Status = { code: GrpcStatus.UNAVAILABLE, details: "database unavailable; retry later" };

/** Options of the edge: authentication, stream limits and call observation. */
export interface RpcEdgeOptions {
  /** Resolves a bearer token to its principal (`undefined`: unknown). Absent: authentication is off. */
  authenticate?: ((token: string) => Principal | undefined) | undefined;
  /** Most server streams open at once on one connection. */
  maxStreamsPerConnection: number;
  /** Most server streams open at once in total. */
  maxStreams: number;
  /** Called when a call ends, with its gRPC status code and duration. */
  observe?: (method: string, code: GrpcStatus, seconds: number) => void;
}

/** The principal of a call, or a refusal. Public services and a server without auth have no principal. */
function authenticateCall(
  metadata: Metadata,
  authenticate: RpcEdgeOptions["authenticate"],
): { principal: Principal | undefined } | { status: Status } {
  if (authenticate === undefined) return { principal: undefined };
  const header = metadata.get("authorization")[0];
  const match = typeof header === "string" ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
  if (match === null) {
    return { status: { code: GrpcStatus.UNAUTHENTICATED, details: "missing bearer token (send metadata authorization: Bearer <token>)" } };
  }
  const principal = authenticate(match[1]!);
  if (principal === undefined) return { status: { code: GrpcStatus.UNAUTHENTICATED, details: "unknown bearer token" } };
  return { principal };
}

/** The request metadata that names a call's namespace (SPEC §12.1). */
export const namespaceHeader = "sessionstate-namespace";

/**
 * The namespace of a call, or a refusal: absent is `default`; a malformed one is INVALID_ARGUMENT; one
 * outside the principal's namespaces is PERMISSION_DENIED (admins may use any).
 */
function namespaceOfCall(metadata: Metadata, principal: Principal | undefined): { namespace: string } | { status: Status } {
  const values = metadata.get(namespaceHeader);
  const raw = values[0];
  if (values.length > 1 || (raw !== undefined && typeof raw !== "string")) {
    return { status: { code: GrpcStatus.INVALID_ARGUMENT, details: `${namespaceHeader}: give one namespace` } };
  }
  const namespace = raw === undefined || raw === "" ? defaultNamespace : raw;
  if (!isValidNamespace(namespace)) {
    return {
      status: {
        code: GrpcStatus.INVALID_ARGUMENT,
        details: `${namespaceHeader}: must be 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit`,
      },
    };
  }
  if (principal !== undefined && !mayUseNamespace(principal, namespace)) {
    return { status: { code: GrpcStatus.PERMISSION_DENIED, details: `namespace "${namespace}" is outside the scope of token "${principal.name}"` } };
  }
  return { namespace };
}

/** A response's bytes: a message is encoded, a `WireMessage` is already in wire form. */
function encode<O extends DescMessage>(schema: O, message: MessageInitShape<O> | WireMessage<O>): Buffer {
  return message instanceof WireMessage ? asBuffer(message.bytes) : asBuffer(toBinary(schema, create(schema, message)));
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * The only place that touches grpc-js call objects. It registers generated services on a server and wraps
 * every handler: requests are decoded (malformed bytes are INVALID_ARGUMENT), handlers are awaited, and
 * anything thrown becomes a safe status. It also tracks open server streams so shutdown can end them.
 */
export class RpcEdge {
  /** Every open server stream: how to end it, and whether its service is public (health). */
  private readonly streamClosers = new Map<(status: Status) => void, boolean>();
  private readonly streamsByPeer = new Map<string, number>();
  private openPublicStreams = 0;
  /** Unary calls not answered yet, each with the way to answer it now. */
  private readonly unaryInFlight = new Set<(status: Status) => void>();
  private readonly unaryDrained = new Set<() => void>();
  private closing = false;
  /** False while the server cannot serve (its database is unreachable): calls are refused at once. */
  private available = true;

  constructor(
    private readonly server: Server,
    private readonly log: Logger,
    private readonly options: RpcEdgeOptions,
  ) {}

  /** Number of server streams of the service's own methods (notices) currently open; health watches are not counted. */
  get openStreams(): number {
    return this.streamClosers.size - this.openPublicStreams;
  }

  /**
   * Registers a generated service with its handlers. A `public` service (health) needs no credentials
   * even when authentication is on.
   */
  addService<S extends GenServiceMethods>(service: GenService<S>, handlers: ServiceHandlers<S>, { isPublic = false } = {}): void {
    const authenticate = isPublic ? undefined : this.options.authenticate;
    const implementation: UntypedServiceImplementation = {};
    for (const method of Object.values(service.method) as DescMethod[]) {
      const handler = (handlers as Record<string, unknown>)[method.localName];
      switch (method.methodKind) {
        case "unary":
          implementation[method.localName] = this.wrapUnary(method, handler as UnaryHandler<DescMessage, DescMessage>, authenticate, isPublic);
          break;
        case "server_streaming":
          implementation[method.localName] = this.wrapServerStream(
            method,
            handler as ServerStreamHandler<DescMessage, DescMessage>,
            authenticate,
            isPublic,
          );
          break;
        case "client_streaming":
        case "bidi_streaming":
          throw new Error(`${methodPath(method)}: ${method.methodKind} methods are not supported`);
        default: {
          const never: never = method.methodKind;
          throw new Error(`unknown method kind ${String(never)}`);
        }
      }
    }
    this.server.addService(grpcServiceDefinition(service), implementation);
  }

  /** Refuses new calls with UNAVAILABLE and ends every open stream with UNAVAILABLE. */
  shutDownCalls(): void {
    this.closing = true;
    for (const close of [...this.streamClosers.keys()]) close(shuttingDown);
  }

  /**
   * Whether calls are served (health SERVING). While not, every call of a non-public service is refused at
   * once with UNAVAILABLE, and open streams are ended with UNAVAILABLE so that their clients go elsewhere.
   */
  setAvailable(available: boolean): void {
    this.available = available;
    if (available) return;
    for (const [close, isPublic] of [...this.streamClosers]) if (!isPublic) close(notServing);
  }

  /**
   * Resolves once no unary call is in flight, or after `graceMs`: then every call still in flight is
   * answered UNAVAILABLE at once (whatever its handler does later is dropped), so no call is cut off
   * with a reset that clients would see as INTERNAL.
   */
  async drainUnaryCalls(graceMs: number): Promise<void> {
    if (this.unaryInFlight.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.unaryDrained.add(resolve);
        timer = setTimeout(resolve, graceMs);
      });
      clearTimeout(timer);
      this.unaryDrained.clear();
    }
    for (const answer of [...this.unaryInFlight]) answer(shuttingDown);
  }

  private decode(method: DescMethod, bytes: Buffer): { request: unknown } | { status: Status } {
    try {
      return { request: fromBinary(method.input, bytes) };
    } catch {
      return {
        status: {
          code: GrpcStatus.INVALID_ARGUMENT,
          details: `request: not a valid ${method.input.typeName} message (strings must be valid UTF-8)`,
        },
      };
    }
  }

  private wrapUnary(
    method: DescMethod,
    handler: UnaryHandler<DescMessage, DescMessage>,
    authenticate: RpcEdgeOptions["authenticate"],
    isPublic: boolean,
  ) {
    const path = methodPath(method);
    return (call: ServerUnaryCall<Buffer, Buffer>, rawCallback: sendUnaryData<Buffer>): void => {
      const started = performance.now();
      let answered = false;
      const callback: sendUnaryData<Buffer> = (err, value) => {
        if (answered) return;
        answered = true;
        this.unaryInFlight.delete(answerNow);
        if (this.unaryInFlight.size === 0) for (const drained of this.unaryDrained) drained();
        this.options.observe?.(path, err === null ? GrpcStatus.OK : (err.code ?? GrpcStatus.UNKNOWN), (performance.now() - started) / 1000);
        rawCallback(err, value);
      };
      const answerNow = (status: Status): void => callback(status);
      if (this.closing) return callback(shuttingDown);
      if (!this.available && !isPublic) return callback(notServing);
      this.unaryInFlight.add(answerNow);
      const auth = authenticateCall(call.metadata, authenticate);
      if ("status" in auth) return callback(auth.status);
      // Public services (health) are in no namespace.
      const scope = isPublic ? { namespace: defaultNamespace } : namespaceOfCall(call.metadata, auth.principal);
      if ("status" in scope) return callback(scope.status);
      const decoded = this.decode(method, call.request);
      if ("status" in decoded) return callback(decoded.status);
      const context = new UnaryCallContext(path, auth.principal, scope.namespace, call);
      Promise.resolve()
        .then(() => handler(decoded.request as never, context))
        .then((response) => encode(method.output, response))
        .then(
          (bytes) => callback(null, bytes),
          (err: unknown) => callback(statusFromError(err, this.log, path)),
        );
    };
  }

  private wrapServerStream(
    method: DescMethod,
    handler: ServerStreamHandler<DescMessage, DescMessage>,
    authenticate: RpcEdgeOptions["authenticate"],
    isPublic: boolean,
  ) {
    const path = methodPath(method);
    return (call: ServerWritableStream<Buffer, Buffer>): void => {
      const started = performance.now();
      const refuse = (status: Status): void => {
        this.options.observe?.(path, status.code, (performance.now() - started) / 1000);
        call.emit("error", status);
      };
      if (this.closing) return refuse(shuttingDown);
      if (!this.available && !isPublic) return refuse(notServing);
      const auth = authenticateCall(call.metadata, authenticate);
      if ("status" in auth) return refuse(auth.status);
      const scope = isPublic ? { namespace: defaultNamespace } : namespaceOfCall(call.metadata, auth.principal);
      if ("status" in scope) return refuse(scope.status);
      const decoded = this.decode(method, call.request);
      if ("status" in decoded) return refuse(decoded.status);
      // Health watches (clients' load balancers hold one per connection) are limited apart from notice
      // streams, so that they never take a place a subscriber needs.
      const peer = `${isPublic ? "public" : "own"} ${call.getPeer()}`;
      const onPeer = this.streamsByPeer.get(peer) ?? 0;
      if (onPeer >= this.options.maxStreamsPerConnection) {
        return refuse({
          code: GrpcStatus.RESOURCE_EXHAUSTED,
          details: `too many open streams on this connection (limit ${this.options.maxStreamsPerConnection})`,
        });
      }
      if ((isPublic ? this.openPublicStreams : this.openStreams) >= this.options.maxStreams) {
        return refuse({ code: GrpcStatus.RESOURCE_EXHAUSTED, details: `too many open streams on this server (limit ${this.options.maxStreams})` });
      }
      this.streamsByPeer.set(peer, onPeer + 1);
      const abort = new AbortController();
      // grpc-js emits 'cancelled' on every close, a normal end included: `done` tells them apart.
      let done = false;
      const release = (code: GrpcStatus): void => {
        done = true;
        this.streamClosers.delete(closeForShutdown);
        if (isPublic) this.openPublicStreams--;
        const left = (this.streamsByPeer.get(peer) ?? 1) - 1;
        if (left === 0) this.streamsByPeer.delete(peer);
        else this.streamsByPeer.set(peer, left);
        abort.abort();
        this.options.observe?.(path, code, (performance.now() - started) / 1000);
      };
      const finish = (status?: Status): void => {
        if (done) return;
        release(status?.code ?? GrpcStatus.OK);
        if (status === undefined) call.end();
        else call.emit("error", status);
      };
      const closeForShutdown = (status: Status): void => finish(status);
      this.streamClosers.set(closeForShutdown, isPublic);
      if (isPublic) this.openPublicStreams++;
      call.once("cancelled", () => {
        if (!done) release(GrpcStatus.CANCELLED);
      });
      const stream: ServerStream<MessageInitShape<DescMessage> | WireMessage<DescMessage>> = {
        send: (message) => !done && call.write(encode(method.output, message)),
        drained: () => waitForDrain(call, abort.signal),
      };
      const context: CallContext = { signal: abort.signal, method: path, principal: auth.principal, namespace: scope.namespace };
      Promise.resolve()
        .then(() => handler(decoded.request as never, stream, context))
        .then(
          () => finish(),
          (err: unknown) => finish(statusFromError(err, this.log, path)),
        );
    };
  }
}

/**
 * The context of a unary call. grpc-js reports 'cancelled' at the end of every call, and aborting builds a
 * DOMException: the signal, and the listener for cancellation, are made only for handlers that ask for it.
 * A class, not an object literal with a getter: V8 gives each such literal a hidden class of its own, which
 * lives in old space, and on this path that cost more than the rest of the edge (measured with h2load on
 * a trivial method: 16,000 instead of 22,000 calls/s, with a mark-compact every 0.4 s).
 */
class UnaryCallContext implements CallContext {
  private abort: AbortController | undefined;

  constructor(
    readonly method: string,
    readonly principal: Principal | undefined,
    readonly namespace: string,
    private readonly call: ServerUnaryCall<Buffer, Buffer>,
  ) {}

  get signal(): AbortSignal {
    if (this.abort === undefined) {
      const controller = new AbortController();
      this.abort = controller;
      if (this.call.cancelled) controller.abort();
      else this.call.once("cancelled", () => controller.abort());
    }
    return this.abort.signal;
  }
}

/** Resolves on the stream's next 'drain', or at once when `signal` is (or becomes) aborted. */
function waitForDrain(call: ServerWritableStream<Buffer, Buffer>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const settle = (): void => {
      call.off("drain", settle);
      signal.removeEventListener("abort", settle);
      resolve();
    };
    call.once("drain", settle);
    signal.addEventListener("abort", settle, { once: true });
  });
}
