/**
 * The shapes of typed service clients and their calls. Kept apart from `service-client.ts` so that the
 * package's public types never reach grpc-js.
 */
import type { MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import type { GenServiceMethods } from "@bufbuild/protobuf/codegenv2";

/**
 * How a call fails: an Error with the gRPC status `code` (compare with `StatusCode`), the server's
 * message in `details`.
 */
export interface CallError extends Error {
  code: number;
  details: string;
}

/** Per-call options. */
export interface CallOptions {
  /** Deadline, in milliseconds from now. */
  timeoutMs?: number | undefined;
  /** Cancels the call when aborted. */
  signal?: AbortSignal | undefined;
  /** Extra request metadata (for example `authorization`). */
  metadata?: Readonly<Record<string, string>>;
}

/**
 * A server stream: iterate it for messages; `cancel()` ends it from the client side. `pause()` stops
 * reading (the server then feels the transport's flow control) until `resume()`.
 */
export interface ServerStreamCall<Out> extends AsyncIterable<Out> {
  cancel(): void;
  pause(): void;
  resume(): void;
}

/** A typed client of one generated service; unary methods return promises, server streams iterables. */
export type ServiceClient<S extends GenServiceMethods> = {
  [K in keyof S]: S[K]["methodKind"] extends "unary"
    ? (request: MessageInitShape<S[K]["input"]>, options?: CallOptions) => Promise<MessageShape<S[K]["output"]>>
    : S[K]["methodKind"] extends "server_streaming"
      ? (request: MessageInitShape<S[K]["input"]>, options?: CallOptions) => ServerStreamCall<MessageShape<S[K]["output"]>>
      : never;
};
