/**
 * `@sessionstate/client`: the sessionstate client for TypeScript and JavaScript gateways. It exports
 * `SessionStateClient` (typed clients of the four services on one channel, coalesced and best-effort
 * appends, a reconnecting notice subscription, acks), the generated message types and enums, and the
 * gRPC status codes, so callers need no other import.
 */
export {
  SessionStateClient,
  consoleLogger,
  silentLogger,
  type BackoffOptions,
  type ClientLogger,
  type ClientOptions,
  type SubscribeOptions,
} from "./session-state-client.js";
export type { AppendOptions } from "./append-coalescer.js";
export type { CallError, CallOptions, ServerStreamCall, ServiceClient } from "./service-types.js";
export * from "../../../gen/sessionstate/v1/types_pb.js";
export * from "../../../gen/sessionstate/v1/signal_log_pb.js";
export * from "../../../gen/sessionstate/v1/watch_pb.js";
export * from "../../../gen/sessionstate/v1/reconcile_pb.js";
export * from "../../../gen/sessionstate/v1/upstream_pb.js";

export { StatusCode } from "./status-code.js";
