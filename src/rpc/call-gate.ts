/**
 * What the grpc-js call wrappers (unary and server-stream) share: the gate they ask whether calls are taken
 * now, and the encoding of a response into the bytes they write.
 */
import { create, toBinary, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import type { Logger } from "../logger.js";
import { WireMessage } from "../codec/wire-message.js";
import type { Status } from "./call-admission.js";
import type { EndedCall } from "./request-log.js";

/** What a call wrapper asks of the edge: whether calls are taken now, and where to report a call's end. */
export interface CallGate {
  /** The status to refuse a call with now (shutting down, not serving), or undefined to take it. */
  refusal(isPublic: boolean): Status | undefined;
  /** Called when a call ends, with its status, duration and, once admitted, namespace and token name. */
  observe?: ((call: EndedCall) => void) | undefined;
  log: Logger;
}

/** A response's bytes: a message is encoded, a `WireMessage` is already in wire form. */
export function encodeResponse<O extends DescMessage>(schema: O, message: MessageInitShape<O> | WireMessage<O>): Buffer {
  const bytes = message instanceof WireMessage ? message.bytes : toBinary(schema, create(schema, message));
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
