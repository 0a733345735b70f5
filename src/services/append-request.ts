import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { AppendRequest } from "../../gen/sessionstate/v1/signal_log_pb.js";
import { invalidArgument } from "../errors.js";
import { clampEventTime, type EventPayload } from "../domain/event.js";
import { hasControlCharacter, isAgentQualified, normalizeKey } from "../domain/session-key.js";
import type { AppendInput } from "../domain/records.js";
import { actorTypeFromProto, kindFromProto, outcomeFromProto, sessionIdFromRef } from "./convert.js";

/** Longest summary, in characters (code points). */
export const maxSummaryChars = 200;
/** Longest failure reason of a run_failed event, in characters (SPEC §12.3). */
export const maxReasonChars = 200;
/** Most watchers one append may name. */
export const maxNotifyKeys = 100;

/**
 * Validates an AppendRequest and turns it into a store input for a session of `namespace`. Throws
 * INVALID_ARGUMENT naming the first bad field; never truncates or repairs anything except trimming
 * surrounding whitespace of ids.
 */
export function appendInputFromRequest(request: AppendRequest, nowMs: number, namespace: string): AppendInput {
  const session = sessionIdFromRef("session", request.session, namespace);
  const kind = kindFromProto("kind", request.kind);
  const actorType = actorTypeFromProto("actor_type", request.actorType);
  if (kind === "human_direct_message" && actorType !== "human") {
    throw invalidArgument("actor_type", "EVENT_KIND_HUMAN_DIRECT_MESSAGE requires ACTOR_TYPE_HUMAN");
  }
  const actorId =
    actorType === "agent" && request.actorId.trim() !== ""
      ? normalizeKey("actor_id", request.actorId)
      : optionalText("actor_id", request.actorId, 512);

  const payload: EventPayload = {};
  const outcome = outcomeFromProto("payload.outcome", request.payload?.outcome ?? 0);
  if (kind === "run_failed" && outcome === undefined) {
    throw invalidArgument("payload.outcome", "is required for EVENT_KIND_RUN_FAILED (error, timeout or cancelled)");
  }
  if (kind !== "run_failed" && outcome !== undefined) {
    throw invalidArgument("payload.outcome", "is only allowed for EVENT_KIND_RUN_FAILED");
  }
  if (outcome !== undefined) payload.outcome = outcome;
  const channel = optionalText("payload.channel", request.payload?.channel ?? "", 64);
  if (channel !== undefined) payload.channel = channel;
  const turns = request.payload?.turns ?? 0;
  if (turns !== 0) payload.turns = turns;
  const catalogId = optionalText("payload.catalog_id", request.payload?.catalogId ?? "", 128);
  if (catalogId !== undefined) payload.catalogId = catalogId;
  const hostId = optionalText("payload.host_id", request.payload?.hostId ?? "", 128);
  if (hostId !== undefined) payload.hostId = hostId;
  const reason = (request.payload?.reason ?? "").trim();
  if (reason !== "") {
    if (kind !== "run_failed") throw invalidArgument("payload.reason", "is only allowed for EVENT_KIND_RUN_FAILED");
    if ([...reason].length > maxReasonChars) throw invalidArgument("payload.reason", `must be at most ${maxReasonChars} characters`);
    if (hasControlCharacter(reason)) throw invalidArgument("payload.reason", "must be one line without control characters");
    payload.reason = reason;
  }

  if (request.notifySessionKeys.length > maxNotifyKeys) {
    throw invalidArgument("notify_session_keys", `at most ${maxNotifyKeys} keys`);
  }
  const notifyWatcherKeys = new Set<string>();
  request.notifySessionKeys.forEach((raw, i) => {
    const key = normalizeKey(`notify_session_keys[${i}]`, raw);
    if (isAgentQualified(key)) notifyWatcherKeys.add(key);
  });

  const input: AppendInput = {
    session,
    kind,
    actorType,
    summary: summaryFromRequest(request.summary),
    occurredAtMs: eventTimeFromTimestamp(request.occurredAt, nowMs),
    payload,
    notifyWatcherKeys: [...notifyWatcherKeys],
    onlyIfWatched: request.onlyIfWatched,
    nowMs,
  };
  if (actorId !== undefined) input.actorId = actorId;
  const runId = optionalText("run_id", request.runId, 256);
  if (runId !== undefined) input.runId = runId;
  const dedupeKey = optionalText("dedupe_key", request.dedupeKey, 256);
  if (dedupeKey !== undefined) input.dedupeKey = dedupeKey;
  return input;
}

/** A one-line summary of 1-200 characters; INVALID_ARGUMENT otherwise (never truncated). */
function summaryFromRequest(summary: string): string {
  if (summary.trim() === "") throw invalidArgument("summary", "is required (one line, 1-200 characters)");
  if (hasControlCharacter(summary)) throw invalidArgument("summary", "must be one line without control characters");
  const chars = [...summary].length;
  if (chars > maxSummaryChars) {
    throw invalidArgument("summary", `must be at most ${maxSummaryChars} characters (got ${chars})`);
  }
  return summary;
}

/** An optional single-line identifier: trimmed, `undefined` when empty, INVALID_ARGUMENT when too long or not one line. */
export function optionalText(field: string, value: string, maxBytes: number): string | undefined {
  const text = value.trim();
  if (text === "") return undefined;
  if (Buffer.byteLength(text, "utf8") > maxBytes) throw invalidArgument(field, `must be at most ${maxBytes} bytes`);
  if (hasControlCharacter(text)) throw invalidArgument(field, "must not contain control characters");
  return text;
}

/**
 * A caller-supplied time in ms: now when absent, otherwise clamped into [now - 24 h, now].
 * INVALID_ARGUMENT naming `field` when its nanos are out of range.
 */
export function eventTimeFromTimestamp(occurredAt: Timestamp | undefined, nowMs: number, field = "occurred_at"): number {
  if (occurredAt === undefined) return nowMs;
  if (occurredAt.nanos < 0 || occurredAt.nanos > 999_999_999) {
    throw invalidArgument(`${field}.nanos`, "must be between 0 and 999999999");
  }
  return clampEventTime(Number(occurredAt.seconds) * 1000 + Math.floor(occurredAt.nanos / 1_000_000), nowMs);
}
