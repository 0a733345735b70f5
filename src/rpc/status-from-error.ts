import { status as GrpcStatus, type StatusObject } from "@grpc/grpc-js";
import { ServiceError, type StatusName } from "../errors.js";
import type { Logger } from "../logger.js";

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
 * message; SQLite's busy and full conditions become `UNAVAILABLE` and `RESOURCE_EXHAUSTED` with fixed
 * messages (a full disk is logged by the store once, not here per refused write); anything else is
 * `INTERNAL` with a fixed message, and is logged with its stack.
 */
export function statusFromError(err: unknown, log: Logger, method: string): Pick<StatusObject, "code" | "details"> {
  if (err instanceof ServiceError) return { code: grpcCodes[err.code], details: err.message };
  const sqliteCode = (err as { code?: unknown } | null)?.code;
  if (typeof sqliteCode === "string" && sqliteCode.startsWith("SQLITE_")) {
    if (sqliteCode === "SQLITE_BUSY" || sqliteCode === "SQLITE_LOCKED") {
      log.warn({ err, method }, "database busy");
      return { code: GrpcStatus.UNAVAILABLE, details: "database is busy; retry later" };
    }
    if (sqliteCode === "SQLITE_FULL") {
      // The store reports full storage once per change of state (see StorageObserver), never per write.
      return { code: GrpcStatus.RESOURCE_EXHAUSTED, details: "storage is full; the write was not recorded" };
    }
    if (sqliteCode.startsWith("SQLITE_IOERR")) {
      log.error({ err, method }, "database i/o error");
      return { code: GrpcStatus.UNAVAILABLE, details: "database unavailable; retry later" };
    }
  }
  log.error({ err, method }, "unexpected error in handler");
  return { code: GrpcStatus.INTERNAL, details: internalErrorDetails };
}
