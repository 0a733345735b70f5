/**
 * The calls of the HTTP port (Connect, JSON or binary, and gRPC-Web), through connect-es's router: the
 * same handlers as the gRPC port, behind the same gate, the same admission (rpc/call-admission: token and
 * namespace from the HTTP headers), the same stream limits and the same safe statuses. connect-es decodes
 * and encodes the messages (JSON too) and enforces the request size limit; everything else is ours.
 */
import { create, fromBinary, type DescMessage, type DescMethod, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createContextKey, type ConnectRouter, type HandlerContext } from "@connectrpc/connect";
import { createAsyncIterable, type UniversalHandler, type UniversalServerResponse } from "@connectrpc/connect/protocol";
import { status as GrpcStatus } from "@grpc/grpc-js";
import { WireMessage } from "../codec/wire-message.js";
import { admitCaller, type AdmittedCaller, type Authenticate, type MethodScope, type Status } from "./call-admission.js";
import type { CallGate } from "./call-gate.js";
import type { OpenStreams } from "./open-streams.js";
import { methodPath, type CallContext, type ServerStreamHandler, type UnaryHandler } from "./service-adapter.js";
import { statusFromError } from "./status-from-error.js";

/** The connection a call came on (`address:port` of the peer), for the per-connection stream limit. */
export const peerKey = createContextKey<string>("unknown", { description: "the peer's address and port" });

/** One method as the edge registered it: its handler, scope and credentials check. */
export interface RegisteredMethod {
  method: DescMethod;
  handler: UnaryHandler<DescMessage, DescMessage> | ServerStreamHandler<DescMessage, DescMessage>;
  authenticate: Authenticate | undefined;
  scope: MethodScope;
}

/** Registers `methods` on a connect-es router, wrapped as the gRPC port wraps them. */
export function routeMethods(router: ConnectRouter, methods: readonly RegisteredMethod[], gate: CallGate, streams: OpenStreams): void {
  for (const { method, handler, authenticate, scope } of methods) {
    switch (method.methodKind) {
      case "unary":
        router.rpc(method, unaryCall(method, handler as UnaryHandler<DescMessage, DescMessage>, gate, authenticate, scope) as never);
        break;
      case "server_streaming":
        router.rpc(method, serverStreamCall(method, handler as ServerStreamHandler<DescMessage, DescMessage>, gate, streams, authenticate, scope) as never);
        break;
      default:
        throw new Error(`${methodPath(method)}: ${method.methodKind} methods are not supported`);
    }
  }
}

/** How connect-es words a request it cannot decode (JSON: quoting the input; binary: as INTERNAL). */
const undecodable = /^(cannot decode message|parse binary)/;

/**
 * A stream's framed body (Connect streaming, gRPC-Web) whose first frame goes through `rewrite` when it is
 * the end frame (`endFlag`: Connect's end of stream, gRPC-Web's trailers), as it is when a request did not
 * decode. Once the first frame has passed, the rest of the body (a stream's notices) goes on untouched.
 */
async function* withFirstEndFrameRewritten(
  body: AsyncIterable<Uint8Array>,
  endFlag: number,
  rewrite: (payload: Buffer) => Buffer,
): AsyncIterable<Uint8Array> {
  let head: Buffer | undefined = Buffer.alloc(0);
  for await (const chunk of body) {
    if (head === undefined) {
      yield chunk;
      continue;
    }
    head = Buffer.concat([head, chunk]);
    if (head.length < 5 || head.length < 5 + head.readUInt32BE(1)) continue;
    const flags = head[0]!;
    const length = head.readUInt32BE(1);
    if ((flags & endFlag) === 0) {
      yield head;
    } else {
      const rewritten = rewrite(head.subarray(5, 5 + length));
      yield Buffer.concat([Buffer.from([flags]), lengthBytes(rewritten.length), rewritten, head.subarray(5 + length)]);
    }
    head = undefined;
  }
  if (head !== undefined && head.length > 0) yield head;
}

function lengthBytes(length: number): Buffer {
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE(length);
  return bytes;
}

