import { RunOutcome as ProtoRunOutcome, CursorSchema, EventPayloadSchema, StateEventSchema } from "../../gen/sessionstate/v1/types_pb.js";
import type { EventFields } from "../domain/event.js";
import type { CursorRecord } from "../domain/records.js";
import { hasLiveNotice } from "../domain/cursor-rules.js";
import { noticeFromCursor } from "../domain/notice.js";
import { actorsToProto, kindsToProto, outcomesToProto, provenancesToProto } from "./proto-enums.js";
import {
  newWriter,
  type WireWriter,
  writeInteger,
  writeMessage,
  writePackedEnums,
  writeSessionRef,
  writeString,
  writeTimestamp,
} from "./wire-writer.js";

const eventField = StateEventSchema.field;
const payloadField = EventPayloadSchema.field;
const cursorField = CursorSchema.field;

/**
 * An event as StateEvent wire bytes: the one encoder of StateEvent. Events never change once stored, so
 * the store keeps these bytes with the event and responses embed them as they are.
 */
export function encodeStateEvent(event: EventFields): Uint8Array {
  const writer = newWriter();
  const { payload } = event;
  writeInteger(writer, eventField.sequence.number, event.sequence);
  writeSessionRef(writer, eventField.session.number, { agentId: event.agentId, key: event.sessionKey });
  writeInteger(writer, eventField.kind.number, kindsToProto.get(event.kind)!);
  writeInteger(writer, eventField.actorType.number, actorsToProto.get(event.actorType)!);
  writeString(writer, eventField.actorId.number, event.actorId ?? "");
  writeString(writer, eventField.runId.number, event.runId ?? "");
  writeString(writer, eventField.summary.number, event.summary);
  writeTimestamp(writer, eventField.occurredAt.number, event.occurredAtMs);
  writeMessage(writer, eventField.payload.number, (w) => {
    const outcome = payload.outcome === undefined ? ProtoRunOutcome.UNSPECIFIED : outcomesToProto.get(payload.outcome)!;
    writeInteger(w, payloadField.outcome.number, outcome);
    writeString(w, payloadField.channel.number, payload.channel ?? "");
    writeInteger(w, payloadField.turns.number, payload.turns ?? 0);
    writeString(w, payloadField.catalogId.number, payload.catalogId ?? "");
    writeString(w, payloadField.hostId.number, payload.hostId ?? "");
    writeString(w, payloadField.reason.number, payload.reason ?? "");
  });
  return writer.finish();
}

/** A Cursor message field: the one encoder of Cursor. */
export function writeCursor(writer: WireWriter, field: number, cursor: CursorRecord, claimedBy = ""): void {
  writeMessage(writer, field, (w) => {
    writeString(w, cursorField.watcherSessionKey.number, cursor.watcherKey);
    writeSessionRef(w, cursorField.target.number, cursor.target);
    writeInteger(w, cursorField.ackedVersion.number, cursor.acked);
    writeInteger(w, cursorField.notifiedVersion.number, cursor.notified);
    writeInteger(w, cursorField.materialVersion.number, cursor.material);
    writeTimestamp(w, cursorField.updatedAt.number, cursor.updatedAtMs);
    writeInteger(w, cursorField.provenance.number, provenancesToProto.get(cursor.provenance)!);
    writePackedEnums(w, cursorField.extraMaterialKinds.number, cursor.extraKinds.map((kind) => kindsToProto.get(kind)!));
    if (hasLiveNotice(cursor)) writeString(w, cursorField.pendingNoticeText.number, noticeFromCursor(cursor).text);
    writeString(w, cursorField.claimedBy.number, claimedBy);
  });
}
