import { status as GrpcStatus, type StatusObject } from "@grpc/grpc-js";
import type { StatusName } from "../errors.js";
import type { Logger } from "../logger.js";
import { refusalFromError } from "../refusals.js";

const grpcCodes: Record<StatusName, GrpcStatus> = {
  INVALID_ARGUMENT: GrpcStatus.INVALID_ARGUMENT,
  NOT_FOUND: GrpcStatus.NOT_FOUND,
  OUT_OF_RANGE: GrpcStatus.OUT_OF_RANGE,
  FAILED_PRECONDITION: GrpcStatus.FAILED_PRECONDITION,
  PERMISSION_DENIED: GrpcStatus.PERMISSION_DENIED,
  UNAUTHENTICATED: GrpcStatus.UNAUTHENTICATED,
  RESOURCE_EXHAUSTED: GrpcStatus.RESOURCE_EXHAUSTED,
  UNAVAILABLE: GrpcStatus.UNAVAILABLE,
  UNIMPLEMENTED: GrpcStatus.UNIMPLEMENTED,
  INTERNAL: GrpcStatus.INTERNAL,
};

/**
 * Turns anything a handler threw into a status that is safe to send (see refusals.ts), logging it as the
 * refusal says, with the method.
 */
export function statusFromError(err: unknown, log: Logger, method: string): Pick<StatusObject, "code" | "details"> {
  const refusal = refusalFromError(err);
  if (refusal.log !== undefined) log[refusal.log.level]({ err, method }, refusal.log.what);
  return { code: grpcCodes[refusal.code], details: refusal.message };
}