/** Connect's end-of-stream message, its error said as the gRPC port says it when the request did not decode. */
function connectEndStream(payload: Buffer, answer: string): Buffer {
  try {
    const end = JSON.parse(payload.toString("utf8")) as { error?: { code?: unknown; message?: unknown } };
    if (typeof end.error?.message !== "string" || !undecodable.test(end.error.message)) return payload;
    return Buffer.from(JSON.stringify({ ...end, error: { code: "invalid_argument", message: answer } }), "utf8");
  } catch {
    return payload;
  }
}

/** gRPC-Web's trailers, their status said as the gRPC port says it when the request did not decode. */
function grpcWebTrailers(payload: Buffer, answer: string): Buffer {
  const lines = payload.toString("latin1").split("\r\n").filter((line) => line !== "");
  const message = lines.find((line) => line.toLowerCase().startsWith("grpc-message:"));
  if (message === undefined || !undecodable.test(decodeURIComponent(message.slice(message.indexOf(":") + 1).trim()))) return payload;
  const others = lines.filter((line) => !/^grpc-(status|message):/i.test(line));
  return Buffer.from([...others, `grpc-status: ${GrpcStatus.INVALID_ARGUMENT}`, `grpc-message: ${encodeURIComponent(answer)}`, ""].join("\r\n"), "latin1");
}

/**
 * A request connect-es cannot decode is answered in its words, which quote the request ("cannot decode
 * message … from JSON: <the input>"), and a binary one as INTERNAL. Every handler of the router is wrapped
 * so that such an answer says what the gRPC port says of bytes it cannot decode: INVALID_ARGUMENT
 * `request: not a valid <type> message`, quoting nothing of the request: a Connect unary call's error
 * body, a Connect stream's end-of-stream message, and gRPC-Web's trailers (unary and streams).
 */
export function answerUndecodableAsTheGrpcPort(router: ConnectRouter): void {
  const handlers = router.handlers as UniversalHandler[];
  for (const [i, handler] of handlers.entries()) {
    const answer = `request: not a valid ${handler.method.input.typeName} message`;
    const wrapped = async (request: Parameters<UniversalHandler>[0]): Promise<UniversalServerResponse> => {
      const response = await handler(request);
      const contentType = response.header?.get("content-type") ?? "";
      const framed = contentType.startsWith("application/connect+") ? 0x02 : contentType.startsWith("application/grpc-web") ? 0x80 : undefined;
      if (response.body !== undefined && framed !== undefined) {
        const header = new Headers(response.header);
        header.delete("content-length");
        const rewrite = framed === 0x02 ? (payload: Buffer) => connectEndStream(payload, answer) : (payload: Buffer) => grpcWebTrailers(payload, answer);
        return { ...response, header, body: withFirstEndFrameRewritten(response.body, framed, rewrite) };
      }
      const json = contentType.startsWith("application/json");
      if (response.status < 400 || !json || response.body === undefined) return response;
      const chunks: Uint8Array[] = [];
      for await (const chunk of response.body) chunks.push(chunk);
      const bytes = Buffer.concat(chunks);
      let message: unknown;
      try {
        message = (JSON.parse(bytes.toString("utf8")) as { message?: unknown }).message;
      } catch {
        message = undefined;
      }
      if (typeof message !== "string" || !undecodable.test(message)) return { ...response, body: createAsyncIterable([bytes]) };
      const header = new Headers(response.header);
      header.delete("content-length");
      const body = JSON.stringify({ code: "invalid_argument", message: answer });
      return { ...response, status: 400, header, body: createAsyncIterable([new TextEncoder().encode(body)]) };
    };
    handlers[i] = Object.assign(wrapped, {
      protocolNames: handler.protocolNames,
      service: handler.service,
      method: handler.method,
      requestPath: handler.requestPath,
      supportedContentType: handler.supportedContentType,
      allowedMethods: handler.allowedMethods,
    });
  }
}

/** The caller of an HTTP call, or the ConnectError that refuses it (the gate's, or admission's). */
function admit(context: HandlerContext, gate: CallGate, authenticate: Authenticate | undefined, scope: MethodScope): AdmittedCaller {
  const refusal = gate.refusal(scope === "public");
  if (refusal !== undefined) throw connectError(refusal);
  const headers = context.requestHeader;
  const caller = admitCaller(
    (name) => {
      const value = headers.get(name);
      return value === null ? [] : [value];
    },
    authenticate,
    scope,
  );
  if ("status" in caller) throw connectError(caller.status);
  return caller;
}

