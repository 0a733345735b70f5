import {
  SessionStatusResponseSchema,
  StateChangesSchema,
} from "../../gen/sessionstate/v1/reconcile_pb.js";
import {
  AppendBatchResponseSchema,
  AppendFailureSchema,
  AppendResponseSchema,
  AppendResultSchema,
} from "../../gen/sessionstate/v1/signal_log_pb.js";
import {
  AckNoticesResponseSchema,
  AckResultSchema,
  ListWatchesResponseSchema,
  StaleNoticeSchema,
  SubscribeStaleNoticesResponseSchema,
  SyncedSchema,
  WatchResponseSchema,
} from "../../gen/sessionstate/v1/watch_pb.js";
import type { Notice } from "../domain/notice.js";
import type { AckOutcome, AppendOutcome, CursorRecord, SessionStatus } from "../domain/records.js";
import type { SessionId } from "../domain/session-key.js";
import type { StatusName } from "../errors.js";
import { writeCursor } from "./event-codec.js";
import { WireMessage } from "./wire-message.js";
import {
  finishToBuffer,
  newWriter,
  type WireWriter,
  writeBool,
  writeEncodedMessage,
  writeInteger,
  writeMessage,
  writeSessionRef,
  writeString,
} from "./wire-writer.js";

/**
 * The responses the server sends on its hot paths, written field by field on `WireWriter`: one encoder
 * per message. Stored events are embedded as the bytes kept with them, never decoded.
 */

const appendField = AppendResponseSchema.field;

function writeAppendResponseFields(writer: WireWriter, outcome: AppendOutcome): void {
  if (!outcome.recorded) return writeInteger(writer, appendField.stateVersion.number, outcome.stateVersion);
  writeBool(writer, appendField.recorded.number, true);
  writeBool(writer, appendField.deduplicated.number, outcome.deduplicated);
  writeEncodedMessage(writer, appendField.event.number, outcome.event.wire);
  writeInteger(writer, appendField.stateVersion.number, outcome.stateVersion);
}

/** An AppendResponse. */
export function appendResponse(outcome: AppendOutcome): WireMessage<typeof AppendResponseSchema> {
  const writer = newWriter();
  writeAppendResponseFields(writer, outcome);
  return new WireMessage(finishToBuffer(writer));
}

/** One entry's failure in an AppendBatch: its status and client-safe message. */
export interface AppendEntryFailure {
  code: StatusName;
  message: string;
}

/** The numbers of status codes, as gRPC and Connect number them (google.rpc.Code). */
const statusNumbers: Record<StatusName, number> = {
  INVALID_ARGUMENT: 3,
  NOT_FOUND: 5,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
};

/** An AppendBatchResponse: per entry, its AppendResponse or its failure. */
export function appendBatchResponse(
  results: readonly (AppendOutcome | AppendEntryFailure)[],
): WireMessage<typeof AppendBatchResponseSchema> {
  const writer = newWriter();
  const resultField = AppendResultSchema.field;
  const failureField = AppendFailureSchema.field;
  for (const entry of results) {
    writeMessage(writer, AppendBatchResponseSchema.field.results.number, (w) => {
      if ("recorded" in entry) {
        writeMessage(w, resultField.response.number, (r) => writeAppendResponseFields(r, entry));
      } else {
        writeMessage(w, resultField.failure.number, (f) => {
          writeInteger(f, failureField.code.number, statusNumbers[entry.code]);
          writeString(f, failureField.message.number, entry.message);
        });
      }
    });
  }
  return new WireMessage(finishToBuffer(writer));
}

/** A SessionStatusResponse; `state_changes` only when the status holds changes. */
export function sessionStatusResponse(session: SessionId, status: SessionStatus): WireMessage<typeof SessionStatusResponseSchema> {
  const writer = newWriter();
  const field = SessionStatusResponseSchema.field;
  const changesField = StateChangesSchema.field;
  writeSessionRef(writer, field.session.number, session);
  writeInteger(writer, field.stateVersion.number, status.stateVersion);
  const { changes } = status;
  if (changes !== undefined) {
    writeMessage(writer, field.stateChanges.number, (w) => {
      for (const event of changes.events) writeEncodedMessage(w, changesField.events.number, event.wire);
      writeBool(w, changesField.historyGap.number, changes.historyGap);
      writeBool(w, changesField.truncated.number, changes.truncated);
      writeInteger(w, changesField.earliestAvailableSequence.number, changes.earliestAvailableSequence);
    });
  }
  return new WireMessage(finishToBuffer(writer));
}

