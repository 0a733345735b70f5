import { fromBinary, type MessageInitShape } from "@bufbuild/protobuf";
import { StateEventSchema } from "../../gen/sessionstate/v1/types_pb.js";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { RemoteItemKind, type AdoptRequest, type Upstream, type UpstreamLinkSchema } from "../../gen/sessionstate/v1/upstream_pb.js";
import type { Clock } from "../clock.js";
import { StatusError, invalidArgument } from "../errors.js";
import type { ServiceHandlers } from "../rpc/service-adapter.js";
import type { Store } from "../store/store.js";
import type { AppendInput, LinkRecord } from "../domain/records.js";
import type { SessionId } from "../domain/session-key.js";
import type { StoredEvent } from "../domain/event.js";
import { normalizeUserText, type SessionActivity } from "../upstream/session-activity.js";
import { resolveTranscriptPath } from "../upstream/transcript-path.js";
import { classifierForCatalog, knownCatalogIds, readFirstRow } from "../upstream/transcript-catalogs.js";
import { linkSourceToText, type LinkSource } from "../domain/upstream-link.js";
import type { UpstreamMonitor } from "../upstream/upstream-monitor.js";
import type { HookScans } from "../upstream/hook-scans.js";
import type { ActivityByMinute } from "../activity-by-minute.js";
import { maxRemoteItems, reportRemoteItems, type RemoteItem } from "../upstream/remote-report.js";
import { eventTimeFromTimestamp, optionalText } from "./append-request.js";
import { agentPageFromRequest, authorizeAgents, requireAdmin } from "./authorize.js";
import { sessionIdFromRef, sessionIdToRef } from "./convert.js";
import { paginate } from "./page-token.js";

/** Longest own text accepted, in UTF-8 bytes. */
export const maxOwnTextBytes = 256 * 1024;

/** What the Upstream service needs. */
export interface UpstreamDeps {
  store: Store;
  monitor: UpstreamMonitor;
  activity: SessionActivity;
  /** Scans the CLIs' hooks asked for; a scan that waits for a run's end runs when SetRunActive(false) says so. */
  hookScans?: Pick<HookScans, "runEnded">;
  clock: Clock;
  /** Real path of the transcript root; undefined when local adoption is off. */
  transcriptRoot: string | undefined;
  /** Longest transcript line read whole (a transcript's first row is read at adoption). */
  maxLineBytes: number;
  /** Text prefixes of rows no person typed (a paired node's items are classified here). */
  syntheticPrefixes: readonly string[];
  /** Counts the events reports record and the notices they open (GetServerInfo). */
  activityByMinute?: ActivityByMinute;
}

/** A stored event as a StateEvent message, decoded from the bytes stored with it (the one StateEvent encoder). */
function eventMessageFromStored(event: StoredEvent) {
  return fromBinary(StateEventSchema, event.wire);
}

function linkToProto(link: LinkRecord, lastScanOutcome = ""): MessageInitShape<typeof UpstreamLinkSchema> {
  return {
    session: sessionIdToRef(link.session),
    catalogId: link.catalogId,
    hostId: link.hostId,
    threadId: link.threadId,
    source: linkSourceToText(link.source),
    marker: link.marker,
    missedChecks: link.missedChecks,
    lastScannedAt: link.lastScannedAtMs === undefined ? undefined : timestampFromMs(link.lastScannedAtMs),
    updatedAt: timestampFromMs(link.updatedAtMs),
    lastScanOutcome,
  };
}

const remoteKinds = new Map<RemoteItemKind, RemoteItem["kind"]>([
  [RemoteItemKind.UNSPECIFIED, "unspecified"],
  [RemoteItemKind.USER_MESSAGE, "user_message"],
  [RemoteItemKind.AGENT_MESSAGE, "agent_message"],
  [RemoteItemKind.TOOL, "tool"],
  [RemoteItemKind.OTHER, "other"],
]);

/** Where an adopted session lives: its link source and starting marker, or why the link was declined. */
type AdoptionSource = { source: LinkSource; marker: string } | { declined: string };