function unaryCall(
  method: DescMethod,
  handler: UnaryHandler<DescMessage, DescMessage>,
  gate: CallGate,
  authenticate: Authenticate | undefined,
  scope: MethodScope,
): (request: MessageShape<DescMessage>, context: HandlerContext) => Promise<MessageShape<DescMessage>> {
  const path = methodPath(method);
  return async (request, httpContext) => {
    const started = performance.now();
    let caller: AdmittedCaller | undefined;
    let code: number = GrpcStatus.OK;
    try {
      caller = admit(httpContext, gate, authenticate, scope);
      const context: CallContext = { signal: httpContext.signal, method: path, principal: caller.principal, namespace: caller.namespace, peer: httpContext.values.get(peerKey) };
      return asMessage(method.output, await handler(request, context));
    } catch (err) {
      const refused = asConnectError(err, gate, path);
      code = refused.code;
      throw refused;
    } finally {
      gate.observe?.({ protocol: httpContext.protocolName, method: path, code, seconds: (performance.now() - started) / 1000, namespace: caller?.namespace, token: caller?.principal?.name });
    }
  };
}

function serverStreamCall(
  method: DescMethod,
  handler: ServerStreamHandler<DescMessage, DescMessage>,
  gate: CallGate,
  streams: OpenStreams,
  authenticate: Authenticate | undefined,
  scope: MethodScope,
): (request: MessageShape<DescMessage>, context: HandlerContext) => AsyncGenerator<MessageShape<DescMessage>> {
  const path = methodPath(method);
  return async function* (request, httpContext) {
    const started = performance.now();
    let caller: AdmittedCaller | undefined;
    let code: number = GrpcStatus.OK;
    // Why the server ended the stream early (shutdown, the database lost), when it did.
    let endedWith: Status | undefined;
    const abort = new AbortController();
    const onClientGone = (): void => abort.abort();
    httpContext.signal.addEventListener("abort", onClientGone, { once: true });
    let release: (() => void) | undefined;
    try {
      caller = admit(httpContext, gate, authenticate, scope);
      const opened = streams.open(httpContext.values.get(peerKey), scope === "public", (status) => {
        endedWith = status;
        abort.abort();
      });
      if (typeof opened !== "function") throw connectError(opened.status);
      release = opened;
      const context: CallContext = { signal: abort.signal, method: path, principal: caller.principal, namespace: caller.namespace, peer: httpContext.values.get(peerKey) };
      const messages = handler(request, context)[Symbol.asyncIterator]();
      const aborted = new Promise<"aborted">((resolve) => abort.signal.addEventListener("abort", () => resolve("aborted"), { once: true }));
      try {
        for (;;) {
          const next = abort.signal.aborted ? "aborted" : await Promise.race([messages.next(), aborted]);
          if (next === "aborted" || next.done === true) break;
          yield asMessage(method.output, next.value);
        }
      } finally {
        void messages.return?.();
      }
      if (endedWith !== undefined) throw connectError(endedWith);
      if (httpContext.signal.aborted) code = GrpcStatus.CANCELLED;
    } catch (err) {
      const refused = asConnectError(endedWith === undefined ? err : connectError(endedWith), gate, path);
      code = refused.code;
      throw refused;
    } finally {
      httpContext.signal.removeEventListener("abort", onClientGone);
      release?.();
      abort.abort();
      gate.observe?.({ protocol: httpContext.protocolName, method: path, code, seconds: (performance.now() - started) / 1000, namespace: caller?.namespace, token: caller?.principal?.name });
    }
  };
}

/** A handler's response as connect-es takes it: a message (a `WireMessage` is decoded from its bytes). */
function asMessage<O extends DescMessage>(schema: O, response: MessageInitShape<O> | WireMessage<O>): MessageShape<O> {
  return response instanceof WireMessage ? fromBinary(schema, response.bytes) : create(schema, response);
}

/** A status as connect-es sends it: the codes are gRPC's, by number. */
function connectError(status: Status): ConnectError {
  return new ConnectError(status.details, status.code as number as Code);
}

/** Anything thrown, as a safe ConnectError: ours pass through, the rest as the gRPC port maps them. */
function asConnectError(err: unknown, gate: CallGate, path: string): ConnectError {
  if (err instanceof ConnectError) return err;
  return connectError(statusFromError(err, gate.log, path));
}
