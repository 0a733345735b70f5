import type { GetServerInfoResponseSchema } from "../../gen/sessionstate/v1/reconcile_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { ActivityByMinute } from "../activity-by-minute.js";
import type { Principal } from "../domain/principal.js";
import type { Retention } from "../jobs/retention.js";
import type { CallContext } from "../rpc/service-adapter.js";
import type { UpstreamMonitor } from "../upstream/upstream-monitor.js";
import type { HookCalls } from "../upstream/hook-calls.js";

/** What GetServerInfo reports: facts fixed at start-up, and where to read the ones that change. */
export interface ServerFacts {
  version: string;
  backend: "sqlite" | "postgres";
  nodeId: string;
  /** The file's absolute path, or the URL with its password replaced, and the schema. */
  database: string;
  startedAtMs: number;
  retentionDays: number;
  maxEvents: number;
  monitorIntervalMs: number;
  databaseReachable: () => boolean;
  retention: Pick<Retention, "lastPass">;
  monitor: Pick<UpstreamMonitor, "lastTick">;
  /** The CLIs' hook calls taken since start (absent: none are taken). */
  hookCalls?: Pick<HookCalls, "snapshot">;
  activityByMinute: ActivityByMinute;
}

type ServerInfo = MessageInitShape<typeof GetServerInfoResponseSchema>;

/** The caller as its token says; auth off: unauthenticated, with every right. */
function callerFromPrincipal(principal: Principal | undefined): NonNullable<ServerInfo["caller"]> {
  if (principal === undefined) return { authenticated: false };
  return {
    authenticated: true,
    tokenName: principal.name,
    admin: principal.admin,
    agents: [...principal.agents].sort(),
    namespaces: principal.admin || principal.namespaces === "all" ? [] : [...principal.namespaces].sort(),
  };
}

/** GetServerInfo's answer for a call: reads memory only, never the database. */
export function serverInfo(facts: ServerFacts, context: CallContext): ServerInfo {
  const pass = facts.retention.lastPass;
  const tick = facts.monitor.lastTick;
  return {
    version: facts.version,
    backend: facts.backend,
    nodeId: facts.nodeId,
    databaseReachable: facts.databaseReachable(),
    startedAt: timestampFromMs(facts.startedAtMs),
    retention: {
      retentionDays: facts.retentionDays,
      maxEvents: BigInt(facts.maxEvents),
      ...(pass === undefined
        ? {}
        : { lastPassAt: timestampFromMs(pass.endedAtMs), lastPassEventsRemoved: BigInt(pass.eventsRemoved), lastPassCursorsRemoved: BigInt(pass.cursorsRemoved) }),
    },
    upstreamMonitor: {
      intervalMs: BigInt(facts.monitorIntervalMs),
      ...(tick === undefined
        ? {}
        : {
            lastTickAt: timestampFromMs(tick.endedAtMs),
            lastTickLinksScanned: tick.linksScanned,
            lastTickEventsRecorded: tick.eventsRecorded,
            lastTickLinksTimedOut: tick.linksTimedOut,
            lastTickLinksFailed: tick.linksFailed,
          }),
    },
    minutes: facts.activityByMinute.lastHour(context.namespace).map((minute) => ({
      minute: timestampFromMs(minute.minuteMs),
      appends: BigInt(minute.appends),
      noticesOpened: BigInt(minute.noticesOpened),
      noticesAcknowledged: BigInt(minute.noticesAcknowledged),
    })),
    caller: callerFromPrincipal(context.principal),
    namespace: context.namespace,
    // Where the data lives is for who runs the server: an admin token, or anyone when no token is asked.
    database: context.principal === undefined || context.principal.admin ? facts.database : "",
    hooks: (facts.hookCalls?.snapshot() ?? []).map((counts) => ({
      cli: counts.cli,
      matched: BigInt(counts.matched),
      unmatched: BigInt(counts.unmatched),
      refused: BigInt(counts.refused),
      lastCallAt: counts.lastCallAtMs === undefined ? undefined : timestampFromMs(counts.lastCallAtMs),
    })),
  };
}
