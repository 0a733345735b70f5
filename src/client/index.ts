/**
 * The sessionstate client library: import this from a gateway. It re-exports the generated message
 * types and enums so callers need no other import.
 */
export { SessionStateClient, type BackoffOptions, type ClientOptions, type SubscribeOptions } from "./session-state-client.js";
export type { AppendOptions } from "./append-coalescer.js";
export { createServiceClient, type CallOptions, type ServerStreamCall, type ServiceClient } from "./service-client.js";
export * from "../../gen/sessionstate/v1/types_pb.js";
export * from "../../gen/sessionstate/v1/signal_log_pb.js";
export * from "../../gen/sessionstate/v1/watch_pb.js";
export * from "../../gen/sessionstate/v1/reconcile_pb.js";
export * from "../../gen/sessionstate/v1/upstream_pb.js";
