import { create, toBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import {
  ActorType as ProtoActorType,
  EventKind as ProtoEventKind,
  RunOutcome as ProtoRunOutcome,
  StateEventSchema,
} from "../../gen/sessionstate/v1/types_pb.js";
import type { ActorType, EventKind, RunOutcome, StoredEvent } from "./event.js";

export const kindsToProto: ReadonlyMap<EventKind, ProtoEventKind> = new Map([
  ["human_direct_message", ProtoEventKind.HUMAN_DIRECT_MESSAGE],
  ["goal_changed", ProtoEventKind.GOAL_CHANGED],
  ["upstream_missing", ProtoEventKind.UPSTREAM_MISSING],
  ["child_spawned", ProtoEventKind.CHILD_SPAWNED],
  ["run_completed", ProtoEventKind.RUN_COMPLETED],
  ["run_failed", ProtoEventKind.RUN_FAILED],
  ["compacted", ProtoEventKind.COMPACTED],
  ["adopted", ProtoEventKind.ADOPTED],
]);

export const actorsToProto: ReadonlyMap<ActorType, ProtoActorType> = new Map([
  ["human", ProtoActorType.HUMAN],
  ["agent", ProtoActorType.AGENT],
  ["system", ProtoActorType.SYSTEM],
]);

export const outcomesToProto: ReadonlyMap<RunOutcome, ProtoRunOutcome> = new Map([
  ["error", ProtoRunOutcome.ERROR],
  ["timeout", ProtoRunOutcome.TIMEOUT],
  ["cancelled", ProtoRunOutcome.CANCELLED],
]);

/** A stored event as a StateEvent. */
export function eventToProto(event: Omit<StoredEvent, "wire">): MessageInitShape<typeof StateEventSchema> {
  const { payload } = event;
  return {
    sequence: BigInt(event.sequence),
    session: { key: event.sessionKey, agentId: event.agentId },
    kind: kindsToProto.get(event.kind) ?? ProtoEventKind.UNSPECIFIED,
    actorType: actorsToProto.get(event.actorType) ?? ProtoActorType.UNSPECIFIED,
    actorId: event.actorId ?? "",
    runId: event.runId ?? "",
    summary: event.summary,
    occurredAt: timestampFromMs(event.occurredAtMs),
    payload: {
      outcome: payload.outcome === undefined ? ProtoRunOutcome.UNSPECIFIED : (outcomesToProto.get(payload.outcome) ?? ProtoRunOutcome.UNSPECIFIED),
      channel: payload.channel ?? "",
      turns: payload.turns ?? 0,
      catalogId: payload.catalogId ?? "",
      hostId: payload.hostId ?? "",
    },
  };
}

/**
 * The event's wire form: the bytes of its StateEvent message. Events never change once stored, so the
 * store keeps these bytes beside the columns and responses embed them as they are.
 */
export function encodeStateEvent(event: Omit<StoredEvent, "wire">): Uint8Array {
  return toBinary(StateEventSchema, create(StateEventSchema, eventToProto(event)));
}
