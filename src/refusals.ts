/**
 * What a client is told when a call (or one entry of a batch) fails, whatever threw: a `StatusError` keeps its
 * code and message; a storage fault (store/store-errors) becomes `UNAVAILABLE` or `RESOURCE_EXHAUSTED` with
 * fixed messages; anything else is `INTERNAL` with a fixed message. How loudly to log it comes with it. The
 * edge (rpc/status-from-error) turns it into the protocol's status; a service that answers per entry (an
 * AppendBatch) hands it to the codec. Never holds SQL, a stack or a path.
 */
import { StatusError, type StatusName } from "./errors.js";
import { storeFaultFromError } from "./store/store-errors.js";

/** The details sent for every unexpected error. The error itself goes to the log only. */
export const internalErrorDetails = "internal error";

/** A failure as a client may see it, and how the server logs it (never: a refusal, or already logged once elsewhere). */
export interface Refusal {
  code: StatusName;
  message: string;
  log: { level: "debug" | "warn" | "error"; what: string } | undefined;
}

/** The refusal of anything thrown by a handler. */
export function refusalFromError(err: unknown): Refusal {
  if (err instanceof StatusError) return { code: err.code, message: err.message, log: undefined };
  const fault = storeFaultFromError(err);
  switch (fault) {
    case "busy":
      return { code: "UNAVAILABLE", message: "database is busy; retry later", log: { level: "warn", what: "database busy" } };
    case "full":
      // The store reports full storage once per change of state (see StorageObserver), never per write.
      return { code: "RESOURCE_EXHAUSTED", message: "storage is full; the write was not recorded", log: undefined };
    case "unavailable":
      return { code: "UNAVAILABLE", message: "database unavailable; retry later", log: { level: "error", what: "database unavailable" } };
    case "unreachable":
      // Every call fails while the database is away: the health probe logs the outage once, not here.
      return { code: "UNAVAILABLE", message: "database unavailable; retry later", log: { level: "debug", what: "database unreachable" } };
    case undefined:
      return { code: "INTERNAL", message: internalErrorDetails, log: { level: "error", what: "unexpected error in handler" } };
    default: {
      const never: never = fault;
      throw new Error(`unknown store fault ${String(never)}`);
    }
  }
}
