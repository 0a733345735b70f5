/**
 * Server streams: the one place that writes a handler's messages to a grpc-js call, waits for the
 * transport to drain, and stops on abort. A handler returns an `AsyncIterable` of responses (as in
 * connect-es and nice-grpc); the stream ends with OK when it is exhausted, with the error's status when it
 * throws, and early (its iterator returned, so its `finally` blocks run) when the client cancels, the
 * deadline passes or the server ends the stream.
 */
import type { DescMessage, DescMethod, MessageInitShape } from "@bufbuild/protobuf";
import { status as GrpcStatus, type ServerWritableStream } from "@grpc/grpc-js";
import type { WireMessage } from "../codec/wire-message.js";
import { encodeResponse, type CallGate } from "./call-gate.js";
import { admitCall, type AdmittedCall, type Authenticate, type MethodScope, type Status } from "./call-admission.js";
import type { OpenStreams } from "./open-streams.js";
import { methodPath, type CallContext, type ServerStreamHandler } from "./service-adapter.js";
import { statusFromError } from "./status-from-error.js";

/** A grpc-js handler for a server-streaming method. */
export function serverStreamCall(
  method: DescMethod,
  handler: ServerStreamHandler<DescMessage, DescMessage>,
  gate: CallGate,
  streams: OpenStreams,
  authenticate: Authenticate | undefined,
  scope: MethodScope,
): (call: ServerWritableStream<Buffer, Buffer>) => void {
  const path = methodPath(method);
  const isPublic = scope === "public";
  return (call) => {
    const started = performance.now();
    let admitted: AdmittedCall | undefined;
    const observe = (code: GrpcStatus): void =>
      gate.observe?.({
        protocol: "grpc",
        method: path,
        code,
        seconds: (performance.now() - started) / 1000,
        namespace: admitted?.namespace,
        token: admitted?.principal?.name,
      });
    const refuse = (status: Status): void => {
      observe(status.code);
      call.emit("error", status);
    };
    const refusal = gate.refusal(isPublic);
    if (refusal !== undefined) return refuse(refusal);
    const admission = admitCall(method, call.metadata, call.request, authenticate, scope);
    if ("status" in admission) return refuse(admission.status);
    admitted = admission;

    const abort = new AbortController();
    // grpc-js emits 'cancelled' on every close, a normal end included: `done` tells them apart.
    let done = false;
    const end = (code: GrpcStatus): void => {
      done = true;
      release();
      abort.abort();
      observe(code);
    };
    const finish = (status?: Status): void => {
      if (done) return;
      end(status?.code ?? GrpcStatus.OK);
      if (status === undefined) call.end();
      else call.emit("error", status);
    };
    const opened = streams.open(call.getPeer(), isPublic, finish);
    if (typeof opened !== "function") return refuse(opened.status);
    const release = opened;
    call.once("cancelled", () => {
      if (!done) end(GrpcStatus.CANCELLED);
    });
    const context: CallContext = { signal: abort.signal, method: path, principal: admitted.principal, namespace: admitted.namespace, peer: call.getPeer() };
    Promise.resolve()
      .then(() => writeAll(handler(admitted.request as never, context), call, method.output, abort.signal))
      .then(
        () => finish(),
        (err: unknown) => finish(statusFromError(err, gate.log, path)),
      );
  };
}

/**
 * Writes every message of `messages` to `call`, waiting for the transport to drain whenever it is full,
 * until the messages end or `signal` aborts (then the iterator is returned, so the handler cleans up).
 */
async function writeAll<O extends DescMessage>(
  messages: AsyncIterable<MessageInitShape<O> | WireMessage<O>>,
  call: ServerWritableStream<Buffer, Buffer>,
  schema: O,
  signal: AbortSignal,
): Promise<void> {
  if (signal.aborted) return;
  for await (const message of messages) {
    if (signal.aborted) return;
    if (!call.write(encodeResponse(schema, message))) await drained(call, signal);
    if (signal.aborted) return;
  }
}

/** Resolves on the stream's next 'drain', or at once when `signal` is (or becomes) aborted. */
function drained(call: ServerWritableStream<Buffer, Buffer>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const settle = (): void => {
      call.off("drain", settle);
      signal.removeEventListener("abort", settle);
      resolve();
    };
    call.once("drain", settle);
    signal.addEventListener("abort", settle, { once: true });
  });
}
