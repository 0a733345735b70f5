import type { Reconcile } from "../../gen/sessionstate/v1/reconcile_pb.js";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { StatusError, invalidArgument } from "../errors.js";
import type { ServiceHandlers } from "../rpc/service-adapter.js";
import type { Store } from "../store/store.js";
import { agentFilterFromRequest, authorizeAgents } from "./authorize.js";
import { normalizeKeyPrefix, type SessionOrder } from "../domain/session-key.js";
import type { SessionHead } from "../domain/records.js";
import { sessionStatusResponse } from "../codec/response-codec.js";
import { sessionIdFromRef, sessionIdToRef } from "./convert.js";
import { decodePageToken, pageSizeFromRequest, paginate } from "./page-token.js";
import { namespacesVisibleTo } from "../domain/principal.js";
import { StatusAnswerCache } from "./status-cache.js";
import { serverInfo, type ServerFacts } from "./server-info.js";
import type { Metrics } from "../metrics.js";

/** Most events one SessionStatus answer holds. */
export const maxStatusEvents = 200;
/** Most sessions one GetStateVersions call may ask for. */
export const maxVersionRefs = 1000;

/** What the Reconcile service needs. */
export interface ReconcileDeps {
  store: Store;
  /** Bytes of SessionStatus answers kept for repeated questions; only used with a store that has status stamps. */
  statusCacheBytes?: number;
  metrics?: Metrics;
  /** What GetServerInfo reports. */
  server: ServerFacts;
}

/** The order ListSessions asks for, and where its page starts (`page_token`). */
function sessionOrderFromRequest(
  request: { keyPrefix: string; recentFirst: boolean; pageToken: string },
  namespace: string,
): SessionOrder {
  const prefix = normalizeKeyPrefix("key_prefix", request.keyPrefix);
  if (prefix !== "" && request.recentFirst) throw invalidArgument("recent_first", "cannot be combined with key_prefix");
  if (request.recentFirst) {
    const position = decodePageToken("page_token", request.pageToken, 4);
    if (position === undefined) return { by: "recent" };
    const updatedAtMs = Number(position[1]);
    if (position[0] !== "recent" || !Number.isSafeInteger(updatedAtMs)) throw invalidArgument("page_token", "is not a token returned by this service");
    return { by: "recent", after: { updatedAtMs, agentId: position[2]!, key: position[3]! } };
  }
  if (prefix !== "") {
    const position = decodePageToken("page_token", request.pageToken, 3);
    if (position === undefined) return { by: "key", prefix };
    if (position[0] !== "key") throw invalidArgument("page_token", "is not a token returned by this service");
    return { by: "key", prefix, after: { key: position[1]!, agentId: position[2]! } };
  }
  const position = decodePageToken("page_token", request.pageToken, 2);
  return { by: "agent", after: position === undefined ? undefined : { namespace, agentId: position[0]!, key: position[1]! } };
}

/** The page token's position of a page's last session, in the page's order. */
function pagePositionFromHead(order: SessionOrder, head: SessionHead): string[] {
  const { agentId, key } = head.session;
  switch (order.by) {
    case "agent":
      return [agentId, key];
    case "key":
      return ["key", key, agentId];
    case "recent":
      return ["recent", String(head.updatedAtMs), agentId, key];
  }
}

/** The Reconcile service: read-only, never moves a cursor. */
export function reconcileHandlers({ store, statusCacheBytes = 0, metrics, server }: ReconcileDeps): ServiceHandlers<(typeof Reconcile)["method"]> {
  const cache =
    statusCacheBytes > 0 ? new StatusAnswerCache(statusCacheBytes, store.statusStamp.bind(store), store.statusStampsCurrent.bind(store)) : undefined;
  return {
    sessionStatus: async (request, context) => {
      const session = sessionIdFromRef("session", request.session, context.namespace);
      authorizeAgents(context, [session.agentId]);
      if (request.limit < 0) throw invalidArgument("limit", `must not be negative (0 means ${maxStatusEvents}; more than ${maxStatusEvents} is served as ${maxStatusEvents})`);
      const limit = request.limit === 0 ? maxStatusEvents : Math.min(request.limit, maxStatusEvents);
      const since = request.changesSince;
      if (since !== undefined && since < 0n) {
        throw invalidArgument("changes_since", "must not be negative");
      }
      // Versions are far below 2^53; anything larger is simply past the head.
      const sinceNumber = since === undefined ? undefined : since > BigInt(Number.MAX_SAFE_INTEGER) ? Infinity : Number(since);
      const remembered = await cache?.lookup(session, sinceNumber, limit);
      if (remembered !== undefined && "answer" in remembered) {
        metrics?.statusAnswersFrom.cache.inc();
        return remembered.answer;
      }
      const status = await store.sessionStatus(session, sinceNumber, limit);
      if (since !== undefined && status.changes === undefined) {
        throw new StatusError(
          "OUT_OF_RANGE",
          `changes_since ${since} is above the session's state version ${status.stateVersion}`,
        );
      }
      const answer = sessionStatusResponse(session, status);
      if (remembered !== undefined) remembered.remember(answer);
      metrics?.statusAnswersFrom.store.inc();
      return answer;
    },
    listSessions: async (request, context) => {
      const agentId = agentFilterFromRequest(context, request.agentId, "ListSessions");
      const limit = pageSizeFromRequest("page_size", request.pageSize);
      const order = sessionOrderFromRequest(request, context.namespace);
      const heads = await store.listSessions({ namespace: context.namespace, agentId, order, limit: limit + 1 });
      const { page, nextPageToken } = paginate(heads, limit, (head) => pagePositionFromHead(order, head));
      return {
        sessions: page.map((head) => ({
          session: sessionIdToRef(head.session),
          stateVersion: BigInt(head.stateVersion),
          updatedAt: timestampFromMs(head.updatedAtMs),
          prunedThrough: BigInt(head.prunedThrough),
          hasUpstream: head.hasUpstream,
        })),
        nextPageToken,
      };
    },
    listNamespaces: async (request, context) => {
      const limit = pageSizeFromRequest("page_size", request.pageSize);
      const after = decodePageToken("page_token", request.pageToken, 1)?.[0];
      const rows = await store.listNamespaces({ after, only: namespacesVisibleTo(context.principal), limit: limit + 1 });
      const { page, nextPageToken } = paginate(rows, limit, (row) => [row.name]);
      return {
        namespaces: page.map((row) => ({
          name: row.name,
          sessions: BigInt(row.sessions),
          events: BigInt(row.events),
          watches: BigInt(row.watches),
          pendingNotices: BigInt(row.pendingNotices),
          ...(row.updatedAtMs > 0 ? { updatedAt: timestampFromMs(row.updatedAtMs) } : {}),
        })),
        nextPageToken,
      };
    },
    getServerInfo: async (_request, context) => serverInfo(server, context),
    getStateVersions: async (request, context) => {
      if (request.sessions.length > maxVersionRefs) {
        throw invalidArgument("sessions", `at most ${maxVersionRefs} sessions per call (got ${request.sessions.length})`);
      }
      const sessions = request.sessions.map((ref, i) => sessionIdFromRef(`sessions[${i}]`, ref, context.namespace));
      authorizeAgents(context, new Set(sessions.map((session) => session.agentId)));
      const versions = await store.getStateVersions(sessions);
      return {
        versions: sessions.map((session, i) => {
          const version = versions[i];
          return { session: sessionIdToRef(session), stateVersion: version === undefined ? undefined : BigInt(version) };
        }),
      };
    },
  };
}
