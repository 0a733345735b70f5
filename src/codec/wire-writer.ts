import { WireType } from "@bufbuild/protobuf/wire";
import { SessionRefSchema } from "../../gen/sessionstate/v1/types_pb.js";
import { TimestampSchema } from "@bufbuild/protobuf/wkt";
import type { SessionId } from "../domain/session-key.js";

/**
 * Field writers over `WireWriter` (below), for the messages the server encodes on every call.
 * Like protobuf-es's own encoder, a scalar at its default (0, false, "") is left out and a message field
 * is always written, so the bytes equal `toBinary` of the same message. Field numbers always come from
 * the generated descriptors (`Schema.field.x.number`), never from literals.
 */

/**
 * A protobuf binary writer into one growing Buffer, for the messages the server writes on every call. It
 * writes what protobuf-es's `WireWriter` writes, with the methods these encoders use, but without its
 * per-call arrays: protobuf-es keeps the bytes in a JavaScript array of numbers and a list of chunks, and
 * every nested message forks both, which on Append was the largest share of the server's allocations after
 * grpc-js's own (measured with the sampling heap profiler under h2load). A nested message reserves one
 * byte for its length and moves its body along in the rare case the length needs more.
 */
export class WireWriter {
  private buf = Buffer.allocUnsafe(256);
  private pos = 0;
  /** Where each open nested message's reserved length byte is. */
  private readonly forks: number[] = [];

  private ensure(bytes: number): void {
    if (this.pos + bytes <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + bytes));
    this.buf.copy(grown, 0, 0, this.pos);
    this.buf = grown;
  }

  /** A field's tag. */
  tag(field: number, wireType: WireType): this {
    return this.uint32(field * 8 + wireType);
  }

  /** A varint of a value in [0, 2^32). */
  uint32(value: number): this {
    this.ensure(5);
    while (value > 0x7f) {
      this.buf[this.pos++] = (value & 0x7f) | 0x80;
      value >>>= 7;
    }
    this.buf[this.pos++] = value;
    return this;
  }

  /** A varint of a 64-bit integer: a negative one as its two's complement, ten bytes. */
  int64(value: bigint): this {
    let rest = BigInt.asUintN(64, value);
    this.ensure(10);
    while (rest > 0x7fn) {
      this.buf[this.pos++] = Number(rest & 0x7fn) | 0x80;
      rest >>= 7n;
    }
    this.buf[this.pos++] = Number(rest);
    return this;
  }

  /** A varint of an int32 (an enum value): a negative one sign-extended to ten bytes, as protobuf does. */
  int32(value: number): this {
    return value >= 0 ? this.uint32(value) : this.int64(BigInt(value));
  }

  bool(value: boolean): this {
    return this.uint32(value ? 1 : 0);
  }

  /** A length-delimited UTF-8 string. */
  string(value: string): this {
    const length = Buffer.byteLength(value, "utf8");
    this.uint32(length);
    this.ensure(length);
    this.pos += this.buf.write(value, this.pos, length, "utf8");
    return this;
  }

  /** Length-delimited bytes. */
  bytes(value: Uint8Array): this {
    this.uint32(value.byteLength);
    this.ensure(value.byteLength);
    this.buf.set(value, this.pos);
    this.pos += value.byteLength;
    return this;
  }

  /** Starts a nested message (after its tag); `join` ends it. */
  fork(): this {
    this.ensure(1);
    this.forks.push(this.pos++);
    return this;
  }

  /** Ends the innermost nested message, writing its length before it. */
  join(): this {
    const at = this.forks.pop()!;
    const length = this.pos - at - 1;
    if (length < 0x80) {
      this.buf[at] = length;
      return this;
    }
    let size = 1;
    for (let rest = length; rest > 0x7f; rest >>>= 7) size++;
    this.ensure(size - 1);
    this.buf.copyWithin(at + size, at + 1, this.pos);
    this.pos += size - 1;
    let rest = length;
    for (let i = at; rest > 0x7f; i++, rest >>>= 7) this.buf[i] = (rest & 0x7f) | 0x80;
    this.buf[at + size - 1] = rest;
    return this;
  }

  /** The message's bytes (a view of the writer's memory: the writer is not used again). */
  finish(): Buffer {
    if (this.forks.length > 0) throw new Error("a nested message was not joined");
    return this.buf.subarray(0, this.pos);
  }
}

/** A fresh writer; its `finish()` gives the message's bytes. */
export function newWriter(): WireWriter {
  return new WireWriter();
}

const maxUint32 = 0xffff_ffff;

/** An int64 or uint32-ranged integer field (a safe integer); left out when 0. */
export function writeInteger(writer: WireWriter, field: number, value: number): void {
  if (!Number.isSafeInteger(value)) throw new RangeError(`field ${field}: ${value} is not a safe integer`);
  if (value === 0) return;
  writer.tag(field, WireType.Varint);
  // A non-negative value below 2^32 has the same varint as uint32, without BigInt.
  if (value > 0 && value <= maxUint32) writer.uint32(value);
  else writer.int64(BigInt(value));
}

/** A repeated enum field, packed as proto3 packs it (and as protobuf-es does); left out when empty. */
export function writePackedEnums(writer: WireWriter, field: number, values: readonly number[]): void {
  if (values.length === 0) return;
  writer.tag(field, WireType.LengthDelimited).fork();
  for (const value of values) writer.int32(value);
  writer.join();
}

/** A bool field; left out when false. */
export function writeBool(writer: WireWriter, field: number, value: boolean): void {
  if (value) writer.tag(field, WireType.Varint).bool(true);
}

/** A string field; left out when empty. */
export function writeString(writer: WireWriter, field: number, value: string): void {
  if (value !== "") writer.tag(field, WireType.LengthDelimited).string(value);
}

/** A message field whose body `write` writes; always written, even when empty. */
export function writeMessage(writer: WireWriter, field: number, write: (writer: WireWriter) => void): void {
  writer.tag(field, WireType.LengthDelimited).fork();
  write(writer);
  writer.join();
}

/** A message field already in wire form (an event's stored StateEvent bytes), embedded as it is. */
export function writeEncodedMessage(writer: WireWriter, field: number, bytes: Uint8Array): void {
  writer.tag(field, WireType.LengthDelimited).bytes(bytes);
}

const sessionRefField = SessionRefSchema.field;
const timestampField = TimestampSchema.field;

/** A SessionRef message field, agent id always filled in. */
export function writeSessionRef(writer: WireWriter, field: number, session: Pick<SessionId, "agentId" | "key">): void {
  writeMessage(writer, field, (w) => {
    writeString(w, sessionRefField.key.number, session.key);
    writeString(w, sessionRefField.agentId.number, session.agentId);
  });
}

/** A google.protobuf.Timestamp message field for a time in ms since the epoch, as `timestampFromMs` gives it. */
export function writeTimestamp(writer: WireWriter, field: number, ms: number): void {
  const seconds = Math.floor(ms / 1000);
  const nanos = (ms - seconds * 1000) * 1_000_000;
  writeMessage(writer, field, (w) => {
    writeInteger(w, timestampField.seconds.number, seconds);
    writeInteger(w, timestampField.nanos.number, nanos);
  });
}

/** The finished bytes (grpc-js sends Buffers). */
export function finishToBuffer(writer: WireWriter): Buffer {
  return writer.finish();
}
