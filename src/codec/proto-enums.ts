import {
  ActorType as ProtoActorType,
  EventKind as ProtoEventKind,
  RunOutcome as ProtoRunOutcome,
  WatchProvenance as ProtoWatchProvenance,
} from "../../gen/sessionstate/v1/types_pb.js";
import type { ActorType, EventKind, RunOutcome } from "../domain/event.js";
import type { WatchProvenance } from "../domain/records.js";

/** A one-to-one table as a map; written as a record so that a missing domain value is a compile error. */
function mapOf<K extends string, V>(table: Record<K, V>): ReadonlyMap<K, V> {
  return new Map(Object.entries(table) as [K, V][]);
}

/** The domain's event kinds and their proto enum values, one to one. */
export const kindsToProto: ReadonlyMap<EventKind, ProtoEventKind> = mapOf<EventKind, ProtoEventKind>({
  human_direct_message: ProtoEventKind.HUMAN_DIRECT_MESSAGE,
  goal_changed: ProtoEventKind.GOAL_CHANGED,
  upstream_missing: ProtoEventKind.UPSTREAM_MISSING,
  child_spawned: ProtoEventKind.CHILD_SPAWNED,
  run_completed: ProtoEventKind.RUN_COMPLETED,
  run_failed: ProtoEventKind.RUN_FAILED,
  compacted: ProtoEventKind.COMPACTED,
  adopted: ProtoEventKind.ADOPTED,
  created: ProtoEventKind.CREATED,
  imported: ProtoEventKind.IMPORTED,
});

/** Watch provenances and their proto enum values, one to one. */
export const provenancesToProto: ReadonlyMap<WatchProvenance, ProtoWatchProvenance> = mapOf<WatchProvenance, ProtoWatchProvenance>({
  explicit: ProtoWatchProvenance.EXPLICIT,
  ambient: ProtoWatchProvenance.AMBIENT,
});

/** The domain's actor types and their proto enum values, one to one. */
export const actorsToProto: ReadonlyMap<ActorType, ProtoActorType> = new Map([
  ["human", ProtoActorType.HUMAN],
  ["agent", ProtoActorType.AGENT],
  ["system", ProtoActorType.SYSTEM],
]);

/** The domain's run outcomes and their proto enum values, one to one. */
export const outcomesToProto: ReadonlyMap<RunOutcome, ProtoRunOutcome> = new Map([
  ["error", ProtoRunOutcome.ERROR],
  ["timeout", ProtoRunOutcome.TIMEOUT],
  ["cancelled", ProtoRunOutcome.CANCELLED],
]);
