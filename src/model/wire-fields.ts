/**
 * Hand encoding for the messages of the hot paths (appends, status reads, notices, acks, and each event's
 * stored StateEvent), where protobuf-es's reflective `create` + `toBinary` cost more per message than
 * everything else the server does with it, and for embedding already-encoded events. A message
 * is listed as its fields in field-number order, each field knowing its encoded size, so the whole message
 * is written into one Buffer of exactly the right size. Like any proto3 encoder, scalar fields at their
 * default (0, false, "") are left out; message fields are always written. Tests check the bytes against
 * `toBinary` of the same message.
 */

/** One field of a message to encode: a varint (integers and bools), a string, or a nested message. */
export type WireField =
  | { readonly number: number; readonly kind: "varint"; readonly value: number; readonly size: number }
  | { readonly number: number; readonly kind: "string"; readonly value: string; readonly length: number; readonly size: number }
  | { readonly number: number; readonly kind: "message"; readonly fields: readonly WireField[]; readonly length: number; readonly size: number }
  | { readonly number: number; readonly kind: "encoded"; readonly bytes: Uint8Array; readonly size: number };

const varintType = 0;
const lengthDelimitedType = 2;

function varintSize(value: number): number {
  if (value < 0) return 10; // a negative int64 is its 64-bit two's complement
  let size = 1;
  for (let rest = value; rest >= 128; rest = Math.floor(rest / 128)) size++;
  return size;
}

const tagSize = (number: number): number => varintSize(number * 8);

/** An integer field (int32, int64, uint32, enum) of a safe integer value; left out when 0. */
export function varintField(number: number, value: number): WireField[] {
  if (!Number.isSafeInteger(value)) throw new RangeError(`field ${number}: ${value} is not a safe integer`);
  return value === 0 ? [] : [{ number, kind: "varint", value, size: tagSize(number) + varintSize(value) }];
}

/** A bool field; left out when false. */
export function boolField(number: number, value: boolean): WireField[] {
  return varintField(number, value ? 1 : 0);
}

/** A string field, UTF-8 encoded; left out when empty. */
export function stringField(number: number, value: string): WireField[] {
  if (value === "") return [];
  const length = Buffer.byteLength(value, "utf8");
  return [{ number, kind: "string", value, length, size: tagSize(number) + varintSize(length) + length }];
}

/** A message field (one element of a repeated message field, too); always written, even when empty. */
export function messageField(number: number, fields: readonly WireField[]): WireField[] {
  let length = 0;
  for (const field of fields) length += field.size;
  return [{ number, kind: "message", fields, length, size: tagSize(number) + varintSize(length) + length }];
}

/**
 * A message field whose message is already in wire form (an event's stored StateEvent bytes): written as
 * it is, never decoded. Always written, even when empty.
 */
export function encodedMessageField(number: number, bytes: Uint8Array): WireField[] {
  return [{ number, kind: "encoded", bytes, size: tagSize(number) + varintSize(bytes.byteLength) + bytes.byteLength }];
}

/** The wire bytes of a message made of `fields`. */
export function encodeFields(fields: readonly WireField[]): Buffer {
  let size = 0;
  for (const field of fields) size += field.size;
  const out = Buffer.allocUnsafe(size);
  const end = writeFields(out, 0, fields);
  if (end !== size) throw new Error(`encoded ${end} bytes, expected ${size}`);
  return out;
}

function writeVarint(out: Buffer, offset: number, value: number): number {
  if (value < 0) return writeNegativeVarint(out, offset, value);
  let at = offset;
  let rest = value;
  while (rest >= 128) {
    out[at++] = (rest % 128) | 128;
    rest = Math.floor(rest / 128);
  }
  out[at++] = rest;
  return at;
}

function writeNegativeVarint(out: Buffer, offset: number, value: number): number {
  let at = offset;
  let rest = BigInt.asUintN(64, BigInt(value));
  for (let i = 0; i < 9; i++) {
    out[at++] = Number(rest & 0x7fn) | 128;
    rest >>= 7n;
  }
  out[at++] = Number(rest);
  return at;
}

function writeFields(out: Buffer, offset: number, fields: readonly WireField[]): number {
  let at = offset;
  for (const field of fields) {
    switch (field.kind) {
      case "varint":
        at = writeVarint(out, at, field.number * 8 + varintType);
        at = writeVarint(out, at, field.value);
        break;
      case "string":
        at = writeVarint(out, at, field.number * 8 + lengthDelimitedType);
        at = writeVarint(out, at, field.length);
        at += out.write(field.value, at, field.length, "utf8");
        break;
      case "message":
        at = writeVarint(out, at, field.number * 8 + lengthDelimitedType);
        at = writeVarint(out, at, field.length);
        at = writeFields(out, at, field.fields);
        break;
      case "encoded":
        at = writeVarint(out, at, field.number * 8 + lengthDelimitedType);
        at = writeVarint(out, at, field.bytes.byteLength);
        out.set(field.bytes, at);
        at += field.bytes.byteLength;
        break;
    }
  }
  return at;
}
