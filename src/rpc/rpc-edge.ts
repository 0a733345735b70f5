/**
 * The only place that touches grpc-js call objects. It registers generated services on a server and wraps
 * every handler (rpc/unary-calls, rpc/server-streams): each call is admitted (rpc/call-admission: token,
 * namespace, request bytes), handled, and anything thrown becomes a safe status. It refuses calls while the
 * server is stopping or cannot serve, and ends open streams (rpc/open-streams) then.
 */
import type { DescMessage, DescMethod } from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import type { ConnectRouter } from "@connectrpc/connect";
import type { Server, UntypedServiceImplementation } from "@grpc/grpc-js";
import type { Logger } from "../logger.js";
import { notServing, shuttingDown, type Authenticate, type MethodScope } from "./call-admission.js";
import { answerUndecodableAsTheGrpcPort, routeMethods, type RegisteredMethod } from "./connect-calls.js";
import { OpenStreams, type StreamLimits } from "./open-streams.js";
import type { EndedCall } from "./request-log.js";
import type { CallGate } from "./call-gate.js";
import { serverStreamCall } from "./server-streams.js";
import { grpcServiceDefinition, methodPath, type ServerStreamHandler, type ServiceHandlers, type UnaryHandler } from "./service-adapter.js";
import { UnaryCalls } from "./unary-calls.js";

/** Options of the edge: authentication, stream limits and call observation. */
export interface RpcEdgeOptions extends StreamLimits {
  /** Resolves a bearer token to its principal (`undefined`: unknown). Absent: authentication is off. */
  authenticate?: Authenticate | undefined;
  /** Called when a call ends, with its status, duration and, once admitted, namespace and token name. */
  observe?: (call: EndedCall) => void;
}

export class RpcEdge {
  private readonly streams: OpenStreams;
  private readonly unary: UnaryCalls;
  private readonly gate: CallGate;
  /** Every method added, for the HTTP port's router: the same handlers behind the same gate and admission. */
  private readonly methods: RegisteredMethod[] = [];
  private closing = false;
  /** False while the server cannot serve (its database is unreachable): calls are refused at once. */
  private available = true;

  constructor(
    private readonly server: Server,
    log: Logger,
    private readonly options: RpcEdgeOptions,
  ) {
    this.streams = new OpenStreams(options);
    this.gate = {
      refusal: (isPublic) => (this.closing ? shuttingDown : !this.available && !isPublic ? notServing : undefined),
      observe: options.observe,
      log,
    };
    this.unary = new UnaryCalls(this.gate);
  }

  /** Number of server streams of the service's own methods (notices) currently open; health watches are not counted. */
  get openStreams(): number {
    return this.streams.own;
  }

  /**
   * Registers a generated service with its handlers. A `public` service (health) needs no credentials
   * even when authentication is on; the methods named in `everyNamespace` ignore the namespace header
   * (their handlers answer what the caller's credentials allow across namespaces).
   */
  addService<S extends GenServiceMethods>(
    service: GenService<S>,
    handlers: ServiceHandlers<S>,
    { isPublic = false, everyNamespace = [] }: { isPublic?: boolean; everyNamespace?: readonly (keyof S)[] } = {},
  ): void {
    const authenticate = isPublic ? undefined : this.options.authenticate;
    const implementation: UntypedServiceImplementation = {};
    for (const method of Object.values(service.method) as DescMethod[]) {
      const handler = (handlers as Record<string, unknown>)[method.localName];
      const scope: MethodScope = isPublic ? "public" : everyNamespace.includes(method.localName as keyof S) ? "every-namespace" : "namespace";
      this.methods.push({ method, handler: handler as RegisteredMethod["handler"], authenticate, scope });
      switch (method.methodKind) {
        case "unary":
          implementation[method.localName] = this.unary.handler(method, handler as UnaryHandler<DescMessage, DescMessage>, authenticate, scope);
          break;
        case "server_streaming":
          implementation[method.localName] = serverStreamCall(
            method,
            handler as ServerStreamHandler<DescMessage, DescMessage>,
            this.gate,
            this.streams,
            authenticate,
            scope,
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

  /**
   * Registers every method added so far on a connect-es router (the HTTP port: Connect and gRPC-Web), with
   * the same gate, admission and stream limits as the gRPC port.
   */
  routes(router: ConnectRouter): void {
    routeMethods(router, this.methods, this.gate, this.streams);
    answerUndecodableAsTheGrpcPort(router);
  }

  /** Refuses new calls with UNAVAILABLE and ends every open stream with UNAVAILABLE. */
  shutDownCalls(): void {
    this.closing = true;
    this.streams.closeAll(shuttingDown, { publicToo: true });
  }

  /**
   * Whether calls are served (health SERVING). While not, every call of a non-public service is refused at
   * once with UNAVAILABLE, and open streams are ended with UNAVAILABLE so that their clients go elsewhere.
   */
  setAvailable(available: boolean): void {
    this.available = available;
    if (!available) this.streams.closeAll(notServing, { publicToo: false });
  }

  /**
   * Resolves once no unary call is in flight, or after `graceMs`: then every call still in flight is
   * answered UNAVAILABLE at once.
   */
  drainUnaryCalls(graceMs: number): Promise<void> {
    return this.unary.drain(graceMs);
  }
}
