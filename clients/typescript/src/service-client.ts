import { create, fromBinary, toBinary, type DescMessage, type DescMethod, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import { Metadata, type CallOptions as GrpcCallOptions, type Client } from "@grpc/grpc-js";
import type { CallOptions, ServerStreamCall, ServiceClient } from "./service-types.js";

export type { CallError, CallOptions, ServerStreamCall, ServiceClient } from "./service-types.js";

function serializer<M extends DescMessage>(schema: M) {
  return (init: MessageInitShape<M>): Buffer => {
    const bytes = toBinary(schema, create(schema, init));
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
}

function deserializer<M extends DescMessage>(schema: M) {
  return (bytes: Buffer): MessageShape<M> => fromBinary(schema, bytes);
}

function callParts(defaults: CallOptions, options: CallOptions | undefined) {
  const merged = { ...defaults, ...options, metadata: { ...defaults.metadata, ...options?.metadata } };
  const metadata = new Metadata();
  for (const [name, value] of Object.entries(merged.metadata)) metadata.set(name, value);
  const grpcOptions: GrpcCallOptions = {};
  if (merged.timeoutMs !== undefined) grpcOptions.deadline = new Date(Date.now() + merged.timeoutMs);
  return { metadata, grpcOptions, signal: merged.signal };
}

/**
 * Cancels a call when `signal` aborts (at once if it already has). Returns the function that removes the
 * listener: called when the call ends, so a long-lived signal shared by many calls keeps no listeners.
 */
function cancelOnAbort(signal: AbortSignal | undefined, cancel: () => void): () => void {
  if (signal === undefined) return () => {};
  if (signal.aborted) {
    cancel();
    return () => {};
  }
  signal.addEventListener("abort", cancel, { once: true });
  return () => signal.removeEventListener("abort", cancel);
}

/**
 * Builds a typed client for `service` over an existing grpc-js `Client` (one channel can serve every
 * service). `defaults` apply to every call and are overridden per call.
 */
export function createServiceClient<S extends GenServiceMethods>(
  channel: Client,
  service: GenService<S>,
  defaults: CallOptions = {},
): ServiceClient<S> {
  const client: Record<string, unknown> = {};
  for (const method of Object.values(service.method) as DescMethod[]) {
    const path = `/${service.typeName}/${method.name}`;
    const serialize = serializer(method.input);
    const deserialize = deserializer(method.output);
    if (method.methodKind === "unary") {
      client[method.localName] = (request: MessageInitShape<DescMessage>, options?: CallOptions) => {
        const { metadata, grpcOptions, signal } = callParts(defaults, options);
        return new Promise((resolve, reject) => {
          let detach = (): void => {};
          const call = channel.makeUnaryRequest(path, serialize, deserialize, request, metadata, grpcOptions, (err, value) => {
            detach();
            if (err === null) resolve(value);
            else reject(err);
          });
          detach = cancelOnAbort(signal, () => call.cancel());
        });
      };
    } else if (method.methodKind === "server_streaming") {
      client[method.localName] = (request: MessageInitShape<DescMessage>, options?: CallOptions) => {
        const { metadata, grpcOptions, signal } = callParts(defaults, options);
        const call = channel.makeServerStreamRequest(path, serialize, deserialize, request, metadata, grpcOptions);
        const detach = cancelOnAbort(signal, () => call.cancel());
        call.once("status", detach);
        // A grpc-js ClientReadableStream is already async-iterable and cancellable.
        return call as unknown as ServerStreamCall<unknown>;
      };
    }
  }
  return client as ServiceClient<S>;
}