const noticeField = StaleNoticeSchema.field;
const streamField = SubscribeStaleNoticesResponseSchema.field;

/** A SubscribeStaleNoticesResponse carrying one notice. */
export function noticeResponse(notice: Notice, claim?: { claimId: string; deliveryCount: number }): WireMessage<typeof SubscribeStaleNoticesResponseSchema> {
  const writer = newWriter();
  writeMessage(writer, streamField.notice.number, (w) => {
    writeString(w, noticeField.watcherSessionKey.number, notice.watcherKey);
    writeSessionRef(w, noticeField.target.number, notice.target);
    writeInteger(w, noticeField.changesSince.number, notice.changesSince);
    writeInteger(w, noticeField.notifiedVersion.number, notice.notifiedVersion);
    writeString(w, noticeField.text.number, notice.text);
    writeBool(w, noticeField.wake.number, notice.wake);
    writeString(w, noticeField.contextKey.number, notice.contextKey);
    writeBool(w, noticeField.queueOnly.number, notice.queueOnly);
    if (claim !== undefined) {
      writeString(w, noticeField.claimId.number, claim.claimId);
      writeInteger(w, noticeField.deliveryCount.number, claim.deliveryCount);
    }
  });
  return new WireMessage(finishToBuffer(writer));
}

/** A SubscribeStaleNoticesResponse carrying the synced marker. */
export function syncedResponse(pendingDelivered: number): WireMessage<typeof SubscribeStaleNoticesResponseSchema> {
  const writer = newWriter();
  writeMessage(writer, streamField.synced.number, (w) => writeInteger(w, SyncedSchema.field.pendingDelivered.number, pendingDelivered));
  return new WireMessage(finishToBuffer(writer));
}

/** An AckNoticesResponse: one AckResult per outcome, in order. */
export function ackResponse(outcomes: readonly AckOutcome[], claimedBy?: (cursor: CursorRecord) => string): WireMessage<typeof AckNoticesResponseSchema> {
  const writer = newWriter();
  const resultField = AckResultSchema.field;
  for (const outcome of outcomes) {
    writeMessage(writer, AckNoticesResponseSchema.field.results.number, (w) => {
      writeBool(w, resultField.acknowledged.number, outcome.acknowledged);
      writeBool(w, resultField.reopened.number, outcome.reopened);
      if (outcome.cursor !== undefined) writeCursor(w, resultField.cursor.number, outcome.cursor, claimedBy?.(outcome.cursor));
    });
  }
  return new WireMessage(finishToBuffer(writer));
}

/** A WatchResponse: watched with its cursor, or refused with a reason. */
export function watchResponse(result: { cursor: CursorRecord } | { reason: string }, claimedBy?: (cursor: CursorRecord) => string): WireMessage<typeof WatchResponseSchema> {
  const writer = newWriter();
  const field = WatchResponseSchema.field;
  if ("cursor" in result) {
    writeBool(writer, field.watched.number, true);
    writeCursor(writer, field.cursor.number, result.cursor, claimedBy?.(result.cursor));
  } else {
    writeString(writer, field.reason.number, result.reason);
  }
  return new WireMessage(finishToBuffer(writer));
}

/** A ListWatchesResponse: a page of cursors and the token of the next page ("" on the last). */
export function listWatchesResponse(cursors: readonly CursorRecord[], nextPageToken: string, claimedBy?: (cursor: CursorRecord) => string): WireMessage<typeof ListWatchesResponseSchema> {
  const writer = newWriter();
  const field = ListWatchesResponseSchema.field;
  for (const cursor of cursors) writeCursor(writer, field.cursors.number, cursor, claimedBy?.(cursor));
  writeString(writer, field.nextPageToken.number, nextPageToken);
  return new WireMessage(finishToBuffer(writer));
}
