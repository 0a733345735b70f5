import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs, TimestampSchema } from "@bufbuild/protobuf/wkt";
import {
  ActorType as ProtoActorType,
  EventKind as ProtoEventKind,
  EventPayloadSchema,
  RunOutcome as ProtoRunOutcome,
  SessionRefSchema,
  StateEventSchema,
} from "../../gen/sessionstate/v1/types_pb.js";
import { encodeFields, messageField, stringField, varintField, type WireField } from "./wire-fields.js";
import type { ActorType, EventKind, RunOutcome, StoredEvent } from "./event.js";
import type { SessionId } from "./session-key.js";

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

/** A SessionRef's fields, for hand-encoded messages. */
export function sessionRefFields(session: SessionId): WireField[] {
  const field = SessionRefSchema.field;
  return [...stringField(field.key.number, session.key), ...stringField(field.agentId.number, session.agentId)];
}

/** A google.protobuf.Timestamp's fields for a time in milliseconds, as `timestampFromMs` gives them. */
export function timestampFields(ms: number): WireField[] {
  const field = TimestampSchema.field;
  const seconds = Math.floor(ms / 1000);
  return [...varintField(field.seconds.number, seconds), ...varintField(field.nanos.number, (ms - seconds * 1000) * 1_000_000)];
}

/**
 * The event's wire form: the bytes of its StateEvent message (`eventToProto`, encoded), written by hand
 * because every append encodes one. Events never change once stored, so the store keeps these bytes beside
 * the columns and responses embed them as they are.
 */
export function encodeStateEvent(event: Omit<StoredEvent, "wire">): Uint8Array {
  const field = StateEventSchema.field;
  const payloadField = EventPayloadSchema.field;
  const { payload } = event;
  return encodeFields([
    ...varintField(field.sequence.number, event.sequence),
    ...messageField(field.session.number, sessionRefFields({ agentId: event.agentId, key: event.sessionKey })),
    ...varintField(field.kind.number, kindsToProto.get(event.kind) ?? ProtoEventKind.UNSPECIFIED),
    ...varintField(field.actorType.number, actorsToProto.get(event.actorType) ?? ProtoActorType.UNSPECIFIED),
    ...stringField(field.actorId.number, event.actorId ?? ""),
    ...stringField(field.runId.number, event.runId ?? ""),
    ...stringField(field.summary.number, event.summary),
    ...messageField(field.occurredAt.number, timestampFields(event.occurredAtMs)),
    ...messageField(field.payload.number, [
      ...varintField(
        payloadField.outcome.number,
        payload.outcome === undefined ? ProtoRunOutcome.UNSPECIFIED : (outcomesToProto.get(payload.outcome) ?? ProtoRunOutcome.UNSPECIFIED),
      ),
      ...stringField(payloadField.channel.number, payload.channel ?? ""),
      ...varintField(payloadField.turns.number, payload.turns ?? 0),
      ...stringField(payloadField.catalogId.number, payload.catalogId ?? ""),
      ...stringField(payloadField.hostId.number, payload.hostId ?? ""),
    ]),
  ]);
}
