import type { Watch } from "../../gen/sessionstate/v1/watch_pb.js";
import type { Clock } from "../clock.js";
import { invalidArgument } from "../errors.js";
import { consumerGroupProblem, defaultMaxInFlight } from "../domain/consumer-group.js";
import { hasControlCharacter, isAgentQualified, maxKeyBytes, normalizeKey } from "../domain/session-key.js";
import type { NoticeFilter, NoticeHub } from "../notices/notice-hub.js";
import type { ServiceHandlers } from "../rpc/service-adapter.js";
import type { Store } from "../store/store.js";
import type { AckInput, CursorRecord, WatchRequest } from "../domain/records.js";
import { extraMaterialKinds, isExtraMaterialKind, type ExtraMaterialKind } from "../domain/event.js";
import { EventKind as ProtoEventKind, WatchProvenance as ProtoWatchProvenance } from "../../gen/sessionstate/v1/types_pb.js";
import type { Metrics } from "../metrics.js";
import type { ActivityByMinute } from "../activity-by-minute.js";
import { watchRefusal } from "../domain/cursor-rules.js";
import { authorizeAgents, authorizeKeys, authorizePrefixes, requireAdmin } from "./authorize.js";
import { kindFromProto, provenanceFromProto, sessionIdFromRef } from "./convert.js";
import { decodePageToken, pageSizeFromRequest, paginate } from "./page-token.js";
import { ackResponse, listWatchesResponse, noticeResponse, syncedResponse, watchResponse } from "../codec/response-codec.js";

/** Most watcher keys plus prefixes one subscription may name. */
export const maxSubscriptionFilters = 100;
/** Most acks one AckNotices call may carry. */
export const maxAcksPerCall = 1000;

/** What the Watch service needs. */
export interface WatchDeps {
  store: Store;
  hub: NoticeHub;
  clock: Clock;
  metrics?: Metrics;
  /** Counts acknowledgements and the notices they reopen (GetServerInfo). */
  activityByMinute?: ActivityByMinute;
}

/** Most claim ids one ReleaseNotices call may carry. */
export const maxReleasesPerCall = 1000;

/** A watcher key that must be agent-qualified (subscriptions, acks). */
function watcherKeyFromField(field: string, raw: string): string {
  const key = normalizeKey(field, raw);
  if (!isAgentQualified(key)) throw invalidArgument(field, "must be an agent-qualified key (agent:<agentId>:<rest>); bare keys never watch");
  return key;
}

/** A version field that must be a non-negative int64. */
function versionFromField(field: string, value: bigint): number {
  if (value < 0n) throw invalidArgument(field, "must be a non-negative integer");
  return value > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(value);
}

function noticeFilterFromRequest(namespace: string, watcherSessionKeys: readonly string[], watcherKeyPrefixes: readonly string[]): NoticeFilter {
  if (watcherSessionKeys.length === 0 && watcherKeyPrefixes.length === 0) {
    throw invalidArgument("watcher_session_keys", "name at least one watcher key or watcher_key_prefixes entry");
  }
  if (watcherSessionKeys.length + watcherKeyPrefixes.length > maxSubscriptionFilters) {
    throw invalidArgument("watcher_session_keys", `at most ${maxSubscriptionFilters} keys and prefixes together`);
  }
  const watcherKeys = [...new Set(watcherSessionKeys.map((raw, i) => watcherKeyFromField(`watcher_session_keys[${i}]`, raw)))];
  const prefixes = [
    ...new Set(
      watcherKeyPrefixes.map((raw, i) => {
        const field = `watcher_key_prefixes[${i}]`;
        const prefix = raw.trimStart().toLowerCase();
        if (prefix === "") throw invalidArgument(field, "must not be empty");
        if (Buffer.byteLength(prefix, "utf8") > maxKeyBytes) throw invalidArgument(field, `must be at most ${maxKeyBytes} bytes`);
        if (hasControlCharacter(prefix)) throw invalidArgument(field, "must not contain control characters");
        return prefix;
      }),
    ),
  ];
  return { namespace, watcherKeys, prefixes };
}

/**
 * What a WatchRequest asks for: its provenance (unspecified is explicit) and extra material kinds (explicit
 * watches only; each one of run_completed, run_failed, compacted; kept in their canonical order, once each).
 */
function watchRequestFromProto(provenance: ProtoWatchProvenance, kinds: readonly ProtoEventKind[]): WatchRequest {
  const wanted = provenance === ProtoWatchProvenance.UNSPECIFIED ? "explicit" : provenanceFromProto("provenance", provenance);
  const named = new Set<ExtraMaterialKind>();
  kinds.forEach((value, i) => {
    const kind = kindFromProto(`extra_material_kinds[${i}]`, value);
    if (!isExtraMaterialKind(kind)) {
      throw invalidArgument("extra_material_kinds", "may hold only EVENT_KIND_RUN_COMPLETED, EVENT_KIND_RUN_FAILED and EVENT_KIND_COMPACTED");
    }
    named.add(kind);
  });
  if (wanted === "ambient" && named.size > 0) {
    throw invalidArgument("extra_material_kinds", "must be empty for an ambient watch (WATCH_PROVENANCE_AMBIENT)");
  }
  return { provenance: wanted, extraKinds: extraMaterialKinds.filter((kind) => named.has(kind)) };
}

