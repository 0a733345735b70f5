import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import {
  Client,
  connectivityState as ConnectivityState,
  credentials,
  experimental,
  Metadata,
  status as GrpcStatus,
  type ClientReadableStream,
  type ServiceError,
} from "@grpc/grpc-js";
import {
  HealthCheckRequestSchema,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus as ServingStatus,
  type HealthCheckResponse,
} from "./gen/grpc/health/v1/health_pb.js";

/**
 * The name of the client's load-balancing policy: round robin over the replicas whose health says
 * SERVING (SPEC §11). Each connected replica is watched with `grpc.health.v1.Health/Watch`; one that
 * reports NOT_SERVING (its database unreachable, or it is stopping) gets no calls while another serves,
 * and gets them again as soon as it reports SERVING. A server without the health service counts as
 * serving. When no replica serves, calls fail at once with UNAVAILABLE instead of waiting for one.
 */
export const servingRoundRobin = "sessionstate_serving_round_robin";

/** How long a broken health stream waits before it is opened again (the connection itself is still up). */
const rewatchDelayMs = 1000;

const watchPath = "/grpc.health.v1.Health/Watch";
const serializeRequest = (service: string): Buffer => {
  const bytes = toBinary(HealthCheckRequestSchema, create(HealthCheckRequestSchema, { service }));
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
};
const deserializeResponse = (bytes: Buffer): HealthCheckResponse => fromBinary(HealthCheckResponseSchema, bytes);

/** One replica's connection, healthy while its server says SERVING. */
class ServingWatchedSubchannel extends experimental.BaseSubchannelWrapper {
  private client: Client | undefined;
  private call: ClientReadableStream<HealthCheckResponse> | undefined;
  private rewatch: NodeJS.Timeout | undefined;
  private readonly onState = (_subchannel: unknown, _previous: ConnectivityState, next: ConnectivityState): void => {
    if (next === ConnectivityState.READY) this.watch();
    else this.unwatch();
  };

  constructor(child: experimental.SubchannelInterface) {
    super(child);
    child.addConnectivityStateListener(this.onState);
    if (child.getConnectivityState() === ConnectivityState.READY) this.watch();
  }

  private watch(): void {
    if (this.call !== undefined) return;
    clearTimeout(this.rewatch);
    this.client ??= new Client("serving-watch", credentials.createInsecure(), { channelOverride: this.child.getChannel() });
    const call = this.client.makeServerStreamRequest(watchPath, serializeRequest, deserializeResponse, "", new Metadata(), {});
    this.call = call;
    call.on("data", (response: HealthCheckResponse) => this.setHealthy(response.status === ServingStatus.SERVING));
    call.on("error", (error: ServiceError) => {
      if (this.call !== call) return;
      this.call = undefined;
      // A server without the health service serves everything it has.
      if (error.code === GrpcStatus.UNIMPLEMENTED) {
        this.setHealthy(true);
        return;
      }
      if (error.code === GrpcStatus.CANCELLED) return;
      this.rewatch = setTimeout(() => {
        if (this.child.getConnectivityState() === ConnectivityState.READY) this.watch();
      }, rewatchDelayMs);
      this.rewatch.unref?.();
    });
    call.on("end", () => {
      if (this.call === call) this.call = undefined;
    });
  }

  private unwatch(): void {
    clearTimeout(this.rewatch);
    const call = this.call;
    this.call = undefined;
    call?.cancel();
  }

  protected override destroy(): void {
    this.unwatch();
    this.child.removeConnectivityStateListener(this.onState);
    super.destroy();
  }
}

const roundRobin = experimental.parseLoadBalancingConfig({ round_robin: {} });

/** Round robin (grpc-js's own) over subchannels that watch their server's health. */
class ServingRoundRobin implements experimental.LoadBalancer {
  private readonly child: experimental.ChildLoadBalancerHandler;

  constructor(helper: experimental.ChannelControlHelper) {
    this.child = new experimental.ChildLoadBalancerHandler(
      experimental.createChildChannelControlHelper(helper, {
        createSubchannel: (address, args) => new ServingWatchedSubchannel(helper.createSubchannel(address, args)),
      }),
    );
  }

  updateAddressList(
    endpoints: Parameters<experimental.LoadBalancer["updateAddressList"]>[0],
    _config: experimental.TypedLoadBalancingConfig,
    options: Parameters<experimental.LoadBalancer["updateAddressList"]>[2],
    resolutionNote: string,
  ): boolean {
    return this.child.updateAddressList(endpoints, roundRobin, options, resolutionNote);
  }

  exitIdle(): void {
    this.child.exitIdle();
  }

  resetBackoff(): void {
    this.child.resetBackoff();
  }

  destroy(): void {
    this.child.destroy();
  }

  getTypeName(): string {
    return servingRoundRobin;
  }
}

class ServingRoundRobinConfig implements experimental.TypedLoadBalancingConfig {
  getLoadBalancerName(): string {
    return servingRoundRobin;
  }

  toJsonObject(): object {
    return { [servingRoundRobin]: {} };
  }

  static createFromJson(): ServingRoundRobinConfig {
    return new ServingRoundRobinConfig();
  }
}

let registered = false;

/** Makes the policy known to grpc-js (once per process); a channel asks for it in its service config. */
export function registerServingRoundRobin(): void {
  if (registered || experimental.isLoadBalancerNameRegistered(servingRoundRobin)) return;
  experimental.registerLoadBalancerType(servingRoundRobin, ServingRoundRobin, ServingRoundRobinConfig);
  registered = true;
}
