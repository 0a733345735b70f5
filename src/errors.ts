/**
 * The status codes a service may answer with. They mirror gRPC's names so that `rpc/` can map them
 * one to one, while the domain stays free of grpc-js.
 */
export type StatusName =
  | "INVALID_ARGUMENT"
  | "NOT_FOUND"
  | "OUT_OF_RANGE"
  | "FAILED_PRECONDITION"
  | "PERMISSION_DENIED"
  | "UNAUTHENTICATED"
  | "RESOURCE_EXHAUSTED"
  | "UNAVAILABLE"
  | "UNIMPLEMENTED"
  | "INTERNAL";

/**
 * The one error type services throw. `message` is sent to the client as-is, so it must never hold SQL,
 * stack traces or paths outside the transcript root; `cause` goes to the log only.
 */
export class StatusError extends Error {
  readonly code: StatusName;

  constructor(code: StatusName, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "StatusError";
    this.code = code;
  }
}

/** Shorthand for the most common refusal: `INVALID_ARGUMENT` with a message that names the field. */
export function invalidArgument(field: string, problem: string): StatusError {
  return new StatusError("INVALID_ARGUMENT", `${field}: ${problem}`);
}
