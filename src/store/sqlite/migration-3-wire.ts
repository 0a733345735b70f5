import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";

/**
 * Migration 3's encoder, frozen: the StateEvent wire bytes of an event row exactly as the release that
 * shipped migration 3 wrote them (sessionstate.v1.StateEvent as of that release, field numbers written
 * out). A migration that has shipped must never change, so this never calls live code; the live encoder
 * is src/codec/event-codec.ts.
 */

/** The columns of a schema-2 events row that migration 3 encodes. */
export interface Version2EventRow {
  sequence: number;
  agent_id: string;
  session_key: string;
  kind: string;
  actor_type: string;
  actor_id: string | null;
  run_id: string | null;
  summary: string;
  occurred_at_ms: number;
  outcome: string | null;
  channel: string | null;
  turns: number | null;
  catalog_id: string | null;
  host_id: string | null;
}

const kindNumbers: Readonly<Record<string, number>> = {
  human_direct_message: 1,
  goal_changed: 2,
  upstream_missing: 3,
  child_spawned: 4,
  run_completed: 5,
  run_failed: 6,
  compacted: 7,
  adopted: 8,
};
const actorNumbers: Readonly<Record<string, number>> = { human: 1, agent: 2, system: 3 };
const outcomeNumbers: Readonly<Record<string, number>> = { error: 1, timeout: 2, cancelled: 3 };

function varint(writer: BinaryWriter, field: number, value: number): void {
  if (value !== 0) writer.tag(field, WireType.Varint).int64(BigInt(value));
}

function text(writer: BinaryWriter, field: number, value: string | null): void {
  if (value !== null && value !== "") writer.tag(field, WireType.LengthDelimited).string(value);
}

/** The StateEvent bytes of one schema-2 row, as migration 3 stores them. */
export function encodeVersion2Event(row: Version2EventRow): Uint8Array {
  const writer = new BinaryWriter();
  varint(writer, 1, row.sequence);
  writer.tag(2, WireType.LengthDelimited).fork();
  text(writer, 1, row.session_key);
  text(writer, 2, row.agent_id);
  writer.join();
  varint(writer, 3, kindNumbers[row.kind] ?? 0);
  varint(writer, 4, actorNumbers[row.actor_type] ?? 0);
  text(writer, 5, row.actor_id);
  text(writer, 6, row.run_id);
  text(writer, 7, row.summary);
  const seconds = Math.floor(row.occurred_at_ms / 1000);
  writer.tag(8, WireType.LengthDelimited).fork();
  varint(writer, 1, seconds);
  varint(writer, 2, (row.occurred_at_ms - seconds * 1000) * 1_000_000);
  writer.join();
  writer.tag(9, WireType.LengthDelimited).fork();
  varint(writer, 1, row.outcome === null ? 0 : (outcomeNumbers[row.outcome] ?? 0));
  text(writer, 2, row.channel);
  varint(writer, 3, row.turns ?? 0);
  text(writer, 4, row.catalog_id);
  text(writer, 5, row.host_id);
  writer.join();
  return writer.finish();
}