/** The source of an adoption: a local transcript under the root, or a paired node's thread. */
async function adoptionSource(
  source: AdoptRequest["source"],
  catalogId: string,
  deps: Pick<UpstreamDeps, "transcriptRoot" | "maxLineBytes">,
): Promise<AdoptionSource> {
  switch (source.case) {
    case "localTranscript":
      return localTranscriptSource(source.value.path, catalogId, deps);
    case "pairedNode": {
      const nodeId = optionalText("paired_node.node_id", source.value.nodeId, 256);
      if (nodeId === undefined) throw invalidArgument("paired_node.node_id", "is required");
      const newest = optionalText("paired_node.newest_item_uuid", source.value.newestItemUuid, 256);
      return newest === undefined ? { declined: "the thread's newest item has no uuid" } : { source: { kind: "paired-node", nodeId }, marker: newest };
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
  { transcriptRoot, maxLineBytes }: Pick<UpstreamDeps, "transcriptRoot" | "maxLineBytes">,
): Promise<AdoptionSource> {
  if (transcriptRoot === undefined) {
    throw new StatusError("FAILED_PRECONDITION", "local_transcript: local adoption is off; set --transcript-root (SESSIONSTATE_TRANSCRIPT_ROOT) to enable it");
  }
  // Each catalog writes its transcripts its own way: never read one with another's rules.
  const classifier = classifierForCatalog(catalogId);
  if (classifier === undefined) {
    throw invalidArgument("catalog_id", `has no transcript classifier for local transcripts: ${JSON.stringify(catalogId)} (known: ${knownCatalogIds.join(", ")})`);
  }
  const target = await resolveTranscriptPath(transcriptRoot, path);
  if ("declined" in target) return { declined: target.declined };
  const refused = classifier.declineReason?.(await readFirstRow(target.path, maxLineBytes));
  if (refused !== undefined) return { declined: refused };
  return { source: { kind: "transcript", path: target.path }, marker: String(target.sizeBytes) };
}

/** The `adopted` event: one per session (its dedupe key), by a person, naming the catalog and host. */
function adoptedEventFromAdoption(session: SessionId, catalogId: string, hostId: string, nowMs: number): AppendInput {
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

/** The Upstream service: adoption, run activity, self-echo texts, paired-node pages and the monitor. */
export function upstreamHandlers(deps: UpstreamDeps): ServiceHandlers<(typeof Upstream)["method"]> {
  const { store, monitor, activity, clock } = deps;
  return {
    adopt: async (request, context) => {
      const session = sessionIdFromRef("session", request.session, context.namespace);
      authorizeAgents(context, [session.agentId]);
      const catalogId = optionalText("catalog_id", request.catalogId, 128);
      if (catalogId === undefined) throw invalidArgument("catalog_id", "is required");
      const hostId = optionalText("host_id", request.hostId, 128) ?? "";
      const threadId = optionalText("thread_id", request.threadId, 256) ?? "";
      const nowMs = clock.nowMs();
      const where = await adoptionSource(request.source, catalogId, deps);
      const adopted = await store.adopt({
        adoptedEvent: adoptedEventFromAdoption(session, catalogId, hostId, nowMs),
        ...("declined" in where ? {} : { link: { session, catalogId, hostId, threadId, source: where.source, marker: where.marker, updatedAtMs: nowMs } }),
      });
      return {
        event: eventMessageFromStored(adopted.event),
        linked: adopted.link !== undefined,
        reason: "declined" in where ? where.declined : "",
        link: adopted.link === undefined ? undefined : linkToProto(adopted.link),
      };
    },
    setRunActive: async (request, context) => {
      const session = sessionIdFromRef("session", request.session, context.namespace);
      authorizeAgents(context, [session.agentId]);
      await activity.setRunActive(session, request.active);
      if (!request.active) deps.hookScans?.runEnded(session);
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
        if (item.occurredAt !== undefined) remote.occurredAtMs = eventTimeFromTimestamp(item.occurredAt, nowMs, `items[${i}].occurred_at`);
        return remote;
      });
      const result = await reportRemoteItems({ store, activity, clock, syntheticPrefixes: deps.syntheticPrefixes }, session, items);
      switch (result.outcome) {
        case "no-paired-node-link":
          throw new StatusError("FAILED_PRECONDITION", "session: has no paired-node upstream link (adopt it with paired_node first)");
        case "link-changed":
          throw new StatusError("UNAVAILABLE", "the upstream link changed during the report; retry");
        case "recorded":
          if (result.event !== undefined) {
            deps.activityByMinute?.count(session.namespace, "appends");
            deps.activityByMinute?.count(session.namespace, "noticesOpened", result.noticesOpened ?? 0);
          }
          return { humanTurns: result.humanTurns, event: result.event === undefined ? undefined : eventMessageFromStored(result.event) };
        default: {
          const never: never = result;
          throw new Error(`unknown report outcome ${String(never)}`);
        }
      }
    },
    listUpstreamLinks: async (request, context) => {
      const { agentId, limit, after } = agentPageFromRequest(context, request, "ListUpstreamLinks");
      const links = await store.listLinks({ namespace: context.namespace, agentId, after, limit: limit + 1 });
      const { page, nextPageToken } = paginate(links, limit, (link) => [link.session.agentId, link.session.key]);
      return { links: page.map((link) => linkToProto(link, monitor.lastOutcome(link))), nextPageToken };
    },
    scanNow: async (_request, context) => {
      requireAdmin(context, "ScanNow");
      return monitor.tick(context.namespace);
    },
  };
}
