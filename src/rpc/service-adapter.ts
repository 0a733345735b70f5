import type { DescMessage, DescMethod, DescService, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import type { GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import type { MethodDefinition, ServiceDefinition } from "@grpc/grpc-js";
import type { Principal } from "../domain/principal.js";
import type { WireMessage } from "../codec/wire-message.js";

/** What a handler learns about its call. */
export interface CallContext {
  /** Aborted when the client cancels, the deadline passes or the server shuts down. */
  readonly signal: AbortSignal;
  /** The full method path, for example `/sessionstate.v1.SignalLog/Append`. */
  readonly method: string;
  /** The authenticated caller; `undefined` when authentication is off (or for public services). */
  readonly principal: Principal | undefined;
  /**
   * The namespace the request is in (metadata `sessionstate-namespace`, absent: `default`), already
   * checked against the principal's. Every session the request names is in it (SPEC §12.1).
   */
  readonly namespace: string;
  /** The caller's address as the transport names it (a server stream's; `undefined` for unary calls). */
  readonly peer?: string;
}

/**
 * A unary handler: returns the response (as a message, or already encoded), or throws (a `StatusError`
 * for expected refusals).
 */
export type UnaryHandler<I extends DescMessage, O extends DescMessage> = (
  request: MessageShape<I>,
  context: CallContext,
) => Promise<MessageInitShape<O> | WireMessage<O>>;

/**
 * A server-streaming handler: the responses, as an async iterable (an `async function*` in practice). Each
 * is written when the transport can take it, so the handler's pace follows the client's. The stream ends
 * with OK when they end, with the error's status when the iteration throws (a `StatusError` for expected
 * refusals), and early, with the iterator returned, when `context.signal` aborts.
 */
export type ServerStreamHandler<I extends DescMessage, O extends DescMessage> = (
  request: MessageShape<I>,
  context: CallContext,
) => AsyncIterable<MessageInitShape<O> | WireMessage<O>>;

/**
 * The handlers of a generated service, keyed by method local name. A missing or mistyped handler is a
 * compile error, where grpc-js would silently answer UNIMPLEMENTED.
 */
export type ServiceHandlers<S extends GenServiceMethods> = {
  [K in keyof S]: S[K]["methodKind"] extends "unary"
    ? UnaryHandler<S[K]["input"], S[K]["output"]>
    : S[K]["methodKind"] extends "server_streaming"
      ? ServerStreamHandler<S[K]["input"], S[K]["output"]>
      : never;
};

/** The grpc-js path of a method: `/<package>.<Service>/<Method>`. */
export function methodPath(method: DescMethod): string {
  return `/${method.parent.typeName}/${method.name}`;
}

const passBytes = (bytes: Buffer): Buffer => bytes;

/**
 * A grpc-js service definition for a protobuf-es service descriptor. Messages travel as raw bytes: the
 * handler wrapper decodes and encodes them, so a malformed request becomes INVALID_ARGUMENT instead of a
 * transport error.
 */
export function grpcServiceDefinition(service: DescService): ServiceDefinition {
  const definition: Record<string, MethodDefinition<Buffer, Buffer>> = {};
  for (const method of service.methods) {
    definition[method.localName] = {
      path: methodPath(method),
      originalName: method.name,
      requestStream: method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming",
      responseStream: method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming",
      requestSerialize: passBytes,
      requestDeserialize: passBytes,
      responseSerialize: passBytes,
      responseDeserialize: passBytes,
    };
  }
  return definition;
}
