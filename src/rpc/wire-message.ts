import { create, toBinary, type DescMessage, type MessageInitShape } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";

/**
 * A response already in wire form. A handler returns one instead of a message when it composes the bytes
 * itself, to embed stored message bytes (events) without decoding and re-encoding them.
 */
export class WireMessage<O extends DescMessage> {
  /** Only for type checking: the message type these bytes encode. */
  declare readonly schema: O;

  constructor(readonly bytes: Uint8Array) {}
}

/** A part of a message in wire form: a message's fields, or an embedded message field. */
type Part<O extends DescMessage> =
  | { fields: MessageInitShape<O> }
  | { field: number; messages: readonly Uint8Array[] };

/**
 * The wire bytes of a message of type `schema` written as consecutive parts: `fields` parts are encoded
 * as usual, `messages` parts write each of their (already encoded) messages as field `field`. Encoded
 * protobuf messages concatenate, so this equals encoding the whole message at once; with parts in field
 * number order the bytes are the same as `toBinary` would give.
 */
export function composeMessage<O extends DescMessage>(schema: O, parts: readonly Part<O>[]): Uint8Array {
  const writer = new BinaryWriter();
  for (const part of parts) {
    if ("fields" in part) writer.raw(toBinary(schema, create(schema, part.fields)));
    else for (const message of part.messages) writer.tag(part.field, WireType.LengthDelimited).bytes(message);
  }
  return writer.finish();
}
