import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { SessionRefSchema } from "../../gen/sessionstate/v1/types_pb.js";
import { TimestampSchema } from "@bufbuild/protobuf/wkt";
import type { SessionId } from "../domain/session-key.js";

/**
 * Field writers over protobuf-es's `BinaryWriter`, for the messages the server encodes on every call.
 * Like protobuf-es's own encoder, a scalar at its default (0, false, "") is left out and a message field
 * is always written, so the bytes equal `toBinary` of the same message. Field numbers always come from
 * the generated descriptors (`Schema.field.x.number`), never from literals.
 */

/**
 * UTF-8 through Buffer rather than the default TextEncoder: for the short strings of these messages it is
 * about three times faster (measured: a StateEvent in 2.1 instead of 5.7 µs). Same bytes.
 */
function encodeUtf8(text: string): Uint8Array {
  const bytes = Buffer.from(text, "utf8");
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** A fresh writer; its `finish()` gives the message's bytes. */
export function newWriter(): BinaryWriter {
  return new BinaryWriter(encodeUtf8);
}

const maxUint32 = 0xffff_ffff;

/** An int64 or uint32-ranged integer field (a safe integer); left out when 0. */
export function writeInteger(writer: BinaryWriter, field: number, value: number): void {
  if (!Number.isSafeInteger(value)) throw new RangeError(`field ${field}: ${value} is not a safe integer`);
  if (value === 0) return;
  writer.tag(field, WireType.Varint);
  // A non-negative value below 2^32 has the same varint as uint32, without BigInt.
  if (value > 0 && value <= maxUint32) writer.uint32(value);
  else writer.int64(BigInt(value));
}

/** A repeated enum field, packed as proto3 packs it (and as protobuf-es does); left out when empty. */
export function writePackedEnums(writer: BinaryWriter, field: number, values: readonly number[]): void {
  if (values.length === 0) return;
  writer.tag(field, WireType.LengthDelimited).fork();
  for (const value of values) writer.int32(value);
  writer.join();
}

/** A bool field; left out when false. */
export function writeBool(writer: BinaryWriter, field: number, value: boolean): void {
  if (value) writer.tag(field, WireType.Varint).bool(true);
}

/** A string field; left out when empty. */
export function writeString(writer: BinaryWriter, field: number, value: string): void {
  if (value !== "") writer.tag(field, WireType.LengthDelimited).string(value);
}

/** A message field whose body `write` writes; always written, even when empty. */
export function writeMessage(writer: BinaryWriter, field: number, write: (writer: BinaryWriter) => void): void {
  writer.tag(field, WireType.LengthDelimited).fork();
  write(writer);
  writer.join();
}

/** A message field already in wire form (an event's stored StateEvent bytes), embedded as it is. */
export function writeEncodedMessage(writer: BinaryWriter, field: number, bytes: Uint8Array): void {
  writer.tag(field, WireType.LengthDelimited).bytes(bytes);
}

const sessionRefField = SessionRefSchema.field;
const timestampField = TimestampSchema.field;

/** A SessionRef message field, agent id always filled in. */
export function writeSessionRef(writer: BinaryWriter, field: number, session: Pick<SessionId, "agentId" | "key">): void {
  writeMessage(writer, field, (w) => {
    writeString(w, sessionRefField.key.number, session.key);
    writeString(w, sessionRefField.agentId.number, session.agentId);
  });
}

/** A google.protobuf.Timestamp message field for a time in ms since the epoch, as `timestampFromMs` gives it. */
export function writeTimestamp(writer: BinaryWriter, field: number, ms: number): void {
  const seconds = Math.floor(ms / 1000);
  const nanos = (ms - seconds * 1000) * 1_000_000;
  writeMessage(writer, field, (w) => {
    writeInteger(w, timestampField.seconds.number, seconds);
    writeInteger(w, timestampField.nanos.number, nanos);
  });
}

/** The finished bytes as a Buffer over the same memory (grpc-js sends Buffers). */
export function finishToBuffer(writer: BinaryWriter): Buffer {
  const bytes = writer.finish();
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
