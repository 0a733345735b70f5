import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import {
  ActorType as ProtoActorType,
  EventKind as ProtoEventKind,
  RunOutcome as ProtoRunOutcome,
  type SessionRef,
  type SessionRefSchema,
  type StateEventSchema,
} from "../../gen/sessionstate/v1/types_pb.js";
import { invalidArgument } from "../errors.js";
import type { ActorType, EventKind, RunOutcome, StoredEvent } from "../model/event.js";
import { resolveSessionId, type SessionId } from "../model/session-key.js";

const kindsFromProto = new Map<ProtoEventKind, EventKind>([
  [ProtoEventKind.HUMAN_DIRECT_MESSAGE, "human_direct_message"],
  [ProtoEventKind.GOAL_CHANGED, "goal_changed"],
  [ProtoEventKind.UPSTREAM_MISSING, "upstream_missing"],
  [ProtoEventKind.CHILD_SPAWNED, "child_spawned"],
  [ProtoEventKind.RUN_COMPLETED, "run_completed"],
  [ProtoEventKind.RUN_FAILED, "run_failed"],
  [ProtoEventKind.COMPACTED, "compacted"],
  [ProtoEventKind.ADOPTED, "adopted"],
]);
const kindsToProto = new Map([...kindsFromProto].map(([proto, kind]) => [kind, proto]));

const actorsFromProto = new Map<ProtoActorType, ActorType>([
  [ProtoActorType.HUMAN, "human"],
  [ProtoActorType.AGENT, "agent"],
  [ProtoActorType.SYSTEM, "system"],
]);
const actorsToProto = new Map([...actorsFromProto].map(([proto, actor]) => [actor, proto]));

const outcomesFromProto = new Map<ProtoRunOutcome, RunOutcome>([
  [ProtoRunOutcome.ERROR, "error"],
  [ProtoRunOutcome.TIMEOUT, "timeout"],
  [ProtoRunOutcome.CANCELLED, "cancelled"],
]);
const outcomesToProto = new Map([...outcomesFromProto].map(([proto, outcome]) => [outcome, proto]));

/** The event kind of a proto enum value; INVALID_ARGUMENT for UNSPECIFIED and unknown numbers. */
export function kindFromProto(field: string, value: ProtoEventKind): EventKind {
  const kind = kindsFromProto.get(value);
  if (kind === undefined) throw invalidArgument(field, `must be a known EventKind other than UNSPECIFIED (got ${value})`);
  return kind;
}

/** The actor type of a proto enum value; INVALID_ARGUMENT for UNSPECIFIED and unknown numbers. */
export function actorTypeFromProto(field: string, value: ProtoActorType): ActorType {
  const actor = actorsFromProto.get(value);
  if (actor === undefined) throw invalidArgument(field, `must be a known ActorType other than UNSPECIFIED (got ${value})`);
  return actor;
}

/** The run outcome of a proto enum value; `undefined` for UNSPECIFIED, INVALID_ARGUMENT for unknown numbers. */
export function outcomeFromProto(field: string, value: ProtoRunOutcome): RunOutcome | undefined {
  if (value === ProtoRunOutcome.UNSPECIFIED) return undefined;
  const outcome = outcomesFromProto.get(value);
  if (outcome === undefined) throw invalidArgument(field, `must be a known RunOutcome (got ${value})`);
  return outcome;
}

/** Resolves a required SessionRef field; INVALID_ARGUMENT naming `field` when it is missing or malformed. */
export function sessionIdFromRef(field: string, ref: SessionRef | undefined): SessionId {
  if (ref === undefined) throw invalidArgument(field, "is required");
  return resolveSessionId(field, ref.key, ref.agentId);
}

/** A session identity as a SessionRef, agent id always filled in. */
export function sessionIdToRef(session: SessionId): MessageInitShape<typeof SessionRefSchema> {
  return { key: session.key, agentId: session.agentId };
}

/** A stored event as a StateEvent. */
export function eventToProto(event: StoredEvent): MessageInitShape<typeof StateEventSchema> {
  const { payload } = event;
  return {
    sequence: BigInt(event.sequence),
    session: sessionIdToRef({ agentId: event.agentId, key: event.sessionKey }),
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
