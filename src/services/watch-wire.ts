import { CursorSchema } from "../../gen/sessionstate/v1/types_pb.js";
import {
  AckNoticesResponseSchema,
  AckResultSchema,
  StaleNoticeSchema,
  SubscribeStaleNoticesResponseSchema,
} from "../../gen/sessionstate/v1/watch_pb.js";
import { sessionRefFields, timestampFields } from "../model/event-wire.js";
import type { Notice } from "../notices/notice.js";
import { WireMessage } from "../rpc/wire-message.js";
import { boolField, encodeFields, messageField, stringField, varintField, type WireField } from "../model/wire-fields.js";
import type { AckOutcome, CursorRecord } from "../store/store.js";

// Field numbers come from the generated descriptors, so they cannot drift from the .proto.
const cursorField = CursorSchema.field;
const notice = StaleNoticeSchema.field;
const ackResult = AckResultSchema.field;

function cursorFields(cursor: CursorRecord): WireField[] {
  return [
    ...stringField(cursorField.watcherSessionKey.number, cursor.watcherKey),
    ...messageField(cursorField.target.number, sessionRefFields(cursor.target)),
    ...varintField(cursorField.ackedVersion.number, cursor.acked),
    ...varintField(cursorField.notifiedVersion.number, cursor.notified),
    ...varintField(cursorField.materialVersion.number, cursor.material),
    ...messageField(cursorField.updatedAt.number, timestampFields(cursor.updatedAtMs)),
  ];
}

/** A SubscribeStaleNoticesResponse carrying `item` as its notice, in wire form: sent once per notice. */
export function noticeResponse(item: Notice): WireMessage<typeof SubscribeStaleNoticesResponseSchema> {
  const fields = [
    ...stringField(notice.watcherSessionKey.number, item.watcherKey),
    ...messageField(notice.target.number, sessionRefFields(item.target)),
    ...varintField(notice.changesSince.number, item.changesSince),
    ...varintField(notice.notifiedVersion.number, item.notifiedVersion),
    ...stringField(notice.text.number, item.text),
    ...boolField(notice.wake.number, item.wake),
    ...stringField(notice.contextKey.number, item.contextKey),
  ];
  return new WireMessage(encodeFields(messageField(SubscribeStaleNoticesResponseSchema.field.notice.number, fields)));
}

/** An AckNoticesResponse with one AckResult per outcome, in wire form: sent once per ack call. */
export function ackResponse(outcomes: readonly AckOutcome[]): WireMessage<typeof AckNoticesResponseSchema> {
  const results = outcomes.flatMap((outcome) =>
    messageField(AckNoticesResponseSchema.field.results.number, [
      ...boolField(ackResult.acknowledged.number, outcome.acknowledged),
      ...boolField(ackResult.reopened.number, outcome.reopened),
      ...(outcome.cursor === undefined ? [] : messageField(ackResult.cursor.number, cursorFields(outcome.cursor))),
    ]),
  );
  return new WireMessage(encodeFields(results));
}
