import type { DescMessage } from "@bufbuild/protobuf";

/**
 * A response already in wire form. A handler returns one (or sends one on a stream) instead of a message
 * when it encodes the bytes itself (src/codec/response-codec.ts), for example to embed stored events
 * without decoding and re-encoding them.
 */
export class WireMessage<O extends DescMessage> {
  /** Only for type checking: the message type these bytes encode. */
  declare readonly schema: O;

  constructor(readonly bytes: Uint8Array) {}
}
