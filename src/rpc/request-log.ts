/**
 * The request log: at `debug`, one line per call (method, namespace, status, milliseconds, the token's
 * name); at `info`, only the calls that failed in a way an operator acts on (INTERNAL, UNAVAILABLE,
 * RESOURCE_EXHAUSTED). Never a request's content, never a token: its name from the tokens file at most.
 */
import { status as GrpcStatus } from "@grpc/grpc-js";
import type { Logger } from "../logger.js";

/** A call as it ended. `namespace` and `token` are absent when it was refused before they were known. */
export interface EndedCall {
  /** The protocol it came by: `grpc` (the gRPC port), or the HTTP port's `connect` or `grpc-web`. */
  protocol: string;
  method: string;
  code: GrpcStatus;
  seconds: number;
  namespace?: string | undefined;
  /** The name of the caller's token (absent: authentication off, or the call was not authenticated). */
  token?: string | undefined;
}

/** The failures logged at `info` too: the server's or its database's, and limits reached. */
const operatorFailures: ReadonlySet<GrpcStatus> = new Set([GrpcStatus.INTERNAL, GrpcStatus.UNAVAILABLE, GrpcStatus.RESOURCE_EXHAUSTED]);

/** Logs ended calls on `log` as its level says; at `info` and above a successful call costs one set lookup. */
export function requestLogger(log: Logger): (call: EndedCall) => void {
  return (call) => {
    const debug = log.isLevelEnabled("debug");
    if (!debug && !operatorFailures.has(call.code)) return;
    const fields = {
      method: call.method,
      protocol: call.protocol,
      namespace: call.namespace ?? null,
      code: GrpcStatus[call.code] ?? String(call.code),
      ms: Math.round(call.seconds * 10_000) / 10,
      token: call.token ?? null,
    };
    if (operatorFailures.has(call.code)) log.info(fields, "call failed");
    else log.debug(fields, "call");
  };
}