/** The Watch service: cursors, the notice stream and acknowledgements. */
export function watchHandlers({ store, hub, clock, metrics, activityByMinute }: WatchDeps): ServiceHandlers<(typeof Watch)["method"]> {
  /** Every cursor answered names who holds its pending notice's claim in a consumer group (Cursor.claimed_by). */
  const claimedBy = (cursors: readonly CursorRecord[]): Promise<(cursor: CursorRecord) => string> => hub.claims.holders(cursors);
  return {
    watch: async (request, context) => {
      const watcherKey = normalizeKey("watcher_session_key", request.watcherSessionKey);
      const target = sessionIdFromRef("target", request.target, context.namespace);
      const wanted = watchRequestFromProto(request.provenance, request.extraMaterialKinds);
      authorizeKeys(context, [watcherKey]);
      authorizeAgents(context, [target.agentId]);
      const refusal = watchRefusal(watcherKey, target);
      if (refusal !== undefined) return watchResponse({ reason: refusal });
      const cursor = await store.watch(watcherKey, target, clock.nowMs(), wanted);
      return watchResponse({ cursor }, await claimedBy([cursor]));
    },
    unwatch: async (request, context) => {
      const watcherKey = normalizeKey("watcher_session_key", request.watcherSessionKey);
      const target = sessionIdFromRef("target", request.target, context.namespace);
      authorizeKeys(context, [watcherKey]);
      authorizeAgents(context, [target.agentId]);
      return { removed: await store.unwatch(watcherKey, target) };
    },
    listWatches: async (request, context) => {
      const watcherKey =
        request.watcherSessionKey.trim() === "" ? undefined : normalizeKey("watcher_session_key", request.watcherSessionKey);
      const target = request.target === undefined ? undefined : sessionIdFromRef("target", request.target, context.namespace);
      if (watcherKey === undefined && target === undefined) requireAdmin(context, "ListWatches without a watcher or target");
      if (watcherKey !== undefined) authorizeKeys(context, [watcherKey]);
      if (target !== undefined) authorizeAgents(context, [target.agentId]);
      const limit = pageSizeFromRequest("page_size", request.pageSize);
      const position = decodePageToken("page_token", request.pageToken, 3);
      const after = position === undefined ? undefined : ([position[0]!, position[1]!, position[2]!] as const);
      const provenance = request.provenance === ProtoWatchProvenance.UNSPECIFIED ? undefined : provenanceFromProto("provenance", request.provenance);
      const cursors = await store.listWatches({
        namespace: context.namespace,
        ...(provenance === undefined ? {} : { provenance }),
        watcherKey,
        target,
        after,
        limit: limit + 1,
      });
      const { page, nextPageToken } = paginate(cursors, limit, (c) => [c.watcherKey, c.target.agentId, c.target.key]);
      return listWatchesResponse(page, nextPageToken, await claimedBy(page));
    },
    subscribeStaleNotices: async function* (request, context) {
      const filter = noticeFilterFromRequest(context.namespace, request.watcherSessionKeys, request.watcherKeyPrefixes);
      authorizeKeys(context, filter.watcherKeys);
      authorizePrefixes(context, filter.prefixes);
      const problem = consumerGroupProblem(request.consumerGroup, request.maxInFlight);
      if (problem !== undefined) throw invalidArgument(problem.field, problem.problem);
      const membership =
        request.consumerGroup === ""
          ? undefined
          : { group: request.consumerGroup, maxInFlight: request.maxInFlight === 0 ? defaultMaxInFlight : request.maxInFlight, peer: context.peer ?? "unknown" };
      for await (const item of hub.serve(filter, context.signal, membership)) {
        yield "notice" in item ? noticeResponse(item.notice, item.claim) : syncedResponse(item.synced.pendingDelivered);
      }
    },
    releaseNotices: async (request, context) => {
      if (request.claimIds.length > maxReleasesPerCall) throw invalidArgument("claim_ids", `at most ${maxReleasesPerCall} per call`);
      request.claimIds.forEach((id, i) => {
        if (id.length === 0 || id.length > 64) throw invalidArgument(`claim_ids[${i}]`, "must be a claim id as a notice carries it (1-64 characters)");
      });
      // A claim of a watcher the caller may not act for answers false, as one that is not held: never which.
      const mayRelease = (watcherKey: string): boolean => {
        try {
          authorizeKeys(context, [watcherKey]);
          return true;
        } catch {
          return false;
        }
      };
      // Only over the connection that holds a claim: a claim id another member learnt of is not its to give back.
      return { released: await hub.claims.release(request.claimIds, context.namespace, context.peer ?? "unknown", mayRelease) };
    },
    ackNotices: async (request, context) => {
      if (request.acks.length > maxAcksPerCall) throw invalidArgument("acks", `at most ${maxAcksPerCall} per call`);
      const acks = request.acks.map((ack, i): AckInput => {
        const input: AckInput = {
          watcherKey: watcherKeyFromField(`acks[${i}].watcher_session_key`, ack.watcherSessionKey),
          target: sessionIdFromRef(`acks[${i}].target`, ack.target, context.namespace),
          notifiedVersion: versionFromField(`acks[${i}].notified_version`, ack.notifiedVersion),
        };
        if (ack.reconciledThrough !== undefined) {
          input.reconciledThrough = versionFromField(`acks[${i}].reconciled_through`, ack.reconciledThrough);
        }
        return input;
      });
      authorizeKeys(context, acks.map((ack) => ack.watcherKey));
      authorizeAgents(context, new Set(acks.map((ack) => ack.target.agentId)));
      const outcomes = await store.ackNotices(acks, clock.nowMs());
      for (const outcome of outcomes) {
        metrics?.acks.inc({ result: outcome.acknowledged ? "acknowledged" : "stale" });
        if (outcome.reopened) metrics?.noticesReopened.inc();
        if (outcome.acknowledged) activityByMinute?.count(context.namespace, "noticesAcknowledged");
        if (outcome.reopened) activityByMinute?.count(context.namespace, "noticesOpened");
      }
      return ackResponse(outcomes, await claimedBy(outcomes.flatMap((outcome) => (outcome.cursor === undefined ? [] : [outcome.cursor]))));
    },
  };
}
