import { status as GrpcStatus, type StatusObject } from "@grpc/grpc-js";
import { ServiceError, type StatusName } from "../errors.js";
import type { Logger } from "../logger.js";
import { storeFaultOf } from "../store/store-errors.js";

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

/** The details sent for every unexpected error. The error itself goes to the log only. */
export const internalErrorDetails = "internal error";

/**
 * Turns anything a handler threw into a status that is safe to send. A `ServiceError` keeps its code and
 * message; a storage fault (see store/store-errors) becomes `UNAVAILABLE` or `RESOURCE_EXHAUSTED` with
 * fixed messages (a full disk is logged by the store once, not here per refused write); anything else is
 * `INTERNAL` with a fixed message, and is logged with its stack.
 */
export function statusFromError(err: unknown, log: Logger, method: string): Pick<StatusObject, "code" | "details"> {
  if (err instanceof ServiceError) return { code: grpcCodes[err.code], details: err.message };
  const fault = storeFaultOf(err);
  switch (fault) {
    case "busy":
      log.warn({ err, method }, "database busy");
      return { code: GrpcStatus.UNAVAILABLE, details: "database is busy; retry later" };
    case "full":
      // The store reports full storage once per change of state (see StorageObserver), never per write.
      return { code: GrpcStatus.RESOURCE_EXHAUSTED, details: "storage is full; the write was not recorded" };
    case "unavailable":
      log.error({ err, method }, "database unavailable");
      return { code: GrpcStatus.UNAVAILABLE, details: "database unavailable; retry later" };
    case "unreachable":
      // Every call fails while the database is away: the health probe logs the outage once, not here.
      log.debug({ err, method }, "database unreachable");
      return { code: GrpcStatus.UNAVAILABLE, details: "database unavailable; retry later" };
    case undefined:
      break;
    default: {
      const never: never = fault;
      throw new Error(`unknown store fault ${String(never)}`);
    }
  }
  log.error({ err, method }, "unexpected error in handler");
  return { code: GrpcStatus.INTERNAL, details: internalErrorDetails };
}
