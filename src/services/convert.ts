import type { MessageInitShape } from "@bufbuild/protobuf";
import {
  ActorType as ProtoActorType,
  EventKind as ProtoEventKind,
  RunOutcome as ProtoRunOutcome,
  WatchProvenance as ProtoWatchProvenance,
  type SessionRef,
  type SessionRefSchema,
} from "../../gen/sessionstate/v1/types_pb.js";
import { invalidArgument } from "../errors.js";
import type { ActorType, EventKind, RunOutcome } from "../domain/event.js";
import { actorsToProto, kindsToProto, outcomesToProto, provenancesToProto } from "../codec/proto-enums.js";
import type { WatchProvenance } from "../domain/records.js";
import { resolveSessionId, type SessionId } from "../domain/session-key.js";

const kindsFromProto = new Map([...kindsToProto].map(([kind, proto]) => [proto, kind]));
const actorsFromProto = new Map([...actorsToProto].map(([actor, proto]) => [proto, actor]));
const outcomesFromProto = new Map([...outcomesToProto].map(([outcome, proto]) => [proto, outcome]));
const provenancesFromProto = new Map([...provenancesToProto].map(([provenance, proto]) => [proto, provenance]));

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

/** The watch provenance of a proto enum value; INVALID_ARGUMENT for UNSPECIFIED and unknown numbers. */
export function provenanceFromProto(field: string, value: ProtoWatchProvenance): WatchProvenance {
  const provenance = provenancesFromProto.get(value);
  if (provenance === undefined) throw invalidArgument(field, `must be a known WatchProvenance (got ${value})`);
  return provenance;
}

/** The run outcome of a proto enum value; `undefined` for UNSPECIFIED, INVALID_ARGUMENT for unknown numbers. */
export function outcomeFromProto(field: string, value: ProtoRunOutcome): RunOutcome | undefined {
  if (value === ProtoRunOutcome.UNSPECIFIED) return undefined;
  const outcome = outcomesFromProto.get(value);
  if (outcome === undefined) throw invalidArgument(field, `must be a known RunOutcome (got ${value})`);
  return outcome;
}

/**
 * Resolves a required SessionRef field into a session of `namespace` (the request's); INVALID_ARGUMENT
 * naming `field` when it is missing or malformed.
 */
export function sessionIdFromRef(field: string, ref: SessionRef | undefined, namespace: string): SessionId {
  if (ref === undefined) throw invalidArgument(field, "is required");
  return resolveSessionId(field, ref.key, ref.agentId, namespace);
}

/** A session identity as a SessionRef, agent id always filled in. */
export function sessionIdToRef(session: SessionId): MessageInitShape<typeof SessionRefSchema> {
  return { key: session.key, agentId: session.agentId };
}
