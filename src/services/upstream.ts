import { fromBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { StateEventSchema } from "../../gen/sessionstate/v1/types_pb.js";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { RemoteItemKind, type AdoptRequest, type Upstream, type UpstreamLinkSchema } from "../../gen/sessionstate/v1/upstream_pb.js";
import type { Clock } from "../clock.js";
import { ServiceError, invalidArgument } from "../errors.js";
import type { ServiceHandlers } from "../rpc/service-adapter.js";
import type { Store } from "../store/store.js";
import type { AppendInput, LinkRecord } from "../domain/records.js";
import type { SessionId } from "../domain/session-key.js";
import type { StoredEvent } from "../domain/event.js";
import { normalizeUserText, type SessionActivity } from "../upstream/session-activity.js";
import { resolveTranscriptPath } from "../upstream/transcript-path.js";
import { classifierForCatalog, knownCatalogIds } from "../upstream/transcript-catalogs.js";
import { fileSourcePrefix, nodeSourcePrefix } from "../domain/write-plans.js";
import { maxRemoteItems, type RemoteItem, type UpstreamMonitor } from "../upstream/upstream-monitor.js";
import { eventTimeOf, optionalText } from "./append-request.js";
import { agentPageOf, authorizeAgents, requireAdmin } from "./authorize.js";
import { sessionIdFromRef, sessionIdToRef } from "./convert.js";
import { paginate } from "./page-token.js";

/** Longest own text accepted, in UTF-8 bytes. */
export const maxOwnTextBytes = 256 * 1024;

/** What the Upstream service needs. */
export interface UpstreamDeps {
  store: Store;
  monitor: UpstreamMonitor;
  activity: SessionActivity;
  clock: Clock;
  /** Real path of the transcript root; undefined when local adoption is off. */
  transcriptRoot: string | undefined;
}

/** A stored event as a StateEvent message, decoded from the bytes stored with it (the one StateEvent encoder). */
function eventMessageOf(event: StoredEvent) {
  return fromBinary(StateEventSchema, event.wire);
}

function linkToProto(link: LinkRecord): MessageInitShape<typeof UpstreamLinkSchema> {
  return {
    session: sessionIdToRef(link.session),
    catalogId: link.catalogId,
    hostId: link.hostId,
    threadId: link.threadId,
    source: link.source,
    marker: link.marker,
    missedChecks: link.missedChecks,
    lastScannedAt: link.lastScannedAtMs === undefined ? undefined : timestampFromMs(link.lastScannedAtMs),
    updatedAt: timestampFromMs(link.updatedAtMs),
  };
}

const remoteKinds = new Map<RemoteItemKind, RemoteItem["kind"]>([
  [RemoteItemKind.UNSPECIFIED, "unspecified"],
  [RemoteItemKind.USER_MESSAGE, "user_message"],
  [RemoteItemKind.AGENT_MESSAGE, "agent_message"],
  [RemoteItemKind.TOOL, "tool"],
  [RemoteItemKind.OTHER, "other"],
]);

/** The Upstream service: adoption, run activity, self-echo texts, paired-node pages and the monitor. */
/** Where an adopted session lives: its link source and starting marker, or why the link was declined. */
interface AdoptionSource {
  source: string;
  /** Absent when the link is declined. */
  marker?: string | undefined;
  declined?: string | undefined;
}

/** The source of an adoption: a local transcript under the root, or a paired node's thread. */
async function adoptionSource(
  source: AdoptRequest["source"],
  catalogId: string,
  deps: Pick<UpstreamDeps, "transcriptRoot" | "monitor">,
): Promise<AdoptionSource> {
  switch (source.case) {
    case "localTranscript":
      return localTranscriptSource(source.value.path, catalogId, deps);
    case "pairedNode": {
      const nodeId = optionalText("paired_node.node_id", source.value.nodeId, 256);
      if (nodeId === undefined) throw invalidArgument("paired_node.node_id", "is required");
      const newest = optionalText("paired_node.newest_item_uuid", source.value.newestItemUuid, 256);
      return newest === undefined
        ? { source: `${nodeSourcePrefix}${nodeId}`, declined: "the thread's newest item has no uuid" }
        : { source: `${nodeSourcePrefix}${nodeId}`, marker: newest };
    }
    case undefined:
      throw invalidArgument("source", "is required (local_transcript or paired_node)");
    default: {
      const never: never = source;
      throw new Error(`unknown source ${String(never)}`);
    }
  }
}

/**
 * A local transcript's source, starting at its current end: refused without a transcript root or for a
 * catalog without a classifier; declined (with the reason) when the path is not a regular file under the
 * root, or the catalog cannot read this file (pi: only version 3 sessions; the header says).
 */
async function localTranscriptSource(
  path: string,
  catalogId: string,
  { transcriptRoot, monitor }: Pick<UpstreamDeps, "transcriptRoot" | "monitor">,
): Promise<AdoptionSource> {
  if (transcriptRoot === undefined) {
    throw new ServiceError("FAILED_PRECONDITION", "local_transcript: local adoption is off; set --transcript-root (SESSIONSTATE_TRANSCRIPT_ROOT) to enable it");
  }
  // Each catalog writes its transcripts its own way: never read one with another's rules.
  const classifier = classifierForCatalog(catalogId);
  if (classifier === undefined) {
    throw invalidArgument("catalog_id", `has no transcript classifier for local transcripts: ${JSON.stringify(catalogId)} (known: ${knownCatalogIds.join(", ")})`);
  }
  const target = await resolveTranscriptPath(transcriptRoot, path);
  if ("declined" in target) return { source: "", declined: target.declined };
  const refused = classifier.declineReason?.(await monitor.firstRowOf(target.path));
  if (refused !== undefined) return { source: "", declined: refused };
  return { source: `${fileSourcePrefix}${target.path}`, marker: String(target.sizeBytes) };
}

/** The `adopted` event: one per session (its dedupe key), by a person, naming the catalog and host. */
function adoptedEventOf(session: SessionId, catalogId: string, hostId: string, nowMs: number): AppendInput {
  return {
    session,
    kind: "adopted",
    actorType: "human",
    summary: `adopted from ${catalogId}`,
    occurredAtMs: nowMs,
    payload: hostId === "" ? { catalogId } : { catalogId, hostId },
    dedupeKey: `adopted:${session.agentId}:${session.key}`,
    notifyWatcherKeys: [],
    onlyIfWatched: false,
    nowMs,
  };
}

export function upstreamHandlers({ store, monitor, activity, clock, transcriptRoot }: UpstreamDeps): ServiceHandlers<(typeof Upstream)["method"]> {
  return {
    adopt: async (request, context) => {
      const session = sessionIdFromRef("session", request.session, context.namespace);
      authorizeAgents(context, [session.agentId]);
      const catalogId = optionalText("catalog_id", request.catalogId, 128);
      if (catalogId === undefined) throw invalidArgument("catalog_id", "is required");
      const hostId = optionalText("host_id", request.hostId, 128) ?? "";
      const threadId = optionalText("thread_id", request.threadId, 256) ?? "";
      const nowMs = clock.nowMs();
      const { source, marker, declined } = await adoptionSource(request.source, catalogId, { transcriptRoot, monitor });
      const adopted = await store.adopt({
        adoptedEvent: adoptedEventOf(session, catalogId, hostId, nowMs),
        ...(marker === undefined ? {} : { link: { session, catalogId, hostId, threadId, source, marker, updatedAtMs: nowMs } }),
      });
      return {
        event: eventMessageOf(adopted.event),
        linked: adopted.link !== undefined,
        reason: declined ?? "",
        link: adopted.link === undefined ? undefined : linkToProto(adopted.link),
      };
    },
    setRunActive: async (request, context) => {
      const session = sessionIdFromRef("session", request.session, context.namespace);
      authorizeAgents(context, [session.agentId]);
      await activity.setRunActive(session, request.active);
      return {};
    },
    recordOwnUserText: async (request, context) => {
      const session = sessionIdFromRef("session", request.session, context.namespace);
      authorizeAgents(context, [session.agentId]);
      if (normalizeUserText(request.text) === "") throw invalidArgument("text", "is required");
      if (Buffer.byteLength(request.text, "utf8") > maxOwnTextBytes) throw invalidArgument("text", `must be at most ${maxOwnTextBytes} bytes`);
      await activity.recordOwnText(session, request.text);
      return {};
    },
    reportRemoteItems: async (request, context) => {
      const session = sessionIdFromRef("session", request.session, context.namespace);
      authorizeAgents(context, [session.agentId]);
      if (request.items.length > maxRemoteItems) throw invalidArgument("items", `at most ${maxRemoteItems} items, newest first`);
      const nowMs = clock.nowMs();
      const items = request.items.map((item, i): RemoteItem => {
        const kind = remoteKinds.get(item.kind);
        if (kind === undefined) throw invalidArgument(`items[${i}].kind`, `must be a known RemoteItemKind (got ${item.kind})`);
        const uuid = item.uuid.trim();
        if (Buffer.byteLength(uuid, "utf8") > 256) throw invalidArgument(`items[${i}].uuid`, "must be at most 256 bytes");
        const remote: RemoteItem = { uuid, kind, text: item.text };
        if (item.occurredAt !== undefined) remote.occurredAtMs = eventTimeOf(item.occurredAt, nowMs, `items[${i}].occurred_at`);
        return remote;
      });
      const result = await monitor.reportRemoteItems(session, items);
      return { humanTurns: result.humanTurns, event: result.event === undefined ? undefined : eventMessageOf(result.event) };
    },
    listUpstreamLinks: async (request, context) => {
      const { agentId, limit, after } = agentPageOf(context, request, "ListUpstreamLinks");
      const links = await store.listLinks({ namespace: context.namespace, agentId, after, limit: limit + 1 });
      const { page, nextPageToken } = paginate(links, limit, (link) => [link.session.agentId, link.session.key]);
      return { links: page.map(linkToProto), nextPageToken };
    },
    scanNow: async (_request, context) => {
      requireAdmin(context, "ScanNow");
      return monitor.tick(context.namespace);
    },
  };
}
